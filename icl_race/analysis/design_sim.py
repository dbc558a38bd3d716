"""Synthetic replays of the designs (issue 54 item 4, and item 5's "synthetic first"): outcomes drawn
from a known logistic (K*) or a known censored lognormal (the median); no training.

K*: each replay draws its true log10 K* uniformly over [log10 2,000, log10 20,000] (the slope is the
case's), and every arm sees outcomes drawn from that truth:
  design    Psi-marginal batches from the paper's prior range (`analysis.design`), run to the largest
            total. A proposal depends only on the outcomes so far, so its posterior after T seeds is the
            fixed-total design of T seeds, and its first round with a CI half-width <= h is the design
            stopped at target h: one path per replay gives every total and every target.
  estimate  the comparison arm the issue quotes (QUEST's rule): every seed of a round at the posterior
            median of b, placement at the current estimate only
  quantile  a second comparison arm: each round's seeds at the quantiles (i + 1/2)/S of b's posterior
            (the estimate spread by its own uncertainty; nothing seeks the slope either)
  wide      the paper's grid: 30 log-spaced K over [500, 4e5], T/30 seeds each
  focused   10 K a factor sqrt(2) apart centred on the true K* (knowledge no design has), T/10 seeds each
The grids are fitted by `analysis.threshold.acquisition_curve` (its seed-bootstrap CI), the designs
report their posterior median and equal-tailed credible interval. Every design replay uses the same
design seed: the seed only drives the fantasised outcomes inside a round's picks, and the first
round (which no outcome informs) is then one fixed opening, computed once.

Cost: every seed counts one budget (seed-steps in budgets = seeds). Retirement at t_ICL is not
modelled; `acquired` is each arm's mean true P(acquire) over its seeds, the share that would retire
early: with retirement the cost is seeds x (1 - acquired (1 - r)), r = t_ICL / budget of an acquirer.

The median: times from a lognormal (median, sigma) censored at budget_factor x the median; the rule
(`design.median_check`) adds blocks until the KM median's CI is narrow enough, against a fixed
number of seeds equal to the rule's mean (rounded up to a block). Seed-steps count each seed until
its event or the budget (seeds retire at t_ICL, as runs do). Their tables: `icl_race.studies.design`.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
from scipy.special import expit
from scipy.stats import chi2

from icl_race.analysis import design as dz
from icl_race.analysis.draws import Bootstrap, Draws, generator
from icl_race.analysis.survival import kaplan_meier, proportion_ci
from icl_race.analysis.threshold import Logistic, acquisition_curve

KSTAR_RANGE = (2000.0, 20000.0)  # where the replays' true K* lie
WIDE_K = 30  # the paper's grid: 30 log-spaced K over the prior range
FOCUSED_K = 10  # 10 K a factor sqrt(2) apart around the true K*


@dataclasses.dataclass(frozen=True)
class ArmStats:
    """One arm at one total (or one target) over the replays. bias, rmse and width in decades of
    log10 K* (or of log t for the median); coverage of the true value by the 95% interval, with its
    Wilson CI; failed: replays without an estimate and interval (counted as not covering)."""

    arm: str
    target: float | None  # the stopping target (K*: CI half-width; median: relative width), None: fixed
    replays: int
    seeds: float  # mean seeds used
    seeds_q: list[float]  # 10%, 50%, 90% quantiles of the seeds used
    budgets: float  # mean seed-steps in budgets
    acquired: float  # mean fraction of seeds that acquire (K*: the true P(acquire) at their K)
    coverage: float
    coverage_ci: list[float]
    bias: float
    rmse: float
    width: float  # mean width of the 95% interval (K*: decades; median: relative, (hi - lo) / median)
    failed: int


def _stats(arm, target, rows, truth) -> ArmStats:
    """One arm over its replays, from a row per replay: (estimate, CI low, CI high, seeds, budgets, acquired);
    truth: the true value (or one per replay)."""
    est, lo, hi, seeds, budgets, acquired = np.array(rows, float).T
    ok = np.isfinite(est) & np.isfinite(lo)
    hi = np.where(np.isnan(hi), np.inf, hi)  # an open upper end covers every value above lo
    cover = ok & (lo <= truth) & (truth <= hi)
    err = (est - truth)[ok]
    width = (hi - lo)[ok]
    n = est.size
    return ArmStats(
        arm,
        target,
        n,
        float(np.mean(seeds)),
        [float(v) for v in np.quantile(seeds, [0.1, 0.5, 0.9])],
        float(np.mean(budgets)),
        float(np.mean(acquired)),
        float(cover.mean()),
        list(proportion_ci(int(cover.sum()), n)),
        float(err.mean()) if err.size else math.nan,
        float(np.sqrt(np.mean(err**2))) if err.size else math.nan,
        float(np.mean(width[np.isfinite(width)])) if np.isfinite(width).any() else math.nan,
        int((~ok).sum()),
    )


# ---------------------------------------------------------------------------------------------------
# K*
# ---------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def _opening(design: dz.KStarDesign, seed: int) -> np.ndarray:
    return dz.propose(dz.prior(design), seed)


def _psi(post: dz.Posterior, seed: int) -> np.ndarray:
    return _opening(post.design, seed) if post.seeds == 0 else dz.propose(post, seed)


def _quantile(post: dz.Posterior, seed: int) -> np.ndarray:
    """The comparison arm's round: the candidates nearest the quantiles (i + 1/2)/S of b's posterior."""
    d = post.design
    n = min(d.seeds_per_round, d.max_seeds - post.seeds)
    cand = d.candidates()
    q = post.quantiles((np.arange(n) + 0.5) / n)
    return cand[np.abs(np.log10(cand)[None, :] - q[:, None]).argmin(1)]


def _estimate(post: dz.Posterior, seed: int) -> np.ndarray:
    """QUEST's rule, the issue's comparison: every seed of the round at the candidate nearest the
    posterior median of b (placement at the current estimate only)."""
    d = post.design
    n = min(d.seeds_per_round, d.max_seeds - post.seeds)
    cand = d.candidates()
    return np.repeat(cand[np.abs(np.log10(cand) - post.quantiles([0.5])[0]).argmin()], n)


PLACE = {"design": _psi, "quantile": _quantile, "estimate": _estimate}


def path(design: dz.KStarDesign, place, b: float, slope: float, rng, seed: int = 0):
    """One replay of a placement rule to max_seeds: per round (Summary, sum of the true P(acquire) of the
    seeds placed so far). The posterior is updated round by round (a simulation's shortcut: a run
    recomputes it from every outcome, `design.posterior`)."""
    post, acquired, out = dz.prior(design), 0.0, []
    while post.seeds < design.max_seeds:
        ks = place(post, seed)
        p = expit(slope * (np.log10(ks) - b))
        post = dz.update(post, ks, rng.random(ks.size) < p)
        acquired += float(p.sum())
        out.append((post.summary(), acquired))
    return out


def grid_x(layout: str, b: float, design: dz.KStarDesign) -> np.ndarray:
    """log10 K of a fixed grid: "wide", the paper's (WIDE_K log-spaced K over the design's prior range), or
    "focused", FOCUSED_K K a factor sqrt(2) apart centred on the true log10 K* b."""
    if layout == "wide":
        return np.log10(np.round(np.logspace(np.log10(design.k_lo), np.log10(design.k_hi), WIDE_K)))
    return b + np.log10(2) / 2 * (np.arange(FOCUSED_K) - (FOCUSED_K - 1) / 2)


def grid_fit(x: np.ndarray, per_k: int, b: float, slope: float, bootstrap: Bootstrap) -> tuple[float, float, float]:
    """(log10 K*, CI low, CI high) of acquisition_curve on per_k seeds at each x, their outcomes drawn from
    the bootstrap's generator; nan where it fails."""
    outcomes = [bootstrap.rng.random(per_k) < expit(slope * (xi - b)) for xi in x]
    fit = acquisition_curve(x, outcomes, bootstrap).fit
    if not isinstance(fit, Logistic) or fit.log10_kstar_ci[0] is None:
        return math.nan, math.nan, math.nan
    return fit.log10_kstar, *fit.log10_kstar_ci


