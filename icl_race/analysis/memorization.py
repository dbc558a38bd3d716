"""Estimators for the memorization kinetics (Figs A2/A3 of arXiv 2412.00104; experiments/memorization/README.md).

  tail_fit        c1(t) ~ A t^-alpha: least squares of log c1 on log t over the `decades` of t that end at
                  t_end (default: the last time), on the seed-mean curve; CI: percentile bootstrap that
                  resamples seeds.
  nu_fit          I_K(T) ~ C K^nu: least squares of log I on log K of the per-K seed means; CI: seeds
                  resampled within each K. With it the local exponent of each step between neighbouring
                  K (log of the ratio of the means over log of the ratio of the K), where a K range runs
                  out of one power law (e.g. an MLP running out of room), on the same replicates.
  predict_k_star  K*(N) where C K^nu = median t_ICL(N) at K = infinity (theory.kinetics.k_star_from_time),
                  and the slope of log10 K* on log10 N; CI: the nu bootstrap paired with a bootstrap of
                  the Kaplan-Meier medians.
  minimal_scaling the minimal model's Kaplan-Meier median t_ICL against N (linear fit and log-log
                  exponent, theory 1) at each beta0, and the slope of ln median on beta0 (theory -1) at
                  each N; CI: seed bootstrap of the medians (analysis.threshold).
  t_icl_ratio     measured t_ICL over the minimal-model prediction N sqrt(2 pi) e^-beta0 (per seed,
                  summarised by the geometric mean); CI: seed bootstrap. Censored seeds (t < 0) dropped.
  log_t_vs_beta0  slope of ln t_ICL on a per-seed beta0 (theory -1); CI: seeds resampled (pairs bootstrap).
Each takes its replicates as an `analysis.draws.Bootstrap` (n = 0: no CI) and returns a typed record.
The sweeps' summaries of finished runs are analysis/memorization_summary.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from icl_race.analysis.draws import Bootstrap
from icl_race.analysis.median_n import MedianVsN, km_median_boot, median_vs_N
from icl_race.analysis.record import INLINE, OMIT_NONE, NotFitted, Record
from icl_race.analysis.survival import censored_times, km_median
from icl_race.analysis.threshold import Slope, percentile_ci, power_law_slope
from icl_race.theory.kinetics import k_star_from_time, t_icl_minimal


def _line(x, y) -> tuple[float, float]:
    slope, intercept = np.polyfit(x, y, 1)
    return float(slope), float(intercept)


@dataclass(frozen=True)
class TailFit(Record):  # c1 = A t^-alpha over the times t_range (`tail_fit`); the CIs None without replicates
    alpha: float
    A: float
    t_range: list
    n_times: int
    alpha_ci: list | None = None
    A_ci: list | None = None


def tail_fit(t, c1, bootstrap: Bootstrap, decades: float = 1.0, t_end: float | None = None) -> TailFit:
    """Fit c1 = A t^-alpha over t in [t_end / 10^decades, t_end] (t_end: default the last time).
    c1: [T] or [S, T] (seeds)."""
    t = np.asarray(t, float)
    c1 = np.atleast_2d(np.asarray(c1, float))
    t_end = t.max() if t_end is None else t_end
    win = (t > 0) & (t >= t_end / 10**decades) & (t <= t_end)
    if win.sum() < 2:
        raise ValueError("the tail window holds fewer than 2 times")
    x = np.log(t[win])

    def fit(curves):
        slope, icpt = _line(x, np.log(np.mean(curves[:, win], axis=0)))
        return -slope, float(np.exp(icpt))

    alpha, A = fit(c1)
    out = TailFit(alpha, A, [float(t[win].min()), float(t[win].max())], int(win.sum()))
    if c1.shape[0] == 1 or not bootstrap.n:
        return out
    boot, conf = bootstrap.replicates(fit, c1), bootstrap.confidence
    return replace(out, alpha_ci=percentile_ci(boot[:, 0], conf), A_ci=percentile_ci(boot[:, 1], conf))


def _nu_line(logK, groups):
    return _line(logK, np.log([np.mean(g) for g in groups]))


def _replicates(statistic, logK, groups, bootstrap: Bootstrap):
    """statistic(logK, groups) on each of bootstrap.n replicates, each group's seeds resampled with replacement
    (within each K): [n, 2] of (nu, ln C) for `_nu_line`."""
    resample = lambda: [g[bootstrap.rng.integers(0, g.size, g.size)] for g in groups]
    return np.array([statistic(logK, resample()) for _ in range(bootstrap.n)])


def _local_exponents(logK, groups):
    """d log I / d log K between neighbouring K, from the per-K seed means."""
    return np.diff(np.log([np.mean(g) for g in groups])) / np.diff(logK)


@dataclass(frozen=True)
class LocalExponent(Record):
    K: list  # the step [a, b] of K
    nu: float
    nu_ci: list | None


@dataclass(frozen=True)
class NuFit(Record):
    """I_K(T) = C K^nu (`nu_fit`); the CIs None without replicates. T and the K fitted: where the caller
    says (summarize_memorization), written first."""

    T: float | None = field(default=None, kw_only=True, metadata=OMIT_NONE)
    K: list | None = field(default=None, kw_only=True, metadata=OMIT_NONE)
    nu: float
    C: float
    nu_ci: list | None
    inv_nu: float
    inv_nu_ci: list | None
    max_abs_log_residual: float  # how far the K's are from one power law
    local: list[LocalExponent]


def nu_fit(K, I_by_K, bootstrap: Bootstrap) -> NuFit:
    """Fit I_K(T) = C K^nu. K: [M]; I_by_K: M arrays of per-seed I_K(T) (T fixed by the caller)."""
    logK = np.log(np.asarray(K, float))
    groups = [np.asarray(g, float) for g in I_by_K]
    nu, icpt = _nu_line(logK, groups)
    resid = np.log([np.mean(g) for g in groups]) - (icpt + nu * logK)
    local, conf = _local_exponents(logK, groups), bootstrap.confidence
    nu_ci = inv_nu_ci = None
    local_ci: list = [None] * local.size
    if bootstrap.n and all(g.size > 1 for g in groups):
        boot = _replicates(_nu_line, logK, groups, bootstrap)[:, 0]
        nu_ci, inv_nu_ci = percentile_ci(boot, conf), percentile_ci(1 / boot, conf)
        local_boot = _replicates(_local_exponents, logK, groups, bootstrap)
        local_ci = [percentile_ci(col, conf) for col in local_boot.T]
    steps = [LocalExponent([float(a), float(b)], float(v), ci) for a, b, v, ci in zip(K, K[1:], local, local_ci)]
    return NuFit(nu, float(np.exp(icpt)), nu_ci, 1 / nu, inv_nu_ci, float(np.abs(resid).max()), steps)


@dataclass(frozen=True)
class KStarAtN(Record):  # the median t_ICL at one N and the K* it predicts
    N: int
    median_t_icl: float
    median_t_icl_ci: list
    k_star: float
    k_star_ci: list
    t_icl_K: int | str | None = field(default=None, metadata=OMIT_NONE)  # its t_ICL run's K, where the caller says


@dataclass(frozen=True)
class KStarPrediction(Record):
    """nu and C of I_K(T) = C K^nu, K*(N) per N and the slope of log10 K* on log10 N (`predict_k_star`); the
    budget T, the K and the N: where the caller says (summarize_race), written first."""

    T: float | None = field(default=None, kw_only=True, metadata=OMIT_NONE)
    K: list | None = field(default=None, kw_only=True, metadata=OMIT_NONE)
    N: list | None = field(default=None, kw_only=True, metadata=OMIT_NONE)
    nu: float
    C: float
    per_N: list[KStarAtN]
    k_star_slope: Slope | NotFitted


def predict_k_star(K, I_by_K, N, t_by_N, censor_at, bootstrap: Bootstrap) -> KStarPrediction:
    """K*(N) = (median t_ICL(N) / C)^(1/nu) from I_K(T) = C K^nu (K: [M], I_by_K: per-seed I_K(T)) and the
    per-seed t_ICL at K = infinity for each N (t_by_N, -1 = censored at censor_at, one value or one per N),
    all in SGD steps.
    The predicted slope of log10 K* on log10 N is (log-log slope of median t_ICL on N) / nu, which is
    the theory's 1/nu only where t_ICL is proportional to N."""
    confidence = bootstrap.confidence
    logK = np.log(np.asarray(K, float))
    groups = [np.asarray(g, float) for g in I_by_K]
    nu, icpt = _nu_line(logK, groups)
    cens = [censored_times(t, c) for t, c in zip(t_by_N, np.broadcast_to(censor_at, len(t_by_N)))]
    med = np.array([km_median(t, o) for t, o in cens])
    boot_line = _replicates(_nu_line, logK, groups, bootstrap)
    boot_med = np.stack([km_median_boot(t, o, bootstrap) for t, o in cens])  # [len(N), n_boot]
    k = k_star_from_time(med, nu, np.exp(icpt))
    boot_k = k_star_from_time(boot_med, boot_line[:, 0], np.exp(boot_line[:, 1]))
    per_N = [
        KStarAtN(int(n), float(m), percentile_ci(bm, confidence), float(ks), percentile_ci(bk, confidence))
        for n, m, bm, ks, bk in zip(N, med, boot_med, k, boot_k)
    ]
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = power_law_slope(np.log10(N), np.log10(k), np.log10(boot_k), confidence)
    return KStarPrediction(nu, float(np.exp(icpt)), per_N, slope)


