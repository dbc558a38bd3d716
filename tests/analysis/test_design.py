"""The adaptive designs (icl_race/analysis/design.py, design_sim.py) on outcomes with known truths."""

import dataclasses
import json

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit

from icl_race.analysis import design as dz
from icl_race.analysis import design_sim as ds
from icl_race.analysis.draws import Draws
from icl_race.config import ConfigError
from icl_race.studies import command

B, SLOPE = np.log10(5000.0), 15.0  # a true K* of 5,000 and the project's typical slope per decade

# A coarser grid than the default (0.01-decade lattice, 16 slopes, 20 candidates a decade): the same
# rules at a tenth of the cost, so a test replays a design in seconds.
COARSE = dz.KStarDesign(step=0.01, n_slopes=16, candidates_per_decade=20, seeds_per_round=8, max_seeds=96)


def _outcomes(ks, rng, b=B, slope=SLOPE):
    return rng.random(np.size(ks)) < expit(slope * (np.log10(ks) - b))


def test_the_posterior_concentrates_on_the_true_kstar():
    rng = np.random.default_rng(0)
    ks = np.repeat(np.round(np.logspace(3, np.log10(40000), 20)), 20)  # 400 seeds over 1,000-40,000
    post = dz.posterior(dz.KStarDesign(), ks, _outcomes(ks, rng))
    s = post.summary()
    assert post.seeds == 400 and np.isclose(post.p_LxA.sum(), 1)
    assert s.ci[0] < B < s.ci[1] and abs(s.log10_kstar - B) < 0.03 and s.half_width < 0.05
    assert 8 < s.slope < 30  # the slope is learnt too
    assert dz.prior(dz.KStarDesign()).summary().half_width > 1  # from a prior over 2.9 decades


def test_a_known_slope_and_a_narrow_posterior_put_the_next_seed_at_its_centre():
    """Psi-marginal with the slope known and b ~ Normal(3.7, 0.05): the most informative K is b's
    centre (the expected entropy is symmetric about it and lowest where P(acquire) = 1/2)."""
    d = dz.KStarDesign()
    p = np.zeros((d.locations().size, d.slopes().size))
    p[:, np.abs(d.slopes() - 15).argmin()] = stats.norm.pdf(d.locations(), 3.7, 0.05)
    h = dz.expected_entropy(d, p / p.sum())
    best = np.log10(d.candidates()[h.argmin()])
    assert abs(best - 3.7) < 0.02 and h.min() < h[0] and np.all(np.isfinite(h))


def test_a_proposal_is_a_function_of_the_seed_and_the_outcomes():
    rng = np.random.default_rng(1)
    first = dz.propose(dz.prior(COARSE), seed=3)
    ks = first.astype(float)
    y = _outcomes(ks, rng)
    a = dz.propose(dz.posterior(COARSE, ks, y), seed=3)
    b = dz.propose(dz.posterior(COARSE, list(ks), list(y)), seed=3)  # recomputed from the same outcomes
    assert np.array_equal(a, b) and np.array_equal(first, dz.propose(dz.prior(COARSE), seed=3))
    assert a.size == COARSE.seeds_per_round and np.all((a >= 500) & (a <= 4e5)) and a.dtype.kind == "i"
    assert np.unique(first).size > 1  # a batch spreads: fantasised outcomes move the later picks
    full = dz.posterior(COARSE, np.full(92, 5000.0), np.ones(92, bool))
    assert dz.propose(full, seed=3).size == 4 and dz.propose(full, seed=3, size=2).size == 2  # max_seeds caps it


