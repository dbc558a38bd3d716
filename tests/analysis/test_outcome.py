"""Seed outcome classes (icl_race.analysis.outcome) on hand-made curves with known answers, one pair of
curves on each side of every class boundary."""

import numpy as np
import pytest

from icl_race.analysis import outcome as oc
from icl_race.analysis.events import LASTING, LEVEL  # 0.9, 10: the lasting fall
from icl_race.report.summary import counts_text, outcome_sentence

STEPS = np.arange(1, 31) * 10  # 30 evaluations, steps 10 ... 300


def _seed(below: tuple[int, int] | None = None, end: float | None = None, tail_nan: int = 0) -> np.ndarray:
    """One ICL curve: 0.5 for the first 5 evaluations (t_ICL = step 60), then 0.99, with 0.5 over the
    evaluations [a, b) of `below`, the last finite value set to `end`, and `tail_nan` NaNs at the end."""
    icl = np.full(30, 0.99)
    icl[:5] = 0.5
    if below:
        icl[below[0] : below[1]] = 0.5
    last = 29 - tail_nan
    if end is not None:
        icl[last] = end
    if tail_nan:
        icl[last + 1 :] = np.nan
    return icl


def _classify(*curves, t=None, diverged=None):
    icl = np.stack(curves)
    t = np.full(len(curves), 60) if t is None else np.asarray(t)
    div = np.zeros(len(curves), bool) if diverged is None else np.asarray(diverged)
    return oc.classify(t, div, icl, 1 - icl, STEPS)


@pytest.mark.parametrize(
    "curve, expected",
    [
        # persistent | falling: the last evaluation at the level is not below it; just under it is
        (_seed(end=LEVEL), "persistent"),
        (_seed(end=np.nextafter(LEVEL, 0)), "falling"),
        # falling | transient: a final stretch of lasting - 1 evaluations below, then of lasting
        (_seed(below=(30 - (LASTING - 1), 30)), "falling"),
        (_seed(below=(30 - LASTING, 30)), "transient"),
        # persistent | recovered: a dip of lasting - 1 evaluations, back above; a dip of lasting, back above
        (_seed(below=(10, 10 + LASTING - 1)), "persistent"),
        (_seed(below=(10, 10 + LASTING)), "recovered"),
        # recovered | transient: after a lasting fall, the last evaluation at the level, then just under it
        (_seed(below=(10, 10 + LASTING), end=LEVEL), "recovered"),
        (_seed(below=(10, 10 + LASTING), end=0.89), "transient"),
        # a lasting fall, back above, then a short fall at the end: below at the end after a lasting fall
        (_seed(below=(10, 10 + LASTING), end=0.5), "transient"),
        # the NaN tail of a retired seed: its last finite value decides, its stretch counts what it has
        (_seed(below=(30 - 4 - (LASTING - 1), 26), tail_nan=4), "falling"),
        (_seed(below=(30 - 4 - LASTING, 26), tail_nan=4), "transient"),
        (_seed(tail_nan=4), "persistent"),
        # below the level before t_ICL is no fall
        (np.where(np.arange(30) < 20, 0.5, 0.99), "persistent"),
    ],
)
def test_each_class_boundary(curve, expected):
    t = 210 if curve[:20].max() < LEVEL else 60  # the last case acquires at step 210
    o = _classify(curve, t=[t])
    assert o.classes_S[0] == expected


def test_no_seed_that_ends_below_the_level_is_persistent_or_recovered():
    rng = np.random.default_rng(0)
    icl = rng.choice([0.5, 0.95], size=(400, 30), p=[0.7, 0.3])
    o = oc.classify(np.full(400, 60), np.zeros(400, bool), icl, 1 - icl, STEPS)
    below = oc.last_finite(icl) < LEVEL
    assert set(o.classes_S[below]) <= {"falling", "transient"}
    assert set(o.classes_S[~below]) <= {"persistent", "recovered"}
    # every class of an acquired seed is reached, and the lasting fall is what splits them
    assert set(o.classes_S) == set(oc.ACQUIRED)
    assert np.all((o.fall_S >= 0) == np.isin(o.classes_S, ("transient", "recovered")))


def test_censored_and_diverged_come_first():
    held = _seed()
    o = _classify(held, _seed(below=(10, 30)), held, t=[-1, -1, 60], diverged=[False, False, True])
    assert list(o.classes_S) == ["censored", "censored", "diverged"]  # whatever the curve does
    assert list(o.fall_S) == [-1, -1, -1]


def test_fall_time_is_the_first_lasting_stretch():
    o = _classify(_seed(below=(12, 30)), _seed(below=(12, 21)), _seed(below=(22, 30)))
    assert list(o.classes_S) == ["transient", "persistent", "falling"]
    assert list(o.fall_S) == [130, -1, -1]  # evaluation 12 is step 130
    assert o.final_icl_S[2] == 0.5 and np.isnan(oc.last_finite(np.full((1, 3), np.nan)))[0]


def test_lasting_counts_evaluations_into_the_nan_tail():
    icl = _seed(below=(22, 30))[None]
    icl[0, 30:] = np.nan  # no-op on 30 columns; below from 22 to 29 = 8 evaluations
    assert oc.lasting_fall(icl, STEPS, np.array([60]), lasting=8)[0] == 230
    assert oc.lasting_fall(icl, STEPS, np.array([60]), lasting=9)[0] == -1


def test_counts_have_wilson_cis_and_the_sentence_names_the_rule():
    o = _classify(_seed(), _seed(), _seed(below=(25, 30)), _seed(), _seed(), t=[60, 60, 60, -1, 60])
    c = o.counts()
    assert [c[k].k for k in oc.CLASSES] == [3, 0, 1, 0, 1, 0]
    lo, hi = c["persistent"].ci
    assert lo < 3 / 5 < hi and c["persistent"].n == 5
    assert counts_text({k: o.count(k) for k in oc.CLASSES}) == "3 persistent, 1 falling, 0 transient, 1 censored"
    assert outcome_sentence(o).startswith(
        "3 persistent, 1 falling, 0 transient, 1 censored of 5 seeds (ICL accuracy at the end >= 0.9:"
    )
    assert f">= {LASTING} evaluations" in outcome_sentence(o)


def test_fall_survival_censors_seeds_without_a_lasting_fall():
    o = _classify(_seed(), _seed(below=(12, 30)), _seed(below=(25, 30)), _seed(below=(10, 20)), t=[60] * 4)
    assert list(o.classes_S) == ["persistent", "transient", "falling", "recovered"]
    km = oc.fall_survival(o, np.full(4, 60), 300)
    assert km is not None and km.n == 4 and km.acquired == 2  # two lasting falls, 70 and 50 steps after t_ICL
    assert km.survival[km.t.index(50.0)] == 0.75
    summary = oc.class_summary(o)
    assert list(summary) == list(oc.KEPT)
    falling, recovered = summary["falling"].final_icl_acc, summary["recovered"].final_icl_acc
    assert summary["falling"].n == 1 and falling is not None and falling.median == 0.5
    assert recovered is not None and recovered.median == 0.99
