"""Statistics on synthetic data with known answers (no training; numpy Generators with fixed seeds)."""

import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit

from icl_race.analysis import bimodality as bm
from icl_race.analysis import median_n as mn
from icl_race.analysis import survival as sv
from icl_race.analysis import threshold as th
from icl_race.analysis.compare import fraction_difference
from icl_race.analysis.draws import Bootstrap, generator
from icl_race.analysis.record import NotFitted


def _inside(ci, value):
    return ci[0] is not None and ci[0] <= value <= ci[1]


# ---- survival -----------------------------------------------------------------------------------


def test_censored_lognormal_recovers_parameters_and_dropping_censored_seeds_does_not():
    rng = np.random.default_rng(20250101)
    mu, sigma, budget = 9.0, 0.8, 12_000  # exp(9) = 8103: about 30% never acquire within the budget
    t = np.exp(rng.normal(mu, sigma, 400))
    t_icl = np.where(t <= budget, np.ceil(t), -1).astype(np.int64)
    times, observed = sv.censored_times(t_icl, budget)
    assert 0.2 < (~observed).mean() < 0.4

    fit = sv.fit_lognormal(times, observed)
    assert isinstance(fit, sv.Lognormal)
    assert _inside(fit.mu_ci, mu) and _inside(fit.sigma_ci, sigma), fit
    assert fit.mu_ci[1] - fit.mu_ci[0] < 0.25
    # scipy's censored lognormal MLE agrees with ours
    s_ref, _, scale_ref = stats.lognorm.fit(
        stats.CensoredData(uncensored=times[observed], right=times[~observed]), floc=0
    )
    assert fit.sigma == pytest.approx(s_ref, rel=1e-3) and fit.mu == pytest.approx(math.log(scale_ref), abs=1e-3)
    # dropping the censored seeds (what the reference's histogram-of-acquired amounts to) is biased
    naive = np.log(times[observed])
    assert naive.mean() < fit.mu_ci[0] and naive.std() < fit.sigma_ci[0]

    km = sv.kaplan_meier(times, observed)
    assert _inside(km.median_ci, math.exp(mu))
    assert km.median == sv.km_median(times, observed)
    na = sv.never_acquired(observed)
    assert _inside(na.ci, stats.lognorm.sf(budget, sigma, scale=math.exp(mu)))
    # with administrative censoring the KM curve ends at the never-acquired fraction
    assert km.survival[-1] == pytest.approx(na.fraction)


@pytest.mark.parametrize("n, budget", [(400, 12_000), (30, 6_000)])  # ~30% and ~65% censored
def test_censored_lognormal_wald_cis_match_lifelines(n, budget):
    """fit_lognormal's Wald CIs (closed-form observed information) against lifelines' LogNormalFitter
    (autograd's Hessian) on the same seeds: the same MLE and standard errors, to 1e-4 relative. lifelines
    gives sigma's CI on sigma's own scale, ours on log sigma: compared through sd(sigma) = sigma sd(log sigma)."""
    lifelines = pytest.importorskip("lifelines")
    rng = np.random.default_rng(7)
    t = np.exp(rng.normal(9.0, 0.8, n))
    times, observed = sv.censored_times(np.where(t <= budget, np.ceil(t), -1).astype(np.int64), budget)
    fit = sv.fit_lognormal(times, observed)
    assert isinstance(fit, sv.Lognormal)
    ref = lifelines.LogNormalFitter().fit(times, observed)
    z = stats.norm.ppf(0.975)
    se_mu = (fit.mu_ci[1] - fit.mu_ci[0]) / (2 * z)
    se_log_sigma = math.log(fit.sigma_ci[1] / fit.sigma_ci[0]) / (2 * z)
    se_ref = np.sqrt(np.diag(ref.variance_matrix_.to_numpy()))
    assert fit.mu == pytest.approx(ref.mu_, rel=1e-4) and fit.sigma == pytest.approx(ref.sigma_, rel=1e-4)
    assert se_mu == pytest.approx(se_ref[0], rel=1e-4)
    assert fit.sigma * se_log_sigma == pytest.approx(se_ref[1], rel=1e-4)
    row = ref.summary.loc["mu_"]
    assert fit.mu_ci == pytest.approx([row["coef lower 95%"], row["coef upper 95%"]], rel=1e-4)


