"""The report's typed records and per-section draws: a section's numbers do not move when another section
is added, every seed's outcome is reported with its Wilson interval, statistics say what they rest on."""

import json

import numpy as np

from icl_race import config
from icl_race.analysis.draws import Draws
from icl_race.cli import main
from icl_race.report import classification_sweep, write_report
from icl_race.report.sample import Sample, pool
from icl_race.rundir import load_run, load_sweep

from .test_report_golden import BUDGET, EVAL_EVERY, _cell, _config, _on_grid


def _standard_cells(d, rng, Ks=(200, 500, 1000, 2000, 5000), Ns=(8, 16)):
    for N in Ns:
        for K in Ks:
            p = 1 / (1 + np.exp(-5 * (np.log10(K) - (1.5 + 1.2 * np.log10(N)))))
            acq = rng.random(24) < p
            cfg = {"task": {"K": K, "N": N}}
            _cell(
                d / "cells" / _config(cfg).digest(),
                cfg,
                _on_grid(np.where(acq, 300.0, np.inf)),
                np.where(acq, 0.99, 0.5 + rng.normal(0, 0.02, 24)).astype(np.float32),
            )


def test_a_section_keeps_its_numbers_when_another_section_is_added(tmp_path):
    d = tmp_path / "sweep"
    _standard_cells(d, np.random.default_rng(3))
    before = classification_sweep.compute(load_sweep(d), Draws(0, 50)).to_json()
    for N in (8, 16):  # K = infinity cells: a t_ICL vs N section now comes with its own draws
        cfg = {"task": {"variant": "infinite", "N": N}}
        _cell(d / "cells" / _config(cfg).digest(), cfg, _on_grid(np.full(20, 40.0 * N)), np.full(20, 0.99))
    after = classification_sweep.compute(load_sweep(d), Draws(0, 50)).to_json()
    assert len(before["t_icl_vs_N"]) == 0 and len(after["t_icl_vs_N"]) == 1
    for key in ("acquisition", "paper_sigmoid", "kstar_slope"):
        a = json.dumps(before["thresholds"][0][key], default=str)
        assert a == json.dumps(after["thresholds"][0][key], default=str), key
    other = classification_sweep.compute(load_sweep(d), Draws(1, 50)).to_json()  # another --seed does move them
    assert (
        other["thresholds"][0]["acquisition"][8]["log10_kstar_ci"]
        != after["thresholds"][0]["acquisition"][8]["log10_kstar_ci"]
    )


def test_the_paper_sigmoid_is_refused_on_four_values_of_K_and_the_report_says_why(tmp_path):
    d = tmp_path / "sweep"
    _standard_cells(d, np.random.default_rng(3), Ks=(200, 500, 1000, 2000), Ns=(8,))
    write_report(d, n_boot=20)
    md = (d / "report.md").read_text()
    assert "not fitted: needs >= 5 values of K to fit 4 parameters (has 4)" in md


def test_a_seed_in_two_cells_at_one_K_counts_once_read_where_it_was_not_settled(tmp_path):
    # The K = 1000 cell run again with train.settle_iwl (one K*(N) group: they differ only in retirement),
    # the same 24 seeds, every one read as never acquiring: K* must not move, and K = 1000 holds 24 seeds.
    d = tmp_path / "sweep"
    _standard_cells(d, np.random.default_rng(3), Ns=(8,))
    before = classification_sweep.compute(load_sweep(d), Draws(0, 50)).to_json()["thresholds"][0]
    cfg = {
        "task": {"K": 1000, "N": 8},
        "train": {"steps": BUDGET, "eval_every": EVAL_EVERY, "eval_size": 200, "settle_iwl": 0.9},
    }
    _cell(d / "cells" / _config(cfg).digest(), cfg, np.full(24, -1), np.full(24, 0.5, np.float32))
    after = classification_sweep.compute(load_sweep(d), Draws(0, 50)).to_json()["thresholds"]
    assert len(after) == 1
    a, b = before["acquisition"][8], after[0]["acquisition"][8]
    assert [(c["k"], c["n"]) for c in b["cells"]] == [(c["k"], c["n"]) for c in a["cells"]]
    assert b["log10_kstar"] == a["log10_kstar"] and b["cells"][2]["n"] == 24


STEPS = np.arange(EVAL_EVERY, BUDGET + 1, EVAL_EVERY)  # 40 evaluations


