"""The reports' content is pinned: report.md and report.json of a tiny classification run and sweep
(synthetic, from a fixed generator) and of a linear-regression run and sweep (stored real results) must
match tests/golden/, which was rendered by the reports before they were split by system.

report.md is compared exactly; report.json's floats within tests/stored.py's FITTED tolerance (its
mixtures, lognormal fits and K* come from optimizers, and the goldens were written on another CPU),
everything else in it exactly.

A change that means to alter a report's content regenerates the files with
    ICL_RACE_WRITE_GOLDEN=1 .venv/bin/python -m pytest tests/report/test_report_golden.py
and the diff of tests/golden/ then shows what changed."""

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import stored

from icl_race import config
from icl_race.report import write_report

GOLDEN = Path(__file__).parents[1] / "golden"
BUDGET, EVAL_EVERY = 2000, 50


def _config(raw: dict) -> config.Config:
    return config.from_dict({"train": {"steps": BUDGET, "eval_every": EVAL_EVERY, "eval_size": 200}, **raw})


def _cell(d: Path, raw: dict, t_icl: np.ndarray, final_acc: np.ndarray, diverged=None) -> None:
    cfg = _config(raw)
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps(cfg.to_dict()))
    steps = np.arange(EVAL_EVERY, BUDGET + 1, EVAL_EVERY)
    icl = np.where((t_icl >= 0)[:, None] & (steps[None] >= t_icl[:, None]), 0.99, 0.5).astype(np.float32)
    icl[:, -1] = final_acc
    np.savez(
        d / "results.npz",
        seed_ids=np.arange(t_icl.size),
        t_icl=t_icl,
        t_converged=t_icl,
        eval_steps=steps,
        icl_acc=icl,
        iwl_acc=np.full_like(icl, 0.6),
        steps_run=np.int64(BUDGET),
        budget=np.int64(BUDGET),
        diverged=np.zeros(t_icl.size, bool) if diverged is None else diverged,
    )


def _on_grid(t):
    return np.where(t <= BUDGET, np.ceil(t / EVAL_EVERY) * EVAL_EVERY, -1).astype(np.int64)


def classification_run(d: Path) -> None:
    rng = np.random.default_rng(7)
    t = _on_grid(
        np.concatenate(
            [200 * np.exp(rng.normal(0, 0.4, 25)), 1200 * np.exp(rng.normal(0, 0.3, 10)), np.full(5, np.inf)]
        )
    )
    _cell(
        d,
        {"task": {"K": 1000, "N": 8}},
        t,
        np.where(t >= 0, 0.99, 0.5 + rng.normal(0, 0.02, t.size)),
        diverged=np.arange(t.size) == 3,
    )


def classification_sweep(d: Path) -> None:
    rng = np.random.default_rng(11)
    d.mkdir()
    (d / "sweep.toml").write_text("# synthetic\n")
    for N in (8, 16):
        for variant, shift in (("standard", 0.0), ("balanced", 0.3)):
            for K in (200, 500, 1000, 2000, 5000):
                p = 1 / (1 + np.exp(-5 * (np.log10(K) - (1.5 + 1.2 * np.log10(N) + shift))))
                acq = rng.random(24) < p
                t = _on_grid(np.where(acq, 300 * np.exp(rng.normal(0, 0.3, 24)), np.inf))
                cfg = {"task": {"variant": variant, "K": K, "N": N}}
                _cell(
                    d / "cells" / _config(cfg).digest(),
                    cfg,
                    t,
                    np.where(acq, 0.99, 0.5 + rng.normal(0, 0.02, 24)).astype(np.float32),
                )
        t = _on_grid(40 * N * np.exp(rng.normal(0, 0.5, 30)))
        cfg = {"task": {"variant": "infinite", "N": N}}
        _cell(d / "cells" / _config(cfg).digest(), cfg, t, np.where(t >= 0, 0.99, 0.6))
    # Each cell is named by its config's digest, as `icl-race sweep` names it (a cell holding another config
    # than its name says is foreign, never read).
    unfinished = _config({"task": {"K": 777, "N": 8}})
    (d / "cells" / unfinished.digest()).mkdir()
    (d / "cells" / unfinished.digest() / "config.json").write_text(json.dumps(unfinished.to_dict()))


def copied(name):
    return lambda d: shutil.copytree(GOLDEN / "inputs" / name, d)


CASES = {
    "classification_run": classification_run,
    "classification_sweep": classification_sweep,
    "regression_run": copied("regression_run"),
    "regression_sweep": copied("regression_sweep"),
}


def _rendered(d: Path) -> tuple[str, dict]:
    md = (d / "report.md").read_text().replace(str(d), "DIR")
    return md, _without_echo(json.loads((d / "report.json").read_text().replace(str(d), "DIR")))


def _without_echo(rep: dict) -> dict:
    """The report without what it only repeats (the version, the resolved config, which grows a key with
    every new config field)."""
    return {k: v for k, v in rep.items() if k not in ("icl_race_version", "config")}


@pytest.mark.parametrize("case", CASES)
def test_report_content_is_unchanged(tmp_path, case):
    d = tmp_path / case
    CASES[case](d)
    write_report(d, n_boot=60)
    md, rep = _rendered(d)
    want = GOLDEN / case
    if os.environ.get("ICL_RACE_WRITE_GOLDEN"):
        want.mkdir(parents=True, exist_ok=True)
        (want / "report.md").write_text(md)
        (want / "report.json").write_text(json.dumps(rep, indent=1, sort_keys=True) + "\n")
    assert md == (want / "report.md").read_text()
    stored.assert_matches(rep, _without_echo(stored.load(want / "report.json")), rel=stored.FITTED)
