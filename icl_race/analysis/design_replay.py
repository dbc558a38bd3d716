"""Replays of the K* design on a finished grid (issue 54 item 5, "replay"): each seed the design proposes at
K is one of the grid's seeds at the grid's K nearest in log10 K, drawn with replacement, with its outcome
(acquired ICL by the budget or not) and the steps it trained. No training: a grid that keeps every
seed's outcome answers how the design would have done on the same physics, against the full grid's K*.

What it rests on: the grid's K values stand for every K near them (a proposal between two grid K takes
the nearer one's seeds; beyond the grid's ends, the end's), so the replay can be no sharper than the grid's
spacing lets it; the grid's own K* (its logistic fit, `analysis.threshold.acquisition_curve`) is the
reference, not a truth: the error is the design's distance from the grid's answer.

`shared_case` asks what a grid's interval is worth when its K share seed ids (this project's grids train
seeds 0..S-1 at every K, and each seed's outcome is a threshold in K: design/README.md, item 5): fixed
grids on a known logistic, their seeds' outcomes drawn independently per cell or from one threshold per
seed, each fitted with the within-cell bootstrap and the by-seed one.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.special import expit

from icl_race.analysis import design as dz
from icl_race.analysis.design_sim import KSTAR_RANGE, ArmStats, _stats, grid_x
from icl_race.analysis.draws import Draws
from icl_race.analysis.threshold import BY_SEED_ID, Logistic, acquisition_curve


@dataclasses.dataclass(frozen=True)
class GridSeeds:
    """A finished grid at one N: per K, each kept seed's outcome and the steps it trained (retired
    seeds: until they retired), and the budget."""

    name: str
    K: list[int]
    acquired: list[np.ndarray]  # per K, [S_K] bool
    steps: list[np.ndarray]  # per K, [S_K] steps trained
    budget: int
    seed_ids: list[np.ndarray] | None = None  # per K, [S_K] (None: not known)
    N: int | None = None  # the runs' task.N (None: not known)


@dataclasses.dataclass(frozen=True)
class GridReplay:
    """The full grid's K* and cost beside the design's replays on it (`design` against the grid's K*
    as the reference: coverage is of the grid's K* by the design's interval)."""

    name: str
    grid_log10_kstar: float | None
    grid_ci: list[float | None]
    grid_seeds: int
    grid_budgets: float  # the grid's seed-steps (as trained: retired seeds stop early) in budgets
    design: ArmStats  # seeds and budgets: what the design spent; bias, rmse, coverage against the grid
    stops: dict[str, int]
    params: dict


def grid_fit(grid: GridSeeds, draws: Draws) -> tuple[float | None, list[float | None]]:
    fit = acquisition_curve(
        np.log10(np.asarray(grid.K, float)), grid.acquired, draws.bootstrap("replay/grid", grid.name)
    ).fit
    return (fit.log10_kstar, list(fit.log10_kstar_ci)) if isinstance(fit, Logistic) else (None, [None, None])


def grid_ci_by_seed(grid: GridSeeds, draws: Draws) -> list[float | None] | None:
    """log10 K*'s interval with the seed ids resampled jointly over every K, where every K holds the same
    seed ids (a grid trains seeds 0..S-1 at each K): a seed's outcomes at neighbouring K share its
    initialisation and stay together. None where the K hold different seeds."""
    x = np.log10(np.asarray(grid.K, float))
    fit = acquisition_curve(x, grid.acquired, draws.bootstrap("replay/grid-by-seed", grid.name), grid.seed_ids)
    if fit.ci_method != BY_SEED_ID:
        return None
    return list(fit.fit.log10_kstar_ci) if isinstance(fit.fit, Logistic) else [None, None]


def replay_once(design: dz.KStarDesign, grid: GridSeeds, rng, seed: int) -> tuple[dz.Posterior, float, str]:
    """One design run on the grid's seeds: its final posterior, its seed-steps (in budgets), why it stopped."""
    x = np.log10(np.asarray(grid.K, float))
    post, steps = dz.prior(design), 0.0
    while (stop := dz.kstar_stop(post)) is None:
        ks = dz.propose(post, seed)
        nearest = np.abs(np.log10(ks)[:, None] - x[None, :]).argmin(1)
        picks = [rng.integers(grid.acquired[j].size) for j in nearest]
        acquired = np.array([grid.acquired[j][i] for j, i in zip(nearest, picks)], bool)
        steps += float(sum(grid.steps[j][i] for j, i in zip(nearest, picks)))
        post = dz.update(post, ks, acquired)
    return post, steps / grid.budget, stop