def test_the_stopping_rule_stops_when_precise_or_at_the_seed_maximum():
    rng = np.random.default_rng(2)
    precise = ds.path(dataclasses.replace(COARSE, half_width=0.0), ds._psi, B, SLOPE, rng)
    half = [s.half_width for s, _ in precise]
    assert len(precise) == 12 and precise[-1][0].seeds == 96  # half_width 0: only the maximum stops it
    assert half[-1] < half[0] and half[-1] < 0.06
    target = (half[2] + half[3]) / 2  # reached between the third and the fourth round
    post = dz.prior(dataclasses.replace(COARSE, half_width=target))
    assert dz.kstar_stop(post) is None
    k, y = np.empty(0), np.empty(0, bool)
    rng = np.random.default_rng(2)
    while (reason := dz.kstar_stop(post)) is None:
        ks = dz.propose(post, 0)
        k, y = np.concatenate([k, ks]), np.concatenate([y, _outcomes(ks, rng)])
        post = dz.posterior(post.design, k, y)
    assert reason == "precise" and post.summary().half_width <= target and post.seeds < 96


def test_the_design_s_interval_covers_the_true_kstar_at_its_level():
    """40 replays at true K* spread over 2,000-20,000: a calibrated 95% interval covers at least 33 of
    40 with probability 0.999 (binomial), and the stopped design's error stays inside its width."""
    design = dataclasses.replace(COARSE, max_seeds=48)
    truths = np.random.default_rng(5).uniform(np.log10(2000), np.log10(20000), 40)
    covered, errors = 0, []
    for i, b in enumerate(truths):
        s, _ = ds.path(design, ds._psi, b, SLOPE, np.random.default_rng(100 + i))[-1]
        covered += s.ci[0] <= b <= s.ci[1]
        errors.append(s.log10_kstar - b)
    assert covered >= stats.binom.ppf(0.001, 40, 0.95), covered
    assert abs(np.mean(errors)) < 0.03 and np.sqrt(np.mean(np.square(errors))) < 0.1


def test_the_median_rule_adds_blocks_until_precise_and_covers_the_true_median():
    design = dz.MedianDesign(block=16, max_seeds=256, rel_width=0.3)
    case = ds.median_case(4389.0, 0.4, 4.0, design, 200, seed=0)
    assert case.stops == {"precise": 200} and case.rule.width <= 0.3
    assert 16 <= case.rule.seeds_q[0] and case.rule.seeds_q[2] <= 256
    assert case.rule.coverage * 200 >= stats.binom.ppf(0.001, 200, 0.95), case.rule.coverage
    assert case.fixed.seeds % 16 == 0 and case.fixed.seeds >= case.rule.seeds
    assert abs(case.rule.bias) < 0.05  # natural log of t


def test_the_median_rule_reads_the_km_median_and_its_open_ends():
    d = dz.MedianDesign(block=4, max_seeds=8, rel_width=0.5)
    none = dz.median_check(d, np.full(4, 100.0), np.zeros(4, bool))  # every seed censored
    assert none.median is None and none.rel_width is None and none.stop is None
    assert dz.median_check(d, np.full(8, 100.0), np.zeros(8, bool)).stop == "max_seeds"
    tight = dz.median_check(d, np.linspace(99, 101, 8), np.ones(8, bool))
    assert tight.stop == "precise" and tight.rel_width < 0.5 and 99 <= tight.median <= 101


def test_a_median_design_names_its_event_in_its_record_only_when_it_is_not_t_icl():
    """A t_ICL design's record is the one written before the option (no "event"); a fall design's says so;
    either record gives back the design; any other event is refused naming the values allowed."""
    plain, fall = dz.MedianDesign(block=4, max_seeds=8), dz.MedianDesign(block=4, max_seeds=8, event="fall")
    assert dz.record(plain) == {"block": 4, "max_seeds": 8, "rel_width": 0.25, "confidence": 0.95}
    assert dz.record(fall) == {**dz.record(plain), "event": "fall"}
    assert dz.MedianDesign(**dz.record(plain)) == plain and dz.MedianDesign(**dz.record(fall)) == fall
    assert dz.EVENTS[plain.event] is None and dz.EVENTS[fall.event] == "fell"
    for bad in ("t_ICL", "fell", 3, ["fall"]):
        with pytest.raises(ConfigError, match=r'design\.event = .*: must be "t_icl" or "fall"'):
            dz.MedianDesign(event=bad)