@pytest.mark.parametrize("x", [np.random.default_rng(1).lognormal(size=13), np.r_[0.3, 0.3, 0.5, np.nan, 0.9]])
def test_the_median_ci_is_scipys_percentile_bootstrap_on_the_same_draws(x):
    """threshold.median_ci against scipy.stats.bootstrap (percentile method) with the same generator: the
    same resamples of the finite values, the same median of each, the same interval."""
    got = th.median_ci(x, Bootstrap(2000, np.random.default_rng(5), 0.9))
    finite = x[np.isfinite(x)]
    ref = stats.bootstrap(
        (finite,), np.median, n_resamples=2000, method="percentile", confidence_level=0.9, rng=np.random.default_rng(5)
    )
    assert got.median == np.median(finite) and got.n == finite.size
    assert got.ci == pytest.approx([ref.confidence_interval.low, ref.confidence_interval.high], rel=1e-12)
    assert th.median_ci([np.nan], Bootstrap(100, np.random.default_rng(0))) == th.MedianCI(None, [None, None], 0)


def test_kaplan_meier_by_hand_and_median_not_reached():
    # 10 seeds: two at 100, one at 200, three at 300, one at 400, three censored at 500
    t_icl = np.array([100, 100, 200, 300, 300, 300, 400, -1, -1, -1])
    times, observed = sv.censored_times(t_icl, 500)
    km = sv.kaplan_meier(times, observed)
    assert km.survival == pytest.approx([0.8, 0.7, 0.4, 0.3, 0.3])
    assert km.median == 300.0
    # most seeds censored: the median is not reached and the report must say so, not invent one
    times, observed = sv.censored_times(np.array([100, 200, -1, -1, -1, -1]), 500)
    km = sv.kaplan_meier(times, observed)
    assert km.median is None and math.isnan(sv.km_median(times, observed))


def test_power_law_tail_recovers_alpha_and_beats_lognormal_only_on_power_law_data():
    rng = np.random.default_rng(7)
    alpha, xmin, budget = 2.5, 1000.0, 100_000
    x = xmin * (1 - rng.random(1500)) ** (-1 / (alpha - 1))
    times, observed = sv.censored_times(np.where(x <= budget, x, -1), budget)
    fit = sv.fit_tail(times, observed)
    assert isinstance(fit, sv.Tail) and _inside(fit.power_law.alpha_ci, alpha), fit
    assert fit.xmin < 2 * xmin
    assert fit.likelihood_ratio.favours != "lognormal"

    t = np.exp(rng.normal(9.0, 0.5, 1500))
    times, observed = sv.censored_times(t, 1e9)
    fit = sv.fit_tail(times, observed, xmin=float(np.quantile(t, 0.3)))
    assert fit.likelihood_ratio.R < 0 and fit.likelihood_ratio.favours == "lognormal", fit


# ---- bimodality ---------------------------------------------------------------------------------


def test_bimodal_mixture_detected_and_unimodal_sample_not():
    rng = np.random.default_rng(11)
    bimodal = np.log10(np.r_[np.exp(rng.normal(8.0, 0.35, 180)), np.exp(rng.normal(11.0, 0.35, 120))])
    unimodal = np.log10(np.exp(rng.normal(9.0, 0.8, 300)))
    b, u = bm.summarize(bimodal), bm.summarize(unimodal)
    assert b.bimodal and b.dip_p < 0.01 and b.bc > bm.BC_UNIFORM and b.mixture.delta_bic > 10
    assert b.mixture.two["weights"][0] == pytest.approx(0.6, abs=0.05)
    assert not u.bimodal and u.dip_p > 0.05 and u.bc < bm.BC_UNIFORM and u.mixture.delta_bic < 0


