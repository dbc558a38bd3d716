"""The task-diversity threshold K*(N) and the slope of a power law across N (t_ICL against N at
K = infinity: `analysis.median_n`).

Estimators (x = log10 K throughout):
  acquisition_curve   binomial maximum-likelihood logistic P(acquire) = 1/(1 + exp(-a (x - b))) on the
                      per-cell counts of seeds that acquired ICL within the budget; K* = 10^b (the
                      midpoint). A weak ridge (1e-3 on the slope in standardised x) keeps the fit finite
                      when the cells separate perfectly (all 0 below, all 1 above). CI: bootstrap that
                      resamples seeds within each cell (for counts this is a binomial draw per cell), or,
                      where every cell holds the same seed ids, the ids together over every K;
                      percentile interval of log10 K*.
  paper_sigmoid       the reference's estimator (analysis.py:246-331): least squares of every seed's
                      final ICL accuracy on f(x) = d / (1 + exp(-a (x - b))) + c, scipy curve_fit
                      "dogbox", bounds a in [-1, 100], c in [0, 1], d in [0, 100], b in [2, 5] widened to
                      the swept range of x; K* = 10^b. CI: the same seed bootstrap. Fitted only with
                      >= MIN_K_SIGMOID values of K spanning the transition (a cell's mean final accuracy
                      below MID_ACCURACY and one above): four parameters from fewer points, or from
                      points on one side of the rise, are not determined by the data.
  kstar_slope         least-squares slope of log10 K* on log10 N; CI: the slope of every bootstrap
                      replicate (the cells of different N hold different seeds, so their replicates
                      are independent and are paired column by column).
Every bootstrap takes its count, numpy Generator and confidence from the caller (`analysis.draws.Bootstrap`: one
convention for draws), so the results are reproducible and no estimator roots a stream of its own.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize
from scipy.special import expit

from icl_race.analysis.draws import Bootstrap
from icl_race.analysis.record import INLINE, OMIT_NONE, Fitted, NotFitted, Record
from icl_race.analysis.survival import proportion_ci

RIDGE = 1e-3
MIN_K_SIGMOID = 5
MID_ACCURACY = 0.75  # halfway between chance (two labels) and perfect ICL accuracy


def percentile_ci(samples: ArrayLike, confidence: float) -> list[float | None]:
    """The central `confidence` interval of bootstrap samples (non-finite ones dropped); [None, None]
    when fewer than 10 remain, too few for an interval worth quoting."""
    s = np.asarray(samples, float)
    s = s[np.isfinite(s)]
    if s.size < 10:
        return [None, None]
    lo, hi = np.percentile(s, [50 * (1 - confidence), 50 * (1 + confidence)])
    return [float(lo), float(hi)]


@dataclasses.dataclass(frozen=True)
class MedianCI(Record):
    """A median with its bootstrap interval over n values (`median_ci`)."""

    median: float | None
    ci: list
    n: int


def median_ci(x, bootstrap: Bootstrap) -> MedianCI:
    """The median of the finite values of x with a percentile-bootstrap CI over them (`percentile_ci` of
    the medians of bootstrap.n resamples with replacement; scipy.stats.bootstrap's percentile interval with
    the same generator, tests/analysis/test_analysis.py), median None and no CI for none.
    The package's one bootstrap CI of a plain median (a censored time's median: `median_n.km_median_boot`)."""
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return MedianCI(None, [None, None], 0)
    boots = np.median(bootstrap.rng.choice(x, (bootstrap.n, x.size)), axis=1)
    return MedianCI(float(np.median(x)), percentile_ci(boots, bootstrap.confidence), int(x.size))


def logistic_fit(x: np.ndarray, k: np.ndarray, n: np.ndarray, ridge: float = RIDGE, iters: int = 100):
    """Ridge-stabilised binomial logistic regression of k/n on x, vectorised over leading axes of k.
    Returns (a, b) with P = 1/(1 + exp(-a (x - b))); b is nan where the fitted slope is not positive
    or every cell is all-0 or all-1."""
    x = np.asarray(x, float)
    n = np.asarray(n, float)
    k = np.asarray(k, float)
    m, s = x.mean(), x.std() if x.std() > 0 else 1.0
    z = (x - m) / s
    shape = k.shape[:-1]
    g0, g1 = np.zeros(shape), np.zeros(shape)
    for _ in range(iters):
        p = expit(g0[..., None] + g1[..., None] * z)
        r = k - n * p
        w = n * p * (1 - p)
        grad0 = r.sum(-1) - 1e-8 * g0
        grad1 = (r * z).sum(-1) - ridge * g1
        h00 = w.sum(-1) + 1e-8
        h01 = (w * z).sum(-1)
        h11 = (w * z * z).sum(-1) + ridge
        det = h00 * h11 - h01 * h01
        d0 = np.clip((h11 * grad0 - h01 * grad1) / det, -5, 5)
        d1 = np.clip((h00 * grad1 - h01 * grad0) / det, -5, 5)
        g0, g1 = g0 + d0, g1 + d1
        if max(np.abs(d0).max(initial=0), np.abs(d1).max(initial=0)) < 1e-10:
            break
    frac = k / np.maximum(n, 1)
    degenerate = np.all(frac == 0, -1) | np.all(frac == 1, -1)
    ok = (g1 > 1e-6) & ~degenerate
    with np.errstate(all="ignore"):
        a = np.where(ok, g1 / s, np.nan)
        b = np.where(ok, m - g0 * s / g1, np.nan)
    return a, b


@dataclasses.dataclass(frozen=True)
class CellCount(Record):
    """k of n seeds acquired in one cell at log10 K, with the Wilson interval."""

    log10_K: float
    k: int
    n: int
    fraction: float
    ci: list


@dataclasses.dataclass(frozen=True)
class Logistic(Fitted):
    """The logistic fit of the acquired fraction on log10 K (`acquisition_curve`). Both K* estimators give
    the midpoint b = log10 K* of a curve rising with log10 K (slope a), its seed-bootstrap CI and the
    replicates (`boot_log10_kstar`, not in report.json) that a K* slope across N pairs up."""

    a: float
    b: float
    kstar: float
    log10_kstar: float
    log10_kstar_ci: list
    separated: bool
    kstar_ci: list
    boot_failed: int
    bracketed: bool
    boot_log10_kstar: np.ndarray


@dataclasses.dataclass(frozen=True)
class Acquisition(Record):
    """The cells' acquired fractions at one N and their logistic fit, or why it was not done."""

    cells: list[CellCount]
    confidence: float
    n_boot: int
    fit: Logistic | NotFitted = dataclasses.field(metadata=INLINE)
    ci_method: str | None = dataclasses.field(default=None, metadata=OMIT_NONE)  # how the report's CI was drawn


