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

import dataclasses

import numpy as np

from icl_race.analysis.record import INLINE, OMIT_NONE, Record
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


@dataclasses.dataclass(frozen=True)
class Transition(Record):
    """One event over seeds (`transition_stats`), in tau."""

    t_steps: list[int]  # per seed, as recorded (-1: not reached)
    reached: int
    censored: int
    censored_at_tau: float
    km_median_tau: float | None
    km_median_ci_tau: list  # [lo, hi]; hi None: beyond the budget
    quantiles_tau: dict[int, float | None]  # percentile (10, 50, 90) -> of the reached seeds


def transition_stats(t_S: np.ndarray, censor_at: int, dt: float) -> Transition:
    """One event over seeds: reached/censored counts, KM median and 95% CI, and quantiles of the reached
    seeds, in τ; the per-seed steps as recorded."""
    reached = t_S[t_S >= 0] * dt
    median, ci = None, [None, None]
    if t_S.size:
        km = kaplan_meier(*censored_times(t_S, censor_at))
        scale = lambda v: None if v is None else v * dt
        median, ci = scale(km.median), [scale(v) for v in km.median_ci]
    quantiles = {q: (float(np.quantile(reached, q / 100)) if reached.size else None) for q in (10, 50, 90)}
    return Transition(t_S.tolist(), int(reached.size), int(np.sum(t_S < 0)), censor_at * dt, median, ci, quantiles)


@dataclasses.dataclass(frozen=True)
class Dwell(Record):
    """The dwell on level m (`dwell_stats`)."""

    m: int
    level: float
    n: int  # seeds that reached both ends
    median_tau: float | None
    median_log10_ratio: float | None
    mid_loss: list[float] | None  # median, 10%, 90% of the loss at the log-midpoint


def dwell_stats(
    t: dict, D: int, dt: float, level_L: np.ndarray, loss_SxT: np.ndarray, eval_steps_T: np.ndarray
) -> list[Dwell]:
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
            Dwell(
                m,
                float(level_L[m]),
                int(both.sum()),
                float(np.median(dwell)) if dwell.size else None,
                float(np.median(ratio)) if ratio.size else None,
                [float(np.quantile(mid_loss, q)) for q in (0.5, 0.1, 0.9)] if mid.size else None,
            )
        )
    return rows


@dataclasses.dataclass(frozen=True)
class FinalLoss(Record):
    """One recorded curve's final and lowest median (`final_stats`)."""

    final_median: float
    final_min: float
    final_max: float
    median_min: float
    median_argmin_tau: float


@dataclasses.dataclass(frozen=True)
class Final(Record):
    """The last level L(M_D) and each recorded curve's final losses (written as one object, L_MD first)."""

    L_MD: float
    curves: dict[str, FinalLoss] = dataclasses.field(metadata=INLINE)  # curve name -> (plots.regression.CURVES)


def final_stats(level_L: np.ndarray, eval_steps_T: np.ndarray, dt: float, curves: dict[str, np.ndarray]) -> Final:
    """The last level L(M_D), and per recorded curve ([S, T]) its final median and range over seeds and the
    lowest median with its time in tau."""
    tau_T = eval_steps_T * dt
    meds = {name: np.median(c, axis=0) for name, c in curves.items() if c.size}
    return Final(
        float(level_L[-1]),
        {
            name: FinalLoss(
                float(med_T[-1]),
                float(curves[name][:, -1].min()),
                float(curves[name][:, -1].max()),
                float(med_T.min()),
                float(tau_T[np.argmin(med_T)]),
            )
            for name, med_T in meds.items()
        },
    )


def escaping_head(v_TxH: np.ndarray, i0: int, i1: int) -> int:
    """The head whose |v| grows most from evaluation i0 to evaluation i1 (a transition's start and end)."""
    return int(np.argmax(np.abs(v_TxH[i1]) - np.abs(v_TxH[i0])))


@dataclasses.dataclass(frozen=True)
class Escape(Record):
    """One head's escape against Eq. 21 (`match_eq21`)."""

    start: int
    grown_before: bool
    t0_tau: float
    v0: float
    u0: float
    measured_tau: float
    predicted_tau: float
    rel_err: float


