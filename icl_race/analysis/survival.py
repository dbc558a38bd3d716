"""Censored first-passage times: Kaplan-Meier, never-acquired fractions and tail fits.

A seed that never acquires ICL within the budget is right-censored at the budget: it is known only
that t_ICL > budget. Every estimator here uses it as such (never dropped, never set to the budget).

Distributions fitted by censored maximum likelihood (times treated as exact; in a run they are
multiples of the evaluation period, so every t_ICL is rounded up to the next evaluation):
  lognormal   log t ~ Normal(mu, sigma) on all seeds; Wald CIs from the observed information
              (sigma's on the log scale).
  power law   Pareto type I tail above xmin: density (alpha - 1)/xmin (t/xmin)^(-alpha) for t >= xmin,
              survival (t/xmin)^(1 - alpha). With censoring the MLE is closed-form,
              alpha = 1 + d / sum_i log(t_i/xmin) (d = acquired seeds in the tail, the sum over all
              tail seeds, censored ones at their censoring time). xmin minimises the Kolmogorov-Smirnov
              distance between the tail's Kaplan-Meier curve and the fit (Clauset, Shalizi & Newman 2009).
  comparison  on the same tail (t >= xmin) against a lognormal truncated at xmin, by Vuong's normalised
              log-likelihood ratio R (R > 0 favours the power law) with a two-sided p-value; the
              comparison is called decisive when p < 0.1 (Clauset et al.'s convention).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Self

import numpy as np
from scipy import optimize, stats
from scipy.special import log_ndtr

from icl_race.analysis.record import Fitted, NotFitted, Record

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def censor_time(budget: int, steps_run: int, any_unreached: bool) -> int:
    """The one censoring rule: a seed that has not reached an event was observed until the run stopped,
    which is steps_run when the run ended before its budget with such a seed still running, else the budget."""
    return int(steps_run) if steps_run < budget and any_unreached else int(budget)


def censored_times(t_icl: np.ndarray, censor_at: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(times, observed): acquired seeds at their t_ICL, the others (t_icl < 0) at `censor_at` (one step, or
    one per seed)."""
    t = np.asarray(t_icl)
    observed = t >= 0
    return np.where(observed, t, censor_at).astype(float), observed


def censored_data(times: np.ndarray, observed: np.ndarray) -> stats.CensoredData:
    """(times, observed) as scipy's right-censored sample."""
    times = np.asarray(times, float)
    observed = np.asarray(observed, bool)
    return stats.CensoredData(uncensored=times[observed], right=times[~observed])


def _z(confidence: float) -> float:
    return float(stats.norm.ppf(0.5 + confidence / 2))


# ----------------------------------------------------------------------------------------------
# Kaplan-Meier
# ----------------------------------------------------------------------------------------------


