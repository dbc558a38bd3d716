"""Statistics of linear-attention runs (arXiv 2501.16265): pure functions on a run's arrays.

The arrays are those `icl_race.report.regression_run.RegressionSample` reads once from a `rundir.Run`: the
config (config.json's dict), the kept seeds' transition times t (event -> [S] steps, -1 = censored at
censor_at), curves and per-head probes ([S, T, ...]), eval_steps, dt = train.lr (steps -> units of tau)
and the Eq. 19 levels.

  transition_stats  one event over seeds: KM median with its CI and quantiles, in tau
  dwell_stats       the dwell on each plateau and the loss at its log-midpoint
  final_stats       final and lowest median losses
  eq21_matches      for rank-1 attn_s runs, each transition's escaping head against the scalar ODE of
                    Eq. 21 (match_eq21), summarised by eq21_stats
"""

from __future__ import annotations

import numpy as np

from icl_race.analysis.survival import censored_times, kaplan_meier
from icl_race.theory.linear_attention import plateau_losses, scalar_ode_time, spectrum, staircase

HEAD_KEYS = ("v", "k_align", "q_align", "k_norm", "q_norm")
# Eq. 21 assumes the escaping head's key and query already lie along e_(m+1) (Eq. 20). From small init they
# do not at t_m(m); by the time |v| reaches 0.1 v* they mostly do (median cosines 0.98 on fig3.toml), so the
# ODE is started there rather than at the start of the plateau.
START_FRAC = 0.1
ALIGNED = 0.9  # cos(k, e) · cos(q, e) at the start above which a head counts as in Eq. 20's ansatz


def lambdas(cfg: dict) -> np.ndarray:
    """λ_1 ≥ … ≥ λ_D of a run's config (config.json's dict)."""
    t = cfg["task"]
    return spectrum(t["spectrum"], int(t["D"]), alpha=float(t.get("alpha", 2.0)), values=t.get("lambdas") or None)


def levels(cfg: dict) -> np.ndarray:
    """[L(M_0), …, L(M_D)] (Eq. 19) for a run's config."""
    return plateau_losses(lambdas(cfg), int(cfg["task"]["N"]))


def conspicuous(cfg: dict) -> list[int]:
    """The levels m the theory expects the loss to rest on: multiples of R for attn_s (rank-R heads), only the start and the end for attn_m and the MLP (one drop, Eq. 10)."""
    D, m = int(cfg["task"]["D"]), cfg["model"]
    return list(range(0, D + 1, int(m["rank"]))) if m["kind"] == "attn_s" else [0, D]


def transition_stats(t_S: np.ndarray, censor_at: int, dt: float) -> dict:
    """One event over seeds: reached/censored counts, KM median and 95% CI, and quantiles of the reached
    seeds, in τ; the per-seed steps as recorded."""
    reached = t_S[t_S >= 0] * dt
    out = {
        "t_steps": t_S.tolist(),
        "reached": int(reached.size),
        "censored": int(np.sum(t_S < 0)),
        "censored_at_tau": censor_at * dt,
        "km_median_tau": None,
        "km_median_ci_tau": [None, None],
        "quantiles_tau": {q: (float(np.quantile(reached, q / 100)) if reached.size else None) for q in (10, 50, 90)},
    }
    if t_S.size:
        km = kaplan_meier(*censored_times(t_S, censor_at))
        scale = lambda v: None if v is None else v * dt
        out |= {"km_median_tau": scale(km.median), "km_median_ci_tau": [scale(v) for v in km.median_ci]}
    return out


