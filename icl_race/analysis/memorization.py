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
All bootstraps take a seed for `analysis.draws.generator`, so results are reproducible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from icl_race.analysis.draws import Bootstrap, generator
from icl_race.analysis.runs import FinishedRun
from icl_race.analysis.survival import censored_times, km_median
from icl_race.analysis.text import value_ci
from icl_race.analysis.threshold import km_median_boot, median_vs_N, percentile_ci, power_law_slope
from icl_race.theory.kinetics import budget_at, k_star_from_time, t_icl_minimal, tail_correction


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
        slope = power_law_slope(np.log10(N), np.log10(k), np.log10(boot_k), confidence)
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
    out = {
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
    out = {"slope": slope, "intercept": icpt, "n": int(ok.sum()), "censored": int((~ok).sum()), "slope_ci": None}
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
        by_beta0.append({"beta0": float(b), **fit})
    by_N = []
    for n in np.unique(N):
        sel = np.nonzero(N == n)[0]
        med = np.array([km_median(*cens[i]) for i in sel])
        boot = np.stack([km_median_boot(*cens[i], n_boot, rng) for i in sel])
        with np.errstate(invalid="ignore", divide="ignore"):
            by_N.append({"N": int(n), **power_law_slope(beta0[sel], np.log(med), np.log(boot), confidence)})
    return {"by_beta0": by_beta0, "by_N": by_N}


# ---- finished runs (analysis.runs.FinishedRun: a study's rundir.Run), read through their typed config ----


def _mean_ci(x, n_boot, confidence, rng):
    return (
        percentile_ci([np.mean(x[rng.integers(0, x.size, x.size)]) for _ in range(n_boot)], confidence)
        if x.size > 1
        else None
    )


def _alpha_by_decade(t, c1, n_boot, seed):
    """alpha over each whole decade [t_end / 10, t_end] (t_end a power of ten) inside the evaluated times."""
    lo, hi = np.ceil(np.log10(t[t > 0].min() * 10)), np.floor(np.log10(t.max()))
    fits = ((10.0**k, tail_fit(t, c1, 1.0, n_boot, seed=seed, t_end=10.0**k)) for k in np.arange(lo, hi + 1))
    return [{"t_end": te, "alpha": f["alpha"], "alpha_ci": f["alpha_ci"], "n_times": f["n_times"]} for te, f in fits]


def summarize_memorization(
    runs: Sequence[FinishedRun], Ts=None, decades: float = 1.0, n_boot: int = 1000, seed: int = 0
) -> dict:
    """Per K: the tail fit of c1 and c1_sym over the last `decades`; alpha over each whole decade of t;
    I_K(T) (SGD steps, eta * steps, seed-bootstrap CI) and I_K(T)/I_K(T/10) at every T of Ts the run
    reached; I_K(inf) = I_K(t_last) + the tail correction where alpha's CI lies above 1 and every seed
    memorized before the tail window (else None: the budget diverges or is not shown to converge).
    Then nu from I_K(T) vs K at each T, over the K whose runs reached T. Ts defaults to the shortest
    run's last evaluation (a common T for every K)."""
    rng = generator(seed)
    runs = sorted(runs, key=lambda r: r.cfg.task.K)
    if not runs:
        return {"cells": []}
    Ts = sorted(Ts or [min(float(r.eval_steps[-1]) for r in runs)])
    rows, I_at = [], {T: ([], []) for T in Ts}
    for run in runs:
        cfg = run.cfg
        t, c1, lr, K = run.eval_steps.astype(float), run.curve("c1"), cfg.train.lr, cfg.task.K
        tail = tail_fit(t, c1, decades, n_boot, seed=seed)
        budgets = []
        for T in (T for T in Ts if T <= t[-1]):
            I = budget_at(t, c1, T)
            I_10 = budget_at(t, c1, T / 10) if T / 10 >= t[0] else None
            budgets.append(
                {
                    "T": T,
                    "I_steps": float(I.mean()),
                    "I_steps_ci": _mean_ci(I, n_boot, 0.95, rng),
                    "I_flow": float(I.mean() * lr),
                    "I_over_I_T10": float(I.mean() / I_10.mean()) if I_10 is not None else None,
                }
            )
            I_at[T][0].append(K)
            I_at[T][1].append(I)
        # Extrapolate only a tail that starts after memorization: a window that still holds the fall of c1
        # from 1/2 gives a steep alpha and a meaningless correction.
        t_mem = np.asarray(run.t("memorized"), float)
        converges = (
            tail["alpha_ci"] is not None
            and tail["alpha_ci"][0] > 1
            and np.all(t_mem >= 0)
            and t_mem.max() <= tail["t_range"][0]
        )
        I_inf = budget_at(t, c1, t[-1]).mean() + tail_correction(tail["A"], tail["alpha"], t[-1])
        rows.append(
            {
                "K": K,
                "seeds": int(c1.shape[0]),
                "t_last": float(t[-1]),
                "tail": tail,
                "tail_sym": tail_fit(t, run.curve("c1_sym"), decades, n_boot, seed=seed),
                "alpha_by_decade": _alpha_by_decade(t, c1, n_boot, seed),
                "budgets": budgets,
                "I_inf_steps": float(I_inf) if converges else None,
                "t_memorized_median": float(np.median(t_mem)),
            }
        )
    nu = [{"T": T, "K": Ks, **nu_fit(Ks, Is, n_boot=n_boot, seed=seed)} for T, (Ks, Is) in I_at.items() if len(Ks) >= 2]
    return {"Ts": Ts, "cells": rows, "nu": nu}


def summarize_minimal(runs: Sequence[FinishedRun], n_boot: int = 1000, seed: int = 0) -> dict:
    """Per cell (N, beta0): measured t_ICL vs
    N sqrt(2 pi) e^-beta0, in SGD steps (ratio) and in eta * steps (ratio_flow); with beta0_random, the
    slope of ln t_ICL on beta0 (theory -1). Over all fixed-beta0 cells: minimal_scaling."""
    rows, fixed = [], []
    for run in runs:
        cfg, t_icl = run.cfg, run.t("icl")
        N, lr, random_beta0 = cfg.task.N, cfg.train.lr, getattr(cfg.model, "beta0_random", False)
        # the beta0 each seed drew (the probe "beta0"), else the config's one value
        beta0 = run.curve("beta0")[:, 0] if "beta0" in run.curves else np.full(t_icl.shape, cfg.model.beta0)
        row = {
            "N": N,
            "beta0": None if random_beta0 else cfg.model.beta0,
            "seeds": int(t_icl.size),
            "ratio": t_icl_ratio(t_icl, N, beta0, 1.0, n_boot, seed=seed),
            "ratio_flow": t_icl_ratio(t_icl, N, beta0, lr, n_boot, seed=seed),
            "median_t_icl": float(np.median(t_icl[t_icl > 0])) if np.any(t_icl > 0) else None,
        }
        if not random_beta0:
            fixed.append((N, row["beta0"], t_icl, float(run.budget)))
        elif np.sum(t_icl > 0) >= 3:
            row["ln_t_vs_beta0"] = log_t_vs_beta0(t_icl, beta0, n_boot, seed=seed)
        rows.append(row)
    out = {"cells": sorted(rows, key=lambda x: (x["N"], x["beta0"] if x["beta0"] is not None else 0))}
    if len(fixed) >= 2:
        out["scaling"] = minimal_scaling(*zip(*fixed), n_boot=n_boot, seed=seed)
    return out


def budgets_by_K(mlp_runs: Sequence[FinishedRun], T: float) -> tuple[tuple, tuple]:
    """(K, per-seed I_K(T)) of the MLP-only runs that reached T, in increasing K."""
    return tuple(
        zip(
            *sorted(
                (
                    (r.cfg.task.K, budget_at(r.eval_steps.astype(float), r.curve("c1"), T))
                    for r in mlp_runs
                    if r.eval_steps[-1] >= T
                ),
                key=lambda x: x[0],
            )
        )
    ) or ((), ())


def summarize_race(
    mlp_runs: Sequence[FinishedRun], kinf_runs: Sequence[FinishedRun], T: float, n_boot: int = 1000, seed: int = 0
) -> dict:
    """nu from the MLP-only cells' I_K(T) (T: the race's training budget, in SGD
    steps) and the median t_ICL(N) of K = infinity race cells (e.g. the transformer) give the predicted
    K*(N) (predict_k_star)."""
    kinf = sorted(
        (
            (
                r.cfg.task.N,
                r.t("icl"),
                float(r.budget),
                "inf" if getattr(r.cfg.task, "variant", None) == "infinite" else r.cfg.task.K,
            )
            for r in kinf_runs
        ),
        key=lambda x: x[0],
    )
    K, I_by_K = budgets_by_K(mlp_runs, T)
    N, t_by_N, budgets, t_K = zip(*kinf)
    out = predict_k_star(K, I_by_K, np.array(N), t_by_N, budgets, n_boot, seed=seed)
    # The race's condition can also be tested with t_ICL measured at a finite K (above K*): each row
    # names the K its t_ICL run trained at.
    out["per_N"] = [row | {"t_icl_K": k} for row, k in zip(out["per_N"], t_K)]
    return {"T": T, "K": list(K), "N": list(N), **out}


# ---- typed results (`icl-race analyze memorization ...`: icl_race/studies/memorization.py) ---------


@dataclass(frozen=True)
class Memorization:
    """summarize_memorization: per K (`cells`) the c1 tail fit, I_K(T) at each budget of `Ts` and
    I_K(inf); per budget (`nu`) nu(T) over K with its local exponent per step of K."""

    Ts: list
    cells: list
    nu: list

    def text(self) -> str:
        return "\n".join([_cell_line(c) for c in self.cells] + [line for n in self.nu for line in _nu_lines(n)])


def _cell_line(c: dict) -> str:
    t = c["tail"]
    budgets = "; ".join(f"I_K({b['T']:g}) {value_ci(b['I_steps'], b['I_steps_ci'])} steps" for b in c["budgets"])
    return (
        f"K {c['K']:,} ({c['seeds']} seeds, to step {c['t_last']:,.0f}): tail alpha "
        f"{value_ci(t.get('alpha'), t.get('alpha_ci'), '{:.2f}')}; {budgets or 'no T reached'}; "
        f"I_K(inf) {value_ci(c['I_inf_steps'], missing='not shown to converge')}"
    )


def _nu_lines(n: dict) -> tuple[str, str]:
    local = "; ".join(
        f"{a:,.0f}-{b:,.0f} {value_ci(x['nu'], x['nu_ci'], '{:.2f}')}" for x in n["local"] for a, b in [x["K"]]
    )
    return (
        f"T {n['T']:g}: nu {value_ci(n['nu'], n['nu_ci'], '{:.3f}')} over K {', '.join(f'{k:,}' for k in n['K'])}",
        f"  local exponent per step of K: {local}",
    )


def memorization(runs: Sequence[FinishedRun], Ts=None, n_boot: int = 1000, seed: int = 0) -> Memorization:
    return Memorization(**({"Ts": [], "nu": []} | summarize_memorization(runs, Ts, n_boot=n_boot, seed=seed)))


@dataclass(frozen=True)
class Minimal:
    """summarize_minimal's summary: per (N, beta0) cell the t_ICL ratios; the scaling over fixed-beta0 cells."""

    cells: list
    scaling: dict | None = None

    def text(self) -> str:
        lines = []
        for c in self.cells:
            r, rf = c["ratio"], c["ratio_flow"]
            beta0 = "random" if c["beta0"] is None else f"{c['beta0']:g}"
            slope = c.get("ln_t_vs_beta0")
            lines.append(
                f"N {c['N']}, beta0 {beta0}: acquired {r['acquired']}/{r['seeds']}, t_ICL over N sqrt(2 pi) "
                f"e^-beta0 {value_ci(r['ratio'], r['ratio_ci'], '{:.3g}', 'n/a')} (steps), "
                f"{value_ci(rf['ratio'], rf['ratio_ci'], '{:.3g}', 'n/a')} (eta x steps)"
                + (
                    f"; slope of ln t_ICL on beta0 {value_ci(slope['slope'], slope['slope_ci'], '{:.2f}')}"
                    if slope
                    else ""
                )
            )
        return "\n".join(lines)


def minimal(runs: Sequence[FinishedRun], n_boot: int = 1000, seed: int = 0) -> Minimal:
    return Minimal(**summarize_minimal(runs, n_boot, seed=seed))


def measured_k_star(report: dict) -> dict:
    """The measured K*(N) of an `icl-race report` (report.json): its one threshold group of standard
    contexts (labelled "finite K" in a plain K* sweep, by its fields in a directory that also holds
    K = infinity cells). ValueError when there is no such group or more than one."""
    standard = [t for t in report["thresholds"] if t.get("variant", "standard") == "standard"]
    if len(standard) != 1:
        raise ValueError(
            f"expected one K* group of standard contexts, found {len(standard)}"
            + (f" ({'; '.join(t['label'] for t in standard)})" if standard else "")
        )
    th = standard[0]
    return {
        "per_N": [
            {"N": int(n), "k_star": a["kstar"], "k_star_ci": a["kstar_ci"]} for n, a in th["acquisition"].items()
        ],
        "k_star_slope": th["kstar_slope"],
    }


@dataclass(frozen=True)
class RaceKStar:
    """K*(N) predicted by summarize_race, beside the measured K*(N) of a report where one was given."""

    predicted: dict
    measured: dict | None = None

    def text(self) -> str:
        p = self.predicted
        measured = {m["N"]: m for m in (self.measured or {}).get("per_N", [])}
        lines = [
            f"I_K({p['T']:g}) = C K^nu over K {', '.join(f'{k:,}' for k in p['K'])}: nu {p['nu']:.3f}, C {p['C']:.3g}"
        ]
        for row in p["per_N"]:
            m = measured.get(row["N"])
            k = row.get("t_icl_K", "inf")
            lines.append(
                f"N {row['N']}: K = {k if k == 'inf' else f'{k:,}'} median t_ICL "
                f"{value_ci(row['median_t_icl'], row['median_t_icl_ci'])} "
                f"-> predicted K* {value_ci(row['k_star'], row['k_star_ci'])}"
                + (f", measured {value_ci(m['k_star'], m['k_star_ci'])}" if m else "")
            )
        for name, s in (("predicted", p["k_star_slope"]), ("measured", (self.measured or {}).get("k_star_slope"))):
            if s and s.get("ok"):
                lines.append(
                    f"slope of log K* on log N, {name}: {value_ci(s['slope'], s.get('slope_ci'), '{:.2f}')} "
                    f"({s['n_points']} values of N)"
                )
        return "\n".join(lines)


def race(
    mlp_runs: Sequence[FinishedRun],
    kinf_runs: Sequence[FinishedRun],
    T: float,
    measured: dict | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> RaceKStar:
    return RaceKStar(predicted=summarize_race(mlp_runs, kinf_runs, T, n_boot, seed=seed), measured=measured)
