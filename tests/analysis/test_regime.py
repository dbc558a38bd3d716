"""The regime diagnostic: rise fraction, plateau height, effective threshold, and the device-recorded
level passages against the same first passages read off the stored curves."""

import numpy as np
import pytest
from scipy import stats

from icl_race import config
from icl_race.analysis import regime
from icl_race.analysis.draws import Bootstrap, generator
from icl_race.analysis.race import first_passage
from icl_race.run.runner import execute

STEPS = np.arange(1, 101) * 10  # evaluations at 10, 20, ..., 1000


def _jump(t_start, height, rise=0, second=None):
    """Accuracy 0.5 until t_start, then `height` (after a linear rise over `rise` steps), and with
    second = (t, h) a later move to h: a constructed trace with known t_start, plateau and passages."""
    acc = np.where(STEPS < t_start, 0.5, height)
    if rise:
        ramp = (STEPS >= t_start) & (STEPS < t_start + rise)
        acc = np.where(ramp, 0.6 + (height - 0.6) * (STEPS - t_start) / rise, acc)
    if second:
        acc = np.where(STEPS >= second[0], second[1], acc)
    return acc


def test_rise_fraction_and_plateau_of_constructed_traces():
    acc = np.stack(
        [
            _jump(200, 0.99),  # abrupt: 0.6 and 0.95 passed at the same evaluation
            _jump(200, 0.98, rise=100),  # climbs 0.6 -> 0.98 over 100 steps
            _jump(200, 0.85, second=(700, 0.97)),  # jumps to 0.85, reaches the threshold in a second phase
            np.full(STEPS.size, 0.55),  # never rises
        ]
    )
    t_start = first_passage(acc, STEPS, 0.6 - 1e-9)  # passage over (just below) 0.6: the ramp starts at 0.6
    t_thr = first_passage(acc, STEPS, 0.95)
    np.testing.assert_array_equal(t_start, [200, 200, 200, -1])
    np.testing.assert_array_equal(t_thr, [200, 300, 700, -1])
    r = regime.rise_fraction(t_thr, t_start)
    np.testing.assert_allclose(r[:3], [0.0, 100 / 300, 500 / 700])
    assert np.isnan(r[3])
    h = regime.plateau_height(acc, STEPS, t_start)  # window [250, 300]
    np.testing.assert_allclose(h[[0, 2]], [0.99, 0.85])
    assert 0.8 < h[1] < 0.95 and np.isnan(h[3])  # the slow climb is still under way in the window
    s = regime.summarize(t_thr, t_start, acc, STEPS, 0.95, Bootstrap(200, generator(0)))
    assert s.acquired == 3 and s.seeds == 4
    assert s.rise_fraction.median == pytest.approx(100 / 300)
    assert s.plateau_reaches_threshold == pytest.approx(1 / 3)  # only the abrupt seed
    assert s.final_icl_acc_acquired.median == pytest.approx(0.98)  # of 0.99, 0.98, 0.97
    assert s.abrupt is False  # the median rise fraction 1/3 is no jump


def test_regime_verdict():
    assert regime.is_abrupt(0.05, 0.9) and not regime.is_abrupt(0.3, 0.9) and not regime.is_abrupt(0.05, 0.2)
    assert regime.is_abrupt(None, None) is None


def test_effective_threshold_matches_monte_carlo():
    # A seed holding p: P(some look above 0.95 in 40 looks of 500 sequences) = 1/2 at p = p_eff.
    p = regime.effective_threshold(0.95, 500, 40)
    assert 0.92 < p < 0.935
    rng = np.random.default_rng(0)
    hits = (rng.binomial(500, p, (20000, 40)) / 500 > 0.95).any(axis=1)
    assert abs(hits.mean() - 0.5) < 0.015
    # One look: the threshold itself (to the count grid); confirmation pulls it back up.
    assert regime.effective_threshold(0.95, 2000, 1) == pytest.approx(0.95, abs=2e-3)
    assert regime.effective_threshold(0.95, 500, 40, confirm=3) > p + 0.01
    q = stats.binom.sf(475, 500, 0.94)
    assert regime._p_run(q, 1, 1) == pytest.approx(q)


def test_level_passages_recorded_on_device_equal_the_curves(tmp_path, tiny_raw):
    raw = {**tiny_raw, "train": {**tiny_raw["train"], "stop_when_all_acquired": False}}
    cfg = config.from_dict(raw)
    r = execute(cfg, tmp_path / "run", progress=False, log=lambda *a: None)
    assert {"t_icl60", "t_icl75", "t_icl90"} <= set(r)
    for name, level in (("t_icl60", 0.6), ("t_icl75", 0.75), ("t_icl90", 0.9), ("t_icl", 0.95)):
        np.testing.assert_array_equal(r[name], first_passage(r["icl_acc"], r["eval_steps"], level))
    assert (r["t_icl60"] >= 0).any() and (r["t_icl"] >= 0).any()
    passed = r["t_icl"] >= 0
    assert np.all(r["t_icl60"][passed] <= r["t_icl90"][passed]) and np.all(r["t_icl90"][passed] <= r["t_icl"][passed])
