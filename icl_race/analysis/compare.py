"""Two ensembles side by side: the ratio of their Kaplan-Meier medians with a bootstrap CI, and the
log-rank test of equal survival. Pure numpy/scipy on (times, observed) arrays.

`median_ratio` is the package's one ratio of medians, with one CI rule (`ratio_of_boots`: `METHOD`);
what differs between its callers is only which seeds each replicate resamples, the generators they pass
(`analysis.draws`). Unrelated ensembles (`icl-race compare`: other runs, other configs, other seed ids)
resample each one's seeds independently (stratified), each group from its own child of the root, so a
comparison gives the same CI whatever other groups it is computed with. The conditions of one study
(`race.summarize_independence`: cells of one sweep, the same seed ids) draw both sides from the same
root, so a replicate resamples the same seed positions on both sides: the ratio is paired by seed id.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from icl_race.analysis.draws import generator
from icl_race.analysis.survival import LogRank, km_median, logrank
from icl_race.analysis.threshold import km_median_boot

METHOD = (
    "stratified percentile bootstrap over seeds: each ensemble's seeds resampled with replacement, "
    "Kaplan-Meier medians recomputed (censored seeds kept), the ratio of each replicate pair; a resampled "
    "median not reached is beyond the censoring time, so its replicate ranks above every ratio (the other "
    "group's median unreached), below every ratio (the reference's), or on the open side of both ends "
    "(both), and a CI end that falls on such a replicate is open (None)"
)


@dataclasses.dataclass(frozen=True)
class MedianRatio:
    """median(other) / median(reference) of the Kaplan-Meier medians; None where a median is not reached."""

    ratio: float | None
    ci: tuple[float | None, float | None]  # None: an open end (beyond what the runs observed), or n_boot < 10
    confidence: float
    n_boot: int
    unreached: int  # replicates in which a resampled median is not reached (kept in the CI, as beyond)
    method: str = METHOD


def open_ended_ci(reference: np.ndarray, other: np.ndarray, confidence: float) -> tuple[float | None, float | None]:
    """The percentile CI of other / reference over paired bootstrap medians (nan: not reached, i.e. beyond
    the censoring time), every replicate kept: one with `other` unreached is +infinity, one with the
    reference unreached is 0, one with both ranks on the open side of each end. An end whose order
    statistics (numpy's linear interpolation) include such a replicate is None; with none of them the ends
    are numpy's percentiles of the ratios."""
    n = reference.size
    if n < 10:
        return None, None
    above, below = np.isnan(other), np.isnan(reference)  # ratio beyond every finite one / under every one
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = other / reference
    finite = ratio[~(above | below)]
    if not finite.size:
        return None, None
    ends: list[float | None] = []
    for pct, open_ in ((50 * (1 - confidence), below), (50 * (1 + confidence), above)):
        q = pct / 100 * (n - 1)
        i = int(np.floor(q))
        rank = np.arange(i, min(i + 1 if q > i else i, n - 1) + 1)  # the order statistics interpolated
        low_side = open_ is below  # the open replicates sort first at the lower end, last at the upper
        k = int(open_.sum())
        if (rank < k).any() if low_side else (rank >= n - k).any():
            ends.append(None)
            continue
        filled = np.where(
            open_,
            finite.min() if low_side else finite.max(),
            np.where(below | above, finite.max() if low_side else finite.min(), ratio),
        )
        ends.append(float(np.percentile(filled, pct)))
    return ends[0], ends[1]


@dataclasses.dataclass(frozen=True)
class PairStats:
    ratio: MedianRatio
    logrank: LogRank


def median_ratio(
    reference: tuple[np.ndarray, np.ndarray],
    other: tuple[np.ndarray, np.ndarray],
    n_boot: int,
    rngs: tuple[np.random.Generator, np.random.Generator],
    confidence: float = 0.95,
) -> MedianRatio:
    """Ratio of the KM medians of two (times, observed) samples, CI by `METHOD` with one generator each."""
    boots = [
        km_median_boot(np.asarray(t, float), np.asarray(o, bool), n_boot, rng)
        for (t, o), rng in zip((reference, other), rngs)
    ]
    return ratio_of_boots(km_median(*reference), km_median(*other), boots[0], boots[1], confidence)


def ratio_of_boots(
    reference_median: float | None,
    other_median: float | None,
    reference_boot: np.ndarray,
    other_boot: np.ndarray,
    confidence: float = 0.95,
) -> MedianRatio:
    """median(other) / median(reference) from the medians (None or nan: not reached) and their bootstrap
    replicates (nan: not reached), CI by `METHOD` (`open_ended_ci`). Without a ratio (a median not reached
    on all the seeds) there is no CI either: nothing to put an interval around."""
    meds = [np.nan if m is None else m for m in (reference_median, other_median)]
    ratio = meds[1] / meds[0] if all(np.isfinite(m) for m in meds) else None
    return MedianRatio(
        None if ratio is None else float(ratio),
        (None, None) if ratio is None else open_ended_ci(reference_boot, other_boot, confidence),
        confidence,
        int(reference_boot.size),
        int(np.sum(np.isnan(reference_boot) | np.isnan(other_boot))),
    )


def compare_to_reference(
    samples: list[tuple[np.ndarray, np.ndarray]], n_boot: int, seed: int, confidence: float = 0.95
) -> list[PairStats]:
    """Every sample after the first against the first: median ratio (bootstrap seeded by
    SeedSequence(seed), one child per sample: `draws.generator(seed, child=i)`) and log-rank test."""
    out = []
    for i, s in enumerate(samples[1:], start=1):
        # Fresh generators per pair: the reference's resamples are the same in every pair.
        rngs = (generator(seed, child=0), generator(seed, child=i))
        out.append(PairStats(median_ratio(samples[0], s, n_boot, rngs, confidence), logrank(*samples[0], *s)))
    return out
