"""The transformer side of the race's theory (arXiv 2412.00104 §5; experiments/race/README.md), per seed of
one cell: the loss relation after acquisition, ICL's transience under L2 on the attention path, the
memorization that would settle a seed. Pure numpy on results.npz arrays; typed records (analysis.record).
The summaries of sweeps and the independence ablation that use them: `analysis.race_summary`.

  first_passage   per seed, the first evaluation step where a curve is above (or below) a level,
                  optionally only after a per-seed start; -1 = never within the run (censored).
  fall_times      transience: the first evaluation after acquisition (t_ICL) with ICL accuracy below
                  `level` (0.9, the reference's rule); -1 for seeds that acquired and never fell
                  (censored at the last evaluation) and for seeds that never acquired (not at risk).
  loss_relation   L_ICL against x = -1/2 log L_IWL over every seed's evaluations at or after t_ICL
                  (theory: L_ICL = x): the pooled least-squares line and the proportionality constant
                  a of L_ICL = a x (sum xy / sum xx; theory 1), CIs by resampling seeds; `min_x`
                  keeps only x > min_x (e.g. 0.5: L_IWL < e^-1, where memorization is under way).
  km_summary      Kaplan-Meier median of censored times with a seed-bootstrap CI; given generators of
                  one root (`Draws.bootstrap()`), two samples of equal size resample the same seed
                  positions, so the ratio of two conditions' medians (`analysis.compare.ratio_of_boots`
                  on their replicates) is paired by seed id.
  after_memorization  the bet of train.settle_iwl: of the seeds that memorized (IWL accuracy above a
                  level) before acquiring ICL, how many acquired ICL later, and how high ICL got after.

Times are SGD steps (eval_steps); a run's censoring time is its last evaluation.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from icl_race.analysis.draws import Bootstrap
from icl_race.analysis.median_n import km_median_boot
from icl_race.analysis.record import NOT_JSON, OMIT_NONE, Record
from icl_race.analysis.survival import censored_times, km_median
from icl_race.analysis.threshold import percentile_ci


def first_passage(values_SxT, steps_T, level: float, below: bool = False, after_S=None) -> np.ndarray:
    """Step of the first evaluation with value > level (< level with `below`) per seed, -1 if none.
    With after_S, only evaluations strictly after after_S[s] count, and seeds with after_S < 0 get -1."""
    v = np.asarray(values_SxT, float)
    steps = np.asarray(steps_T)
    hit = v < level if below else v > level
    if after_S is not None:
        after = np.asarray(after_S)[:, None]
        hit &= (steps[None, :] > after) & (after >= 0)
    return np.where(hit.any(1), steps[np.argmax(hit, axis=1)], -1)


def fall_times(icl_acc_SxT, steps_T, t_icl_S, level: float = 0.9) -> np.ndarray:
    return first_passage(icl_acc_SxT, steps_T, level, below=True, after_S=t_icl_S)


@dataclass(frozen=True)
class KmMedian(Record):
    """km_summary: the KM median of censored times (None: not reached) with its percentile bootstrap CI;
    `boot`, its replicates (nan: not reached), for the ratios and slopes that pair them."""

    n: int
    observed: int
    median: float | None
    median_ci: list
    boot: np.ndarray = field(repr=False, metadata=NOT_JSON)


def km_summary(t_S, censor_at: float, boot: Bootstrap) -> KmMedian:
    """KM median of times t_S (-1 = censored at censor_at) with a percentile seed-bootstrap CI. Given
    generators of one root (`Draws.bootstrap()`), two samples of equal size resample the same seed positions."""
    times, observed = censored_times(t_S, censor_at)
    med = km_median(times, observed) if times.size else float("nan")
    reps = km_median_boot(times, observed, boot) if times.size else np.empty(0)
    median = float(med) if np.isfinite(med) else None
    return KmMedian(int(times.size), int(observed.sum()), median, percentile_ci(reps, boot.confidence), reps)


def _line_stats(stats_K):
    """Pooled fits from summed sufficient statistics [..., 5] = (n, sum x, sum y, sum xx, sum xy)."""
    n, sx, sy, sxx, sxy = np.moveaxis(stats_K, -1, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
        return slope, (sy - slope * sx) / n, sxy / sxx


@dataclass(frozen=True)
class LossFit(Record):
    """loss_relation: the pooled line L_ICL = intercept + slope x and a of L_ICL = a x (`prop`), None
    without a point; their CIs with replicates and two seeds or more. The points (x, y) for the figure."""

    seeds_used: int
    points: int
    confidence: float
    x: list = field(repr=False, metadata=NOT_JSON)
    y: list = field(repr=False, metadata=NOT_JSON)
    slope: float | None = None
    intercept: float | None = None
    prop: float | None = None
    slope_ci: list | None = field(default=None, metadata=OMIT_NONE)
    intercept_ci: list | None = field(default=None, metadata=OMIT_NONE)
    prop_ci: list | None = field(default=None, metadata=OMIT_NONE)


def loss_relation(icl_loss_SxT, iwl_loss_SxT, steps_T, t_icl_S, boot: Bootstrap, min_x: float = -np.inf) -> LossFit:
    """L_ICL vs x = -1/2 log L_IWL at evaluations >= t_ICL of acquired seeds with x > min_x (see module
    docstring), CIs from `boot` (none with boot.n 0)."""
    t_icl = np.asarray(t_icl_S)
    with np.errstate(divide="ignore"):
        x_SxT = -0.5 * np.log(np.asarray(iwl_loss_SxT, float))
    after_SxT = (t_icl[:, None] >= 0) & (np.asarray(steps_T)[None, :] >= t_icl[:, None]) & (x_SxT > min_x)
    x_SxT = np.where(after_SxT, x_SxT, 0.0)
    y_SxT = np.where(after_SxT, np.asarray(icl_loss_SxT, float), 0.0)
    stats_Sx5 = np.stack(
        [after_SxT.sum(1), x_SxT.sum(1), y_SxT.sum(1), (x_SxT * x_SxT).sum(1), (x_SxT * y_SxT).sum(1)], axis=1
    ).astype(float)
    used = stats_Sx5[:, 0] > 0
    x, y = x_SxT[after_SxT].tolist(), y_SxT[after_SxT].tolist()
    fit = LossFit(int(used.sum()), int(stats_Sx5[:, 0].sum()), boot.confidence, x, y)
    if used.sum() < 1:
        return fit
    slope, intercept, prop = (float(v) for v in _line_stats(stats_Sx5[used].sum(0)))
    fit = dataclasses.replace(fit, slope=slope, intercept=intercept, prop=prop)
    if used.sum() < 2 or not boot.n:
        return fit
    # Resampling seeds = weighting each seed's sufficient statistics by its multiplicity.
    S = int(used.sum())
    counts_BxS = boot.rng.multinomial(S, np.full(S, 1 / S), size=boot.n)
    bs, bi, bp = (percentile_ci(b, boot.confidence) for b in _line_stats(counts_BxS @ stats_Sx5[used]))
    return dataclasses.replace(fit, slope_ci=bs, intercept_ci=bi, prop_ci=bp)


@dataclass(frozen=True)
class AfterMemorization(Record):
    """after_memorization of one cell (`K`, its task.K): its seeds, those that memorized first and among
    them those that acquired ICL later, when they memorized, ICL's highest accuracy after, the acquired."""

    K: int | None
    seeds: int
    memorized_first: int
    acquired_after: int
    t_mem_range: list | None
    max_icl_after: float | None
    acquired: int


