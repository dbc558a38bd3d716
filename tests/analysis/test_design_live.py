"""analysis/design_live.py: what an arm of a live case predicts for fresh seeds, against known answers."""

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import binom

from icl_race.analysis import design as dz
from icl_race.analysis import design_live as dl
from icl_race.analysis.design_replay import GridSeeds


def test_one_logistic_predicts_its_binomial():
    x, b, a, n, k = np.log10(2400.0), np.log10(2100.0), 15.0, 64, 40
    q = dl.predict(x, n, k, np.array([b]), np.array([a]), np.array([1.0]))
    p = expit(a * (x - b))
    assert q.p == pytest.approx(p) and q.expected == pytest.approx(n * p)
    assert q.at_most == pytest.approx(binom.cdf(k, n, p)) and q.at_least == pytest.approx(binom.sf(k - 1, n, p))


def test_an_arm_predicts_half_at_its_own_kstar_whatever_its_slope():
    """At x = b every slope gives 1/2, so the count is Binomial(n, 1/2): symmetric about n/2."""
    b, n = 3.3, 64
    slopes = np.array([2.0, 15.0, 80.0])
    q = dl.predict(b, n, n // 2, np.full(3, b), slopes, np.array([0.2, 0.5, 0.3]))
    assert q.p == pytest.approx(0.5) and q.at_most == pytest.approx(q.at_least)
    assert q.at_most == pytest.approx(binom.cdf(n // 2, n, 0.5))


def test_uncertainty_in_kstar_widens_the_predicted_count():
    """A mixture over K* puts more mass in the tails than the binomial of its mean share (the law of total
    variance): the count 10 of 64 is less surprising to an arm unsure of its K*."""
    x, n, k, a = 3.3, 64, 10, 15.0
    sure = dl.predict(x, n, k, np.array([3.3]), np.array([a]), np.array([1.0]))
    unsure = dl.predict(x, n, k, np.array([3.25, 3.35]), np.full(2, a), np.array([0.5, 0.5]))
    assert unsure.p == pytest.approx(0.5) and sure.p == pytest.approx(0.5)
    assert unsure.at_most > 5 * sure.at_most


def test_fresh_cells_weigh_the_grids_replicates_and_the_designs_posterior():
    """A design whose outcomes pin K* near 10^3.3 predicts about half at K = 10^3.3; a grid whose replicates
    all sit at 10^3.0 predicts expit(a 0.3), at its slope."""
    design = dz.KStarDesign(k_lo=500, k_hi=10_000)
    K = np.repeat([1000, 1500, 2000, 2500, 3000, 4000], 200)
    rng = np.random.default_rng(0)
    post = dz.posterior(design, K, rng.random(K.size) < expit(20 * (np.log10(K) - 3.3)))
    fresh = GridSeeds(
        "fresh", [1995], [np.array([True] * 9 + [False] * 7)], [np.full(16, 100)], 100, [np.arange(100, 116)]
    )
    (cell,) = dl.fresh_cells(fresh, (10.0, np.full(50, 3.0)), post)
    assert (cell.K, cell.seeds, cell.acquired, cell.seed_ids) == (1995, 16, 9, [100, 115])
    assert cell.grid.p == pytest.approx(expit(10.0 * (np.log10(1995) - 3.0)))
    assert cell.design.p == pytest.approx(0.5, abs=0.08)
    assert cell.ci[0] < 9 / 16 < cell.ci[1]
