"""Estimators for the memorization kinetics (Figs A2/A3 of arXiv 2412.00104; experiments/memorization/README.md).

  tail_fit        c1(t) ~ A t^-alpha: least squares of log c1 on log t over the `decades` of t that end at
                  t_end (default: the last time), on the seed-mean curve; CI: percentile bootstrap that
                  resamples seeds.
  local_slope     d log c1 / d log t by central differences on the log-log curve (one-sided at the ends).
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
All bootstraps take a seed for `analysis.draws.generator`, so results are reproducible. The sweeps'
summaries of finished runs are analysis/memorization_summary.py's.
"""

from __future__ import annotations

import numpy as np

from icl_race.analysis.draws import Bootstrap, generator
from icl_race.analysis.survival import censored_times, km_median
from icl_race.analysis.threshold import km_median_boot, median_vs_N, percentile_ci, power_law_slope
from icl_race.theory.kinetics import k_star_from_time, t_icl_minimal


def _line(x, y):
    slope, intercept = np.polyfit(x, y, 1)
    return float(slope), float(intercept)


def tail_fit(
    t, c1, decades: float = 1.0, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0, t_end: float | None = None
) -> dict:
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
    out = {
        "alpha": alpha,
        "A": A,
        "t_range": [float(t[win].min()), float(t[win].max())],
        "n_times": int(win.sum()),
        "alpha_ci": None,
        "A_ci": None,
    }
    S = c1.shape[0]
    if S > 1 and n_boot:
        rng = generator(seed)
        boot = np.array([fit(c1[rng.integers(0, S, S)]) for _ in range(n_boot)])
        out["alpha_ci"], out["A_ci"] = percentile_ci(boot[:, 0], confidence), percentile_ci(boot[:, 1], confidence)
    return out


def local_slope(t, c1):
    """d log c1 / d log t at each time (c1 [T] or [..., T])."""
    return np.gradient(np.log(np.asarray(c1, float)), np.log(np.asarray(t, float)), axis=-1)


def _nu_line(logK, groups):
    return _line(logK, np.log([np.mean(g) for g in groups]))


def _nu_replicates(logK, groups, n_boot, rng):
    """[n_boot, 2] bootstrap replicates of (nu, ln C), seeds resampled within each K."""
    return np.array([_nu_line(logK, [g[rng.integers(0, g.size, g.size)] for g in groups]) for _ in range(n_boot)])


def nu_fit(K, I_by_K, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0) -> dict:
    """Fit I_K(T) = C K^nu. K: [M]; I_by_K: M arrays of per-seed I_K(T) (T fixed by the caller)."""
    logK = np.log(np.asarray(K, float))
    groups = [np.asarray(g, float) for g in I_by_K]
    nu, icpt = _nu_line(logK, groups)
    resid = np.log([np.mean(g) for g in groups]) - (icpt + nu * logK)
    out = {
        "nu": nu,
        "C": float(np.exp(icpt)),
        "nu_ci": None,
        "inv_nu": 1 / nu,
        "inv_nu_ci": None,
        "max_abs_log_residual": float(np.abs(resid).max()),  # how far the K's are from one power law
        "local": [
            {"K": [float(a), float(b)], "nu": float(v), "nu_ci": None}
            for a, b, v in zip(K, K[1:], _local_exponents(logK, groups))
        ],
    }
    if n_boot and all(g.size > 1 for g in groups):
        rng = generator(seed)
        boot = _nu_replicates(logK, groups, n_boot, rng)[:, 0]
        out["nu_ci"] = percentile_ci(boot, confidence)
        out["inv_nu_ci"] = sorted(percentile_ci(1 / boot, confidence))
        local = np.array(
            [_local_exponents(logK, [g[rng.integers(0, g.size, g.size)] for g in groups]) for _ in range(n_boot)]
        )
        for row, col in zip(out["local"], local.T):
            row["nu_ci"] = percentile_ci(col, confidence)
    return out


def _local_exponents(logK, groups):
    """d log I / d log K between neighbouring K, from the per-K seed means."""
    return np.diff(np.log([np.mean(g) for g in groups])) / np.diff(logK)


