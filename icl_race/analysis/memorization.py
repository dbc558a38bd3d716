"""Estimators for the memorization kinetics (classification-task.md §3.3, §11 critiques a and b).

  tail_fit        c1(t) ~ A t^-alpha: least squares of log c1 on log t over the last `decades` of t (on
                  the seed-mean curve); CI: percentile bootstrap that resamples seeds.
  local_slope     d log c1 / d log t by central differences on the log-log curve (one-sided at the ends).
  nu_fit          I_K(T) ~ C K^nu: least squares of log I on log K of the per-K seed means; CI: seeds
                  resampled within each K.
  t_icl_ratio     measured t_ICL over the minimal-model prediction N sqrt(2 pi) e^-beta0 (per seed,
                  summarised by the geometric mean); CI: seed bootstrap. Censored seeds (t < 0) dropped.
All bootstraps take a seed for numpy's Generator, so results are reproducible.
"""

from __future__ import annotations

import numpy as np

from icl_race.theory.kinetics import t_icl_minimal


def _ci(samples, confidence):
    lo, hi = np.nanpercentile(samples, [50 * (1 - confidence), 50 * (1 + confidence)])
    return [float(lo), float(hi)]


def _line(x, y):
    slope, intercept = np.polyfit(x, y, 1)
    return float(slope), float(intercept)


def tail_fit(t, c1, decades: float = 1.0, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0) -> dict:
    """Fit c1 = A t^-alpha over t in [t_max / 10^decades, t_max]. c1: [T] or [S, T] (seeds)."""
    t = np.asarray(t, float)
    c1 = np.atleast_2d(np.asarray(c1, float))
    win = (t > 0) & (t >= t.max() / 10 ** decades)
    if win.sum() < 2:
        raise ValueError("the tail window holds fewer than 2 times")
    x = np.log(t[win])

    def fit(curves):
        slope, icpt = _line(x, np.log(np.mean(curves[:, win], axis=0)))
        return -slope, float(np.exp(icpt))

    alpha, A = fit(c1)
    out = {"alpha": alpha, "A": A, "t_range": [float(t[win].min()), float(t[win].max())], "n_times": int(win.sum()),
           "alpha_ci": None, "A_ci": None}
    S = c1.shape[0]
    if S > 1 and n_boot:
        rng = np.random.default_rng(seed)
        boot = np.array([fit(c1[rng.integers(0, S, S)]) for _ in range(n_boot)])
        out["alpha_ci"], out["A_ci"] = _ci(boot[:, 0], confidence), _ci(boot[:, 1], confidence)
    return out


def local_slope(t, c1):
    """d log c1 / d log t at each time (c1 [T] or [..., T])."""
    return np.gradient(np.log(np.asarray(c1, float)), np.log(np.asarray(t, float)), axis=-1)


def nu_fit(K, I_by_K, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0) -> dict:
    """Fit I_K(T) = C K^nu. K: [M]; I_by_K: M arrays of per-seed I_K(T) (T fixed by the caller)."""
    logK = np.log(np.asarray(K, float))
    groups = [np.asarray(g, float) for g in I_by_K]
    fit = lambda gs: _line(logK, np.log([np.mean(g) for g in gs]))
    nu, icpt = fit(groups)
    out = {"nu": nu, "C": float(np.exp(icpt)), "nu_ci": None, "inv_nu": 1 / nu, "inv_nu_ci": None}
    if n_boot and all(g.size > 1 for g in groups):
        rng = np.random.default_rng(seed)
        boot = np.array([fit([g[rng.integers(0, g.size, g.size)] for g in groups])[0] for _ in range(n_boot)])
        out["nu_ci"] = _ci(boot, confidence)
        out["inv_nu_ci"] = sorted(_ci(1 / boot, confidence))
    return out


def t_icl_ratio(t_icl, N, beta0, time_scale: float = 1.0, n_boot: int = 1000, confidence: float = 0.95,
                seed: int = 0) -> dict:
    """Geometric-mean ratio of measured t_ICL * time_scale (e.g. lr, for eta * steps) to
    N sqrt(2 pi) e^-beta0. beta0 may be per seed (beta0_random) or a scalar."""
    t = np.asarray(t_icl, float)
    beta0 = np.broadcast_to(np.asarray(beta0, float), t.shape)
    ok = t > 0
    log_r = np.log(t[ok] * time_scale) - np.log(t_icl_minimal(N, beta0[ok]))
    out = {"ratio": float(np.exp(np.mean(log_r))) if log_r.size else None, "ratio_ci": None,
           "acquired": int(ok.sum()), "seeds": int(t.size)}
    if log_r.size > 1 and n_boot:
        rng = np.random.default_rng(seed)
        boot = np.exp([np.mean(log_r[rng.integers(0, log_r.size, log_r.size)]) for _ in range(n_boot)])
        out["ratio_ci"] = _ci(boot, confidence)
    return out


