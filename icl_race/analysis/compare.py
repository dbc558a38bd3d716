"""Two ensembles side by side: the ratio of their Kaplan-Meier medians with a bootstrap CI, the
log-rank test of equal survival, and the one rule that reads the two as a verdict (`decide`). Pure
numpy/scipy on (times, observed) arrays.

`decide` is the package's one verdict on whether two groups differ in when they reach an event: a
difference only where the median ratio's CI excludes 1 and the log-rank test rejects equal survival at
`ALPHA`, in the direction the CI gives; "no clear difference" otherwise, with which test (if either) saw
one. Every report that compares groups (`icl-race compare`, a sweep's balanced-vs-standard cells and
its levers) reads its verdicts from it.

`median_ratio` is the package's one ratio of medians, with one CI rule (`ratio_of_boots`: `METHOD`);
what differs between its callers is only which seeds each replicate resamples, the generators they pass
(`analysis.draws`). Unrelated ensembles (`icl-race compare`: other runs, other configs, other seed ids)
resample each one's seeds independently (stratified), each group from its own child of the root, so a
comparison gives the same CI whatever other groups it is computed with. The conditions of one study
(`race_summary.summarize_independence`: cells of one sweep, the same seed ids) draw both sides from the same
root, so a replicate resamples the same seed positions on both sides: the ratio is paired by seed id.

`fraction_difference`: the difference of two acquisition fractions per cell and its mean over the cells
(balanced vs standard contexts), with CIs from binomial resampling of each cell.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

from icl_race.analysis.draws import Bootstrap, Draws, generator
from icl_race.analysis.median_n import km_median_boot
from icl_race.analysis.record import Record
from icl_race.analysis.survival import LogRank, km_median, logrank
from icl_race.analysis.threshold import percentile_ci

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


ALPHA = 0.05  # the level at which the log-rank test is read; the ratio's CI is at its own confidence (95%)

Reason = Literal["both", "ci only", "log-rank only", "neither", "no ratio", "no ci"]
REASONS: dict[str, str] = {
    "both": "the median ratio's CI excludes 1 and the log-rank test rejects equal survival",
    "ci only": "the median ratio's CI excludes 1 but the log-rank test does not reject equal survival",
    "log-rank only": "the log-rank test rejects equal survival but the median ratio's CI includes 1",
    "neither": "the median ratio's CI includes 1 and the log-rank test does not reject equal survival",
    "no ratio": "a median is not reached, so there is no median ratio",
    "no ci": "the median ratio has no CI (fewer than 10 bootstrap replicates)",
}


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Which of two groups reaches the event sooner, or neither (no clear difference), and why (`REASONS`)."""

    sooner: Literal["reference", "other"] | None  # None: no clear difference
    reason: Reason
    ci_excludes_one: bool | None  # None: no ratio or no CI
    logrank_rejects: bool | None  # p <= alpha; None: no test (neither group has an event)
    alpha: float

    @property
    def disagree(self) -> bool:
        """The two tests point different ways: one sees a difference, the other does not."""
        return self.reason in ("ci only", "log-rank only")


def excludes_one(ratio: MedianRatio) -> bool | None:
    """Whether the ratio's CI lies wholly above or below 1 (an open end counts as beyond that side);
    None without a ratio or a CI."""
    if ratio.ratio is None or ratio.n_boot < 10:
        return None
    lo, hi = ratio.ci
    return (lo is not None and lo > 1.0) or (hi is not None and hi < 1.0)


