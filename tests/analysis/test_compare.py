"""analysis/compare.py's statistics (the median ratio's bootstrap CI, the log-rank test) on known samples.
The commands that use them have their own files: test_export.py, test_compare.py, test_runset.py."""

import numpy as np
import pytest

from icl_race.analysis.compare import compare_to_reference, median_ratio, open_ended_ci
from icl_race.analysis.draws import Bootstrap, Draws, generator
from icl_race.analysis.survival import logrank


def test_median_ratio_bootstrap_is_fixed_by_its_seed_and_independent_of_other_groups():
    rng = np.random.default_rng(7)
    samples = [(rng.integers(100, 1000, 30).astype(float), rng.random(30) < 0.8) for _ in range(3)]
    one = compare_to_reference(samples[:2], Draws(5, 300))
    two = compare_to_reference(samples, Draws(5, 300))
    assert one[0] == two[0]  # the reference's and B's streams do not depend on C being there
    assert compare_to_reference(samples[:2], Draws(6, 300))[0].ratio.ci != one[0].ratio.ci
    lo, hi = one[0].ratio.ci
    assert lo <= one[0].ratio.ratio <= hi


def test_logrank_without_any_event_has_no_p():
    t = np.full(5, 400.0)
    never = np.zeros(5, bool)
    assert logrank(t, never, t, never).p is None


def test_unreached_bootstrap_medians_count_as_beyond_and_open_the_ci_end():
    """Replicates whose median is not reached rank past every ratio instead of being dropped: the ends are
    numpy's percentiles over all 1,000 replicates, open where they fall on an unreached one."""
    ref, other = np.ones(1000), np.arange(1.0, 1001.0)  # ratio = 1..1000 in rank order
    assert open_ended_ci(ref, other, 0.95) == (pytest.approx(25.975), pytest.approx(975.025))
    few = other.copy()
    few[-20:] = np.nan  # 2% of the other group's medians beyond: the upper end keeps its rank (dropping
    assert open_ended_ci(ref, few, 0.95)[1] == pytest.approx(975.025)  # them would give 955.525)
    many = other.copy()
    many[-30:] = np.nan  # 3% > 2.5%: the upper end is beyond
    assert open_ended_ci(ref, many, 0.95) == (pytest.approx(25.975), None)
    ref_beyond = ref.copy()
    ref_beyond[:20] = np.nan  # the reference's median beyond in the 20 smallest ratios' replicates: they
    assert open_ended_ci(ref_beyond, other, 0.95)[0] == pytest.approx(25.975)  # rank lowest, as before
    ref_beyond[:30] = np.nan
    assert open_ended_ci(ref_beyond, other, 0.95)[0] is None
    both = np.full(1000, np.nan)
    both[30:] = 1.0
    lo, hi = open_ended_ci(both, np.where(np.isnan(both), np.nan, other), 0.95)  # both beyond: open both ends
    assert lo is None and hi is None


def test_median_ratio_ci_is_open_when_the_other_median_is_often_unreached():
    """A known answer: A's seeds all reach at 100 (median 100 in every resample); B's 20 seeds, 10 at 200
    and 10 censored at 300, reach a median (200) only when a resample holds >= 10 observed seeds
    (probability 0.59). The ratio is 2 and the CI [2, beyond]: the old CI, dropping the ~41% unreached
    replicates, was [2, 2]."""
    a = (np.full(20, 100.0), np.ones(20, bool))
    b = (np.r_[np.full(10, 200.0), np.full(10, 300.0)], np.r_[np.ones(10, bool), np.zeros(10, bool)])
    boots = (Bootstrap(400, np.random.default_rng(1)), Bootstrap(400, np.random.default_rng(2)))
    r = median_ratio(a, b, boots)
    assert r.ratio == 2.0 and r.ci == (2.0, None)
    assert 0.3 < r.unreached / 400 < 0.5 and "beyond the censoring time" in r.method
    swapped = median_ratio(b, a, boots[::-1])
    assert swapped.ratio == 0.5 and swapped.ci == (None, 0.5)


def test_one_median_ratio_rule_paired_or_stratified_by_its_generators_and_no_ci_without_a_ratio():
    """analysis.compare.median_ratio is the package's one median ratio (race's independence ratios use it
    through ratio_of_boots): the generators decide the resampling, the CI rule is the same."""
    from icl_race.analysis.compare import ratio_of_boots

    t = np.arange(1.0, 13.0) * 50
    a, b = (t, np.ones(12, bool)), (2 * t, np.ones(12, bool))
    paired = median_ratio(
        a, b, (Bootstrap(300, generator(0)), Bootstrap(300, generator(0)))
    )  # the same seed positions on both sides
    assert paired.ratio == 2 and paired.ci == (2.0, 2.0)
    stratified = median_ratio(a, b, (Bootstrap(300, generator(0, child=0)), Bootstrap(300, generator(0, child=1))))
    assert stratified.ratio == 2 and stratified.ci[0] < 2 < stratified.ci[1]
    # B's median not reached on all its seeds (1 of 8 observed): no ratio, so no interval around it,
    # though a few replicates (>= 4 copies of the observed seed) do reach a median
    never = (np.r_[100.0, np.full(7, 500.0)], np.r_[True, np.zeros(7, bool)])
    r = median_ratio(a, never, (Bootstrap(1000, generator(0)), Bootstrap(1000, generator(0))))
    assert r.ratio is None and r.ci == (None, None) and r.unreached < 1000
    boots = np.full(1000, 100.0), np.r_[np.full(20, 150.0), np.full(980, np.nan)]
    assert ratio_of_boots(100.0, None, *boots).ci == (None, None)
    assert ratio_of_boots(100.0, 150.0, *boots).ci == (1.5, None)  # the same replicates with a ratio: open above