def log_t_vs_beta0(t_icl, beta0) -> dict:
    """Least-squares slope of ln t_ICL on beta0 over acquired seeds (theory: -1)."""
    t, b = np.asarray(t_icl, float), np.asarray(beta0, float)
    ok = t > 0
    slope, icpt = _line(b[ok], np.log(t[ok]))
    return {"slope": slope, "intercept": icpt, "n": int(ok.sum())}


# ---- sweep directories ------------------------------------------------------------------------------

def load_cells(out) -> list[tuple[dict, dict]]:
    """(config dict, results arrays) of every finished cell of a sweep directory (or of one run dir)."""
    import json
    from pathlib import Path

    out = Path(out)
    dirs = [out] if (out / "results.npz").exists() else sorted((out / "cells").glob("*"))
    cells = []
    for d in dirs:
        if (d / "results.npz").exists() and (d / "meta.json").exists():
            cfg = json.loads((d / "meta.json").read_text())["config"]
            cells.append((cfg, dict(np.load(d / "results.npz"))))
    return cells


def summarize_memorization(out, T: float | None = None, decades: float = 1.0, n_boot: int = 1000) -> dict:
    """Per K: tail fit of c1 and c1_sym, I_K(T) (SGD steps and eta * steps) and I_K(T)/I_K(T/10); then
    nu from I_K(T) vs K. T defaults to the shortest run's last evaluation (a common T for every K)."""
    from icl_race.theory.kinetics import memorization_budget

    cells = sorted(load_cells(out), key=lambda c: c[0]["task"]["K"])
    if not cells:
        return {"cells": []}
    T = T or min(float(r["eval_steps"][-1]) for _, r in cells)
    rows, Ks, I_T = [], [], []
    for cfg, r in cells:
        t = r["eval_steps"].astype(float)
        keep = t <= T
        I = memorization_budget(t[keep], r["c1"][:, keep])
        i_T, i_T10 = I[:, -1], I[:, np.searchsorted(t[keep], T / 10, side="right") - 1] if T / 10 >= t[0] else None
        Ks.append(cfg["task"]["K"])
        I_T.append(i_T)
        rows.append({"K": cfg["task"]["K"], "seeds": int(r["c1"].shape[0]),
                     "tail": tail_fit(t[keep], r["c1"][:, keep], decades, n_boot),
                     "tail_sym": tail_fit(t[keep], r["c1_sym"][:, keep], decades, n_boot),
                     "I_T_steps": float(np.mean(i_T)), "I_T_flow": float(np.mean(i_T) * cfg["train"]["lr"]),
                     "I_T_over_I_T10": float(np.mean(i_T) / np.mean(i_T10)) if i_T10 is not None else None,
                     "t_memorized_median": float(np.median(r["t_memorized"]))})
    nu = nu_fit(Ks, I_T, n_boot=n_boot) if len(Ks) >= 2 else None
    return {"T_steps": T, "cells": rows, "nu": nu}


def summarize_minimal(out, n_boot: int = 1000) -> dict:
    """Per cell (N, beta0): measured t_ICL vs N sqrt(2 pi) e^-beta0, in SGD steps (ratio) and in eta * steps
    (ratio_flow); with beta0_random, the slope of ln t_ICL on beta0 (theory -1)."""
    rows = []
    for cfg, r in load_cells(out):
        N, lr = cfg["task"]["N"], cfg["train"]["lr"]
        beta0 = r["beta0"][:, 0] if "beta0" in r else np.full(r["t_icl"].shape, cfg["model"]["beta0"])
        row = {"N": N, "beta0": None if cfg["model"].get("beta0_random") else cfg["model"]["beta0"],
               "seeds": int(r["t_icl"].size),
               "ratio": t_icl_ratio(r["t_icl"], N, beta0, 1.0, n_boot),
               "ratio_flow": t_icl_ratio(r["t_icl"], N, beta0, lr, n_boot),
               "median_t_icl": float(np.median(r["t_icl"][r["t_icl"] > 0])) if np.any(r["t_icl"] > 0) else None}
        if cfg["model"].get("beta0_random") and np.sum(r["t_icl"] > 0) >= 3:
            row["ln_t_vs_beta0"] = log_t_vs_beta0(r["t_icl"], beta0)
        rows.append(row)
    return {"cells": sorted(rows, key=lambda x: (x["N"], x["beta0"] if x["beta0"] is not None else 0))}
