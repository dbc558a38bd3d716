"""Two ensembles side by side: the ratio of their Kaplan-Meier medians with a bootstrap CI, and the
log-rank test of equal survival. Pure numpy/scipy on (times, observed) arrays.

The ensembles are unrelated (other runs, other configs, other seed ids), so the bootstrap resamples each
one's seeds independently (stratified), not by shared seed position as `race.median_ratio` does for the
cells of one sweep. Each group's resamples draw from its own child of one `numpy.random.SeedSequence`,
so a comparison gives the same CI whatever other groups it is computed with.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from icl_race.analysis.survival import LogRank, km_median, logrank
from icl_race.analysis.threshold import km_median_boot, percentile_ci

METHOD = ("stratified percentile bootstrap over seeds: each ensemble's seeds resampled with replacement, "
          "Kaplan-Meier medians recomputed (censored seeds kept), the ratio of each replicate pair")


@dataclasses.dataclass(frozen=True)
class MedianRatio:
    """median(other) / median(reference) of the Kaplan-Meier medians; None where a median is not reached."""

    ratio: float | None
    ci: tuple[float | None, float | None]  # None ends: fewer than 10 replicates with both medians reached
    confidence: float
    n_boot: int
    undefined: int  # replicates left out of the CI: a resample's median not reached
    method: str = METHOD


@dataclasses.dataclass(frozen=True)
class PairStats:
    ratio: MedianRatio
    logrank: LogRank


def median_ratio(reference: tuple[np.ndarray, np.ndarray], other: tuple[np.ndarray, np.ndarray], n_boot: int,
                 rngs: tuple[np.random.Generator, np.random.Generator], confidence: float = 0.95) -> MedianRatio:
    """Ratio of the KM medians of two (times, observed) samples, CI by `METHOD` with one generator each."""
    meds = [km_median(*s) for s in (reference, other)]
    ratio = meds[1] / meds[0] if all(np.isfinite(m) for m in meds) else None
    boots = [km_median_boot(np.asarray(t, float), np.asarray(o, bool), n_boot, rng)
             for (t, o), rng in zip((reference, other), rngs)]
    with np.errstate(divide="ignore", invalid="ignore"):
        reps = boots[1] / boots[0]
    ci = percentile_ci(reps, confidence)
    return MedianRatio(None if ratio is None else float(ratio), (ci[0], ci[1]), confidence, n_boot,
                       int(np.sum(~np.isfinite(reps))))


def compare_to_reference(samples: list[tuple[np.ndarray, np.ndarray]], n_boot: int, seed: int,
                         confidence: float = 0.95) -> list[PairStats]:
    """Every sample after the first against the first: median ratio (bootstrap seeded by
    SeedSequence(seed), one child per sample) and log-rank test."""
    children = np.random.SeedSequence(seed).spawn(len(samples))
    out = []
    for i, s in enumerate(samples[1:], start=1):
        # Fresh generators per pair: the reference's resamples are the same in every pair.
        rngs = (np.random.default_rng(children[0]), np.random.default_rng(children[i]))
        out.append(PairStats(median_ratio(samples[0], s, n_boot, rngs, confidence), logrank(*samples[0], *s)))
    return out
