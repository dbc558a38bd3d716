"""A live case of issue 54 item 5: a fixed K* grid and a K* design trained on the same config, side by side
(`Versus`), and fresh seeds that neither arm trained, asked which arm's answer they side with (`FreshCell`).

Each arm predicts how many of n fresh seeds at K acquire: a mixture of binomials over what the arm knows of
the logistic in log10 K. The grid's mixture is over its bootstrap replicates of log10 K* at its fitted slope
(seed ids resampled together where every K holds the same seeds, `analysis.threshold.acquisition_curve`);
the design's is its posterior over (log10 K*, slope), recomputed from its cells. An arm whose answer is
right, with its stated uncertainty, puts the count the fresh seeds gave well inside its predictive range:
a tail probability P(X <= k) or P(X >= k) of a few per cent is evidence against it. At its own K* an arm
predicts about half, whatever its slope, so fresh seeds at each arm's K* test that arm on its own terms.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.special import expit
from scipy.stats import binom

from icl_race.analysis import design as dz
from icl_race.analysis.design_replay import GridSeeds
from icl_race.analysis.record import Record
from icl_race.analysis.survival import proportion_ci


@dataclasses.dataclass(frozen=True)
class Side(Record):
    """One arm of a live case: K* (its estimator's median or fit) and 95% interval, what it spent."""

    kstar: float | None
    ci: list[float | None]
    seeds: int
    seed_steps: int  # as trained: retired seeds count until they retired
    budgets: float


@dataclasses.dataclass(frozen=True)
class Predicted(Record):
    """What one arm predicts for n fresh seeds at one K: the acquiring share (the predictive mean), the
    count it expects, and the predictive probability of a count at most and at least the one observed."""

    p: float
    expected: float
    at_most: float  # P(X <= k)
    at_least: float  # P(X >= k)


@dataclasses.dataclass(frozen=True)
class FreshCell(Record):
    """Fresh seeds at one K: how many acquired (Wilson 95% interval), and each arm's prediction."""

    K: int
    seeds: int
    acquired: int
    ci: list[float]
    seed_ids: list[int]  # the lowest and highest id
    grid: Predicted | None  # None: the grid has no K* fitted
    design: Predicted


@dataclasses.dataclass(frozen=True)
class Versus(Record):
    """A live case: the grid's logistic fit (analysis.threshold) beside the design's posterior (analysis.design,
    recomputed from its cells), the design's cells' logistic fit, and fresh seeds' cells, if any."""

    name: str
    grid: str
    design_dir: str
    fixed: Side
    fixed_ci_by_seed: list | None  # the grid's interval, its seed ids resampled over every K at once (None: K differ)
    design: Side
    design_fit: Side  # the grid's estimator on the design's cells
    stop: str | None  # design.json's stopping reason
    inside: bool  # the design's K* inside the grid's interval
    no_wider: bool  # its interval (decades) no wider than the grid's
    cost_ratio: float  # the design's seed-steps over the grid's
    n_boot: int
    seed: int
    fresh: list[FreshCell] = dataclasses.field(default_factory=list)


def side(cells: GridSeeds, log10_kstar: float | None, log10_ci) -> Side:
    """An arm's K* and interval (log10 in, K out) with the seeds and seed-steps its cells spent."""
    seeds = sum(a.size for a in cells.acquired)
    steps = int(sum(int(s.sum()) for s in cells.steps))
    up = lambda v: None if v is None else float(10**v)
    return Side(up(log10_kstar), [up(v) for v in log10_ci], seeds, steps, steps / cells.budget if cells.budget else 0.0)


def posterior(cells: GridSeeds, design: dz.KStarDesign) -> dz.Posterior:
    """A K* design's posterior recomputed from its cells' outcomes (design.json's rule)."""
    K = np.concatenate([np.full(a.size, K) for K, a in zip(cells.K, cells.acquired)])
    return dz.posterior(design, K, np.concatenate(cells.acquired))


def predict(x: float, n: int, k: int, b_J: np.ndarray, a_J: np.ndarray, w_J: np.ndarray) -> Predicted:
    """The count of n seeds at x = log10 K that acquire, as a mixture over logistics (location b_j, slope
    a_j, weight w_j) of binomials, and where the observed count k falls in it."""
    keep = w_J > 1e-12 * w_J.max()
    p_J, w_J = expit(a_J[keep] * (x - b_J[keep])), w_J[keep] / w_J[keep].sum()
    pmf = w_J @ binom.pmf(np.arange(n + 1)[None, :], n, p_J[:, None])
    p = float(w_J @ p_J)
    return Predicted(p, n * p, float(pmf[: k + 1].sum()), float(pmf[k:].sum()))


def fresh_cells(fresh: GridSeeds, grid_arm: tuple | None, post: dz.Posterior) -> list[FreshCell]:
    """Each fresh K's count beside the grid's prediction (`grid_arm`: its slope a and its bootstrap replicates
    of log10 K*; None where it has no K* fitted) and the design's (its posterior)."""
    if fresh.seed_ids is None:
        raise ValueError(f"{fresh.name}: fresh seeds need their ids (that no arm trained them is the point)")
    b_LxA, a_LxA = np.meshgrid(post.design.locations(), post.design.slopes(), indexing="ij")
    out = []
    for K, acq, ids in zip(fresh.K, fresh.acquired, fresh.seed_ids):
        x, n, k = float(np.log10(K)), int(acq.size), int(acq.sum())
        by_grid = None
        if grid_arm is not None:
            a, boot = grid_arm[0], np.asarray(grid_arm[1], float)
            boot = boot[np.isfinite(boot)]
            by_grid = predict(x, n, k, boot, np.full(boot.size, a), np.full(boot.size, 1.0))
        by_design = predict(x, n, k, b_LxA.ravel(), a_LxA.ravel(), post.p_LxA.ravel())
        ci = [float(v) for v in proportion_ci(k, n)]
        out.append(FreshCell(int(K), n, k, ci, [int(ids.min()), int(ids.max())], by_grid, by_design))
    return out