@dataclass(frozen=True)
class TimeRatio(Record):  # the geometric mean of measured over predicted t_ICL, acquired seeds (`t_icl_ratio`)
    ratio: float | None  # None: no seed acquired
    ratio_ci: list | None
    acquired: int
    seeds: int


def t_icl_ratio(t_icl, N, beta0, bootstrap: Bootstrap, time_scale: float = 1.0) -> TimeRatio:
    """Geometric-mean ratio of measured t_ICL * time_scale (e.g. lr, for eta * steps) to
    N sqrt(2 pi) e^-beta0. beta0 may be per seed (beta0_random) or a scalar."""
    t = np.asarray(t_icl, float)
    beta0 = np.broadcast_to(np.asarray(beta0, float), t.shape)
    ok = t > 0
    log_r = np.log(t[ok] * time_scale) - np.log(t_icl_minimal(N, beta0[ok]))
    ratio = float(np.exp(np.mean(log_r))) if log_r.size else None
    ci = None
    if log_r.size > 1 and bootstrap.n:
        ci = percentile_ci(np.exp(bootstrap.replicates(np.mean, log_r)), bootstrap.confidence)
    return TimeRatio(ratio, ci, int(ok.sum()), int(t.size))


@dataclass(frozen=True)
class Beta0Slope(Record):  # ln t_ICL = intercept + slope beta0 over the n acquired seeds (`log_t_vs_beta0`)
    slope: float
    intercept: float
    n: int
    censored: int  # seeds dropped
    slope_ci: list | None


