"""The memorization and minimal-model sweeps summarised from their finished runs (`analysis.runs.FinishedRun`:
a study's `rundir.Run`s, read through their typed config) with the estimators of `analysis.memorization`:
per K the c1 tail and the budgets I_K(T) with nu over K (`summarize_memorization`), per (N, beta0) the
t_ICL ratios (`summarize_minimal`), the race's predicted K*(N) (`summarize_race`) beside the measured one
of a report (`measured_k_star`). Bootstraps take a seed for `analysis.draws.generator`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from icl_race.analysis.draws import generator
from icl_race.analysis.memorization import (
    log_t_vs_beta0,
    minimal_scaling,
    nu_fit,
    predict_k_star,
    t_icl_ratio,
    tail_fit,
)
from icl_race.analysis.runs import FinishedRun
from icl_race.analysis.threshold import percentile_ci
from icl_race.theory.kinetics import budget_at, tail_correction


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
    rows: list[dict] = []
    I_at: dict[float, tuple[list, list]] = {T: ([], []) for T in Ts}  # T -> (the K that reached it, their I_K(T))
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
    out: dict = {"cells": sorted(rows, key=lambda x: (x["N"], x["beta0"] if x["beta0"] is not None else 0))}
    if len(fixed) >= 2:
        Ns, beta0s, t_icls, censor_ats = zip(*fixed)
        out["scaling"] = minimal_scaling(Ns, beta0s, t_icls, censor_ats, n_boot=n_boot, seed=seed)
    return out


def budgets_by_K(mlp_runs: Sequence[FinishedRun], T: float) -> tuple[tuple, tuple]:
    """(K, per-seed I_K(T)) of the MLP-only runs that reached T, in increasing K."""
    reached = sorted(
        (
            (r.cfg.task.K, budget_at(r.eval_steps.astype(float), r.curve("c1"), T))
            for r in mlp_runs
            if r.eval_steps[-1] >= T
        ),
        key=lambda x: x[0],
    )
    return tuple(k for k, _ in reached), tuple(I for _, I in reached)


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
