"""The scale bridge's lr analysis (icl_race/analysis/scale.py) on samples with known answers."""

import numpy as np
import pytest
from refusal import refused

from icl_race.analysis.draws import Draws
from icl_race.analysis.scale import KStarAtN, interval_draws, kstar_slope, lr_bridge

LRS = [0.1, 0.03, 0.01]


def _sample(lr, scale=150.0, n=32, seed=0):
    """t_ICL = scale / lr x lognormal(0, 0.2) per seed; the rise starts at 0.95 t_ICL (rise fraction 0.05)."""
    t = np.round(scale / lr * np.exp(np.random.default_rng(seed).normal(0, 0.2, n))).astype(int)
    return t, np.round(0.95 * t).astype(int)


def _bridge(scales=(150, 150, 150), diverged_at_01=0, collapsed_at_01=0):
    t, start = zip(*[_sample(lr, s, seed=i) for i, (lr, s) in enumerate(zip(LRS, scales))])
    div = [np.arange(32) < (diverged_at_01 if lr == 0.1 else 0) for lr in LRS]
    col = [np.arange(32) < (collapsed_at_01 if lr == 0.1 else 0) for lr in LRS]
    return lr_bridge(np.array(LRS), list(t), list(start), [1e9] * 3, div, col, Draws(0, 500), width=512)


def test_the_same_gradient_flow_time_makes_the_largest_lr_the_bridge():
    b = _bridge()
    assert b.bridge_lr == 0.1 and b.reference_lr == 0.01 and [c.lr for c in b.cells] == LRS
    for c in b.cells:
        assert c.agrees and c.stable and c.acquired == 32
        assert abs(c.t_lr - 150) < 20, c.t_lr  # the lognormal's median is 150 lr-units
        lo, hi = c.t_lr_ci
        assert lo < c.t_lr < hi
        assert abs(c.rise - 0.05) < 0.002
    assert b.cells[-1].ratio == 1.0


def test_a_faster_clock_at_the_largest_lr_or_an_unstable_one_moves_the_bridge_down():
    assert _bridge(scales=(300, 150, 150)).bridge_lr == 0.03  # lr 0.1 takes twice the lr-time: CI excludes 1
    assert _bridge(diverged_at_01=1).bridge_lr == 0.03
    b = _bridge(collapsed_at_01=2)
    assert b.bridge_lr == 0.03 and b.cells[0].collapsed == 2 and not b.cells[0].stable


def test_an_lr_s_numbers_do_not_depend_on_the_other_lrs():
    full = _bridge()
    t, start = _sample(0.03, seed=1)
    t_ref, start_ref = _sample(0.01, seed=2)
    two = lr_bridge(
        np.array([0.01, 0.03]),
        [t_ref, t],
        [start_ref, start],
        [1e9] * 2,
        [np.zeros(32, bool)] * 2,
        [np.zeros(32, bool)] * 2,
        Draws(0, 500),
    )
    assert two.cells[0] == full.cells[1] and two.cells[1] == full.cells[2]