WITHIN_CELLS = "bootstrap percentile, seeds resampled within cells"
BY_SEED_ID = "bootstrap percentile, seed ids resampled together over every K (the cells share their seeds)"


def shared_seeds(outcomes: list[np.ndarray], seed_ids: list | None) -> np.ndarray | None:
    """The outcomes as [K, S] with each seed in one column, where every cell holds the same S distinct seed
    ids (in any order); else None."""
    if seed_ids is None or not outcomes or len(seed_ids) != len(outcomes):
        return None
    first = sorted(seed_ids[0])
    if not first or len(set(first)) != len(first) or any(sorted(ids) != first for ids in seed_ids):
        return None
    cols = [sorted(range(len(ids)), key=ids.__getitem__) for ids in map(list, seed_ids)]
    return np.stack([np.asarray(o, bool)[c] for o, c in zip(outcomes, cols)])


def acquisition_curve(
    x: np.ndarray, outcomes: list[np.ndarray], bootstrap: Bootstrap, seed_ids: list | None = None
) -> Acquisition:
    """Logistic fit of the fraction of seeds that acquired ICL against x = log10 K, and K* with its
    bootstrap CI. `outcomes[c]` holds one bool per seed of cell c (True = acquired), `seed_ids[c]` (optional)
    the seeds' ids. Where every cell holds the same seeds (a grid that trains seeds 0..S-1 at every K), a
    seed's outcomes across K are one threshold of its own, not independent draws: the bootstrap resamples
    the seed ids together over every K (the within-cell bootstrap covers 0.61-0.83 there, the by-seed one
    0.90-0.92: `analyze design shared`). Otherwise it resamples each cell's seeds (binomially). With seed ids
    the result names its method (`ci_method`)."""
    n_boot, rng, confidence = bootstrap.n, bootstrap.rng, bootstrap.confidence
    x = np.asarray(x, float)
    A_KxS = shared_seeds(outcomes, seed_ids)
    k = np.array([int(np.sum(o)) for o in outcomes])
    n = np.array([len(o) for o in outcomes])
    method = None if seed_ids is None else WITHIN_CELLS if A_KxS is None else BY_SEED_ID  # None: the caller's to say
    keep = n > 0
    x, k, n = x[keep], k[keep], n[keep]
    cells = [
        CellCount(float(xi), int(ki), int(ni), ki / ni, list(proportion_ci(ki, ni, confidence)))
        for xi, ki, ni in zip(x, k, n)
    ]
    if x.size < 2 or np.unique(x).size < 2:
        return Acquisition(cells, confidence, n_boot, NotFitted("needs >= 2 values of K"), method)
    a, b = logistic_fit(x, k, n)
    if not np.isfinite(b):
        why = "no increasing acquisition curve (every cell all-0 or all-1, or acquisition does not rise with K)"
        return Acquisition(cells, confidence, n_boot, NotFitted(why), method)
    if A_KxS is None:
        kb = rng.binomial(n, k / n, size=(n_boot, x.size))
    else:  # x and n are whole: every cell holds the same S > 0 seeds
        kb = A_KxS[:, rng.integers(0, A_KxS.shape[1], (n_boot, A_KxS.shape[1]))].sum(2).T
    _, bb = logistic_fit(x, kb, n)
    frac = k / n
    ci = percentile_ci(bb, confidence)
    order = np.argsort(x)
    fs, xs = frac[order], x[order]
    separated = bool(np.all((fs == 0) | (fs == 1)) and np.all(np.diff(fs) >= 0))
    if separated:
        # Every cell is all-0 or all-1: resampling seeds changes nothing, so the bootstrap CI has zero
        # width. All that is known is that K* lies between the last all-0 and the first all-1 cell.
        ci = [float(xs[fs == 0].max()), float(xs[fs == 1].min())]
    a, b, kstar_ci, failed = (
        float(a),
        float(b),
        [None if v is None else 10**v for v in ci],
        int(np.sum(~np.isfinite(bb))),
    )
    fit = Logistic(a, b, 10**b, b, ci, separated, kstar_ci, failed, bool(frac.min() < 0.5 < frac.max()), bb)
    return Acquisition(cells, confidence, n_boot, fit, method)