def test_agreement_of_the_three_bimodality_statistics_and_power():
    rng = np.random.default_rng(11)
    two = np.r_[rng.normal(0, 0.3, 120), rng.normal(3, 0.3, 80)]
    assert bm.summarize(two).agreement == "bimodal" and not bm.summarize(two).underpowered
    assert bm.summarize(rng.normal(0, 1, 200)).agreement == "unimodal"
    # A mass at one end and a tail (a demo's final accuracies: most seeds near 1, a few at chance): the dip
    # test keeps unimodality on this many values while BC and Delta BIC favour two modes.
    skewed = np.r_[1 - rng.exponential(0.005, 26), rng.uniform(0.48, 0.62, 6)]
    st = bm.summarize(skewed)
    assert st.dip_p > 0.05 and st.bc > bm.BC_UNIFORM and st.mixture.delta_bic > 0
    assert st.agreement == "disagree" and not st.bimodal
    few = bm.summarize(two[::20])  # 10 values
    assert few.n == 10 and few.underpowered
    assert bm.summarize(two[:3]).agreement is None  # too few for any test


def test_grid_ties_do_not_fake_bimodality():
    # t_ICL lives on the evaluation grid; dequantizing spreads each value over its evaluation period
    rng = np.random.default_rng(3)
    t = np.ceil(np.exp(rng.normal(6.0, 0.5, 300)) / 50) * 50
    assert bm.summarize(np.log10(t)).dip_p < 0.05  # the ties alone reject unimodality
    assert not bm.summarize(np.log10(bm.dequantize(t, 50))).bimodal


# ---- thresholds ---------------------------------------------------------------------------------


def _acquisition_cells(rng, x, midpoint, steepness=5.0, seeds=40):
    return [rng.random(seeds) < expit(steepness * (xi - midpoint)) for xi in x]


def test_logistic_acquisition_curve_recovers_midpoint():
    rng = np.random.default_rng(5)
    x = np.round(np.arange(2.5, 4.51, 0.125), 3)
    cur = th.acquisition_curve(x, _acquisition_cells(rng, x, 3.3), Bootstrap(1000, rng)).fit
    assert isinstance(cur, th.Logistic) and cur.bracketed
    assert _inside(cur.log10_kstar_ci, 3.3)
    lo, hi = cur.log10_kstar_ci
    assert hi - lo < 0.2 and cur.kstar == pytest.approx(10**cur.b)


def test_separated_cells_bracket_kstar_between_grid_points():
    x = np.array([2.0, 2.5, 3.0, 3.5, 4.0])
    cur = th.acquisition_curve(x, [np.full(20, xi > 2.9) for xi in x], Bootstrap(200, generator(0))).fit
    assert isinstance(cur, th.Logistic)
    assert cur.separated and cur.log10_kstar_ci == [2.5, 3.0] and 2.5 < cur.b < 3.0


def test_kstar_resamples_seed_ids_together_only_where_every_K_holds_the_same_seeds():
    """A grid that trains seeds 0..15 at every K, each seed acquiring above a threshold of its own: K* is
    about the median of 16 thresholds, so its interval must be about as wide as that median's (2 / (slope
    sqrt(16)) = 0.0625 decades of standard error at slope 8), which the within-cell bootstrap, 0.6x as wide,
    is not. Cells holding other seeds (or the same ids in another order) keep the right bootstrap each."""
    x = np.log10(5000) + np.log10(2) / 2 * (np.arange(10) - 4.5)
    widths: dict[str, list[float]] = {"by seed": [], "within": []}
    for trial in range(10):
        own = np.log10(5000) + generator(trial).logistic(0, 1 / 8, 16)
        acquired = [own < xk for xk in x]
        ids = [list(range(16))] * 10
        for name, seed_ids in (("by seed", ids), ("within", None)):
            curve = th.acquisition_curve(x, acquired, Bootstrap(400, generator(trial, name)), seed_ids)
            assert curve.ci_method == (th.BY_SEED_ID if seed_ids else None)
            widths[name].append(np.diff(curve.fit.log10_kstar_ci)[0])
    assert np.mean(widths["by seed"]) == pytest.approx(3.92 * 0.0625, rel=0.25), widths
    assert np.mean(widths["within"]) < 0.75 * np.mean(widths["by seed"]), widths
    base = th.acquisition_curve(x, acquired, Bootstrap(400, generator(0)), ids)
    perm = [np.roll(np.arange(16), k) for k in range(10)]  # the same seeds in another order at each K
    moved = [a[p] for a, p in zip(acquired, perm)]
    assert th.acquisition_curve(x, moved, Bootstrap(400, generator(0)), perm).fit.log10_kstar_ci == (
        base.fit.log10_kstar_ci
    )
    other = th.acquisition_curve(x, acquired, Bootstrap(400, generator(0)), ids[:9] + [list(range(16, 32))])
    plain = th.acquisition_curve(x, acquired, Bootstrap(400, generator(0)))
    assert other.ci_method == th.WITHIN_CELLS and other.fit.log10_kstar_ci == plain.fit.log10_kstar_ci