def test_the_spread_of_ln_t_has_the_chi_square_interval():
    """Two times e^-1 and e: sd of ln t sqrt(2) (ddof 1); with one degree of freedom the chi-square
    quantile q is the square of the normal's at (1 + q) / 2, so the interval's ends are closed forms."""
    sd, (lo, hi) = ds.log_spread(np.exp([-1.0, 1.0]))
    assert sd == pytest.approx(np.sqrt(2))
    assert lo == pytest.approx(np.sqrt(2) / stats.norm.ppf(0.9875)) and hi == pytest.approx(
        np.sqrt(2) / stats.norm.ppf(0.5125)
    )
    x = np.exp(np.random.default_rng(0).normal(0, 0.3, 4000))  # a large sample: a tight interval around 0.3
    sd, (lo, hi) = ds.log_spread(x)
    assert lo < sd < hi and 0.29 < lo and hi < 0.31


@pytest.mark.parametrize(
    "field,kwargs",
    [
        ("max_seeds", {"max_seeds": 8}),
        ("k_lo, k_hi", {"k_lo": 5e5}),
        ("half_width", {"half_width": -0.1}),
        ("confidence", {"confidence": 1.0}),
    ],
)
def test_a_bad_design_is_one_line_naming_the_field(field, kwargs):
    with pytest.raises(ConfigError, match=f"design.{field} = .*: must be"):
        dz.KStarDesign(**kwargs)


def test_analyze_design_synthetic_writes_its_tables(tmp_path):
    out = tmp_path / "synthetic.json"
    result, written = command.run(
        "design", "synthetic", [], out, 50, 0, {"replays": 2, "slopes": 15, "totals": 16, "targets": 0.3}
    )
    record = json.loads(out.read_text())["result"]
    assert [r["arm"] for r in record["kstar"][0]["fixed"]] == ["design", "quantile", "estimate"]
    assert record["kstar"][0]["stopped"][0]["target"] == 0.3 and len(record["median"]) == 2
    assert (tmp_path / "synthetic.md").exists() and "| design |" in command.as_text("design", "synthetic", result)
    assert {out, tmp_path / "synthetic.md"} <= set(written)  # what it says it wrote
    with pytest.raises(ConfigError, match="totals=20: must be a multiple of 16"):
        command.run("design", "synthetic", [], tmp_path / "x.json", 50, 0, {"totals": 20})


def test_the_design_replayed_on_a_grid_finds_the_grids_kstar():
    """A grid of 12 K (a factor sqrt(2) apart around K* = 5,000), 60 seeds each from the logistic: the
    design replayed on its seeds lands near the grid's own K* and spends far fewer seeds than the grid."""
    from icl_race.analysis import design_replay as dr

    rng = np.random.default_rng(1)
    Ks = [int(k) for k in np.round(5000 * np.sqrt(2.0) ** np.arange(-6, 6))]
    acquired = [_outcomes(np.full(60, k), rng) for k in Ks]
    steps = [np.where(a, 300, 1000) for a in acquired]  # an acquiring seed retires at 30 % of the budget
    grid = dr.GridSeeds("synthetic", Ks, acquired, steps, 1000)
    design = dataclasses.replace(COARSE, half_width=0.05, seeds_per_round=16, max_seeds=160)
    out = dr.replay(grid, design, 20, Draws(0, 200))
    assert out.grid_seeds == 720 and out.grid_log10_kstar == pytest.approx(B, abs=0.05)
    d = out.design
    assert abs(d.bias) < 0.04 and d.rmse < 0.08 and d.coverage >= 0.7, d
    assert d.seeds <= 160 and d.budgets < d.seeds  # retired seeds cost less than a budget
    assert sum(out.stops.values()) == 20