def _sigmoid4(x, a, b, c, d):
    return d * expit(a * (x - b)) + c


def _sigmoid4_jac(x, a, b, c, d):
    s = expit(a * (x - b))
    g = d * s * (1 - s)
    return np.stack([g * (x - b), -g * a, np.ones_like(x), s], axis=1)


def _fit_sigmoid4(x, ybar, n, b_bounds, p0=None):
    """Least squares over seeds, computed on cell means: sum_i (y_i - f(x_c))^2 equals
    sum_c n_c (ybar_c - f(x_c))^2 plus a constant, so weights n_c give the per-seed fit exactly."""
    if p0 is None:
        p0 = [5.0, float(np.clip(np.median(x), *b_bounds)), 0.5, 0.5]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            popt, _ = optimize.curve_fit(
                _sigmoid4,
                x,
                ybar,
                p0=p0,
                sigma=1 / np.sqrt(n),
                jac=_sigmoid4_jac,
                method="dogbox",
                maxfev=2000,
                bounds=([-1, b_bounds[0], 0, 0], [100, b_bounds[1], 1, 100]),
            )
        except (RuntimeError, ValueError):
            return None
    return popt


@dataclasses.dataclass(frozen=True)
class Sigmoid(Fitted):
    """The paper's 4-parameter sigmoid on final ICL accuracy at one N (`paper_sigmoid`)."""

    a: float
    b: float
    c: float
    d: float
    kstar: float
    log10_kstar: float
    log10_kstar_ci: list
    kstar_ci: list
    b_bounds: list
    at_bound: bool
    n_boot: int
    confidence: float
    n_K: int
    boot_failed: int
    boot_log10_kstar: np.ndarray


def paper_sigmoid(x_cells: np.ndarray, acc: list[np.ndarray], bootstrap: Bootstrap) -> Sigmoid | NotFitted:
    """The reference's K* estimator on final ICL accuracy (`acc[c]`: one value per seed of cell c)."""
    n_boot, rng, confidence = bootstrap.n, bootstrap.rng, bootstrap.confidence
    x_cells = np.asarray(x_cells, float)
    acc = [np.asarray(a, float) for a in acc]
    keep = np.array([a.size > 0 for a in acc])
    x_cells, acc = x_cells[keep], [a for a, k in zip(acc, keep) if k]
    n_K = int(np.unique(x_cells).size)
    if n_K < MIN_K_SIGMOID:
        return NotFitted(f"needs >= {MIN_K_SIGMOID} values of K to fit 4 parameters (has {n_K})")
    means = np.array([a.mean() for a in acc])
    if not (means.min() < MID_ACCURACY < means.max()):
        return NotFitted(
            f"the cells do not span the transition (no K with mean final accuracy on each side of {MID_ACCURACY})"
        )
    b_bounds = (min(2.0, float(x_cells.min())), max(5.0, float(x_cells.max())))
    n = np.array([a.size for a in acc], float)
    popt = _fit_sigmoid4(x_cells, means, n, b_bounds)
    if popt is None:
        return NotFitted("curve_fit did not converge")
    # seed bootstrap within cells: the means of resampled cells
    boot_means = np.stack([a[rng.integers(0, a.size, (n_boot, a.size))].mean(1) for a in acc], 1)  # [B, C]
    boots = np.full(n_boot, np.nan)
    for i in range(n_boot):
        pb = _fit_sigmoid4(x_cells, boot_means[i], n, b_bounds, p0=popt)  # warm start from the point estimate
        if pb is not None:
            boots[i] = pb[1]
    ci = percentile_ci(boots, confidence)
    at_bound = bool(np.isclose(popt[1], b_bounds[0]) or np.isclose(popt[1], b_bounds[1]))
    a, b, c, d = map(float, popt)
    kstar_ci, failed = [None if v is None else 10**v for v in ci], int(np.sum(~np.isfinite(boots)))
    return Sigmoid(a, b, c, d, 10**b, b, ci, kstar_ci, list(b_bounds), at_bound, n_boot, confidence, n_K, failed, boots)


