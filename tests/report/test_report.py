"""Reports: a tiny real run produces every file; a synthetic sweep directory recovers known answers."""

import json
import math

import matplotlib.pyplot as plt
import numpy as np
import pytest
import tiny
from scipy.special import expit

from icl_race import config, rundir
from icl_race.analysis.draws import Draws
from icl_race.cli import main
from icl_race.report import hist_text, write_report
from icl_race.report.classification import sweep_report
from icl_race.rundir import load_sweep

BUDGET, EVAL_EVERY = 4000, 50


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """A tiny engine run (about 10-20 s on 2 cores) in which most seeds acquire ICL."""
    from icl_race.run.runner import execute

    cfg = config.from_dict(tiny.raw(train={"eval_size": 100}, ensemble={"seeds": 8, "block": 8}))
    out = tmp_path_factory.mktemp("real") / "run"
    execute(cfg, out, progress=False)
    return out


def test_report_on_a_tiny_real_run_writes_every_file(real_run, capsys):
    assert main(["report", str(real_run), "--boot", "200"]) == 0
    assert "report.md" in capsys.readouterr().out
    for name in ("t_icl_hist", "survival", "bimodality", "trajectories", "curves"):
        assert (real_run / "figures" / f"{name}.png").read_bytes()[:4] == b"\x89PNG", name
        assert (real_run / "figures" / f"{name}.pdf").read_bytes()[:5] == b"%PDF-", name
    rep = json.loads((real_run / "report.json").read_text())
    res = np.load(real_run / "results.npz")
    cell = rep["cell"]
    assert rep["kind"] == "run" and cell["n_seeds"] == res["t_icl"].size
    assert cell["acquired"] == int(np.sum(res["t_icl"] >= 0))
    assert cell["never_acquired"]["k"] == int(np.sum(res["t_icl"] < 0))
    assert len(rep["figures"]) == 10 and len(rep["paper_comparisons"]) == 4
    counts = rep["cell"]["outcomes"]["counts"]
    assert sum(c["k"] for c in counts.values()) == res["t_icl"].size  # every seed has one outcome
    assert counts["censored"]["k"] == int(np.sum(res["t_icl"] < 0))
    md = (real_run / "report.md").read_text()
    for text in (
        "Kaplan-Meier median t_ICL",
        "never acquired",
        "Beside the paper",
        "figures/survival.png",
        "dip test p",
        "not measured in this directory",
        "## Outcomes",
        "Wilson score",
        "figures/curves.png",
    ):
        assert text in md, text

    assert main(["report", str(real_run), "--boot", "200", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == rep | {"icl_race_version": rep["icl_race_version"]}

    assert main(["hist", str(real_run)]) == 0
    out = capsys.readouterr().out
    assert "never (> 800)" in out and f"n={res['t_icl'].size} seeds" in out and "KM median t_ICL" in out
    assert main(["hist", str(real_run), "--json"]) == 0
    h = json.loads(capsys.readouterr().out)
    assert h["schema"] == rep["schema"] and h["kind"] == "hist" and h["summary"] in out
    assert sum(b["count"] for b in h["bins"]) + h["never_acquired"] == res["t_icl"].size


def test_bad_directories_exit_2_with_one_line(tmp_path, capsys):
    for argv in (["report", str(tmp_path / "missing")], ["hist", str(tmp_path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("icl-race: error:") and err.count("\n") == 1
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text(json.dumps(config.from_dict({}).to_dict()))
    assert main(["report", str(tmp_path / "run")]) == 2
    assert "no results.npz" in capsys.readouterr().err
    mem = config.from_dict({"task": {"kind": "memorization"}, "model": {"kind": "mlp"}})
    (tmp_path / "sweep" / "cells" / mem.digest()).mkdir(parents=True)
    (tmp_path / "sweep" / "cells" / mem.digest() / "config.json").write_text(json.dumps(mem.to_dict()))
    assert main(["report", str(tmp_path / "sweep")]) == 2
    assert (
        "icl-race analyze memorization" in capsys.readouterr().err and not (tmp_path / "sweep" / "report.md").exists()
    )


# ---- synthetic directories ----------------------------------------------------------------------


def _write_cell(d, raw, t_icl, final_acc, diverged=None, fall=None, extra=None):
    """A run directory with a real config.json and synthetic results.npz on the evaluation grid (ICL
    accuracy 0.2 from step `fall[i]` of each seed with fall[i] >= 0; `extra`: more arrays)."""
    raw = {"train": {"steps": BUDGET, "eval_every": EVAL_EVERY, "eval_size": 200}, **raw}
    cfg = config.from_dict(raw)
    cell = d / "cells" / cfg.digest()
    cell.mkdir(parents=True)
    (cell / "config.json").write_text(json.dumps(cfg.to_dict()))
    steps = np.arange(EVAL_EVERY, BUDGET + 1, EVAL_EVERY)
    hit = (t_icl >= 0)[:, None] & (steps[None] >= t_icl[:, None])
    icl = np.where(hit, 0.99, 0.5).astype(np.float32)
    icl[:, -1] = final_acc
    if fall is not None:
        icl[(fall >= 0)[:, None] & (steps[None] >= fall[:, None])] = 0.2
    res = {
        "seed_ids": np.arange(t_icl.size),
        "t_icl": t_icl,
        "t_converged": t_icl,
        "eval_steps": steps,
        "icl_acc": icl,
        "iwl_acc": np.full_like(icl, 0.6),
        "icl_loss": 1 - icl,
        "iwl_loss": 1 - icl,
        "train_loss": 1 - icl,
        "steps_run": np.int64(BUDGET),
        "budget": np.int64(BUDGET),
    }
    if diverged is not None:
        res["diverged"] = diverged
    np.savez(cell / "results.npz", **res, **(extra or {}))
    return cell


def _grid(t):
    return np.where(t <= BUDGET, np.ceil(t / EVAL_EVERY) * EVAL_EVERY, -1).astype(np.int64)


SLOPE, INTERCEPT, SHIFT = 1.4, 1.7, 0.35  # log10 K* = 1.7 + 1.4 log10 N; balanced contexts need 10^0.35 more K


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    rng = np.random.default_rng(2024)
    (d / "sweep.toml").write_text("# synthetic\n")
    xs = np.linspace(2.5, 4.3, 7)
    for N in (8, 16, 32):
        for variant, shift in (("standard", 0.0), ("balanced", SHIFT)):
            for x in xs:
                K = 2 * int(round(10**x / 2))
                p = expit(6 * (math.log10(K) - (INTERCEPT + SLOPE * math.log10(N) + shift)))
                acq = rng.random(40) < p
                t = _grid(np.where(acq, 300 * np.exp(rng.normal(0, 0.3, 40)), np.inf))
                final = np.where(acq, 0.99, 0.5 + rng.normal(0, 0.02, 40)).astype(np.float32)
                _write_cell(d, {"task": {"variant": variant, "K": K, "N": N}}, t, final)
        # K = infinity: median t_ICL = 40 N, some seeds censored at N = 32
        t = _grid(40 * N * np.exp(rng.normal(0, 0.6, 60)))
        diverged = np.arange(60) < (3 if N == 16 else 0)
        _write_cell(d, {"task": {"variant": "infinite", "N": N}}, t, np.where(t >= 0, 0.99, 0.6), diverged)
    cfg = config.from_dict({"task": {"K": 777, "N": 8}, "train": {"steps": BUDGET, "eval_every": EVAL_EVERY}})
    (d / "cells" / "0123456789abcdef").mkdir()
    (d / "cells" / "0123456789abcdef" / "config.json").write_text(json.dumps(cfg.to_dict()))  # unfinished
    return d


def test_sweep_report_recovers_slope_median_scaling_and_balanced_effect(sweep_dir):
    written = write_report(sweep_dir, n_boot=100)
    for f in written:
        assert (sweep_dir / f).stat().st_size > 0, f
    figs = {f.split("/")[1].split("__")[0] for f in written if f.startswith("figures/")}
    assert figs == {
        "acquisition_vs_K",
        "kstar_vs_N",
        "heatmap",
        "near_kstar",
        "t_icl_vs_N",
        "balanced_vs_standard",
        "trajectories_by_cell",
        "curves_by_cell",
    }  # no seed falls: no fall_by_cell
    # 10 of the analyses, ICL and IWL trajectories, the three recorded losses: small multiples, not one per cell
    assert sum(f.endswith(".pdf") for f in written) == sum(f.endswith(".png") for f in written) == 15
    rep = json.loads((sweep_dir / "report.json").read_text())
    assert rep["kind"] == "sweep" and rep["n_cells_finished"] == 3 * (2 * 7 + 1)
    assert [u["cell"] for u in rep["unfinished"]] == ["0123456789abcdef"]
    assert set(rep["varying_fields"]) == {"task.K", "task.N", "task.variant"}

    by_variant = {t["group"]["task.variant"]: t for t in rep["thresholds"]}
    std = by_variant["standard"]
    for N in (8, 16, 32):
        ci = std["acquisition"][str(N)]["log10_kstar_ci"]
        assert ci[0] <= INTERCEPT + SLOPE * math.log10(N) <= ci[1], (N, ci)
    s = std["kstar_slope"]
    assert s["slope_ci"][0] <= SLOPE <= s["slope_ci"][1] and abs(s["slope"] - SLOPE) < 0.2, s

    med = rep["t_icl_vs_N"][0]["median_vs_N"]
    assert [p["N"] for p in med["per_N"]] == [8, 16, 32]
    assert med["loglog"]["slope_ci"][0] <= 1.0 <= med["loglog"]["slope_ci"][1]
    inf16 = next(c for c in rep["cells"] if c["variant"] == "infinite" and c["N"] == 16)
    assert inf16["n_diverged"] == 3 and inf16["n_seeds"] == 57

    bal = rep["balanced_vs_standard"][0]
    assert bal["acc_above_0.75"]["mean_diff_ci"][0] > 0  # balanced contexts acquire less at the same K

    verdicts = {r["claim"]: r["verdict"] for r in rep["paper_comparisons"]}
    assert verdicts["log K* vs log N slope, measured (Fig 6A)"] == "agrees"
    assert verdicts["balanced contexts reduce ICL (Fig 6E)"] == "agrees"
    assert verdicts["t_ICL proportional to N (theory t_ICL ~ N sqrt(2 pi) e^-beta0)"] == "agrees"
    md = (sweep_dir / "report.md").read_text()
    for text in (
        "Beside the paper",
        "1.41",
        "Unfinished",
        "0123456789abcdef",
        "Balanced vs standard",
        "K = infinity",
        "## Outcomes per cell",
        "figures/trajectories_by_cell__icl.png",
        "figures/curves_by_cell__train_loss.png",
    ):
        assert text in md, text

    text = hist_text(sweep_dir)
    assert "45 finished cells, 1 unfinished" in text and "infinite K=inf N=16: n=57 seeds (3 diverged excluded)" in text


def test_old_cells_without_newer_fields_pool_with_new_ones(tmp_path):
    from icl_race.report.sample import condition as _condition
    from icl_race.rundir import read_config

    full = config.from_dict({"task": {"K": 1000, "N": 8}}).to_dict()
    old = json.loads(json.dumps(full))
    del old["train"]["eval_spacing"], old["model"]["freeze"]  # written before these fields existed
    for name, cfg in (("new", full), ("old", old)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(cfg))
    assert _condition(read_config(tmp_path / "old")) == _condition(read_config(tmp_path / "new"))


def test_bimodality_near_kstar_is_read_from_the_best_observed_rerun_of_that_cell(tmp_path):
    """A 40-seed K* grid (early stop at 0.99) whose cells end unimodal, plus, at every K, a rerun with the early stop off and 80
    seeds whose final accuracies split in two, and one with another learning rate and 120 seeds: the K*
    group's bimodality comes from the early-stop-off rerun (same physics, more seeds), never from the
    other learning rate."""
    rng = np.random.default_rng(7)
    for x in np.linspace(2.6, 3.6, 5):
        K = 2 * int(round(10**x / 2))
        acq = rng.random(40) < expit(6 * (x - 3.1))
        _write_cell(
            tmp_path,
            {
                "task": {"K": K, "N": 8},
                "train": {"steps": BUDGET, "eval_every": EVAL_EVERY, "eval_size": 200, "early_stop": "freeze"},
            },
            _grid(np.where(acq, 400.0, np.inf)),
            (0.7 + rng.normal(0, 0.02, 40)).astype(np.float32),
        )
        split = np.where(np.arange(80) % 2 == 0, 0.99, 0.5) + rng.normal(0, 0.01, 80)
        _write_cell(
            tmp_path,
            {
                "task": {"K": K, "N": 8},
                "train": {"steps": BUDGET, "eval_every": EVAL_EVERY, "eval_size": 200, "early_stop": "off"},
            },
            _grid(np.where(split > 0.9, 400.0, np.inf)),
            split.astype(np.float32),
        )
        _write_cell(
            tmp_path,
            {
                "task": {"K": K, "N": 8},
                "train": {"steps": BUDGET, "eval_every": EVAL_EVERY, "eval_size": 200, "lr": 0.05},
            },
            _grid(np.full(120, 400.0)),
            np.full(120, 0.99, np.float32),
        )
    rep, _, figs = sweep_report(load_sweep(tmp_path), Draws(0, 50))
    for fig in figs.values():
        plt.close(fig)
    freeze = next(
        t for t in rep["thresholds"] if t["group"]["train.early_stop"] == "freeze" and t["group"]["train.lr"] != 0.05
    )
    near = freeze["near_kstar"][0]["bimodality"]["final_icl_acc"]
    assert near["n"] == 80 and near["bimodal"], near


def test_retirement_levers_do_not_split_a_kstar_group(tmp_path):
    """K* at N = 8 without the retirement levers and at N = 16 with them (train.settle_iwl, a lower
    stop_threshold) is one K*(N) group with one slope: retiring a decided seed changes no t_ICL. Another
    lr still splits."""
    rng = np.random.default_rng(3)
    for N, train in ((8, {}), (16, {"settle_iwl": 0.9, "stop_threshold": 0.95}), (16, {"lr": 0.05})):
        for x in np.linspace(2.5, 4.3, 7):
            K = 2 * int(round(10**x / 2))
            acq = rng.random(40) < expit(6 * (x - (INTERCEPT + SLOPE * math.log10(N))))
            _write_cell(
                tmp_path,
                {
                    "task": {"K": K, "N": N},
                    "train": {"steps": BUDGET, "eval_every": EVAL_EVERY, "eval_size": 200, **train},
                },
                _grid(np.where(acq, 400.0, np.inf)),
                np.where(acq, 0.99, 0.5).astype(np.float32),
            )
    rep, md, figs = sweep_report(load_sweep(tmp_path), Draws(0, 50))
    for fig in figs.values():
        plt.close(fig)
    groups = {t["group"].get("train.lr"): t for t in rep["thresholds"]}
    assert set(groups) == {0.05, 0.01} and groups[0.01]["N"] == [8, 16] and groups[0.05]["N"] == [16]
    s = groups[0.01]["kstar_slope"]
    assert s["slope_ci"][0] <= SLOPE <= s["slope_ci"][1], s
    assert not groups[0.01]["kstar_slope_paper_sigmoid"]["ok"]  # fitted to final accuracy, which retiring changes
    assert "settle_iwl=0.9" in md  # the cells still say how they were trained
    # A settled seed's last accuracy is read when it retired: no final-accuracy bimodality or sigmoid at
    # N = 16 (its verdict says why), both at N = 8.
    assert not groups[0.01]["paper_sigmoid"][16]["ok"] and groups[0.01]["paper_sigmoid"][8]["ok"]
    near = {n["N"]: n["bimodality"]["final_icl_acc"] for n in groups[0.01]["near_kstar"]}
    assert near[16]["n"] == 0 and "settle_iwl" in near[16]["not_measured"] and near[8]["n"] == 40
    assert "not measured: seeds settled by train.settle_iwl" in md


def test_sweep_report_gives_each_cell_its_outcomes_fall_curve_and_trajectories(tmp_path):
    """Item 1 for sweeps: per-cell outcome counts, final accuracies and fall times in one table, the
    fall-time Kaplan-Meier curves and trajectories as small multiples (one figure, a panel per cell)."""
    t = _grid(np.full(12, 500.0))
    t[-2:] = -1  # 2 censored
    falls = {8: np.where(np.arange(12) < 4, 1500, -1), 16: np.full(12, -1)}  # 4 transient at N = 8, none at 16
    for N, fall in falls.items():
        _write_cell(tmp_path, {"task": {"variant": "infinite", "N": N}}, t, np.where(t >= 0, 0.99, 0.5), fall=fall)
    _, md, figs = sweep_report(load_sweep(tmp_path), Draws(0, 50))
    assert {
        "fall_by_cell",
        "trajectories_by_cell__icl",
        "trajectories_by_cell__iwl",
        "curves_by_cell__train_loss",
        "curves_by_cell__icl_loss",
        "curves_by_cell__iwl_loss",
    } <= set(figs)
    assert len(figs["fall_by_cell"].axes) == 1  # the N = 16 cell, where nothing fell, has no panel
    assert len(figs["trajectories_by_cell__icl"].axes) == 2
    table = md.split("## Outcomes per cell")[1]
    row8 = next(line for line in table.splitlines() if line.startswith("| infinite K=inf N=8 |"))
    # 6 persistent, 4 transient (fell to 0.2 at step 1,500: 1,000 steps after t_ICL = 500), 2 censored
    assert (
        row8.startswith("| infinite K=inf N=8 | 6/12 = 50.0% [")
        and "| 4/12 = 33.3% [" in row8
        and "| 2/12 = 16.7% [" in row8
    )
    assert "0.99 (0.99-0.99) / - / - / 0.20 (0.20-0.20) / 0.50 (0.50-0.50)" in row8  # no recovered, falling
    assert "not reached (4 of 10 fell)" in row8
    row16 = next(line for line in table.splitlines() if line.startswith("| infinite K=inf N=16 |"))
    assert row16.endswith("| - |") and "figures/fall_by_cell.png" in md
    for fig in figs.values():
        plt.close(fig)  # pyplot keeps every figure open until closed


def test_the_comparison_names_the_width_and_lr_its_verdicts_come_from():
    from icl_race.report.claims import comparison_markdown
    from icl_race.report.paper import scale_text

    configs = [{"model": {"width": 64}, "train": {"lr": 0.1}}, {"model": {"width": 128}, "train": {"lr": 0.1}}]
    assert scale_text(configs) == "MLP width 64, 128, lr 0.1 (the paper: MLP width 512, lr 0.01)"
    assert scale_text([{}]) == "MLP width 512, lr 0.01 (the paper: MLP width 512, lr 0.01)"  # defaults = the paper's
    assert "Verdicts from runs at MLP width 64" in "\n".join(comparison_markdown([], scale_text(configs[:1])))


# ---- warnings (report/warnings.py) ----------------------------------------------------------------------


def test_expected_t_icl_is_the_scale_bridge_measurement_and_the_budget_warning_uses_it():
    from icl_race.report import warnings as W

    assert W.expected_t_icl(32, 64, 0.1) == pytest.approx(2480)  # measured KM medians, at their lr
    assert W.expected_t_icl(128, 256, 0.1) == pytest.approx(11840)
    assert W.expected_t_icl(32, 512, 0.01) == pytest.approx(4389 * 3)  # steps x lr is the clock
    assert W.expected_t_icl(256, 512, 0.03) == pytest.approx(26999 * 2**1.33)  # the exponent beyond N = 128
    assert 6320 > W.expected_t_icl(48, 64, 0.1) > 2480 and 2480 > W.expected_t_icl(32, 96, 0.1) > 1960
    assert W.expected_t_icl(16, 64, 0.1) is None  # nothing measured below N = 32
    assert W.expected_t_icl(513, 64, 0.1) is None  # nor extrapolated beyond 4x the largest N measured
    demo = config.load("experiments/demo.toml")
    infinite = 'task.variant="infinite"'
    assert W.budget(config.load("experiments/demo.toml", [infinite])) is None  # 3,000 steps against ~2,480
    short = W.budget(config.load("experiments/demo.toml", [infinite, "task.N=128"]))
    assert short.startswith(
        "warning: train.steps = 3,000 is shorter than the expected t_ICL at K = infinity, "
        "~21,280 steps for N = 128, width 64, lr 0.1 (scale-bridge fits"
    )
    assert "\n" not in short
    assert W.budget(config.load("experiments/demo.toml", [infinite, "task.N=128", "train.optimizer=adam"])) is None
    # At finite K (the demo's 3,600) ICL comes up to 3.1x sooner than at K = infinity (measured to N = 64): a
    # budget is called short only below ~2,480 / 3.1 = 800 steps, and never beyond N = 64.
    assert W.budget(demo) is None and W.budget(config.load("experiments/demo.toml", ["train.steps=1000"])) is None
    assert W.budget(config.load("experiments/demo.toml", ["task.N=128"])) is None
    finite = W.budget(config.load("experiments/demo.toml", ["train.steps=500"]))
    assert finite.startswith(
        "warning: train.steps = 500 is shorter than the earliest t_ICL expected at any finite K, ~800 steps for "
        "N = 32, width 64, lr 0.1 (the t_ICL at K = infinity, ~2,480"
    ), finite


def test_run_and_report_warn_when_nothing_is_acquired_or_seeds_diverge(tmp_path, capsys):
    from icl_race.report.summary import run_summary

    train = {"steps": BUDGET, "eval_every": EVAL_EVERY, "eval_size": 200, "optimizer": "adam", "lr": 0.1}
    none = _write_cell(tmp_path / "a", {"train": train}, np.full(4, -1), 0.5, np.array([0, 0, 0, 1], bool))
    s = run_summary(rundir.load(none))
    assert s.warnings == [
        "warning: no seed acquired ICL within 4,000 steps (0 of 4; train.optimizer adam, train.lr 0.1): "
        "Adam's calibrated lr is 0.001 (experiments/levers/adam.toml)",
        "warning: 1 of 4 seeds diverged (a non-finite loss; train.optimizer adam, train.lr 0.1): lower train.lr "
        "(Adam's calibrated lr is 0.001)",
    ]
    # printed by run and demo last (before the histogram line, which a directory without the figure lacks)
    assert s.histogram is None and s.text().splitlines()[-2:] == s.warnings
    assert main(["report", str(none), "--boot", "20"]) == 0
    said, *warned = capsys.readouterr().err.splitlines()  # what it does (once read), then the warnings
    assert said.startswith(f"report: read the run in {none}") and warned == s.warnings
    assert "- **Warning: no seed acquired ICL within 4,000 steps" in (none / "report.md").read_text()
    ok = _write_cell(tmp_path / "b", {}, np.full(4, 500), 0.99)
    assert run_summary(rundir.load(ok)).warnings == []


def test_the_summary_lines_name_a_run_outside_the_abrupt_regime(tmp_path):
    from icl_race.report.summary import run_summary

    t = np.full(6, 1000)
    for name, t60, outside in (("jump", 950, False), ("climb", 500, True)):  # rise fraction 0.05 and 0.5
        cell = _write_cell(tmp_path / name, {}, t, 0.99, extra={"t_icl60": np.full(6, t60)})
        line = hist_text(cell).splitlines()[-1]
        assert ("outside the abrupt regime (median rise fraction 0.50 > 0.10)" in line) == outside, line
        regime = [w for w in run_summary(rundir.load(cell)).warnings if "abrupt regime" in w]
        assert regime == (
            [
                "warning: outside the abrupt regime: median rise fraction 0.50 > 0.10 (analysis/regime.py): ICL "
                "climbs to the threshold rather than jumping, so t_ICL times a slow crossing (docs/regime.md)"
            ]
            if outside
            else []
        )


def test_sweep_warnings_name_the_setting_that_acquired_nothing_or_the_whole_sweep(tmp_path):
    from icl_race.report.summary import dir_warnings

    train = {"steps": BUDGET, "eval_every": EVAL_EVERY, "eval_size": 200}
    for lr, t in ((0.1, 500), (1.0, -1)):
        _write_cell(tmp_path / "s", {"train": train | {"lr": lr}}, np.full(4, t), 0.99 if t > 0 else 0.5)
    assert dir_warnings(tmp_path / "s") == [
        "warning: 1 cell: no seed acquired ICL within 4,000 steps (0 of 4; train.optimizer sgd, train.lr 1): "
        "raise train.steps, lower train.lr or raise task.K"
    ]
    for K in (500, 1000):
        _write_cell(tmp_path / "z", {"task": {"K": K}, "train": train}, np.full(3, -1), 0.5)
    assert dir_warnings(tmp_path / "z") == [
        "warning: every cell: no seed acquired ICL within 4,000 steps (0 of 6; train.optimizer sgd, train.lr "
        "0.01): the expected t_ICL at K = infinity is ~59,052 steps (scale-bridge fits, experiments/scale/README.md "
        "item 2): raise train.steps"  # the defaults: N = 100, width 512, lr 0.01
    ]


def test_run_and_sweep_print_the_budget_warning_before_any_work(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text(tiny.toml(tiny.raw(task={"N": 32, "variant": "infinite"})))
    (tmp_path / "file").write_text("")
    assert main(["run", str(cfg), "--out", str(tmp_path / "file")]) == 2  # refused after the warning
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("warning: train.steps = 800 is shorter than the expected t_ICL at K = infinity, ~2,")
    spec = tmp_path / "s.toml"
    spec.write_text(
        tiny.toml(tiny.raw(task={"N": 32, "variant": "infinite"})) + '[grid]\n"train.steps" = [800, 5000]\n'
    )
    assert main(["sweep", str(spec), "--out", str(tmp_path / "sw"), "--dry-run", "--no-measure"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [w[:60] for w in err if w.startswith("warning:")] == [
        "warning: cell {'train.steps': 800}: train.steps = 800 is sho"
    ]
