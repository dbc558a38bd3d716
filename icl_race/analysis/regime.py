"""Is ICL acquired abruptly? The regime diagnostic of a classification cell (numpy/scipy on arrays).

The race theory of arXiv 2412.00104 times ICL by a jump: attention stays near uniform, then sharpens
within a short time and ICL accuracy goes from chance-like to its plateau. At small N the context's
majority label already predicts the target and accuracy *climbs* to the threshold instead, so a
first passage over 0.95 times a slow, noisy crossing, not the jump. Per seed:

  rise fraction  r = (t_thr - t_start) / t_thr, t_start the first passage over the lowest level
                 (0.6 by default), t_thr over the ICL threshold: small when the jump is abrupt
  plateau        the ICL accuracy the seed holds right after its first rise: the median over the
                 evaluations in [t_start (1 + a), t_start (1 + b)], (a, b) = PLATEAU_WINDOW; it
                 comes before any second phase (near K* a seed may jump to 0.8-0.9, then climb
                 past the threshold, stall or lose ICL as the MLP memorizes)

A cell is in the abrupt regime where the attention path runs alone (K = infinity): the median r at
most RISE_BOUND and the first rise reaching the threshold (median plateau above it).

Evaluation noise: a seed whose true accuracy p sits below the threshold still crosses it on some
look; `effective_threshold` gives the p at which a first passage within `looks` evaluations of
`eval_size` sequences happens with probability 1/2 (optionally needing k consecutive looks).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import optimize, stats

from icl_race.analysis.draws import Bootstrap
from icl_race.analysis.outcome import last_finite
from icl_race.analysis.record import Record
from icl_race.analysis.threshold import MedianCI, median_ci

# (a, b): the plateau is read over [t_start (1 + a), t_start (1 + b)]. With r <= RISE_BOUND the jump
# ends by t_thr <= t_start / (1 - r) ~ 1.11 t_start, before the window opens; a second phase near K*
# takes a multiple of t_start, after it closes.
PLATEAU_WINDOW = (0.25, 0.5)
# The abrupt-regime bound on the median rise fraction at K = infinity, chosen from measurements
# (experiments/README.md, "The regime"; width 64, lr 0.1, 16 seeds each): r = 0.147 [0.135, 0.163] at
# N = 16, 0.062 [0.052, 0.075] at N = 32, 0.035 [0.029, 0.044] at N = 64. The rise takes a roughly
# constant 150-220 steps while t_ICL grows, so r ~ 2.2 / N has no kink to find; 0.10 keeps each CI
# on one side of the bound (0.15 cuts N = 16's) and matches the theory's need for N >~ 20 e^beta0.
RISE_BOUND = 0.10


def rise_fraction(t_thr_S, t_start_S) -> np.ndarray:
    """(t_thr - t_start) / t_thr per seed; NaN where the threshold was not reached (t_thr < 0)."""
    t_thr, t_start = np.asarray(t_thr_S, float), np.asarray(t_start_S, float)
    ok = (t_thr > 0) & (t_start >= 0)
    return np.where(ok, (t_thr - t_start) / np.where(ok, t_thr, 1.0), np.nan)


def plateau_height(acc_SxT, eval_steps_T, t_start_S, window=PLATEAU_WINDOW) -> np.ndarray:
    """Median accuracy per seed over the evaluations in [t_start (1 + a), t_start (1 + b)] (at least
    the first evaluation at or after the window opens); NaN where t_start < 0 or the run ended before
    the window opened."""
    acc = np.asarray(acc_SxT, float)
    steps = np.asarray(eval_steps_T, float)
    out = np.full(acc.shape[0], np.nan)
    for s, t0 in enumerate(np.asarray(t_start_S, float)):
        if t0 < 0:
            continue
        lo, hi = t0 * (1 + window[0]), t0 * (1 + window[1])
        idx = np.flatnonzero((steps >= lo) & (steps <= hi))
        if idx.size == 0:
            idx = np.flatnonzero(steps >= lo)[:1]
        if idx.size:
            out[s] = float(np.median(acc[s, idx]))
    return out


@dataclasses.dataclass(frozen=True)
class Regime(Record):
    """Is ICL acquired abruptly: one cell's statistics (`summarize`)."""

    rise_fraction: MedianCI
    plateau: MedianCI
    plateau_reaches_threshold: float | None
    final_icl_acc_acquired: MedianCI
    acquired: int
    seeds: int

    @property
    def abrupt(self) -> bool | None:
        return is_abrupt(self.rise_fraction.median, self.plateau_reaches_threshold)


def summarize(
    t_thr_S,
    t_start_S,
    acc_SxT,
    eval_steps_T,
    threshold: float,
    bootstrap: Bootstrap,
) -> Regime:
    """Per-cell regime statistics over the (non-diverged) seeds given: median rise fraction of the
    acquired seeds with a bootstrap CI, median plateau height (all seeds that started to rise) with a
    CI, the fraction of risers whose plateau reaches the threshold, and the final ICL accuracy of the
    acquired seeds."""
    acc = np.asarray(acc_SxT, float)
    t_thr = np.asarray(t_thr_S)
    r = rise_fraction(t_thr, t_start_S)
    h = plateau_height(acc, eval_steps_T, t_start_S)
    acquired = t_thr >= 0
    final = last_finite(acc)  # a retired seed's curve ends in NaN: its last evaluation is its final accuracy
    risen = np.isfinite(h)
    return Regime(
        median_ci(r, bootstrap),
        median_ci(h, bootstrap),
        float(np.mean(h[risen] > threshold)) if risen.any() else None,
        median_ci(final[acquired], bootstrap),
        int(acquired.sum()),
        int(acc.shape[0]),
    )


def is_abrupt(r: float | None, reach: float | None, bound: float = RISE_BOUND) -> bool | None:
    """The regime test of a K = infinity cell: median rise fraction r <= bound and the median plateau above
    the threshold (`plateau_reaches_threshold` reach > 1/2). None when no seed was acquired."""
    if r is None or reach is None:
        return None
    return bool(r <= bound and reach > 0.5)


def _p_run(q: float, looks: int, k: int) -> float:
    """P(at least one run of k consecutive successes in `looks` Bernoulli(q) trials)."""
    state = np.zeros(k)  # state[j]: no run yet, current streak j
    state[0] = 1.0
    done = 0.0
    for _ in range(looks):
        new = np.zeros(k)
        new[0] = state.sum() * (1 - q)
        new[1:] = state[:-1] * q
        done += state[-1] * q
        state = new
    return float(done)


def effective_threshold(threshold: float, eval_size: int, looks: int, confirm: int = 1) -> float:
    """The true accuracy p at which a seed holding p passes `threshold` (strictly, on eval_size
    sequences) within `looks` evaluations with probability 1/2, passing meaning `confirm`
    consecutive evaluations above it. Below `threshold` for looks > 1: what first passage measures."""
    cut = math.floor(threshold * eval_size + 1e-9)  # acc > threshold <=> count >= cut + 1

    def gap(p):
        return _p_run(float(stats.binom.sf(cut, eval_size, p)), looks, confirm) - 0.5

    return float(optimize.brentq(gap, 1e-6, 1 - 1e-9, xtol=1e-6))