def decide(ratio: MedianRatio, test: LogRank, alpha: float = ALPHA) -> Verdict:
    """The verdict on other against reference (ratio = median(other) / median(reference)): a group is
    sooner only where the ratio's CI excludes 1 and the log-rank p <= alpha; never from a point estimate."""
    rejects = None if test.p is None else bool(test.p <= alpha)
    ci = excludes_one(ratio)
    if ratio.ratio is None or ci is None:
        return Verdict(None, "no ratio" if ratio.ratio is None else "no ci", None, rejects, alpha)
    if ci and rejects:
        hi = ratio.ci[1]
        return Verdict("other" if hi is not None and hi < 1.0 else "reference", "both", True, True, alpha)
    reason: Reason = "ci only" if ci else "log-rank only" if rejects else "neither"
    return Verdict(None, reason, ci, rejects, alpha)


@dataclasses.dataclass(frozen=True)
class PairStats:
    ratio: MedianRatio
    logrank: LogRank
    verdict: Verdict  # `decide(ratio, logrank)`


def pair_stats(
    reference: tuple[np.ndarray, np.ndarray],
    other: tuple[np.ndarray, np.ndarray],
    bootstraps: tuple[Bootstrap, Bootstrap],
) -> PairStats:
    """other against reference, two (times, observed) samples: the median ratio (one bootstrap each),
    the log-rank test and their verdict."""
    ratio, test = median_ratio(reference, other, bootstraps), logrank(*reference, *other)
    return PairStats(ratio, test, decide(ratio, test))


def median_ratio(
    reference: tuple[np.ndarray, np.ndarray],
    other: tuple[np.ndarray, np.ndarray],
    bootstraps: tuple[Bootstrap, Bootstrap],
) -> MedianRatio:
    """Ratio of the KM medians of two (times, observed) samples, CI by `METHOD` at the first bootstrap's
    confidence, each sample resampled by its own bootstrap."""
    boots = [km_median_boot(t, o, boot) for (t, o), boot in zip((reference, other), bootstraps)]
    return ratio_of_boots(km_median(*reference), km_median(*other), boots[0], boots[1], bootstraps[0].confidence)


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


def compare_to_reference(samples: list[tuple[np.ndarray, np.ndarray]], draws: Draws) -> list[PairStats]:
    """Every sample after the first against the first: median ratio (bootstrap seeded by
    SeedSequence(draws.seed), one child per sample: `draws.generator(seed, child=i)`) and log-rank test."""
    # Fresh generators per pair: the reference's resamples are the same in every pair.
    boot = lambda i: Bootstrap(draws.n_boot, generator(draws.seed, child=i))
    return [pair_stats(samples[0], s, (boot(0), boot(i))) for i, s in enumerate(samples[1:], start=1)]


@dataclasses.dataclass(frozen=True)
class CellDifference(Record):
    p1: float
    p2: float
    diff: float
    diff_ci: list


@dataclasses.dataclass(frozen=True)
class FractionDifference(Record):
    """p1 - p2 per cell and over the cells, with bootstrap CIs (`fraction_difference`)."""

    per_cell: list[CellDifference]
    mean_diff: float
    mean_diff_ci: list
    confidence: float
    n_boot: int


def fraction_difference(
    k1: np.ndarray, n1: np.ndarray, k2: np.ndarray, n2: np.ndarray, bootstrap: Bootstrap
) -> FractionDifference:
    """p1 - p2 per cell and averaged over cells (e.g. standard minus balanced, per K)."""
    n_boot, rng, confidence = bootstrap.n, bootstrap.rng, bootstrap.confidence
    k1, n1, k2, n2 = (np.asarray(v, int) for v in (k1, n1, k2, n2))
    p1, p2 = k1 / n1, k2 / n2
    b1 = rng.binomial(n1, p1, size=(n_boot, n1.size)) / n1
    b2 = rng.binomial(n2, p2, size=(n_boot, n2.size)) / n2
    diffs = b1 - b2
    return FractionDifference(
        [
            CellDifference(float(a), float(b), float(a - b), percentile_ci(d, confidence))
            for a, b, d in zip(p1, p2, diffs.T)
        ],
        float(np.mean(p1 - p2)),
        percentile_ci(diffs.mean(1), confidence),
        confidence,
        n_boot,
    )
