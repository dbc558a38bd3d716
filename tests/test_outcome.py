"""Seed outcome classes (icl_race.analysis.outcome) on hand-made curves with known answers."""

import numpy as np

from icl_race.analysis import outcome as oc

STEPS = np.arange(1, 31) * 10  # 30 evaluations


def _curves():
    icl = np.full((5, 30), 0.99)
    icl[0, :5] = 0.5  # persistent: acquires at step 60
    icl[1, :5] = 0.5
    icl[1, 12:] = 0.5  # transient: falls at step 130 for 18 evaluations
    icl[2] = 0.5  # censored
    icl[3, :5] = 0.5
    icl[3, 12:21] = 0.5  # a 9-evaluation dip: not lasting
    icl[4, :5] = 0.5
    icl[4, 22:] = 0.5  # falls at 230, curve ends in NaN after 26 evaluations: 4 below, not lasting
    icl[4, 26:] = np.nan
    t = np.array([60, 60, -1, 60, 60])
    return icl, t


def test_classes_and_fall_time():
    icl, t = _curves()
    o = oc.classify(t, np.zeros(5, bool), icl, 1 - icl, STEPS)
    assert list(o.classes_S) == ["persistent", "transient", "censored", "persistent", "persistent"]
    assert list(o.fall_S) == [-1, 130, -1, -1, -1]
    assert o.ended_below == 1  # seed 4: its last finite evaluation is below the level
    assert o.final_icl_S[4] == 0.5 and np.isnan(oc.last_finite(np.full((1, 3), np.nan)))[0]


def test_lasting_counts_evaluations_into_the_nan_tail():
    icl, t = _curves()
    icl[4, 22:] = 0.5
    icl[4, 40 - 10 :] = np.nan  # no-op on 30 columns; below from 22 to 29 = 8 evaluations
    assert oc.lasting_fall(icl, STEPS, t, lasting=8)[4] == 230
    assert oc.lasting_fall(icl, STEPS, t, lasting=9)[4] == -1


def test_diverged_counted_apart_and_counts_have_wilson_cis():
    icl, t = _curves()
    o = oc.classify(t, np.array([False, True, False, False, False]), icl, 1 - icl, STEPS)
    c = o.counts()
    assert [c[k]["k"] for k in oc.CLASSES] == [3, 0, 1, 1]
    lo, hi = c["persistent"]["ci"]
    assert lo < 3 / 5 < hi and c["persistent"]["n"] == 5


def test_fall_survival_censors_persistent_seeds():
    icl, t = _curves()
    o = oc.classify(t, np.zeros(5, bool), icl, 1 - icl, STEPS)
    km = oc.fall_survival(o, t, 300)
    assert km["n"] == 4 and km["acquired"] == 1  # 4 acquired seeds, one fall (70 steps after t_ICL)
    assert km["survival"][list(km["t"]).index(70.0)] == 0.75
    summary = oc.class_summary(o)
    assert summary["transient"]["n"] == 1 and summary["transient"]["final_icl_acc"]["median"] == 0.5