def _ols_slopes(u: np.ndarray, v: np.ndarray):
    """Least-squares slope and intercept of v on u for every row of v (rows must be finite)."""
    uc = u - u.mean()
    slope = (v - v.mean(-1, keepdims=True)) @ uc / (uc @ uc)
    return slope, v.mean(-1) - slope * u.mean()


@dataclasses.dataclass(frozen=True)
class Slope(Fitted):
    """A least-squares line with bootstrap CIs (`power_law_slope`)."""

    slope: float
    intercept: float
    n_points: int
    confidence: float
    r2: float | None = None  # with > 2 points (None there: y constant)
    slope_ci: list | None = dataclasses.field(default=None, metadata=OMIT_NONE)  # the rest: with replicates
    intercept_ci: list | None = dataclasses.field(default=None, metadata=OMIT_NONE)
    boot_used: int | None = dataclasses.field(default=None, metadata=OMIT_NONE)
    boot_dropped: int | None = dataclasses.field(default=None, metadata=OMIT_NONE)

    def to_json(self) -> dict:
        d = super().to_json()
        return d if self.n_points > 2 else {k: v for k, v in d.items() if k != "r2"}  # r2 beyond 2 points


def power_law_slope(
    x: np.ndarray, y: np.ndarray, boot_y: np.ndarray | None = None, confidence: float = 0.95
) -> Slope | NotFitted:
    """Least-squares line y = intercept + slope x (e.g. log10 K* on log10 N), with a bootstrap CI from
    replicates boot_y[i, b] of y[i] (independent across i). Replicates with a non-finite value are
    dropped (counted in boot_dropped)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.size < 2 or np.unique(x).size < 2:
        return NotFitted("needs >= 2 values")
    slope, intercept = _ols_slopes(x, y[None])
    fit = Slope(float(slope[0]), float(intercept[0]), int(x.size), confidence)
    if x.size > 2:
        resid = y - (intercept[0] + slope[0] * x)
        r2 = float(1 - resid @ resid / ((y - y.mean()) @ (y - y.mean()))) if np.ptp(y) > 0 else None
        fit = dataclasses.replace(fit, r2=r2)
    if boot_y is None:
        return fit
    by = np.asarray(boot_y, float).T  # [B, n_points]
    good = np.all(np.isfinite(by), axis=1)
    bs, bi = _ols_slopes(x, by[good]) if good.any() else (np.empty(0), np.empty(0))
    return dataclasses.replace(
        fit,
        slope_ci=percentile_ci(bs, confidence),
        intercept_ci=percentile_ci(bi, confidence),
        boot_used=int(good.sum()),
        boot_dropped=int((~good).sum()),
    )


def interval_verdict(ci: Sequence[float | None] | None, value: float) -> str:
    """'agrees' when value lies in the CI, else 'disagrees'; 'not measured' without a CI."""
    if ci is None or ci[0] is None or ci[1] is None:
        return "not measured (no CI)"
    return "agrees" if ci[0] <= value <= ci[1] else "disagrees"


def sign_verdict(ci: Sequence[float | None] | None, expected_sign: int) -> str:
    """For a directional claim: 'agrees' when the CI excludes 0 on the expected side, 'disagrees' when
    it excludes 0 on the other side, else 'inconclusive (CI includes 0)'."""
    if ci is None or ci[0] is None or ci[1] is None:
        return "not measured (no CI)"
    if ci[0] > 0 or ci[1] < 0:
        return "agrees" if (ci[0] > 0) == (expected_sign > 0) else "disagrees"
    return "inconclusive (CI includes 0)"