def after_memorization(
    t_icl_S, iwl_acc_SxT, icl_acc_SxT, steps_T, level: float = 0.9, K: int | None = None
) -> AfterMemorization:
    """Whether memorization ends the race, per seed of one cell: t_mem = the first evaluation with IWL
    accuracy above `level`; a seed *memorized first* when t_mem comes before its t_ICL (or it never
    acquired ICL): the seeds that train.settle_iwl = level would settle. Counts those, those among them
    that acquired ICL later (each one a loss of the bet), and ICL's highest accuracy after t_mem."""
    t_icl = np.asarray(t_icl_S)
    steps = np.asarray(steps_T)
    t_mem = first_passage(iwl_acc_SxT, steps, level)
    first = (t_mem >= 0) & ((t_icl < 0) | (t_mem < t_icl))
    after = np.where(steps[None, :] >= t_mem[:, None], np.asarray(icl_acc_SxT, float), np.nan)[first]
    return AfterMemorization(
        K,
        int(t_icl.size),
        int(first.sum()),
        int(np.sum(first & (t_icl >= 0))),
        [int(t_mem[first].min()), int(t_mem[first].max())] if first.any() else None,
        float(np.nanmax(after)) if after.size and np.isfinite(after).any() else None,
        int(np.sum(t_icl >= 0)),
    )