def dwell_stats(
    t: dict, D: int, dt: float, level_L: np.ndarray, loss_SxT: np.ndarray, eval_steps_T: np.ndarray
) -> list[dict]:
    """Per level m = 0 … D−1: dwell t_m(m+1) − t_m(m) in τ (t_m0 = 0), for m ≥ 1 log10 t_m(m+1)/t_m(m)
    (the plateau's width on the log time axis), and the loss at the log-midpoint (median, 10% and 90%),
    over the seeds that reached both."""
    rows = []
    for m in range(D):
        after = t[f"m{m + 1}"]
        before = t[f"m{m}"] if m else np.zeros_like(after)
        both = (after >= 0) & (before >= 0)
        dwell = (after - before)[both] * dt
        ratio = np.log10(after[both] / before[both]) if m and both.any() else np.array([])
        mid = np.sqrt(np.maximum(before[both], eval_steps_T[0]) * after[both])
        mid_loss = loss_SxT[both, np.searchsorted(eval_steps_T, mid)]
        rows.append(
            {
                "m": m,
                "level": float(level_L[m]),
                "n": int(both.sum()),
                "median_tau": float(np.median(dwell)) if dwell.size else None,
                "median_log10_ratio": float(np.median(ratio)) if ratio.size else None,
                "mid_loss": [float(np.quantile(mid_loss, q)) for q in (0.5, 0.1, 0.9)] if mid.size else None,
            }
        )
    return rows


def final_stats(level_L: np.ndarray, eval_steps_T: np.ndarray, dt: float, curves: dict[str, np.ndarray]) -> dict:
    """The last level L(M_D), and per recorded curve ([S, T]) its final median and range over seeds and the
    lowest median with its time in tau."""
    out: dict[str, object] = {"L_MD": float(level_L[-1])}
    tau_T = eval_steps_T * dt
    for name, curve_SxT in curves.items():
        if not curve_SxT.size:
            continue
        med_T = np.median(curve_SxT, axis=0)
        out[name] = {
            "final_median": float(med_T[-1]),
            "final_min": float(curve_SxT[:, -1].min()),
            "final_max": float(curve_SxT[:, -1].max()),
            "median_min": float(med_T.min()),
            "median_argmin_tau": float(tau_T[np.argmin(med_T)]),
        }
    return out


def escaping_head(v_TxH: np.ndarray, i0: int, i1: int) -> int:
    """The head whose |v| grows most from evaluation i0 to evaluation i1 (a transition's start and end)."""
    return int(np.argmax(np.abs(v_TxH[i1]) - np.abs(v_TxH[i0])))


def match_eq21(
    tau_T: np.ndarray, absv_T: np.ndarray, i0: int, lam: float, c: float, start_frac: float = START_FRAC
) -> dict | None:
    """One head's escape against Eq. 21 (λ = λ_(m+1), c = c_(m+1), v* = (λc)^(−1/3)), from evaluation i0 on.

    Start: the last evaluation a ≥ i0 before |v| first reaches start_frac · v*; the ODE's t = 0 is there and
    v0 = |v(t_a)|. Measured: the time from t_a until |v| reaches v*/2, interpolated between the evaluations
    around the crossing linearly in the ODE's own clock s(v) = scalar_ode_time(v, v0), along which an exact
    solution is a straight line in t, so the grid adds no error when Eq. 21 holds. Predicted: s(v*/2).
    None when |v| never reaches v*/2, or had already at i0. grown_before: |v| was above start_frac · v* at i0
    already (the head grew partly in an earlier transition), so the start is i0 itself."""
    vstar = (lam * c) ** (-1.0 / 3.0)
    above = np.nonzero(absv_T[i0:] >= start_frac * vstar)[0]
    half = np.nonzero(absv_T[i0:] >= vstar / 2)[0]
    if not half.size or half[0] == 0:
        return None
    a, h = i0 + max(above[0] - 1, 0), i0 + half[0]
    v0 = float(absv_T[a])
    # v just above v* (grid noise) would fall on the other branch of the clock: hold it just below
    s_prev, s_next, s_half = scalar_ode_time(
        np.minimum([absv_T[h - 1], absv_T[h], vstar / 2], vstar * (1 - 1e-9)), v0, lam, c
    )
    t_half = tau_T[h - 1] + (tau_T[h] - tau_T[h - 1]) * (s_half - s_prev) / (s_next - s_prev)
    measured = float(t_half - tau_T[a])
    return {
        "start": int(a),
        "grown_before": bool(above[0] == 0),
        "t0_tau": float(tau_T[a]),
        "v0": v0,
        "u0": v0 / vstar,
        "measured_tau": measured,
        "predicted_tau": float(s_half),
        "rel_err": measured / float(s_half) - 1.0,
    }