def predict_k_star(
    K, I_by_K, N, t_by_N, censor_at, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0
) -> dict:
    """K*(N) = (median t_ICL(N) / C)^(1/nu) from I_K(T) = C K^nu (K: [M], I_by_K: per-seed I_K(T)) and the
    per-seed t_ICL at K = infinity for each N (t_by_N, -1 = censored at censor_at, one value or one per N),
    all in SGD steps.
    The predicted slope of log10 K* on log10 N is (log-log slope of median t_ICL on N) / nu, which is
    the theory's 1/nu only where t_ICL is proportional to N."""
    rng = generator(seed)
    logK = np.log(np.asarray(K, float))
    groups = [np.asarray(g, float) for g in I_by_K]
    nu, icpt = _nu_line(logK, groups)
    cens = [censored_times(t, c) for t, c in zip(t_by_N, np.broadcast_to(censor_at, len(t_by_N)))]
    med = np.array([km_median(t, o) for t, o in cens])
    boot_line = _nu_replicates(logK, groups, n_boot, rng)
    boot_med = np.stack([km_median_boot(t, o, n_boot, rng) for t, o in cens])  # [len(N), n_boot]
    k = k_star_from_time(med, nu, np.exp(icpt))
    boot_k = k_star_from_time(boot_med, boot_line[:, 0], np.exp(boot_line[:, 1]))
    per_N = [
        {
            "N": int(n),
            "median_t_icl": float(m),
            "median_t_icl_ci": percentile_ci(bm, confidence),
            "k_star": float(ks),
            "k_star_ci": percentile_ci(bk, confidence),
        }
        for n, m, bm, ks, bk in zip(N, med, boot_med, k, boot_k)
    ]
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = power_law_slope(np.log10(N), np.log10(k), np.log10(boot_k), confidence).to_json()
    return {"nu": nu, "C": float(np.exp(icpt)), "per_N": per_N, "k_star_slope": slope}


def t_icl_ratio(
    t_icl, N, beta0, time_scale: float = 1.0, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0
) -> dict:
    """Geometric-mean ratio of measured t_ICL * time_scale (e.g. lr, for eta * steps) to
    N sqrt(2 pi) e^-beta0. beta0 may be per seed (beta0_random) or a scalar."""
    t = np.asarray(t_icl, float)
    beta0 = np.broadcast_to(np.asarray(beta0, float), t.shape)
    ok = t > 0
    log_r = np.log(t[ok] * time_scale) - np.log(t_icl_minimal(N, beta0[ok]))
    out: dict[str, object] = {
        "ratio": float(np.exp(np.mean(log_r))) if log_r.size else None,
        "ratio_ci": None,
        "acquired": int(ok.sum()),
        "seeds": int(t.size),
    }
    if log_r.size > 1 and n_boot:
        rng = generator(seed)
        boot = np.exp([np.mean(log_r[rng.integers(0, log_r.size, log_r.size)]) for _ in range(n_boot)])
        out["ratio_ci"] = percentile_ci(boot, confidence)
    return out


def log_t_vs_beta0(t_icl, beta0, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0) -> dict:
    """Least-squares slope of ln t_ICL on beta0 over acquired seeds (theory: -1). Censored seeds are
    dropped, which flattens the slope if the low-beta0 seeds are the censored ones: see "censored"."""
    t, b = np.asarray(t_icl, float), np.asarray(beta0, float)
    ok = t > 0
    x, y = b[ok], np.log(t[ok])
    slope, icpt = _line(x, y)
    out: dict[str, object] = {
        "slope": slope,
        "intercept": icpt,
        "n": int(ok.sum()),
        "censored": int((~ok).sum()),
        "slope_ci": None,
    }
    if n_boot and x.size > 2:
        rng = generator(seed)
        idx = rng.integers(0, x.size, (n_boot, x.size))
        out["slope_ci"] = percentile_ci([_line(x[i], y[i])[0] for i in idx], confidence)
    return out


def minimal_scaling(N, beta0, t_icl, censor_at, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0) -> dict:
    """Cells of the minimal model at fixed beta0 (N[i], beta0[i], per-seed t_icl[i], -1 = censored at
    censor_at[i]): at each beta0 the median t_ICL against N (analysis.threshold.median_vs_N: linear
    fit, log-log exponent; theory t ~ N), at each N the slope of ln median t_ICL on beta0 (theory -1)."""
    rng = generator(seed)
    N, beta0 = np.asarray(N, float), np.asarray(beta0, float)
    cens = [censored_times(t, c) for t, c in zip(t_icl, censor_at)]
    by_beta0 = []
    for b in np.unique(beta0):
        sel = np.nonzero(beta0 == b)[0]
        fit = median_vs_N(
            N[sel], [cens[i][0] for i in sel], [cens[i][1] for i in sel], Bootstrap(n_boot, rng, confidence)
        )
        by_beta0.append({"beta0": float(b), **fit.to_json()})
    by_N = []
    for n in np.unique(N):
        sel = np.nonzero(N == n)[0]
        med = np.array([km_median(*cens[i]) for i in sel])
        boot = np.stack([km_median_boot(cens[i][0], cens[i][1], n_boot, rng) for i in sel])
        with np.errstate(invalid="ignore", divide="ignore"):
            by_N.append({"N": int(n), **power_law_slope(beta0[sel], np.log(med), np.log(boot), confidence).to_json()})
    return {"by_beta0": by_beta0, "by_N": by_N}