def test_the_grids_interval_by_seed_id_widens_only_when_its_cells_share_seeds():
    """A grid that trains seeds 0..S-1 at every K: resampling seed ids jointly over the K gives the same
    interval as the within-cell bootstrap when the cells' outcomes are independent, and a wider one when
    each seed has one threshold of its own (its outcomes across K move together). Twelve grids each."""
    from scipy.special import expit

    from icl_race.analysis import design_replay as dr

    Ks = [int(k) for k in np.round(5000 * np.sqrt(2.0) ** np.arange(-6, 6))]
    x, S = np.log10(Ks), 32
    ratios: dict[str, list[float]] = {"own threshold": [], "independent": []}
    for trial in range(12):
        rng = np.random.default_rng(trial)
        thr = np.log10(5000) + rng.logistic(0, 1 / 15, S)
        cases = {
            "own threshold": [xk > thr for xk in x],
            "independent": [rng.random(S) < expit(15 * (xk - np.log10(5000))) for xk in x],
        }
        for name, acquired in cases.items():
            grid = dr.GridSeeds("s", Ks, acquired, [np.ones(S)] * len(Ks), 1, [np.arange(S)] * len(Ks))
            (lo, hi), (blo, bhi) = dr.grid_fit(grid, Draws(0, 1000))[1], dr.grid_ci_by_seed(grid, Draws(0, 1000))
            ratios[name].append((bhi - blo) / (hi - lo))
    assert 0.85 < np.mean(ratios["independent"]) < 1.15, ratios
    assert np.mean(ratios["own threshold"]) > np.mean(ratios["independent"]) + 0.15, ratios
    other = dr.GridSeeds("s", Ks[:2], cases["independent"][:2], [np.ones(S)] * 2, 1, [np.arange(S), np.arange(S) + S])
    assert dr.grid_ci_by_seed(other, Draws(0, 100)) is None  # the K hold different seeds


def test_the_median_rule_stops_after_one_block_for_a_narrow_spread_and_at_the_maximum_for_a_wide_one():
    """What the dry run projects a median design from: times nearly equal (spread 0.01) make one block's
    KM interval narrow at once; a spread of 3 in ln t never gets a 64-seed interval within 1 % of the median."""
    design = dz.MedianDesign(block=64, max_seeds=192, rel_width=0.25)
    assert ds.median_case(1.0, 0.01, 4.0, design, 5, seed=0).rule.seeds_q == [64, 64, 64]
    wide = dataclasses.replace(design, rel_width=0.01)
    assert ds.median_case(1.0, 3.0, 4.0, wide, 5, seed=0).rule.seeds_q == [192, 192, 192]


def test_a_grid_whose_k_share_seeds_errs_as_the_median_of_its_seeds_thresholds():
    """Known answers for a grid that trains the same 16 seeds at every K, each seed acquiring above a
    threshold of its own (logistic, slope 8 per decade): its K* is about the median of 16 thresholds, whose
    standard error is 1 / (2 f sqrt(16)) with f = slope / 4 the density at the median, 1 / (2 x 8) = 0.0625
    decades; independent cells of the same count err less; the within-cell bootstrap, blind to the
    sharing, keeps its width and under-covers, the by-seed bootstrap widens to cover."""
    from icl_race.analysis import design_replay as dr

    indep, cell, by_seed = dr.shared_case(8.0, "focused", 16, 100, Draws(0, 400)).arms
    assert cell.rmse == by_seed.rmse and indep.seeds == cell.seeds == 160  # one fit, two intervals
    assert cell.rmse == pytest.approx(1 / (2 * 8), rel=0.25), cell
    assert indep.rmse < 0.7 * cell.rmse, (indep, cell)
    assert by_seed.width > 1.4 * cell.width and cell.width == pytest.approx(indep.width, rel=0.1)
    assert cell.coverage < 0.85 <= by_seed.coverage, (cell, by_seed)


def test_analyze_design_shared_writes_its_tables(tmp_path):
    out = tmp_path / "shared.json"
    result, written = command.run("design", "shared", [], out, 50, 0, {"replays": 3, "slopes": 8, "per_k": 4})
    cases = json.loads(out.read_text())["result"]["cases"]
    assert [(c["layout"], c["n_k"], c["per_k"]) for c in cases] == [("wide", 30, 4), ("focused", 10, 4)]
    assert "| shared seeds, by seed id |" in command.as_text("design", "shared", result)
    assert {out, tmp_path / "shared.md"} <= set(written)