def log_t_vs_beta0(t_icl, beta0, bootstrap: Bootstrap) -> Beta0Slope:
    """Least-squares slope of ln t_ICL on beta0 over acquired seeds (theory: -1). Censored seeds are
    dropped, which flattens the slope if the low-beta0 seeds are the censored ones: see "censored"."""
    t, b = np.asarray(t_icl, float), np.asarray(beta0, float)
    ok = t > 0
    x, y = b[ok], np.log(t[ok])
    # One beta0 for every seed (or a resample of one seed) has no slope; polyfit raises on all-zero x.
    line = lambda x, y: _line(x, y) if x.size and np.ptp(x) > 0 else (np.nan, np.nan)
    ci = None
    if bootstrap.n and x.size > 2:  # NaN slopes dropped
        ci = percentile_ci(bootstrap.replicates(lambda x, y: line(x, y)[0], x, y), bootstrap.confidence)
    return Beta0Slope(*line(x, y), int(ok.sum()), int((~ok).sum()), ci)


@dataclass(frozen=True)
class AtBeta0(Record):  # median_vs_N over the cells of one beta0
    beta0: float
    fit: MedianVsN = field(metadata=INLINE)


@dataclass(frozen=True)
class AtN(Record):  # the slope of ln median t_ICL on beta0 over the cells of one N
    N: int
    fit: Slope | NotFitted = field(metadata=INLINE)


@dataclass(frozen=True)
class MinimalScaling(Record):
    by_beta0: list[AtBeta0]
    by_N: list[AtN]


def minimal_scaling(N, beta0, t_icl, censor_at, bootstrap: Bootstrap) -> MinimalScaling:
    """Cells of the minimal model at fixed beta0 (N[i], beta0[i], per-seed t_icl[i], -1 = censored at
    censor_at[i]): at each beta0 the median t_ICL against N (analysis.threshold.median_vs_N: linear
    fit, log-log exponent; theory t ~ N), at each N the slope of ln median t_ICL on beta0 (theory -1)."""
    N, beta0 = np.asarray(N, float), np.asarray(beta0, float)
    cens = [censored_times(t, c) for t, c in zip(t_icl, censor_at)]
    by_beta0 = []
    for b in np.unique(beta0):
        sel = np.nonzero(beta0 == b)[0]
        fit = median_vs_N(N[sel], [cens[i][0] for i in sel], [cens[i][1] for i in sel], bootstrap)
        by_beta0.append(AtBeta0(float(b), fit))
    by_N = []
    for n in np.unique(N):
        sel = np.nonzero(N == n)[0]
        med = np.array([km_median(*cens[i]) for i in sel])
        boot = np.stack([km_median_boot(cens[i][0], cens[i][1], bootstrap) for i in sel])
        with np.errstate(invalid="ignore", divide="ignore"):
            by_N.append(AtN(int(n), power_law_slope(beta0[sel], np.log(med), np.log(boot), bootstrap.confidence)))
    return MinimalScaling(by_beta0, by_N)
