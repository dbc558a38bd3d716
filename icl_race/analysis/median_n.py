"""Median t_ICL against N at K = infinity (Fig 6B): the Kaplan-Meier median per N (censored seeds kept), the
least-squares line against N, a quadratic term (linearity check, >= 3 values of N) and the log-log exponent,
with CIs from a seed bootstrap of the KM medians (`analysis.draws.Bootstrap`: the caller's draws).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from icl_race.analysis.draws import Bootstrap
from icl_race.analysis.record import INLINE, OMIT_NONE, Fitted, NotFitted, Record
from icl_race.analysis.survival import km_median
from icl_race.analysis.threshold import Slope, percentile_ci, power_law_slope


def km_median_boot(times, observed, bootstrap: Bootstrap) -> np.ndarray:
    """Kaplan-Meier medians of bootstrap.n resamples of the seeds (nan where a resample's median is not reached)."""
    return bootstrap.replicates(km_median, np.asarray(times, float), np.asarray(observed, bool))


@dataclasses.dataclass(frozen=True)
class MedianAtN(Record):
    N: int
    median: float | None
    median_ci: list
    n: int
    acquired: int


@dataclasses.dataclass(frozen=True)
class Quadratic(Record):
    c2: float
    c2_ci: list
    units: str


@dataclasses.dataclass(frozen=True)
class Lines(Fitted):
    """Median t_ICL on N (linear), log10 median on log10 N (loglog) and, with >= 3 N, a quadratic term."""

    linear: Slope | NotFitted
    loglog: Slope | NotFitted
    quadratic: Quadratic | None = dataclasses.field(default=None, metadata=OMIT_NONE)


@dataclasses.dataclass(frozen=True)
class MedianVsN(Record):
    """KM median t_ICL per N and its lines (`median_vs_N`), or why they were not fitted."""

    per_N: list[MedianAtN]
    confidence: float
    n_boot: int
    excluded_N: list[int]
    fit: Lines | NotFitted = dataclasses.field(metadata=INLINE)


def median_vs_N(N: np.ndarray, times: list[np.ndarray], observed: list[np.ndarray], bootstrap: Bootstrap) -> MedianVsN:
    """KM median t_ICL per N and its scaling with N (the module docstring)."""
    n_boot, confidence = bootstrap.n, bootstrap.confidence
    N = np.asarray(N, float)
    med = np.array([km_median(t, o) for t, o in zip(times, observed)])
    boots = [km_median_boot(t, o, bootstrap) for t, o in zip(times, observed)]
    boot = np.reshape(boots, (len(times), n_boot))  # [N, n_boot], [0, n_boot] without an N
    per_n = [
        MedianAtN(
            int(n_), None if not np.isfinite(m) else float(m), percentile_ci(b, confidence), int(len(t)), int(np.sum(o))
        )
        for n_, m, b, t, o in zip(N, med, boot, times, observed)
    ]
    ok = np.isfinite(med)
    head = (per_n, confidence, n_boot, [int(v) for v in N[~ok]])
    # Distinct values: cells that split one N's seeds (ensemble.first_seed) give no slope between them.
    if np.unique(N[ok]).size < 2:
        return MedianVsN(*head, NotFitted("needs a reached median at >= 2 values of N"))
    Nk, mk, bk = N[ok], med[ok], boot[ok]
    linear = power_law_slope(Nk, mk, bk, confidence)
    with np.errstate(all="ignore"):
        loglog = power_law_slope(np.log10(Nk), np.log10(mk), np.log10(bk), confidence)
    quadratic = None
    if Nk.size >= 3:
        # Quadratic term in standardised N: a CI that contains 0 is consistent with a straight line.
        u = (Nk - Nk.mean()) / Nk.std()
        A = np.stack([np.ones_like(u), u, u * u], 1)
        pinv = np.linalg.pinv(A)
        c2 = (pinv @ mk)[2]
        bt = bk.T
        good = np.all(np.isfinite(bt), 1)
        c2b = (bt[good] @ pinv.T)[:, 2]
        quadratic = Quadratic(float(c2), percentile_ci(c2b, confidence), "steps per (sd of N)^2")
    return MedianVsN(*head, Lines(linear, loglog, quadratic))