def eq21_matches(
    cfg: dict, t: dict[str, np.ndarray], heads: dict[str, np.ndarray], ev_T: np.ndarray, dt: float
) -> list[list[dict]]:
    """Per transition M_m → M_(m+1) (m = 0 … D−1), over the seeds that reached t_m(m) and t_m(m+1): the
    escaping head, its `match_eq21`, and the cosines of its key and query with e_(m+1) at the ODE's start."""
    ref = staircase(lambdas(cfg), int(cfg["task"]["N"]))
    out = []
    for m in range(len(ref["lam"])):
        rows = []
        for s in range(heads["v"].shape[0]):
            start, end = (t[f"m{m}"][s] if m else 0), t[f"m{m + 1}"][s]
            if start < 0 or end < 0:
                continue
            i0, i1 = np.searchsorted(ev_T, [start, end])  # events fire at evaluations
            j = escaping_head(heads["v"][s], i0, i1)
            match = match_eq21(ev_T * dt, np.abs(heads["v"][s, :, j]), i0, ref["lam"][m], ref["c"][m])
            if match is None:
                continue
            a = match["start"]
            rows.append(
                {
                    "seed": s,
                    "head": j,
                    **match,
                    "cos_k": float(abs(heads["k_align"][s, a, j, 0, m]) / heads["k_norm"][s, a, j]),
                    "cos_q": float(abs(heads["q_align"][s, a, j, 0, m]) / heads["q_norm"][s, a, j]),
                }
            )
        out.append(rows)
    return out


def eq21_stats(matches: list[list[dict]], lam_D: np.ndarray, vstar_D: np.ndarray) -> list[dict]:
    """Per transition: seeds matched (and how many of them grown_before), medians of u0 = v0/v* and of the
    start cosines, the relative error measured/predicted − 1 of the time to v*/2 (median, 10%, 90%, median of
    its absolute value), and the largest |error| over the seeds in Eq. 20's ansatz at the start (not
    grown_before, cos_k · cos_q ≥ ALIGNED) with their number."""
    out = []
    for m, rows in enumerate(matches):
        col = {k: np.array([r[k] for r in rows]) for k in ("u0", "cos_k", "cos_q", "rel_err", "grown_before")}
        ansatz = ~col["grown_before"].astype(bool) & (col["cos_k"] * col["cos_q"] >= ALIGNED)
        out.append(
            {
                "m": m,
                "lam": float(lam_D[m]),
                "vstar": float(vstar_D[m]),
                "n": len(rows),
                "n_grown_before": int(np.sum(col["grown_before"])),
                "n_ansatz": int(ansatz.sum()),
                "ansatz_abs_err_max": float(np.abs(col["rel_err"][ansatz]).max()) if ansatz.any() else None,
            }
            | (
                {
                    "u0_median": float(np.median(col["u0"])),
                    "cos_k_median": float(np.median(col["cos_k"])),
                    "cos_q_median": float(np.median(col["cos_q"])),
                    "rel_err": [float(np.quantile(col["rel_err"], q)) for q in (0.5, 0.1, 0.9)],
                    "abs_rel_err_median": float(np.median(np.abs(col["rel_err"]))),
                }
                if rows
                else {}
            )
        )
    return out


def has_heads(cfg: dict, heads: dict[str, np.ndarray]) -> bool:
    """Rank-1 attn_s with the per-head probes recorded: Eq. 21 applies."""
    m = cfg["model"]
    return m["kind"] == "attn_s" and int(m["rank"]) == 1 and set(HEAD_KEYS) <= set(heads)
