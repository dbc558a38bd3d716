"""Replays of the K* design on a finished grid (issue 54 item 5, "replay"): each seed the design proposes at
K is one of the grid's seeds at the grid's K nearest in log10 K, drawn with replacement, with its outcome
(acquired ICL by the budget or not) and the steps it trained. No training: a grid that keeps every
seed's outcome answers how the design would have done on the same physics, against the full grid's K*.

What it rests on: the grid's K values stand for every K near them (a proposal between two grid K takes
the nearer one's seeds; beyond the grid's ends, the end's), so the replay can be no sharper than the grid's
spacing lets it; the grid's own K* (its logistic fit, `analysis.threshold.acquisition_curve`) is the
reference, not a truth: the error is the design's distance from the grid's answer.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from icl_race.analysis import design as dz
from icl_race.analysis.design_sim import ArmStats, _stats
from icl_race.analysis.draws import Draws
from icl_race.analysis.threshold import Logistic, acquisition_curve, logistic_fit, percentile_ci


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
    ids = grid.seed_ids
    if ids is None or any(i.shape != ids[0].shape or np.any(i != ids[0]) for i in ids):
        return None
    A_KxS = np.stack(grid.acquired)
    rng = draws.rng("replay/grid-by-seed", grid.name)
    k_BxK = A_KxS[:, rng.integers(0, A_KxS.shape[1], (draws.n_boot, A_KxS.shape[1]))].sum(2).T
    _, b_B = logistic_fit(np.log10(np.asarray(grid.K, float)), k_BxK, np.full(len(grid.K), A_KxS.shape[1]))
    return percentile_ci(b_B, 0.95)


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