def test_analyze_scale_lr_on_two_tiny_k_infinity_runs(tmp_path, capsys):
    """The command end to end: two runs of one width at two lrs give one table row per lr, the JSON
    written where asked; bad input is one line, exit 2, nothing written."""
    import json

    from icl_race import config
    from icl_race.cli import main
    from icl_race.run.runner import execute

    raw = {
        "task": {"variant": "infinite", "N": 8},
        "model": {"width": 32},
        "train": {"batch_size": 64, "steps": 300, "eval_every": 50, "eval_size": 100, "icl_levels": [0.6]},
        "ensemble": {"seeds": 4, "block": 4},
    }
    for lr in (0.1, 0.05):
        execute(
            config.from_dict({**raw, "train": {**raw["train"], "lr": lr}}),
            tmp_path / f"lr{lr}",
            progress=False,
            log=lambda m: None,
        )
    out = tmp_path / "results" / "lr.json"
    assert (
        main(
            [
                "analyze",
                "scale",
                "lr",
                str(tmp_path / "lr0.1"),
                str(tmp_path / "lr0.05"),
                "--out",
                str(out),
                "--boot",
                "50",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "| 0.1 | 4 |" in text and "| 0.05 | 4 |" in text and "bridge lr" in text
    result = json.loads(out.read_text())["result"]
    assert [c["lr"] for c in result["cells"]] == [0.1, 0.05] and result["reference_lr"] == 0.05
    kinf = tmp_path / "results" / "kinf.json"
    assert (
        main(
            [
                "analyze",
                "scale",
                "kinf",
                str(tmp_path / "lr0.1"),
                str(tmp_path / "lr0.05"),
                "--out",
                str(kinf),
                "--boot",
                "50",
            ]
        )
        == 0
    )
    fits = json.loads(kinf.read_text())["result"]["fits"]
    assert [(f["width"], f["lr"]) for f in fits] == [(32, 0.05), (32, 0.1)] and all(f["exponent"] is None for f in fits)
    assert kinf.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"  # the figure beside the JSON
    capsys.readouterr()
    bad = tmp_path / "refused" / "bad.json"  # a folder of its own: tmp_path holds the runs
    assert main(["analyze", "scale", "lr", str(tmp_path / "lr0.1"), "--out", str(bad)]) == 2
    err = refused(capsys.readouterr().err)  # after the line saying what it loads
    assert len(err) == 1 and "needs runs at >= 2 values of train.lr" in err[0] and not bad.exists()
    # the same seeds run twice (a copy of a run, as a rerun on another machine) would count twice: refused
    import shutil

    shutil.copytree(tmp_path / "lr0.1", tmp_path / "again")
    assert main(["analyze", "scale", "kinf", str(tmp_path / "lr0.1"), str(tmp_path / "again"), "--out", str(bad)]) == 2
    err = refused(capsys.readouterr().err)
    assert len(err) == 1 and "seed 0 (root seed 0) twice" in err[0] and not bad.exists()


def _kinf_cells(width, lr, Ns, power, rise_at=None, n=32, seed=0):
    """Cells whose t_ICL = 2 N^power x lognormal(0, 0.1); the rise starts at (1 - r) t_ICL, r = 0.05 or rise_at[N]."""
    rise_at = rise_at or {}
    out = []
    for i, N in enumerate(Ns):
        t = np.round(2 * N**power * np.exp(np.random.default_rng([seed, width, i]).normal(0, 0.1, n))).astype(int)
        out.append((width, lr, N, t, np.round((1 - rise_at.get(N, 0.05)) * t).astype(int), 1e9, np.zeros(n, bool)))
    return out


def test_the_width_axis_recovers_each_width_s_exponent_over_its_abrupt_n_only():
    from icl_race.analysis.scale import width_axis

    cells = _kinf_cells(128, 0.1, [32, 64, 128], 1.5) + _kinf_cells(512, 0.03, [16, 32, 64, 128], 1.0, {16: 0.3})
    axis = width_axis(*map(list, zip(*cells)), Draws(0, 300))
    w128, w512 = axis.fits
    assert (w128.width, w128.lr, w512.width) == (128, 0.1, 512)
    assert w128.fitted_N == (32, 64, 128) and w512.fitted_N == (32, 64, 128)  # N = 16 climbs: left out
    assert not w512.per_N[0].abrupt and abs(w512.per_N[0].rise - 0.3) < 1e-3
    for fit, p in ((w128, 1.5), (w512, 1.0)):
        lo, hi = fit.exponent_ci
        assert lo < p < hi and abs(fit.exponent - p) < 0.05, (fit.exponent, fit.exponent_ci)
    assert w512.quadratic_ci[0] < 0 < w512.quadratic_ci[1]  # a straight line in N at exponent 1
    assert w128.quadratic_ci[0] > 0  # curved upwards at 1.5
    lone = width_axis(*map(list, zip(*_kinf_cells(256, 0.1, [32], 1.0))), Draws(0, 50)).fits[0]
    assert lone.exponent is None and "2 values of N" in lone.reason


def test_interval_draws_put_the_interval_s_ends_at_their_quantiles():
    """An asymmetric interval given by hand: the draws' median is the estimate, their 2.5 % and 97.5 %
    quantiles its ends (within 0.004 decades at 200,000 draws)."""
    draws = interval_draws(3.5, [3.4, 3.7], 0.95, np.random.default_rng(0), 200_000)
    assert np.quantile(draws, [0.025, 0.5, 0.975]) == pytest.approx([3.4, 3.5, 3.7], abs=0.004)


def test_the_k_star_slope_s_interval_is_the_least_squares_error_for_normal_points():
    """Symmetric intervals (normal replicates): the slope's 95 % interval is the slope +- 1.96 times
    its standard error sqrt(sum xc^2 se^2) / sum xc^2, within 2 %; the slope is the points' least squares."""
    N, log10_k, se = np.array([32, 64, 100, 128]), np.array([3.5, 3.77, 3.97, 4.1]), np.array([0.02, 0.03, 0.025, 0.04])
    rng = np.random.default_rng(1)
    points = [
        KStarAtN(int(n), 10**y, [0, 0], "t", y + s * rng.standard_normal(100_000)) for n, y, s in zip(N, log10_k, se)
    ]
    fit = kstar_slope(points, 100_000, 1).fit
    xc = np.log10(N) - np.log10(N).mean()
    assert fit.slope == pytest.approx(np.polyfit(np.log10(N), log10_k, 1)[0])
    half = 1.959964 * np.sqrt(xc**2 @ se**2) / (xc @ xc)
    assert np.array(fit.slope_ci) == pytest.approx([fit.slope - half, fit.slope + half], rel=0.02)


def test_the_width_512_grids_intervals_give_the_slope_their_seed_bootstrap_gave():
    """scale/README.md item 4: the seed bootstrap over the three grids' cells gave 0.93 [0.80, 1.03]; their
    K* intervals alone, as two-piece normals, give the same within 0.015 (what `design slope`'s `given`
    rests on)."""
    grids = [(32, 3200, 2982, 3488), (64, 5871, 5262, 6540), (100, 9245, 8304, 10302)]
    rng = np.random.default_rng(0)
    points = [
        KStarAtN(n, k, [lo, hi], "t", interval_draws(np.log10(k), np.log10([lo, hi]), 0.95, rng, 20_000))
        for n, k, lo, hi in grids
    ]
    fit = kstar_slope(points, 20_000, 0).fit
    assert [fit.slope, *fit.slope_ci] == pytest.approx([0.93, 0.80, 1.03], abs=0.015)