def test_paper_sigmoid_recovers_midpoint_on_final_accuracy():
    rng = np.random.default_rng(9)
    x = np.round(np.arange(2.5, 4.51, 0.25), 3)
    acc = [np.where(o, 0.99, 0.5) + rng.normal(0, 0.01, o.size) for o in _acquisition_cells(rng, x, 3.6)]
    fit = th.paper_sigmoid(x, acc, Bootstrap(60, rng))
    assert isinstance(fit, th.Sigmoid) and _inside(fit.log10_kstar_ci, 3.6) and abs(fit.b - 3.6) < 0.1


def test_paper_sigmoid_needs_five_K_spanning_the_transition():
    rng = np.random.default_rng(9)
    x = np.array([2.5, 3.0, 3.5, 4.0, 4.5])
    acc = [np.where(o, 0.99, 0.5) + rng.normal(0, 0.01, o.size) for o in _acquisition_cells(rng, x, 3.5)]
    assert isinstance(th.paper_sigmoid(x, acc, Bootstrap(20, rng)), th.Sigmoid)
    four = th.paper_sigmoid(x[:4], acc[:4], Bootstrap(20, rng))
    assert four == NotFitted("needs >= 5 values of K to fit 4 parameters (has 4)")
    above = th.paper_sigmoid(x, [a * 0 + 0.99 for a in acc], Bootstrap(20, rng))  # every cell past the rise
    assert isinstance(above, NotFitted) and "do not span the transition" in str(above.reason)


def test_logrank_of_equal_and_of_shifted_samples():
    rng = np.random.default_rng(4)
    t = np.exp(rng.normal(7, 0.3, 60))
    obs = t < 1500
    same = sv.logrank(np.minimum(t, 1500), obs, np.minimum(t, 1500), obs)
    assert same.statistic == pytest.approx(0, abs=1e-12) and same.p == pytest.approx(1) and same.n == (60, 60)
    later = sv.logrank(t, np.ones(60, bool), 2 * t, np.ones(60, bool))
    assert later.p < 1e-6 and later.method.startswith("log-rank")
    assert sv.logrank(t, np.ones(60, bool), [], []).p is None


def test_kstar_power_law_slope_recovered():
    rng = np.random.default_rng(12)
    slope, intercept = 1.4, 0.5
    Ns = np.array([50, 100, 150, 200, 250])
    x = np.round(np.arange(2.4, 4.61, 0.1), 2)
    b, boot = [], []
    for N in Ns:
        cur = th.acquisition_curve(
            x, _acquisition_cells(rng, x, intercept + slope * math.log10(N), 6.0), Bootstrap(1000, rng)
        ).fit
        assert isinstance(cur, th.Logistic)
        b.append(cur.b)
        boot.append(cur.boot_log10_kstar)
    fit = th.power_law_slope(np.log10(Ns), np.array(b), np.stack(boot))
    assert isinstance(fit, th.Slope)
    assert _inside(fit.slope_ci, slope) and not _inside(fit.slope_ci, 1.0), fit
    assert fit.slope_ci[1] - fit.slope_ci[0] < 0.3


@pytest.mark.parametrize("power", [1, 2])
def test_median_t_icl_vs_N_linear_and_curved(power):
    rng = np.random.default_rng(4)
    Ns = np.array([50, 100, 150, 200, 250])
    budget = 2e6
    times, observed = [], []
    for N in Ns:
        t = 200.0 * N**power / 50 ** (power - 1) * np.exp(rng.normal(0, 0.5, 300))
        tt, o = sv.censored_times(np.where(t <= budget, t, -1), budget)
        times.append(tt)
        observed.append(o)
    fit = mn.median_vs_N(Ns, times, observed, Bootstrap(500, rng)).fit
    assert isinstance(fit, mn.Lines) and isinstance(fit.loglog, th.Slope) and isinstance(fit.linear, th.Slope)
    assert fit.quadratic is not None
    assert _inside(fit.loglog.slope_ci, power), fit.loglog
    q = fit.quadratic.c2_ci
    if power == 1:
        assert _inside(fit.linear.slope_ci, 200.0) and _inside(q, 0.0)
    else:
        assert q[0] > 0  # curvature detected: not a straight line