def replay(grid: GridSeeds, design: dz.KStarDesign, replays: int, draws: Draws) -> GridReplay:
    """`replays` runs of the design on the grid, each with its own draws of the grid's seeds."""
    if any(a.size == 0 for a in grid.acquired):
        raise ValueError(f"replay: {grid.name} has a K with no kept seed")
    ref, ci = grid_fit(grid, draws)
    rows: list[tuple] = []
    stops: dict[str, int] = {}
    for i in range(replays):
        post, budgets, stop = replay_once(design, grid, draws.rng("replay/draws", grid.name, i), draws.seed)
        s = post.summary()
        rows.append((s.log10_kstar, *s.ci, post.seeds, budgets, np.nan))  # acquired: not counted here
        stops[stop] = stops.get(stop, 0) + 1
    arm = _stats("design", design.half_width, rows, np.nan if ref is None else ref)
    seeds = int(sum(a.size for a in grid.acquired))
    budgets = float(sum(s.sum() for s in grid.steps)) / grid.budget
    return GridReplay(grid.name, ref, ci, seeds, round(budgets, 2), arm, stops, dataclasses.asdict(design))


@dataclasses.dataclass(frozen=True)
class SharedSeeds:
    """Fixed grids of one layout on a known logistic (`slope` per decade, true K* log-uniform over
    KSTAR_RANGE), `per_k` seeds at each of its `n_k` K, three ways: independent seeds in every cell with
    the within-cell bootstrap (the synthetic grids' model), and one threshold per seed shared by every K
    with the within-cell bootstrap and with the by-seed one. Seeds and budgets: seed-cells (every cell one
    budget)."""

    slope: float
    layout: str
    n_k: int
    per_k: int
    arms: list[ArmStats]


def _nan(v: float | None) -> float:
    return np.nan if v is None else v


SHARED_ARMS = ("independent seeds, within-cell", "shared seeds, within-cell", "shared seeds, by seed id")


def shared_case(slope: float, layout: str, per_k: int, replays: int, draws: Draws) -> SharedSeeds:
    """`replays` grids of `layout` ("wide", "focused": `design_sim.grid_x`) on one truth each."""
    lo, hi = np.log10(KSTAR_RANGE)
    truth = draws.rng("shared/truth", slope).uniform(lo, hi, replays)
    rows: dict[str, list[tuple]] = {arm: [] for arm in SHARED_ARMS}
    n_k = 0
    for i, b in enumerate(truth):
        K = [int(k) for k in np.round(10 ** grid_x(layout, b, dz.KStarDesign()))]
        x, n_k = np.log10(K), len(K)
        rng = draws.rng("shared/outcomes", slope, layout, i)
        own = b + rng.logistic(0, 1 / slope, per_k)  # P(own threshold < x) = expit(slope (x - b))
        grid = lambda name, acquired: GridSeeds(
            f"{name} {layout} {slope:g} {i}", K, acquired, [np.ones(per_k)] * n_k, 1, [np.arange(per_k)] * n_k
        )
        independent = grid("independent", [b + rng.logistic(0, 1 / slope, per_k) < xk for xk in x])
        shared = grid("shared", [own < xk for xk in x])
        (e_ind, ci_ind), (e_sh, ci_sh) = grid_fit(independent, draws), grid_fit(shared, draws)
        by_seed = grid_ci_by_seed(shared, draws) or [None, None]
        cost = (per_k * n_k, per_k * n_k, float(np.mean(expit(slope * (x - b)))))
        for arm, est, ci in zip(SHARED_ARMS, (e_ind, e_sh, e_sh), (ci_ind, ci_sh, by_seed)):
            rows[arm].append((_nan(est), *map(_nan, ci), *cost))
    return SharedSeeds(slope, layout, n_k, per_k, [_stats(arm, None, rows[arm], truth) for arm in SHARED_ARMS])
