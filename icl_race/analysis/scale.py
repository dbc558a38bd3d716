"""The scale bridge (issue 25): does a learning rate stand in for the paper's lr 0.01 at a given width?

In gradient-flow time the clock of training is steps x lr, so t_ICL x lr is the same at every lr that is
small enough for SGD to follow the flow. The *bridge lr* of a width is the largest lr whose t_ICL x lr
agrees with the smallest lr's (the paper's 0.01), and that trains stably: no diverged seed and no seed
that acquires ICL at K = infinity and then falls for good (a collapse: `outcome.classify`'s lasting fall, transient or recovered).
Agreement: the bootstrap CI of the ratio of the two Kaplan-Meier medians of t_ICL x lr contains 1.

Numbers per lr rest on the seeds of the cells at that lr (diverged ones excluded, censored ones kept):
the KM median of t_ICL with a percentile bootstrap CI over seeds, the same scaled by lr, and the median
rise fraction (t_ICL - t_icl60) / t_ICL with a bootstrap CI (analysis/regime.py: <= 0.10 is abrupt).
Their tables: `icl_race.studies.scale`.

K*(N) and its slope (`kstar_slope`, issue 54 item 6): log10 K* on log10 N by least squares over K* from any
source (a design's posterior, a grid's logistic fit, an interval of a run no longer on disk), each with
replicates of its own; `icl_race.studies.design`'s `slope` reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from icl_race.analysis import survival as sv
from icl_race.analysis.draws import Bootstrap, Draws, generator
from icl_race.analysis.median_n import Lines, km_median_boot, median_vs_N
from icl_race.analysis.record import NOT_JSON, NotFitted, Record
from icl_race.analysis.regime import RISE_BOUND, rise_fraction
from icl_race.analysis.threshold import Slope, median_ci, percentile_ci, power_law_slope

METHOD = (
    "Kaplan-Meier median of t_ICL (censored seeds kept at the budget, diverged seeds excluded), "
    "percentile bootstrap over seeds; ratio CI from independent bootstraps of the two lrs; rise "
    "fraction median with a percentile bootstrap"
)


@dataclass(frozen=True)
class LrCell:
    lr: float
    seeds: int  # not diverged
    acquired: int
    diverged: int
    collapsed: int  # acquired ICL, then a lasting fall (at K = infinity nothing competes: a collapse)
    t_icl: float | None  # KM median, steps
    t_icl_ci: tuple[float | None, float | None]
    t_lr: float | None  # t_icl x lr
    t_lr_ci: tuple[float | None, float | None]
    ratio: float | None  # t_lr over the reference lr's
    ratio_ci: tuple[float | None, float | None]
    rise: float | None  # median rise fraction of the acquired seeds
    rise_ci: tuple[float | None, float | None]

    @property
    def stable(self) -> bool:
        return self.diverged == 0 and self.collapsed == 0

    @property
    def agrees(self) -> bool:
        lo, hi = self.ratio_ci
        return lo is not None and hi is not None and lo <= 1.0 <= hi


@dataclass(frozen=True)
class LrBridge:
    width: int | None
    reference_lr: float
    cells: tuple[LrCell, ...]  # largest lr first
    bridge_lr: float  # the largest lr that agrees with the reference and is stable (the reference at worst)
    method: str = METHOD


def _pair(ci) -> tuple[float | None, float | None]:
    """A CI (`threshold.percentile_ci`'s list, or None) as the pair the records hold."""
    return (None, None) if ci is None else (ci[0], ci[1])


def lr_bridge(
    lr_C,
    t_icl_C,
    t_start_C,
    censor_at_C,
    diverged_C,
    collapsed_C,
    draws: Draws,
    width: int | None = None,
) -> LrBridge:
    """One entry per lr (cells of one lr pooled beforehand): t_ICL per seed (-1 censored), the first
    passage of the rise's lowest level per seed, the censoring step (a scalar, or per seed when cells
    of other budgets are pooled), per-seed diverged and collapsed flags. Each lr draws its bootstrap from
    `generator((draws.seed, the lr in units of 1e-9))`, so adding or reordering lrs changes no other lr's
    numbers."""

    def km(c):
        """Entry c's kept seeds, the KM median of their t_ICL (nan: not reached), its replicates and the
        bootstrap that drew them (the rise fraction's median draws from it next)."""
        boot = Bootstrap(draws.n_boot, generator((draws.seed, round(float(lr_C[c]) * 1e9))))
        keep = ~np.asarray(diverged_C[c], bool)
        censor_at = np.broadcast_to(np.asarray(censor_at_C[c], float), keep.shape)[keep]
        times, observed = sv.censored_times(np.asarray(t_icl_C[c])[keep], censor_at)
        return keep, sv.km_median(times, observed), km_median_boot(times, observed, boot), boot

    order = np.argsort(lr_C)[::-1]
    ref = order[-1]
    _, ref_median, ref_boot, _ = km(ref)
    cells = []
    for c in order:
        lr, (keep, median, b, boot) = float(lr_C[c]), km(c)
        t = np.asarray(t_icl_C[c])[keep]
        med = median if np.isfinite(median) else None
        ci = _pair(percentile_ci(b, 0.95)) if med is not None else (None, None)
        ratio: float | None = None
        ratio_ci: tuple[float | None, float | None] = (None, None)
        if med is not None and np.isfinite(ref_median):
            scale = lr / float(lr_C[ref])
            ratio = med * scale / ref_median
            ratio_ci = _pair(percentile_ci(b * scale / ref_boot, 0.95))
        rise = median_ci(rise_fraction(t, np.asarray(t_start_C[c])[keep]), boot)
        cells.append(
            LrCell(
                lr=lr,
                seeds=int(keep.sum()),
                acquired=int(np.sum(t >= 0)),
                diverged=int((~keep).sum()),
                collapsed=int(np.sum(np.asarray(collapsed_C[c], bool) & keep)),
                t_icl=med,
                t_icl_ci=ci,
                t_lr=None if med is None else med * lr,
                t_lr_ci=(None if ci[0] is None else ci[0] * lr, None if ci[1] is None else ci[1] * lr),
                ratio=ratio,
                ratio_ci=ratio_ci,
                rise=rise.median,
                rise_ci=_pair(rise.ci),
            )
        )
    bridge = next((c.lr for c in cells if c.agrees and c.stable), float(lr_C[ref]))
    return LrBridge(width=width, reference_lr=float(lr_C[ref]), cells=tuple(cells), bridge_lr=bridge)


@dataclass(frozen=True)
class PerN:
    N: int
    seeds: int
    acquired: int
    t_icl: float | None  # KM median
    t_icl_ci: tuple[float | None, float | None]
    rise: float | None  # median rise fraction of the acquired seeds
    rise_ci: tuple[float | None, float | None]

    @property
    def abrupt(self) -> bool:
        return self.rise is not None and self.rise <= RISE_BOUND


@dataclass(frozen=True)
class WidthFit:
    """t_ICL(N) at K = infinity for one (width, lr), fitted over the N where ICL is abrupt."""

    width: int
    lr: float
    per_N: tuple[PerN, ...]
    fitted_N: tuple[int, ...]  # the abrupt N with a reached median
    # The fit: None (and CIs (None, None)) when there is none, with the reason why.
    exponent: float | None = None  # log-log slope of the KM median on N
    exponent_ci: tuple[float | None, float | None] = (None, None)
    slope: float | None = None  # linear fit: steps per token
    slope_ci: tuple[float | None, float | None] = (None, None)
    intercept: float | None = None
    intercept_ci: tuple[float | None, float | None] = (None, None)
    quadratic: float | None = None  # quadratic term in standardised N (>= 3 N): a CI containing 0 is a straight line
    quadratic_ci: tuple[float | None, float | None] = (None, None)
    reason: str = ""  # why there is no fit


@dataclass(frozen=True)
class WidthAxis:
    fits: tuple[WidthFit, ...]  # by width, then lr
    method: str = (
        "per N: Kaplan-Meier median t_ICL with a percentile bootstrap over seeds and the median rise "
        f"fraction (abrupt: <= {RISE_BOUND}); per (width, lr): least squares of log10 median on log10 N "
        "(exponent), of the median on N (slope, intercept) and a quadratic term, over the abrupt N, CIs "
        "from the per-N bootstraps"
    )


def width_axis(width_C, lr_C, N_C, t_icl_C, t_start_C, censor_at_C, diverged_C, draws: Draws) -> WidthAxis:
    """One entry per cell (K = infinity; cells of one (width, lr, N) pooled beforehand): t_ICL and the rise's
    first passage per seed, the censoring step (scalar or per seed), diverged flags. Each (width, lr)
    draws its bootstrap from `generator((draws.seed, width, lr in 1e-9))`, so other groups change none of
    its numbers."""
    groups: dict[tuple[int, float], list[int]] = {}
    for c, key in enumerate(zip(width_C, lr_C)):
        groups.setdefault((int(key[0]), float(key[1])), []).append(c)
    fits = []
    for (width, lr), cells in sorted(groups.items()):
        boot = Bootstrap(draws.n_boot, generator((draws.seed, width, round(lr * 1e9))))
        data = []  # per cell, by N: N, (times, observed) of its kept seeds, the median rise fraction
        for c in sorted(cells, key=lambda c: N_C[c]):
            keep = ~np.asarray(diverged_C[c], bool)
            t = np.asarray(t_icl_C[c])[keep]
            censor = np.broadcast_to(np.asarray(censor_at_C[c], float), keep.shape)[keep]
            rise = median_ci(rise_fraction(t, np.asarray(t_start_C[c])[keep]), boot)
            data.append((int(N_C[c]), *sv.censored_times(t, censor), rise))
        by_N = lambda rows: median_vs_N(
            np.array([d[0] for d in rows]), [d[1] for d in rows], [d[2] for d in rows], boot
        )
        per_N = tuple(
            PerN(
                N=p.N,
                seeds=p.n,
                acquired=p.acquired,
                t_icl=p.median,
                t_icl_ci=_pair(p.median_ci) if p.median is not None else (None, None),
                rise=d[3].median,
                rise_ci=_pair(d[3].ci),
            )
            for p, d in zip(by_N(data).per_N, data)
        )
        fit_idx = [i for i, p in enumerate(per_N) if p.abrupt and p.t_icl is not None]
        fitted = tuple(per_N[i].N for i in fit_idx)
        if len(set(fitted)) < 2:
            fits.append(
                WidthFit(width, lr, per_N, fitted, reason="needs an abrupt, reached median at >= 2 values of N")
            )
            continue
        sub = by_N([data[i] for i in fit_idx])
        lines = sub.fit
        assert isinstance(lines, Lines)  # >= 2 distinct N with a reached median: the lines are fitted
        lin, log, quad = lines.linear, lines.loglog, lines.quadratic
        assert isinstance(lin, Slope) and isinstance(log, Slope)
        fits.append(
            WidthFit(
                width,
                lr,
                per_N,
                fitted,
                log.slope,
                _pair(log.slope_ci),
                lin.slope,
                _pair(lin.slope_ci),
                lin.intercept,
                _pair(lin.intercept_ci),
                None if quad is None else quad.c2,
                _pair(None if quad is None else quad.c2_ci),
            )
        )
    return WidthAxis(tuple(fits))


KSTAR_METHOD = (
    "least-squares slope of log10 K* on log10 N; its interval from replicates of each N's log10 K*, "
    "independent across N: a K* design's posterior draws, a grid's seed bootstrap of its logistic fit, or "
    "for an interval given by hand a two-piece normal whose sides put each end at its quantile"
)


@dataclass(frozen=True)
class KStarAtN(Record):
    """One N's K* with its interval and what it rests on (`source`), and its replicates of log10 K*."""

    N: int
    kstar: float
    ci: list[float]
    source: str
    boot_log10_kstar: np.ndarray = field(metadata=NOT_JSON)


@dataclass(frozen=True)
class KStarSlope(Record):
    """K*(N) from several sources and the slope of log10 K* on log10 N (`kstar_slope`)."""

    points: list[KStarAtN]
    fit: Slope | NotFitted
    draws: int  # replicates per N
    seed: int
    method: str = KSTAR_METHOD


def interval_draws(log10_kstar: float, log10_ci, confidence: float, rng: np.random.Generator, n: int) -> np.ndarray:
    """n draws of log10 K* that reproduce an interval given by hand: a two-piece normal at log10_kstar whose
    lower and upper sides have the ends of `log10_ci` at their (1 -+ confidence) / 2 quantiles. On the three
    width-512 grids (scale/README.md item 4) it gives the slope interval their seed bootstrap gave within
    0.01 (design/README.md)."""
    z = stats.norm.ppf((1 + confidence) / 2)
    lo, hi = (log10_kstar - log10_ci[0]) / z, (log10_ci[1] - log10_kstar) / z
    u = rng.standard_normal(n)
    return log10_kstar + np.where(u < 0, lo, hi) * u


def kstar_slope(points: list[KStarAtN], draws: int, seed: int, confidence: float = 0.95) -> KStarSlope:
    """The slope of log10 K* on log10 N over `points` (two at one N are two measurements of it)."""
    x = np.log10([p.N for p in points])
    y = np.log10([p.kstar for p in points])
    boot = np.stack([p.boot_log10_kstar for p in points]) if points else None
    return KStarSlope(points, power_law_slope(x, y, boot, confidence), draws, seed)
