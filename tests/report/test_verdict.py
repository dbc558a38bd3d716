"""The one verdict rule (`analysis.compare.decide`) and its words (`report.verdict`): a group is sooner only
where the median ratio's CI excludes 1 and the log-rank test agrees at alpha; "no clear difference"
otherwise, saying when the two tests disagree, always with both numbers. A table of hand-made pairs of
samples covers each case, then hand-made statistics the edges (no ratio, no CI, no test)."""

import numpy as np
import pytest

from icl_race.analysis.compare import ALPHA, MedianRatio, PairStats, decide, pair_stats
from icl_race.analysis.draws import Bootstrap, generator
from icl_race.analysis.survival import LogRank
from icl_race.report.verdict import cell, sentence

FAST, SLOW = np.linspace(100, 200, 20), np.linspace(300, 400, 20)
# Crossing curves: the reference has 4 early events that the other has late, so the log-rank test
# sees no difference, while each median sits in a tight cluster (200 against 150): the CI excludes 1.
CROSS_REF = np.r_[[10.0] * 4, np.linspace(195, 205, 20), [1000.0] * 6]
CROSS_OTHER = np.r_[np.linspace(145, 155, 20), [1000.0] * 10]
# The same median, but one sample far more spread: the log-rank test rejects, the median ratio's CI covers 1.
SPREAD_REF = np.r_[np.linspace(100, 190, 20), 200, np.linspace(210, 300, 20)]
SPREAD_OTHER = np.r_[np.linspace(10, 190, 20), 200, np.linspace(210, 3000, 20)]


def _pair(reference, other) -> PairStats:
    ref, oth = np.asarray(reference, float), np.asarray(other, float)
    obs_r, obs_o = np.ones(ref.size, bool), np.ones(oth.size, bool)
    boots = (Bootstrap(1000, generator(0, child=0)), Bootstrap(1000, generator(0, child=1)))
    return pair_stats((ref, obs_r), (oth, obs_o), boots)


@pytest.mark.parametrize(
    "reference, other, sooner, reason",
    [
        (SLOW, FAST, "other", "both"),  # CI excludes 1 (below) and the log-rank test agrees
        (FAST, SLOW, "reference", "both"),  # the same, the other way round
        (CROSS_REF, CROSS_OTHER, None, "ci only"),  # CI excludes 1, log-rank p > alpha
        (SPREAD_REF, SPREAD_OTHER, None, "log-rank only"),  # CI covers 1, log-rank p small
        (FAST, FAST + 5, None, "neither"),  # CI covers 1, log-rank p > alpha
    ],
)
def test_the_verdict_of_each_hand_made_pair(reference, other, sooner, reason):
    p = _pair(reference, other)
    v = p.verdict
    assert (v.sooner, v.reason, v.alpha) == (sooner, reason, ALPHA)
    lo, hi = p.ratio.ci
    assert v.ci_excludes_one == (lo > 1 or hi < 1)  # the data make each case what it says
    assert v.logrank_rejects == (p.logrank.p <= ALPHA)
    assert v.disagree == (reason in ("ci only", "log-rank only"))
    text = sentence(p, "B", "A", "icl")
    assert f"ratio B/A {p.ratio.ratio:.3g} [" in text and "log-rank p " in text  # both numbers, always
    assert (" sooner than " in text) == (sooner is not None)
    assert ("disagree" in text) == v.disagree
    assert text.startswith("No clear difference") == (sooner is None)
    assert f"alpha {ALPHA:g}" in text
    if sooner is not None:
        assert text.startswith("B acquires ICL sooner than A" if sooner == "other" else "A acquires ICL sooner than B")


def _ratio(ratio, ci, n_boot=1000) -> MedianRatio:
    return MedianRatio(ratio, ci, 0.95, n_boot, 0)


@pytest.mark.parametrize(
    "ratio, p, sooner, reason",
    [
        (_ratio(0.6, (0.4, 0.9)), 0.01, "other", "both"),
        (_ratio(0.6, (None, 0.9)), 0.01, "other", "both"),  # an open lower end is below every ratio
        (_ratio(1.8, (1.2, None)), 0.01, "reference", "both"),  # an open upper end is beyond every ratio
        (_ratio(0.636, (0.261, 0.947)), 0.216, None, "ci only"),  # the issue's SGD-against-Adam line
        (_ratio(0.9, (0.5, 1.3)), 0.001, None, "log-rank only"),
        (_ratio(0.9, (0.5, 1.3)), ALPHA, None, "log-rank only"),  # p = alpha rejects
        (_ratio(0.9, (0.5, None)), 0.5, None, "neither"),
        (_ratio(None, (None, None)), 0.001, None, "no ratio"),
        (_ratio(0.5, (None, None), n_boot=5), 0.001, None, "no ci"),
        (_ratio(0.5, (0.3, 0.8)), None, None, "ci only"),  # no log-rank test (no event): no difference called
    ],
)
def test_the_rule_on_hand_made_statistics(ratio, p, sooner, reason):
    v = decide(ratio, LogRank(None if p is None else 1.0, p, (10, 10)))
    assert (v.sooner, v.reason) == (sooner, reason)
    if sooner is not None:
        assert cell(v, "B", "A") == f"{'B' if sooner == 'other' else 'A'} sooner"
    elif reason in ("no ratio", "no ci"):
        assert cell(v).startswith("not called (no median ratio")
    else:
        assert cell(v, "B", "A").startswith("no clear difference")
        assert ("tests disagree" in cell(v)) == v.disagree


def test_the_issues_line_is_no_longer_a_winner():
    """'B acquires ICL sooner than A: ratio 0.636 [0.261, 0.947], log-rank p 0.216' now reads as no clear
    difference, with both numbers and the disagreement said."""
    ratio = _ratio(0.636, (0.261, 0.947))
    test = LogRank(1.24, 0.216, (16, 16))
    text = sentence(PairStats(ratio, test, decide(ratio, test)), "adam", "sgd", "icl")
    assert text == (
        "No clear difference between adam and sgd, the two tests disagree: median t_icl ratio adam/sgd 0.636 "
        "[0.261, 0.947] (95% CI excludes 1) but log-rank p 0.216 (> alpha 0.05)"
    )