def test_median_vs_N_needs_two_distinct_N_not_two_cells():
    # Two cells of one N (its seeds split by ensemble.first_seed) made the report fail on a missing slope.
    t = [np.array([100.0, 120, 140]), np.array([110.0, 130, 150])]
    fit = mn.median_vs_N(np.array([32, 32]), t, [np.ones(3, bool)] * 2, Bootstrap(50, generator(0)))
    assert isinstance(fit.fit, NotFitted) and [p.median for p in fit.per_N] == [120.0, 130.0]
    assert "linear" not in fit.to_json()


def test_fraction_difference_and_verdicts():
    rng = np.random.default_rng(1)
    n = np.full(6, 200)
    d = fraction_difference(np.full(6, 150), n, np.full(6, 90), n, Bootstrap(500, rng))
    assert d.mean_diff == pytest.approx(0.3) and _inside(d.mean_diff_ci, 0.3) and d.mean_diff_ci[0] > 0.2
    assert th.sign_verdict(d.mean_diff_ci, +1) == "agrees"
    assert th.sign_verdict(d.mean_diff_ci, -1) == "disagrees"
    assert th.sign_verdict([-0.1, 0.2], +1).startswith("inconclusive")
    assert th.interval_verdict([1.3, 1.5], 1.41) == "agrees" and th.interval_verdict([1.0, 1.2], 1.41) == "disagrees"


def test_statistics_and_reports_import_no_jax():
    import subprocess
    import sys

    code = (
        "import sys, icl_race.report, icl_race.plots.classification, icl_race.analysis.threshold; "
        "sys.exit('jax' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_grid_periods_on_a_log_grid():
    from icl_race.analysis.bimodality import grid_periods

    grid = np.array([10, 20, 40, 80, 160])
    np.testing.assert_array_equal(grid_periods(np.array([10, 40, 160, 20]), grid), [10, 20, 80, 10])


# ---- the one convention for random draws (analysis.draws) ---------------------------------------------


def test_generator_streams_are_fixed_by_root_and_name_and_independent_across_names():
    from icl_race.analysis.draws import Draws

    def draw(rng):
        return rng.integers(0, 1000, 64).tolist()

    # the same root and name: the same stream, in every process
    assert draw(generator(3, "acquisition", "a")) == draw(generator(3, "acquisition", "a"))
    assert draw(generator(3, child=2)) == draw(generator(3, child=2))
    # another name, another child, another root: another stream
    streams = [
        draw(g)
        for g in (
            generator(3),
            generator(3, "acquisition", "a"),
            generator(3, "acquisition", "b"),
            generator(3, "paper_sigmoid", "a"),
            generator(3, child=0),
            generator(3, child=1),
            generator(4),
            generator((3, 512)),
        )
    ]
    assert len({tuple(s) for s in streams}) == len(streams)
    # the streams of today's outputs, unchanged: a study's default_rng(seed) (race's paired km_summary
    # replicates), a report section's named child, compare's spawned children, scale's (seed, width, lr) root
    assert generator(0).integers(0, 8, 8).tolist() == [6, 5, 4, 2, 2, 0, 0, 0]
    assert draw(generator(7)) == draw(np.random.default_rng(7))
    assert Draws(0, 10).rng("acquisition", "K200", "K1000").integers(0, 1000, 4).tolist() == [966, 295, 70, 330]
    children = np.random.SeedSequence(5).spawn(3)
    assert all(draw(generator(5, child=i)) == draw(np.random.default_rng(children[i])) for i in range(3))
    assert generator(5, child=1).integers(0, 1000, 4).tolist() == [538, 253, 909, 73]
    assert draw(generator((0, 512, 30000000))) == draw(
        np.random.default_rng(np.random.SeedSequence([0, 512, 30000000]))
    )
    assert generator((0, 512, 30000000)).integers(0, 1000, 4).tolist() == [844, 677, 146, 252]
    with pytest.raises(ValueError):
        generator(0, "a", child=1)