def km_steps(times: np.ndarray, observed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kaplan-Meier survival right after each distinct event time: (event_times, S). Pure numpy,
    fast enough to be called inside a bootstrap; ties: events at t happen before censorings at t."""
    times = np.asarray(times, float)
    observed = np.asarray(observed, bool)
    if not observed.any():
        return np.empty(0), np.empty(0)
    ut, inv = np.unique(times, return_inverse=True)
    d = np.bincount(inv, weights=observed.astype(float), minlength=ut.size)
    c = np.bincount(inv, minlength=ut.size).astype(float)
    at_risk = times.size - np.concatenate([[0.0], np.cumsum(c)[:-1]])
    ev = d > 0
    s = np.cumprod(1.0 - d[ev] / at_risk[ev])
    return ut[ev], s


def km_median(times: np.ndarray, observed: np.ndarray) -> float:
    """Smallest time with Kaplan-Meier survival <= 1/2; nan when the curve never gets there."""
    t, s = km_steps(times, observed)
    hit = np.nonzero(s <= 0.5 + 1e-12)[0]
    return float(t[hit[0]]) if hit.size else float("nan")


@dataclasses.dataclass(frozen=True)
class KaplanMeier(Record):
    """A Kaplan-Meier curve with its band and median (`kaplan_meier`)."""

    n: int
    acquired: int
    t: list
    survival: list
    low: list
    high: list
    confidence: float
    median: float | None
    median_ci: list
    last_time: float
    at_risk: list  # seeds not yet past each time of `t`
    censored_t: list
    censored_n: list  # where the censored seeds leave


def kaplan_meier(times: np.ndarray, observed: np.ndarray, confidence: float = 0.95) -> KaplanMeier:
    """Kaplan-Meier survival S(t) = P(t_ICL > t) with a pointwise band (scipy.stats.ecdf, Greenwood
    variance, log-log transform so the band stays inside [0, 1]), and the median with its CI.

    The median CI inverts the band (Brookmeyer-Crowley style, as lifelines does): its ends are the
    first times at which the lower and the upper band reach 1/2. Where the upper band never reaches
    1/2 the CI's upper end is `None` ("beyond the last observation"); likewise the median itself.
    Its arrays are plain lists so the result can go into JSON."""
    times = np.asarray(times, float)
    observed = np.asarray(observed, bool)
    n = int(times.size)
    if n == 0:
        raise ValueError("Kaplan-Meier needs at least one seed")
    res = stats.ecdf(censored_data(times, observed))
    q = np.asarray(res.sf.quantiles, float)
    s = np.asarray(res.sf.probabilities, float)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "undefined at some observations" (S = 0 or 1)
        band = res.sf.confidence_interval(confidence_level=confidence, method="log-log")
        lo = np.asarray(band.low.probabilities, float)
        hi = np.asarray(band.high.probabilities, float)
    # The log-log band is undefined where S is 0 or 1: the estimate itself is the only sensible value.
    lo = np.where(np.isnan(lo), s, lo)
    hi = np.where(np.isnan(hi), s, hi)

    def first_below(curve):
        idx = np.nonzero(curve <= 0.5 + 1e-12)[0]
        return float(q[idx[0]]) if idx.size else None

    cens_t, cens_n = np.unique(times[~observed], return_counts=True)

    return KaplanMeier(
        n,
        int(observed.sum()),
        q.tolist(),
        s.tolist(),
        lo.tolist(),
        hi.tolist(),
        confidence,
        first_below(s),
        [first_below(lo), first_below(hi)],
        float(times.max()),
        [int(np.sum(times >= v)) for v in q],
        cens_t.tolist(),
        cens_n.tolist(),
    )


@dataclasses.dataclass(frozen=True)
class LogRank:
    """Two-sided log-rank test of equal survival in two censored samples; statistic and p are None when
    a sample is empty or neither has an event (nothing to compare: scipy's statistic is 0/0 there)."""

    statistic: float | None
    p: float | None
    n: tuple[int, int]  # seeds in each sample
    method: str = "log-rank, two-sided (scipy.stats.logrank on scipy.stats.CensoredData)"


def logrank(times_a: np.ndarray, observed_a: np.ndarray, times_b: np.ndarray, observed_b: np.ndarray) -> LogRank:
    """The log-rank test of two samples of (times, observed), each censored seed at its censoring time."""
    n = (int(np.size(times_a)), int(np.size(times_b)))
    if not all(n) or not (np.any(observed_a) or np.any(observed_b)):
        return LogRank(None, None, n)
    res = stats.logrank(censored_data(times_a, observed_a), censored_data(times_b, observed_b))
    return LogRank(float(res.statistic), float(res.pvalue), n)


def proportion_ci(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials (nan, nan for n = 0)."""
    if n == 0:
        return float("nan"), float("nan")
    ci = stats.binomtest(int(k), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


@dataclasses.dataclass(frozen=True)
class Proportion(Record):
    """k of n with its Wilson interval (`of`: `never_acquired`, `outcome.Outcomes.counts`)."""

    k: int
    n: int
    fraction: float
    ci: list

    @classmethod
    def of(cls, k: int, n: int, confidence: float = 0.95, **more) -> Self:
        """k of n (fraction nan for n = 0), its interval by `proportion_ci`; `more`: a subclass's fields."""
        return cls(k, n, k / n if n else float("nan"), list(proportion_ci(k, n, confidence)), **more)


def never_acquired(observed: np.ndarray, confidence: float = 0.95) -> Proportion:
    """Fraction of seeds that did not acquire ICL within the budget, with its Wilson CI. With every
    seed censored at the same budget this equals the Kaplan-Meier S(budget); it is a within-budget
    fraction, not an estimate of a cure fraction (seeds that would never acquire ICL at all)."""
    observed = np.asarray(observed, bool)
    return Proportion.of(int((~observed).sum()), int(observed.size), confidence)


# ----------------------------------------------------------------------------------------------
# Censored parametric fits
# ----------------------------------------------------------------------------------------------


def _lognormal_information(theta, y_obs: np.ndarray, y_cens: np.ndarray) -> np.ndarray:
    """The observed information (minus the Hessian of the log-likelihood) of a right-censored normal on
    log t in (mu, log sigma), exactly: with z = (y - mu)/sigma, an acquired seed contributes
    [[1, 2z], [2z, 2z^2]] and a censored one, through its inverse Mills ratio h = phi(z)/(1 - Phi(z)) and
    g = h (h - z) (minus the second derivative of log(1 - Phi) in z), [[g, gz + h], [gz + h, z (gz + h)]];
    the mu row and column divided by sigma. Analysis stays free of jax (the reports start without it), so
    this is the closed form, not `jax.hessian`; tests/analysis/test_analysis.py checks it against lifelines."""
    mu, log_s = theta
    s = math.exp(log_s)
    zo, zc = (y_obs - mu) / s, (y_cens - mu) / s
    h = np.exp(stats.norm.logpdf(zc) - log_ndtr(-zc))
    g = h * (h - zc)
    a = zo.size + g.sum()
    b = (2 * zo).sum() + (g * zc + h).sum()
    c = (2 * zo * zo).sum() + (zc * (g * zc + h)).sum()
    return np.array([[a / (s * s), b / s], [b / s, c]])


def _lognormal_pointwise(theta, y_obs, y_cens, y_trunc=None):
    """Per-seed log-likelihood (in t, i.e. with the -log t Jacobian) of a lognormal, optionally
    truncated below at exp(y_trunc)."""
    mu, log_s = theta
    s = math.exp(log_s)
    z = (y_obs - mu) / s
    lo = -0.5 * z * z - log_s - _HALF_LOG_2PI - y_obs
    lc = log_ndtr(-(y_cens - mu) / s)  # log P(Z > z)
    if y_trunc is not None:
        norm = log_ndtr(-(y_trunc - mu) / s)
        lo, lc = lo - norm, lc - norm
    return lo, lc


@dataclasses.dataclass(frozen=True)
class Lognormal(Fitted):
    """Censored-MLE lognormal of t_ICL (`fit_lognormal`)."""

    mu: float
    sigma: float
    mu_ci: list
    sigma_ci: list
    median: float
    loglik: float
    n: int
    acquired: int
    confidence: float


def fit_lognormal(times: np.ndarray, observed: np.ndarray, confidence: float = 0.95) -> Lognormal | NotFitted:
    """Censored maximum likelihood lognormal on every seed: log t_ICL ~ Normal(mu, sigma), with Wald
    CIs from the observed information (mu directly, sigma on the log scale). Needs >= 3 acquired."""
    times = np.asarray(times, float)
    observed = np.asarray(observed, bool)
    d = int(observed.sum())
    if d < 3 or np.ptp(np.log(times[observed])) == 0:
        return NotFitted(f"needs >= 3 acquired seeds with distinct t_ICL (has {d})")
    y_obs, y_cens = np.log(times[observed]), np.log(times[~observed])

    def nll(theta):
        lo, lc = _lognormal_pointwise(theta, y_obs, y_cens)
        return -(lo.sum() + lc.sum())

    x0 = np.array([y_obs.mean(), math.log(max(y_obs.std(), 1e-3))])
    r = optimize.minimize(nll, x0, method="Nelder-Mead", options={"xatol": 1e-9, "fatol": 1e-10, "maxiter": 4000})
    r = optimize.minimize(nll, r.x, method="BFGS")
    mu, log_s = r.x
    z = _z(confidence)
    try:
        cov = np.linalg.inv(_lognormal_information(r.x, y_obs, y_cens))
        se_mu, se_ls = math.sqrt(cov[0, 0]), math.sqrt(cov[1, 1])
    except (np.linalg.LinAlgError, ValueError):
        se_mu = se_ls = float("nan")
    return Lognormal(
        float(mu),
        float(math.exp(log_s)),
        [float(mu - z * se_mu), float(mu + z * se_mu)],
        [float(math.exp(log_s - z * se_ls)), float(math.exp(log_s + z * se_ls))],
        float(math.exp(mu)),
        float(-r.fun),
        int(times.size),
        d,
        confidence,
    )


def _pareto_alpha(log_ratio: np.ndarray, obs: np.ndarray) -> float:
    total = log_ratio.sum()
    d = obs.sum()
    return 1.0 + d / total if total > 0 and d > 0 else float("nan")


def _pareto_pointwise(alpha, xmin, t_obs, t_cens):
    return (math.log(alpha - 1) - math.log(xmin) - alpha * np.log(t_obs / xmin), (1 - alpha) * np.log(t_cens / xmin))


def choose_xmin(times: np.ndarray, observed: np.ndarray, min_tail: int = 10, max_candidates: int = 60) -> float:
    """Clauset's xmin: the candidate (a distinct acquired time leaving >= min_tail acquired seeds at
    or above it) that minimises the KS distance between the tail's Kaplan-Meier curve and its Pareto fit."""
    times = np.asarray(times, float)
    observed = np.asarray(observed, bool)
    cand = np.unique(times[observed])
    n_above = np.array([(observed & (times >= c)).sum() for c in cand])
    cand = cand[n_above >= min_tail]
    if cand.size == 0:
        return float("nan")
    if cand.size > max_candidates:
        cand = np.unique(cand[np.linspace(0, cand.size - 1, max_candidates).round().astype(int)])
    best, best_d = float("nan"), np.inf
    for c in cand:
        tail = times >= c
        t, o = times[tail], observed[tail]
        alpha = _pareto_alpha(np.log(t / c), o)
        if not np.isfinite(alpha):
            continue
        et, s = km_steps(t, o)
        fit = (et / c) ** (1 - alpha)
        before = np.concatenate([[1.0], s[:-1]])
        dist = max(np.abs(s - fit).max(), np.abs(before - fit).max())
        if dist < best_d:
            best, best_d = float(c), dist
    return best


@dataclasses.dataclass(frozen=True)
class PowerLaw(Record):
    alpha: float
    alpha_ci: list
    loglik: float


@dataclasses.dataclass(frozen=True)
class TailLognormal(Record):
    mu: float
    sigma: float
    loglik: float


@dataclasses.dataclass(frozen=True)
class LikelihoodRatio(Record):
    """Vuong's test of the power law against the truncated lognormal: R > 0 favours the power law."""

    R: float
    z: float
    p: float
    favours: str


@dataclasses.dataclass(frozen=True)
class Tail(Fitted):
    """Power-law and truncated-lognormal fits of the tail above xmin (`fit_tail`)."""

    xmin: float
    n_tail: int
    acquired_tail: int
    power_law: PowerLaw
    lognormal: TailLognormal
    likelihood_ratio: LikelihoodRatio
    confidence: float


def fit_tail(
    times: np.ndarray, observed: np.ndarray, xmin: float | None = None, min_tail: int = 10, confidence: float = 0.95
) -> Tail | NotFitted:
    """Power-law (Pareto above xmin) and truncated-lognormal fits of the tail t >= xmin, both by
    censored maximum likelihood on the same seeds, and Vuong's likelihood-ratio comparison."""
    times = np.asarray(times, float)
    observed = np.asarray(observed, bool)
    if xmin is None:
        xmin = choose_xmin(times, observed, min_tail=min_tail)
    if not np.isfinite(xmin):
        return NotFitted(f"needs >= {min_tail} acquired seeds in the tail (has {int(observed.sum())})")
    tail = times >= xmin
    t, o = times[tail], observed[tail]
    d = int(o.sum())
    if d < 2:
        return NotFitted(f"only {d} acquired seeds above xmin = {xmin:g}")
    alpha = _pareto_alpha(np.log(t / xmin), o)
    z = _z(confidence)
    se_alpha = (alpha - 1) / math.sqrt(d)
    pl_o, pl_c = _pareto_pointwise(alpha, xmin, t[o], t[~o])

    y_obs, y_cens, y_tr = np.log(t[o]), np.log(t[~o]), math.log(xmin)

    # A truncated lognormal can drift to mu -> -inf, sigma -> inf (where it mimics a power law): keep
    # mu within 30 e-folds of the data and sigma in [1e-3, 50].
    lower = np.array([y_tr - 30, math.log(1e-3)])
    upper = np.array([y_obs.max() + 30, math.log(50.0)])

    def nll(theta):
        if np.any(theta < lower) or np.any(theta > upper):
            return 1e300
        lo, lc = _lognormal_pointwise(theta, y_obs, y_cens, y_tr)
        v = -(lo.sum() + lc.sum())
        return v if np.isfinite(v) else 1e300

    sd = max(float(y_obs.std()), 1e-2)
    fits = [
        optimize.minimize(
            nll, np.array(start), method="Nelder-Mead", options={"xatol": 1e-7, "fatol": 1e-9, "maxiter": 2000}
        )
        for start in ((y_obs.mean(), math.log(sd)), (y_tr - 2, math.log(2.0)))
    ]
    best = min(fits, key=lambda r: r.fun)  # the first of equals, as before
    ln_o, ln_c = _lognormal_pointwise(best.x, y_obs, y_cens, y_tr)

    diff = np.concatenate([pl_o - ln_o, pl_c - ln_c])
    R = float(diff.sum())
    sd = float(diff.std())
    n = diff.size
    if sd > 0:
        zstat = R / (math.sqrt(n) * sd)
        p = float(2 * stats.norm.sf(abs(zstat)))
    else:
        zstat, p = 0.0, 1.0
    favours = ("power law" if R > 0 else "lognormal") if p < 0.1 else "neither (p >= 0.1)"
    return Tail(
        float(xmin),
        int(t.size),
        d,
        PowerLaw(
            float(alpha), [float(alpha - z * se_alpha), float(alpha + z * se_alpha)], float(pl_o.sum() + pl_c.sum())
        ),
        TailLognormal(float(best.x[0]), float(math.exp(best.x[1])), float(ln_o.sum() + ln_c.sum())),
        LikelihoodRatio(R, float(zstat), p, favours),
        confidence,
    )


def lognormal_sf(t: np.ndarray, mu: float, sigma: float, xmin: float | None = None) -> np.ndarray:
    """Survival of a lognormal, conditional on t >= xmin when xmin is given."""
    s = stats.norm.sf((np.log(t) - mu) / sigma)
    if xmin is not None:
        s = s / stats.norm.sf((math.log(xmin) - mu) / sigma)
    return s


def pareto_sf(t: np.ndarray, alpha: float, xmin: float) -> np.ndarray:
    return np.where(t >= xmin, (np.maximum(t, xmin) / xmin) ** (1 - alpha), 1.0)