@dataclasses.dataclass(frozen=True)
class KStarCase:
    """Every arm of one slope: `fixed` at equal totals, `stopped` the design at each target half-width."""

    slope: float
    kstar_range: list[float]
    seeds_per_round: int
    max_seeds: int
    fixed: list[ArmStats]
    stopped: list[ArmStats]


def kstar_case(
    slope: float,
    totals: list[int],
    targets: list[float],
    replays: int,
    draws: Draws,
    design: dz.KStarDesign | None = None,
) -> KStarCase:
    """`replays` replays of every arm at every total in `totals` and of the design at every target."""
    design = design or dz.KStarDesign(max_seeds=max(totals), half_width=0.0)
    S = design.seeds_per_round
    if any(t % S or t > design.max_seeds for t in totals):
        raise ValueError(f"kstar_case: totals {totals} must be multiples of {S} up to {design.max_seeds}")
    lo, hi = np.log10(KSTAR_RANGE)
    b_true = draws.rng("design_sim/truth", slope).uniform(lo, hi, replays)
    rows: dict[tuple, list] = {}
    for i, b in enumerate(b_true):
        for arm, place in PLACE.items():
            trail = path(design, place, b, slope, draws.rng("design_sim/outcomes", arm, slope, i), draws.seed)
            for t in totals:
                s, acq = trail[t // S - 1]
                rows.setdefault((arm, t), []).append((s.log10_kstar, *s.ci, t, t, acq / t))
            if arm == "design":
                for h in targets:
                    j = next((j for j, (s, _) in enumerate(trail) if s.half_width <= h), len(trail) - 1)
                    s, acq = trail[j]
                    rows.setdefault(("design", h), []).append((s.log10_kstar, *s.ci, s.seeds, s.seeds, acq / s.seeds))
        for arm in ("wide", "focused"):
            x = grid_x(arm, b, design)
            for t in totals:
                if t % x.size:
                    continue
                fit = grid_fit(x, t // x.size, b, slope, draws.bootstrap("design_sim/grid", arm, slope, t, i))
                acq = float(np.mean(expit(slope * (x - b))))
                rows.setdefault((arm, t), []).append((*fit, t, t, acq))

    arms = (*PLACE, "wide", "focused")  # a K* arm's cost: every seed one budget (seeds = budgets in its rows)
    fixed = [_stats(arm, None, rows[arm, t], b_true) for t in totals for arm in arms if (arm, t) in rows]
    stopped = [_stats("design", h, rows["design", h], b_true) for h in targets]
    return KStarCase(slope, list(KSTAR_RANGE), S, design.max_seeds, fixed, stopped)


# ---------------------------------------------------------------------------------------------------
# The median
# ---------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MedianCase:
    """The median rule and the fixed count of equal mean seeds, on one lognormal truth."""

    median: float
    sigma: float
    budget: float
    censored: float  # the true fraction censored at the budget
    rule: ArmStats
    fixed: ArmStats
    stops: dict[str, int]  # why the rule stopped, per replay


def _draw(rng, n: int, mu: float, sigma: float, budget: float) -> tuple[np.ndarray, np.ndarray]:
    t = np.exp(mu + sigma * rng.standard_normal(n))
    return np.minimum(t, budget), t <= budget


def _km(times, observed) -> tuple[float, ...]:
    """ln of the KM median and of its CI's ends, nan where there is none."""
    km = kaplan_meier(times, observed)
    return tuple(math.nan if v is None else math.log(v) for v in (km.median, *km.median_ci))


def log_spread(times, confidence: float = 0.95) -> tuple[float, list[float]]:
    """The spread a median case is drawn at, measured: the sd of ln t over a sample of observed times
    (ddof 1) and its `confidence` interval, chi-square with n - 1 degrees of freedom (ln t normal)."""
    y = np.log(np.asarray(times, float))
    sd = float(np.std(y, ddof=1))
    q = chi2.ppf([(1 + confidence) / 2, (1 - confidence) / 2], y.size - 1)
    return sd, [float(v) for v in sd * np.sqrt((y.size - 1) / q)]


def median_case(
    median: float, sigma: float, budget_factor: float, design: dz.MedianDesign, replays: int, seed: int
) -> MedianCase:
    mu, budget = math.log(median), budget_factor * median
    censored = float(0.5 * math.erfc(math.log(budget_factor) / sigma / math.sqrt(2)))
    rule: list[tuple] = []
    stops: dict[str, int] = {}
    for i in range(replays):
        rng = generator(seed, "design_sim/median", sigma, budget_factor, i)
        times, observed = np.empty(0), np.empty(0, bool)
        while True:
            t, o = _draw(rng, design.block, mu, sigma, budget)
            times, observed = np.concatenate([times, t]), np.concatenate([observed, o])
            check = dz.median_check(design, times, observed)
            if check.stop:
                break
        stops[check.stop] = stops.get(check.stop, 0) + 1
        rule.append((*_km(times, observed), times.size, times.sum() / budget, observed.mean()))
    n_fixed = int(math.ceil(np.mean([r[3] for r in rule]) / design.block) * design.block)
    fixed = []
    for i in range(replays):
        rng = generator(seed, "design_sim/median_fixed", sigma, budget_factor, i)
        times, observed = _draw(rng, n_fixed, mu, sigma, budget)
        fixed.append((*_km(times, observed), n_fixed, times.sum() / budget, observed.mean()))

    def stats(arm, rows, target):
        s, v = _stats(arm, target, rows, mu), np.array(rows, float)
        # the median's interval width is reported relative, (hi - lo) / median, as the rule reads it
        rel = (np.exp(v[:, 2]) - np.exp(v[:, 1])) / np.exp(v[:, 0])
        return dataclasses.replace(s, width=float(np.nanmean(rel)) if np.isfinite(rel).any() else math.nan)

    return MedianCase(
        median,
        sigma,
        budget,
        censored,
        stats("rule", rule, design.rel_width),
        stats("fixed", fixed, None),
        stops,
    )


# ---------------------------------------------------------------------------------------------------
# The result
# ---------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Synthetic:
    """Every case of the synthetic replays, with what they assume."""

    replays: int
    seed: int
    kstar: list[KStarCase]
    median: list[MedianCase]
    median_design: dict
    cost: str = (
        "K*: every seed one budget (retirement at t_ICL not modelled; `acquired` is the share that would "
        "retire); median: each seed until its event or the budget"
    )
    wall_s: float = 0.0
