"""The scale bridge (issue 25): does a learning rate stand in for the paper's lr 0.01 at a given width?

In gradient-flow time the clock of training is steps x lr, so t_ICL x lr is the same at every lr that is
small enough for SGD to follow the flow. The *bridge lr* of a width is the largest lr whose t_ICL x lr
agrees with the smallest lr's (the paper's 0.01), and that trains stably: no diverged seed and no seed
that acquires ICL at K = infinity and then falls for good (a collapse; `outcome.classify`'s transient).
Agreement: the bootstrap CI of the ratio of the two Kaplan-Meier medians of t_ICL x lr contains 1.

Numbers per lr rest on the seeds of the cells at that lr (diverged ones excluded, censored ones kept):
the KM median of t_ICL with a percentile bootstrap CI over seeds, the same scaled by lr, and the median
rise fraction (t_ICL - t_icl60) / t_ICL with a bootstrap CI (analysis/regime.py: <= 0.10 is abrupt).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from icl_race.analysis import survival as sv
from icl_race.analysis.regime import RISE_BOUND, rise_fraction
from icl_race.analysis.threshold import km_median_boot, percentile_ci

METHOD = ("Kaplan-Meier median of t_ICL (censored seeds kept at the budget, diverged seeds excluded), "
          "percentile bootstrap over seeds; ratio CI from independent bootstraps of the two lrs; rise "
          "fraction median with a percentile bootstrap")


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

    def text(self) -> str:
        rows = ["| lr | seeds | acquired | diverged | collapsed | KM median t_ICL (95% CI) | t_ICL x lr (95% CI) | "
                "ratio to lr " + f"{self.reference_lr:g} (95% CI) | rise fraction (95% CI) | agrees, stable |",
                "|---|---:|---:|---:|---:|---|---|---|---|---|"]
        for c in self.cells:
            rows.append(f"| {c.lr:g} | {c.seeds} | {c.acquired} | {c.diverged} | {c.collapsed} | "
                        f"{_ci(c.t_icl, c.t_icl_ci, ',.0f')} | {_ci(c.t_lr, c.t_lr_ci, ',.0f')} | "
                        f"{_ci(c.ratio, c.ratio_ci, '.2f')} | {_ci(c.rise, c.rise_ci, '.3f')} | "
                        f"{'yes' if c.agrees else 'no'}, {'yes' if c.stable else 'no'} |")
        abrupt = [c.lr for c in self.cells if c.rise is not None and c.rise <= RISE_BOUND]
        width = f"width {self.width}: " if self.width else ""
        return "\n".join([*rows, "", f"{width}bridge lr {self.bridge_lr:g} (the largest lr whose t_ICL x lr ratio "
                          f"to lr {self.reference_lr:g} has a CI containing 1, with no diverged or collapsed seed); "
                          f"abrupt (median rise fraction <= {RISE_BOUND}) at lr {', '.join(f'{x:g}' for x in abrupt) or 'none'}",
                          f"Method: {self.method}."])


def _ci(value, ci, fmt: str) -> str:
    if value is None:
        return "not reached"
    lo, hi = ci
    return f"{value:{fmt}} [{'?' if lo is None else format(lo, fmt)}, {'?' if hi is None else format(hi, fmt)}]"


def _median_ci(x: np.ndarray, n_boot: int, rng: np.random.Generator):
    x = x[np.isfinite(x)]
    if x.size == 0:
        return None, (None, None)
    boots = np.median(rng.choice(x, (n_boot, x.size)), axis=1)
    return float(np.median(x)), tuple(percentile_ci(boots, 0.95))


def lr_bridge(lr_C, t_icl_C, t_start_C, censor_at_C, diverged_C, collapsed_C, width: int | None = None,
              n_boot: int = 2000, seed: int = 0) -> LrBridge:
    """One entry per lr (cells of one lr pooled beforehand): t_ICL per seed (-1 censored), the first
    passage of the rise's lowest level per seed, the censoring step (a scalar, or per seed when cells
    of other budgets are pooled), per-seed diverged and collapsed flags. Each lr draws its bootstrap from a SeedSequence of (seed, the lr in units of 1e-9), so adding
    or reordering lrs changes no other lr's numbers."""
    order = np.argsort(lr_C)[::-1]
    boots, medians = {}, {}
    for c in order:
        rng = np.random.default_rng(np.random.SeedSequence([seed, round(float(lr_C[c]) * 1e9)]))
        keep = ~np.asarray(diverged_C[c], bool)
        censor_at = np.broadcast_to(np.asarray(censor_at_C[c], float), keep.shape)[keep]
        times, observed = sv.censored_times(np.asarray(t_icl_C[c])[keep], censor_at)
        medians[c] = sv.km_median(times, observed)
        boots[c] = (km_median_boot(times, observed, n_boot, rng), rng)
    ref = order[-1]
    cells = []
    for c in order:
        lr, (b, rng) = float(lr_C[c]), boots[c]
        keep = ~np.asarray(diverged_C[c], bool)
        t = np.asarray(t_icl_C[c])[keep]
        med = medians[c] if np.isfinite(medians[c]) else None
        ci = tuple(percentile_ci(b[np.isfinite(b)], 0.95)) if med is not None else (None, None)
        ratio, ratio_ci = None, (None, None)
        if med is not None and np.isfinite(medians[ref]):
            scale = lr / float(lr_C[ref])
            r_boot = b * scale / boots[ref][0]
            ratio = med * scale / medians[ref]
            ratio_ci = tuple(percentile_ci(r_boot[np.isfinite(r_boot)], 0.95))
        rise, rise_ci = _median_ci(rise_fraction(t, np.asarray(t_start_C[c])[keep]), n_boot, rng)
        cells.append(LrCell(lr=lr, seeds=int(keep.sum()), acquired=int(np.sum(t >= 0)), diverged=int((~keep).sum()),
                            collapsed=int(np.sum(np.asarray(collapsed_C[c], bool) & keep)), t_icl=med, t_icl_ci=ci,
                            t_lr=None if med is None else med * lr,
                            t_lr_ci=tuple(None if v is None else v * lr for v in ci),
                            ratio=ratio, ratio_ci=ratio_ci, rise=rise, rise_ci=rise_ci))
    bridge = next((c.lr for c in cells if c.agrees and c.stable), float(lr_C[ref]))
    return LrBridge(width=width, reference_lr=float(lr_C[ref]), cells=tuple(cells), bridge_lr=bridge)