def match_eq21(
    tau_T: np.ndarray, absv_T: np.ndarray, i0: int, lam: float, c: float, start_frac: float = START_FRAC
) -> Escape | None:
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
    return Escape(
        int(a),
        bool(above[0] == 0),
        float(tau_T[a]),
        v0,
        v0 / vstar,
        measured,
        float(s_half),
        measured / float(s_half) - 1,
    )


@dataclasses.dataclass(frozen=True)
class Eq21Match(Record):
    """One seed's escaping head across one transition against Eq. 21 (`eq21_matches`): written as one
    object, the escape's fields between the head and the cosines."""

    seed: int
    head: int
    escape: Escape = dataclasses.field(metadata=INLINE)
    cos_k: float
    cos_q: float


def eq21_matches(
    cfg: dict, t: dict[str, np.ndarray], heads: dict[str, np.ndarray], ev_T: np.ndarray, dt: float
) -> list[list[Eq21Match]]:
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
            a = match.start
            rows.append(
                Eq21Match(
                    s,
                    j,
                    match,
                    cos_k=float(abs(heads["k_align"][s, a, j, 0, m]) / heads["k_norm"][s, a, j]),
                    cos_q=float(abs(heads["q_align"][s, a, j, 0, m]) / heads["q_norm"][s, a, j]),
                )
            )
        out.append(rows)
    return out


@dataclasses.dataclass(frozen=True)
class Eq21Transition(Record):
    """One transition's matches summarised (`eq21_stats`); the medians only with a match."""

    m: int
    lam: float
    vstar: float
    n: int
    n_grown_before: int
    n_ansatz: int
    ansatz_abs_err_max: float | None
    u0_median: float | None = dataclasses.field(default=None, metadata=OMIT_NONE)
    cos_k_median: float | None = dataclasses.field(default=None, metadata=OMIT_NONE)
    cos_q_median: float | None = dataclasses.field(default=None, metadata=OMIT_NONE)
    rel_err: list[float] | None = dataclasses.field(default=None, metadata=OMIT_NONE)  # median, 10%, 90%
    abs_rel_err_median: float | None = dataclasses.field(default=None, metadata=OMIT_NONE)


def eq21_stats(matches: list[list[Eq21Match]], lam_D: np.ndarray, vstar_D: np.ndarray) -> list[Eq21Transition]:
    """Per transition: seeds matched (and how many of them grown_before), medians of u0 = v0/v* and of the
    start cosines, the relative error measured/predicted − 1 of the time to v*/2 (median, 10%, 90%, median of
    its absolute value), and the largest |error| over the seeds in Eq. 20's ansatz at the start (not
    grown_before, cos_k · cos_q ≥ ALIGNED) with their number."""
    out = []
    for m, rows in enumerate(matches):
        col = {k: np.array([getattr(r.escape, k) for r in rows]) for k in ("u0", "rel_err", "grown_before")}
        col |= {k: np.array([getattr(r, k) for r in rows]) for k in ("cos_k", "cos_q")}
        ansatz = ~col["grown_before"].astype(bool) & (col["cos_k"] * col["cos_q"] >= ALIGNED)
        worst = float(np.abs(col["rel_err"][ansatz]).max()) if ansatz.any() else None
        head = (m, float(lam_D[m]), float(vstar_D[m]), len(rows), int(np.sum(col["grown_before"])), int(ansatz.sum()))
        if not rows:
            out.append(Eq21Transition(*head, worst))
            continue
        u0, cos_k, cos_q = (float(np.median(col[k])) for k in ("u0", "cos_k", "cos_q"))
        err = [float(np.quantile(col["rel_err"], q)) for q in (0.5, 0.1, 0.9)]
        out.append(Eq21Transition(*head, worst, u0, cos_k, cos_q, err, float(np.median(np.abs(col["rel_err"])))))
    return out


def has_heads(cfg: dict, heads: dict[str, np.ndarray]) -> bool:
    """Rank-1 attn_s with the per-head probes recorded: Eq. 21 applies."""
    m = cfg["model"]
    return m["kind"] == "attn_s" and int(m["rank"]) == 1 and set(HEAD_KEYS) <= set(heads)