def _run_with_known_outcomes(d, precision="default", device=None, first_seed=0):
    """Seeds 0-2 persistent (acquire at 300), seed 3 transient (acquires at 300, below 0.9 from step 1000
    on), seed 4 censored. With `device`, a meta.json that says the run was computed there."""
    cfg = config.from_dict(
        {
            "task": {"K": 1000, "N": 8},
            "ensemble": {"first_seed": first_seed, "seeds": 5},  # the 5 seeds of its results.npz
            "train": {"steps": BUDGET, "eval_every": EVAL_EVERY, "matmul_precision": precision},
        }
    )
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg.to_dict()))
    if device:
        (d / "meta.json").write_text(json.dumps({"config": cfg.to_dict(), "device": device}))
    icl = np.where(STEPS >= 300, 0.99, 0.5)[None].repeat(5, 0)
    icl[3, STEPS >= 1000] = 0.55
    icl[4] = 0.5
    t = np.array([300, 300, 300, 300, -1])
    np.savez(
        d / "results.npz",
        seed_ids=first_seed + np.arange(5),
        t_icl=t,
        t_converged=t,
        eval_steps=STEPS,
        icl_acc=icl,
        iwl_acc=1.4 - icl,
        steps_run=np.int64(BUDGET),
        budget=np.int64(BUDGET),
        diverged=np.zeros(5, bool),
    )


def test_every_seeds_outcome_with_its_wilson_interval_and_fall_time(tmp_path, capsys):
    d = tmp_path / "run"
    _run_with_known_outcomes(d)
    assert main(["report", str(d), "--boot", "20", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    o = rep["cell"]["outcomes"]
    assert {k: v["k"] for k, v in o["counts"].items()} == {
        "persistent": 3,
        "recovered": 0,
        "falling": 0,
        "transient": 1,
        "censored": 1,
        "diverged": 0,
    }
    fall = o["fall_after_t_icl"]  # fell at 1,000, acquired at 300: 3 of the 4 acquired seeds left
    assert fall["t"][0] == 700 and fall["survival"][0] == 0.75 and fall["acquired"] == 1
    assert o["by_class"]["transient"]["final_icl_acc"]["median"] == 0.55
    md = (d / "report.md").read_text()
    assert "| transient | 1/5 = 20.0% [3.6%, 62.4%] | 0.55 (0.55-0.55) | 0.85 (0.85-0.85) |" in md  # Wilson 1 of 5
    assert "underpowered (n = 5 < 20)" in md and "figures/trajectories.png" in md
    assert "Outcome: 3 persistent, 1 transient, 1 censored of 5 seeds" in md


def test_pooling_keeps_one_copy_of_a_seed_run_twice(tmp_path):
    for name in ("a", "b"):
        _run_with_known_outcomes(tmp_path / name)
    samples = pool([Sample.of(load_run(tmp_path / n)) for n in ("a", "b")])
    assert len(samples) == 1 and samples[0].n_seeds == 5 and samples[0].n_duplicates == 5
    assert samples[0].cells == ("a", "b")


def test_a_cpu_run_pools_with_a_gpu_run_at_full_float32_and_not_with_one_at_tf32(tmp_path):
    # A CPU computes float32 matmuls in full whatever the setting (tests/systems/test_classification.py): its "default" is
    # a GPU's "highest". A GPU's "default" (TF32) is another condition.
    _run_with_known_outcomes(tmp_path / "cpu", "default", "1 x cpu:cpu")
    _run_with_known_outcomes(tmp_path / "gpu_f32", "highest", "1 x gpu:NVIDIA H200", first_seed=5)
    _run_with_known_outcomes(tmp_path / "gpu_tf32", "default", "1 x gpu:NVIDIA H200", first_seed=10)
    samples = pool([Sample.of(load_run(tmp_path / n)) for n in ("cpu", "gpu_f32", "gpu_tf32")])
    assert [(s.cells, s.n_seeds) for s in samples] == [(("cpu", "gpu_f32"), 10), (("gpu_tf32",), 5)]
    # without a recorded device the setting is taken as it is
    _run_with_known_outcomes(tmp_path / "unknown", "default", first_seed=15)
    samples = pool([Sample.of(load_run(tmp_path / n)) for n in ("gpu_f32", "unknown")])
    assert len(samples) == 2
    # bf16 products (a jax dot algorithm) change a CPU run too: not full float32 there
    _run_with_known_outcomes(tmp_path / "cpu_bf16", "BF16_BF16_F32", "1 x cpu:cpu", first_seed=20)
    samples = pool([Sample.of(load_run(tmp_path / n)) for n in ("gpu_f32", "cpu_bf16")])
    assert len(samples) == 2


def test_bad_input_to_json_commands_is_one_line_and_writes_nothing(tmp_path, capsys):
    for argv in (["report", str(tmp_path / "missing"), "--json"], ["hist", str(tmp_path), "--json"]):
        assert main(argv) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.startswith("icl-race: error:") and captured.err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []
