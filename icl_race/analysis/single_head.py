"""The single-active-head test (experiments/linear_attention/single_head_protocol.md, pre-registered):
is exactly one head active in each transition M_m → M_{m+1} of a rank-1 ATTN_S staircase, and does the
escape time follow τ / (λ_{m+1}² v_i(t_m)) (the quadratic part of Eq. 21)?

Pure: everything here reads one seed's trajectory through `observe` (below) and returns typed results;
the trajectory itself (float64 gradient flow with dense output) is the study's
(`icl_race.studies.linear_attention`). The definitions are the protocol's, which fixed them before the
measurement; a change here is a change of the protocol.

    observe(t) -> (loss_T, v_TxH, k_TxHxD, q_TxHxD)   t a time or a 1-D array of T times (in τ); v the
        heads' values, k and q their (rank-1) key and query vectors in the eigenbasis of Λ, so that
        coordinate d of k_i is e_{d+1}ᵀ k_i (λ descending). The loss must decrease monotonically in t.

  staircase_seed  one seed: t_m, t_half, and per transition the head rule's pick, the active heads and
                  the escape-time ratios (plus the post hoc ones of the protocol's amendment)
  summarise       per transition over seeds: active-head counts, the decision rule, ratios with bootstrap CIs
The whole test (per init scale, with the numerical checks) and its markdown tables are the study's
(`icl_race.studies.linear_attention.SingleHead`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import brentq

from icl_race.analysis.draws import Bootstrap
from icl_race.analysis.threshold import median_ci as bootstrap_median_ci
from icl_race.theory import linear_attention as th

PLATEAU_FRAC = 0.05  # t_m: loss within 5% of the gap above L(M_m) (theory.transition_levels)
THRESHOLDS = (0.05, 0.1, 0.2)  # a head is active in a transition if its v moves by > f · v*_{m+1}
PRIMARY = 0.1  # the threshold of the decision rule; 0.05 and 0.2 are the sensitivity
HOLDS_AT = 0.9  # the picture holds for a transition if >= 90% of seeds have exactly one
ESCAPE_BAND = (0.5, 2.0)  # the estimate is adequate if the median ratio's CI lies inside
PATH_POINTS = 150  # samples of v along a transition, linear and geometric each

Observe = Callable[[object], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


# ---- one seed ------------------------------------------------------------------------------------


def first_crossing(loss_at: Callable[[float], float], t_T: np.ndarray, loss_T: np.ndarray, level: float) -> float:
    """The first t with L(t) <= level: bracketed on the grid t_T (loss_T = L(t_T)), then refined by
    Brent's method on the dense loss `loss_at` to ~1e-12 relative (a grid alone would quantise t_m at
    the grid's 0.5% spacing, as large as the effects measured). 0 if the grid starts at or below the
    level, NaN if it never gets there (censored at the grid's end). Relies on L decreasing in t, as it
    does under gradient flow."""
    below = np.nonzero(loss_T <= level)[0]
    if below.size == 0:
        return float("nan")
    i = below[0]
    if i == 0:
        return 0.0
    return brentq(lambda t: loss_at(t) - level, t_T[i - 1], t_T[i], xtol=1e-300, rtol=1e-12)


def escape_scores(v_H: np.ndarray, k_HxD: np.ndarray, q_HxD: np.ndarray, d: int) -> np.ndarray:
    """|v_i| |e_dᵀ k_i| |e_dᵀ q_i| per head: the pre-registered rule's pick for the transition that learns
    coordinate d is the head of the largest score (the cube of a geometric-mean "size along e_d", since
    the head's growth rate along e_d is set by the product of the three)."""
    return np.abs(v_H) * np.abs(k_HxD[:, d]) * np.abs(q_HxD[:, d])


def head_shape(v: float, k_D: np.ndarray, q_D: np.ndarray, d: int) -> tuple[float, float, float, float]:
    """(cos k, cos q, |v|/‖k‖, ‖q‖/‖k‖) of one head: how far it is from the ansatz's aligned (cos = 1 along
    e_d) and balanced (|v| = ‖k‖ = ‖q‖) head."""
    nk = np.linalg.norm(k_D)
    return (
        float(abs(k_D[d]) / nk),
        float(abs(q_D[d]) / np.linalg.norm(q_D)),
        float(abs(v) / nk),
        float(np.linalg.norm(q_D) / nk),
    )


def path_times(a: float, b: float) -> np.ndarray:
    """Where v is sampled in the transition [a, b]: linear and geometric grids (the geometric one
    resolves the start of a transition that follows a plateau of many times its length)."""
    return np.unique(
        np.concatenate([[a, b], np.linspace(a, b, PATH_POINTS), np.geomspace(max(a, 1e-3), b, PATH_POINTS)])
    )


def moved(v_path_TxH: np.ndarray, v0_H: np.ndarray) -> np.ndarray:
    """max over the transition of |v_i(t) − v_i(t_m)| per head."""
    return np.max(np.abs(v_path_TxH - v0_H[None, :]), axis=0)


def active_heads(dv_H: np.ndarray, vstar: float, f: float) -> list[int]:
    """The heads whose v moved by more than f · v*: active in the transition."""
    return [int(j) for j in np.nonzero(dv_H > f * vstar)[0]]


@dataclass(frozen=True)
class Transition:
    """Transition m → m+1 of one seed. The fields from n_active on need the transition's end and are
    None where it is censored. Post hoc (the protocol's amendment, after the 2-seed pilot): esc_* for the
    head j whose v moves most, unrec_* for u, the pre-registered score restricted to heads not active in
    an earlier transition (a rule that can be applied at t_m without seeing the future)."""

    m: int
    t_start: float
    t_end: float
    t_half: float
    censored: bool
    head: int  # i*: the pre-registered rule's pick at t_m (0, with NaNs, if t_m is NaN)
    v_head: float
    predicted: float  # τ / (λ² |v_i*(t_m)|)
    predicted_geo: float  # the same with the score's cube root for |v|
    cos_k: float
    cos_q: float
    v_over_k: float
    q_over_k: float
    max_unrecruited_v_ratio: float  # the largest |v| of the heads not yet recruited (i* aside) over |v_i*|
    n_active: dict | None = None  # per threshold (str(f)): how many heads are active
    active: list | None = None  # the active heads at PRIMARY
    head_active: bool | None = None
    head_moves_most: bool | None = None
    dv_sorted_over_vstar: list | None = None  # the four largest moves, over v*
    ratio: float | None = None  # (t_{m+1} − t_m) / predicted
    ratio_half: float | None = None  # (t_half − t_m) / predicted
    ratio_geo: float | None = None
    ratio_half_geo: float | None = None
    esc_head: int | None = None
    esc_v: float | None = None
    esc_ratio: float | None = None
    esc_ratio_half: float | None = None
    esc_ratio_geo: float | None = None
    esc_cos_k: float | None = None
    esc_cos_q: float | None = None
    esc_v_over_k: float | None = None
    esc_q_over_k: float | None = None
    unrec_head: int | None = None
    unrec_v: float | None = None
    unrec_ratio: float | None = None
    unrec_ratio_half: float | None = None
    unrec_ratio_geo: float | None = None
    unrec_cos_k: float | None = None
    unrec_cos_q: float | None = None
    unrec_v_over_k: float | None = None
    unrec_q_over_k: float | None = None
    unrec_is_esc: bool | None = None
    esc_was_recruited: bool | None = None


@dataclass(frozen=True)
class SeedStaircase:
    seed: int
    t_m: list  # [0, t_1, ..., t_D] (τ); NaN: not reached within the horizon
    t_half: list  # [t_half of 0 → 1, ..., of D−1 → D]
    final_loss: float
    solver_steps: int
    seconds: float  # wall time of the seed (integration and analysis)
    transitions: list  # of Transition, m = 0..D−1


def staircase_seed(
    observe: Observe,
    t_T: np.ndarray,
    lam_D: np.ndarray,
    N: int,
    *,
    seed: int,
    solver_steps: int = 0,
    seconds: float = float("nan"),
) -> SeedStaircase:
    """One seed of the test: its trajectory read through `observe` (module docstring) on the grid t_T
    (which brackets every first passage) and at the times each definition needs.

    Per transition m → m+1, at t_m: the pre-registered head i* (largest `escape_scores` along e_{m+1}),
    its shape and the escape estimate τ/(λ_{m+1}² |v_i*|); over [t_m, t_{m+1}]: the active heads at each of
    THRESHOLDS, and the measured escape over the estimate. A head counts as recruited once it was active
    (at PRIMARY) in an earlier transition."""
    lam_D = np.sort(np.asarray(lam_D, np.float64))[::-1]  # e_{m+1} is coordinate m
    D, vstar_D = lam_D.size, th.plateau_values(lam_D, N)
    loss_T = observe(t_T)[0]
    loss_at = lambda t: observe(t)[0][0]
    t_m = [0.0] + [first_crossing(loss_at, t_T, loss_T, x) for x in th.transition_levels(lam_D, N, PLATEAU_FRAC)]
    t_half = [first_crossing(loss_at, t_T, loss_T, x) for x in th.midpoint_levels(lam_D, N)]
    recruited: set[int] = set()
    rows = []
    for m in range(D):
        e, lam1, vstar = m, lam_D[m], vstar_D[m]
        _, v0_H, k0_HxD, q0_HxD = (x[0] for x in observe(t_m[m]))
        H = v0_H.size
        score_H = escape_scores(v0_H, k0_HxD, q0_HxD, e)
        i = int(np.argmax(score_H))
        pred = th.escape_time(lam1, abs(v0_H[i]))
        pred_geo = th.escape_time(lam1, score_H[i] ** (1 / 3))
        others = [j for j in range(H) if j != i and j not in recruited]
        row: dict[str, Any] = dict(  # Transition's keyword arguments, of its fields' several types
            m=m,
            t_start=t_m[m],
            t_end=t_m[m + 1],
            t_half=t_half[m],
            censored=bool(np.isnan(t_m[m + 1])),
            head=i,
            v_head=float(v0_H[i]),
            predicted=float(pred),
            predicted_geo=float(pred_geo),
            **dict(zip(("cos_k", "cos_q", "v_over_k", "q_over_k"), head_shape(v0_H[i], k0_HxD[i], q0_HxD[i], e))),
            max_unrecruited_v_ratio=float(np.max(np.abs(v0_H[others])) / abs(v0_H[i])) if others else float("nan"),
        )
        if not row["censored"]:
            a, b = t_m[m], t_m[m + 1]
            dv_H = moved(observe(path_times(a, b))[1], v0_H)
            active = {f: active_heads(dv_H, vstar, f) for f in THRESHOLDS}
            j = int(np.argmax(dv_H))  # the head that escapes
            fresh = [h for h in range(H) if h not in recruited]
            u = fresh[int(np.argmax(score_H[fresh]))]
            row.update(
                n_active={str(f): len(active[f]) for f in THRESHOLDS},
                active=active[PRIMARY],
                head_active=i in active[PRIMARY],
                head_moves_most=j == i,
                dv_sorted_over_vstar=[float(x) for x in np.sort(dv_H)[::-1][:4] / vstar],
                ratio=(b - a) / pred,
                ratio_half=(t_half[m] - a) / pred,
                ratio_geo=(b - a) / pred_geo,
                ratio_half_geo=(t_half[m] - a) / pred_geo,
            )
            for tag, h in (("esc", j), ("unrec", u)):
                pred_h = th.escape_time(lam1, abs(v0_H[h]))
                geo = (abs(v0_H[h]) * abs(k0_HxD[h, e]) * abs(q0_HxD[h, e])) ** (1 / 3)
                shape = head_shape(v0_H[h], k0_HxD[h], q0_HxD[h], e)
                row.update(
                    {
                        f"{tag}_head": h,
                        f"{tag}_v": float(v0_H[h]),
                        f"{tag}_ratio": (b - a) / pred_h,
                        f"{tag}_ratio_half": (t_half[m] - a) / pred_h,
                        f"{tag}_ratio_geo": (b - a) / th.escape_time(lam1, geo),
                        **{f"{tag}_{k}": x for k, x in zip(("cos_k", "cos_q", "v_over_k", "q_over_k"), shape)},
                    }
                )
            row.update(unrec_is_esc=u == j, esc_was_recruited=j in recruited)
            recruited.update(active[PRIMARY])
        plain: dict[str, Any] = {k: float(x) if isinstance(x, np.floating) else x for k, x in row.items()}
        rows.append(Transition(**plain))
    return SeedStaircase(
        seed=seed,
        t_m=[float(t) for t in t_m],
        t_half=[float(t) for t in t_half],
        final_loss=float(loss_T[-1]),
        solver_steps=int(solver_steps),
        seconds=float(seconds),
        transitions=rows,
    )


@dataclass(frozen=True)
class ToleranceCheck:
    """The same seed integrated at a tighter solver tolerance."""

    max_rel_change_t_m: float
    same_active_counts: bool


def tolerance_check(a: SeedStaircase, b: SeedStaircase) -> ToleranceCheck:
    """How much t_1..t_D move (relative to b's) and whether every completed transition keeps its
    active-head counts, between two integrations of one seed."""
    rel = [abs(x - y) / y for x, y in zip(a.t_m[1:], b.t_m[1:]) if np.isfinite(x) and np.isfinite(y)]
    same = all(ra.n_active == rb.n_active for ra, rb in zip(a.transitions, b.transitions) if ra.n_active is not None)
    return ToleranceCheck(max(rel) if rel else float("nan"), same)


@dataclass(frozen=True)
class Passage:
    gd: float  # the first evaluation at or below the level, in τ (steps x dt)
    flow: float  # the flow's t_m
    grid_resolution: float  # GD's evaluation spacing in τ: the expected size of |gd − flow|


@dataclass(frozen=True)
class GdVsFlow:
    """Engine GD against the flow over the first two transitions (the protocol's check (b))."""

    t_1: Passage
    t_2: Passage


# ---- over seeds ----------------------------------------------------------------------------------


def median_ci(x, bootstrap: Bootstrap) -> list[float]:
    """[median, 2.5%, 97.5%] of the finite values (`threshold.median_ci`), nan where there is none."""
    m = bootstrap_median_ci(list(x), bootstrap)
    return [float("nan") if v is None else v for v in (m.median, *m.ci)]


@dataclass(frozen=True)
class TransitionSummary:
    """Transition m → m+1 over the seeds of one init scale. From active_hist to esc_was_recruited: over
    the seeds that completed it (None if none did); ratio-like fields are median_ci's [median, lo, hi].
    The decision rule (pre-registered): `holds` if at least HOLDS_AT of those seeds have exactly one
    active head at PRIMARY; the escape estimate is adequate if the ratio's CI lies in ESCAPE_BAND."""

    m: int
    seeds: int
    censored: int
    median_cos_k: float  # the medians of i*'s shape and of max_unrecruited_v_ratio, over every seed
    median_cos_q: float
    median_v_over_k: float
    median_q_over_k: float
    median_max_unrecruited_v_ratio: float
    active_hist: dict | None = None  # seeds with 1, 2, 3, >=4 and 0 active heads
    frac_exactly_one: float | None = None
    median_active: float | None = None
    frac_exactly_one_5pct: float | None = None
    frac_exactly_one_20pct: float | None = None
    median_active_5pct: float | None = None
    median_active_20pct: float | None = None
    ratio: list | None = None
    ratio_half: list | None = None
    ratio_geo: list | None = None
    ratio_half_geo: list | None = None
    head_active: float | None = None
    head_moves_most: float | None = None
    holds: bool | None = None
    escape_adequate: bool | None = None
    esc_ratio: list | None = None  # post hoc, as in Transition
    esc_ratio_half: list | None = None
    esc_ratio_geo: list | None = None
    median_esc_cos_k: float | None = None
    median_esc_cos_q: float | None = None
    median_esc_v_over_k: float | None = None
    median_esc_q_over_k: float | None = None
    unrec_ratio: list | None = None
    unrec_ratio_half: list | None = None
    unrec_ratio_geo: list | None = None
    median_unrec_cos_k: float | None = None
    median_unrec_cos_q: float | None = None
    median_unrec_v_over_k: float | None = None
    median_unrec_q_over_k: float | None = None
    unrec_is_esc: float | None = None
    esc_was_recruited: float | None = None


def summarise(seeds: Sequence[SeedStaircase], bootstrap: Bootstrap) -> list[TransitionSummary]:
    """One TransitionSummary per transition. Every bootstrap draws in turn from the one generator of
    `bootstrap`, in a fixed order (transitions, then ratio, ratio_half, ratio_geo, ratio_half_geo, then the
    post hoc ones), so a result is reproducible from its seeds alone."""
    table = []
    for m in range(len(seeds[0].transitions)):
        rows = [s.transitions[m] for s in seeds]
        done = [r for r in rows if not r.censored]
        entry: dict[str, Any] = {"m": m, "seeds": len(rows), "censored": len(rows) - len(done)}  # TransitionSummary's
        if done:
            n_act = np.array([r.n_active[str(PRIMARY)] for r in done])
            ci = lambda key: median_ci([getattr(r, key) for r in done], bootstrap)
            entry.update(
                active_hist={
                    "1": int(np.sum(n_act == 1)),
                    "2": int(np.sum(n_act == 2)),
                    "3": int(np.sum(n_act == 3)),
                    ">=4": int(np.sum(n_act >= 4)),
                    "0": int(np.sum(n_act == 0)),
                },
                frac_exactly_one=float(np.mean(n_act == 1)),
                median_active=float(np.median(n_act)),
                frac_exactly_one_5pct=float(np.mean([r.n_active["0.05"] == 1 for r in done])),
                frac_exactly_one_20pct=float(np.mean([r.n_active["0.2"] == 1 for r in done])),
                median_active_5pct=float(np.median([r.n_active["0.05"] for r in done])),
                median_active_20pct=float(np.median([r.n_active["0.2"] for r in done])),
                holds=bool(np.mean(n_act == 1) >= HOLDS_AT),
            )
            entry |= {key: ci(key) for key in ("ratio", "ratio_half", "ratio_geo", "ratio_half_geo")}  # drawn in turn
            entry["escape_adequate"] = bool(ESCAPE_BAND[0] <= entry["ratio"][1] and entry["ratio"][2] <= ESCAPE_BAND[1])
            for tag in ("esc", "unrec"):
                for key in ("ratio", "ratio_half", "ratio_geo"):
                    entry[f"{tag}_{key}"] = ci(f"{tag}_{key}")
                for key in ("cos_k", "cos_q", "v_over_k", "q_over_k"):
                    entry[f"median_{tag}_{key}"] = float(np.median([getattr(r, f"{tag}_{key}") for r in done]))
            for key in ("head_active", "head_moves_most", "unrec_is_esc", "esc_was_recruited"):  # fractions of seeds
                entry[key] = float(np.mean([getattr(r, key) for r in done]))
        for key in ("cos_k", "cos_q", "v_over_k", "q_over_k", "max_unrecruited_v_ratio"):
            entry[f"median_{key}"] = nanmedian([getattr(r, key) for r in rows])
        table.append(TransitionSummary(**entry))
    return table


def nanmedian(x) -> float:
    """np.nanmedian, NaN without a warning where every value is NaN (a transition no seed reached)."""
    x = np.asarray(x, np.float64)
    return float(np.nanmedian(x)) if np.any(~np.isnan(x)) else float("nan")
