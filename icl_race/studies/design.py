"""The adaptive designs' checks without training (experiments/design/, issue 54 items 4-5): replays of the
K* design and of the median rule on outcomes drawn from known truths (`icl_race.analysis.design_sim`), and
replays of the K* design on finished grids' seeds (`icl_race.analysis.design_replay`).

  synthetic  [--set replays=500 --set slopes=15,8 --set totals=160,240,480 --set targets=0.1,0.075,0.05
              --set rel_width=0.25]   K*: the design, the posterior-estimate and posterior-quantile arms, the
              paper's wide grid and a focused grid at equal seeds, and the design stopped at each target
              CI half-width; the median rule against a fixed count of equal mean seeds; + .md
  replay     DIR... [--set replays=200 --set half_width=0.05 --set seeds_per_round=16 --set max_seeds=480]
              the K* design from the paper's prior, replayed on each finished K* grid (per DIR and N):
              each proposed K draws a seed of the grid's nearest K; its K* against the full grid's, and the
              seed-steps each spent; + .md
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from icl_race.analysis import design as dz
from icl_race.analysis import design_replay as dr
from icl_race.analysis import design_sim as ds
from icl_race.analysis.text import num
from icl_race.config import ConfigError
from icl_race.studies.inputs import COUNT, Option, runs_of

MEDIAN_TRUTHS = ((4389.0, 0.4, 4.0), (4389.0, 0.8, 2.0))  # (median, sigma, budget / median): width 512's
# K = infinity median at N = 32, a spread like its KM CI's and a wider one censored at 2x the median


def _list(v) -> list:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def synthetic(
    dirs,
    *,
    replays: int = 500,
    slopes=(15.0, 8.0),
    totals=(160, 240, 480),
    targets=(0.1, 0.075, 0.05),
    rel_width: float = 0.25,
    n_boot: int = 1000,
    seed: int = 0,
) -> ds.Synthetic:
    """Replays of the designs on known truths"""
    totals, S = sorted(_list(totals)), dz.KStarDesign().seeds_per_round
    bad = [t for t in totals if t % S]
    if bad:
        raise ConfigError(f"--set totals={bad[0]}: must be a multiple of {S} (the design's seeds per round)")
    start = time.monotonic()
    design = dz.KStarDesign(max_seeds=max(totals), half_width=0.0)
    kstar = [
        ds.kstar_case(s, totals, sorted(_list(targets), reverse=True), replays, seed, n_boot, design)
        for s in _list(slopes)
    ]
    mdesign = dz.MedianDesign(rel_width=rel_width)
    median = [ds.median_case(m, sg, f, mdesign, replays, seed) for m, sg, f in MEDIAN_TRUTHS]
    return ds.Synthetic(replays, seed, kstar, median, vars(mdesign), wall_s=round(time.monotonic() - start, 1))


@dataclasses.dataclass(frozen=True)
class Replays:
    """The design replayed on each grid: what it rests on, then per grid its K* beside the grid's."""

    replays: int
    seed: int
    cases: list[dr.GridReplay]
    method: str = (
        "each proposed K takes a seed of the grid's nearest K (log10), drawn with replacement, with its outcome "
        "and trained steps; the reference is the full grid's logistic-fit K* (bootstrap CI), not a truth"
    )

    def text(self) -> str:
        lines = [
            f"# The K* design replayed on finished grids ({self.replays} replays a grid, seed {self.seed})",
            "",
            f"Method: {self.method}.",
            "",
            "| grid | grid K* (95% CI) | grid seeds, budgets | design seeds (10/50/90%) | design budgets | "
            "bias vs grid | RMSE | covers grid K* | design CI width | stops |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for c in self.cases:
            d = c.design
            k = lambda v: "-" if v is None else num(10**v)
            lines.append(
                f"| {c.name} | {k(c.grid_log10_kstar)} [{k(c.grid_ci[0])}, {k(c.grid_ci[1])}] | {c.grid_seeds}, "
                f"{c.grid_budgets:,.1f} | {num(d.seeds)} ({'/'.join(num(q) for q in d.seeds_q)}) | {d.budgets:,.1f} | "
                f"{num(d.bias, '{:+.3f}')} | {num(d.rmse, '{:.3f}')} | {d.coverage:.2f} | {num(d.width, '{:.3f}')} | "
                f"{c.stops} |"
            )
        return "\n".join(lines) + "\n"


def _grids(dirs) -> list[dr.GridSeeds]:
    """Each directory's finished standard-K runs, per N, as the seeds of a grid (kept seeds only)."""
    out = []
    for d in dirs:
        by_N: dict[int, dict[int, list]] = {}
        budgets = set()
        for run in runs_of("design replay", [d]):
            if run.cfg.task.variant != "standard":
                continue
            steps = np.where(run.retired_at >= 0, run.retired_at, run.steps_run)[run.kept]
            by_N.setdefault(run.cfg.task.N, {}).setdefault(run.cfg.task.K, []).append((run.t() >= 0, steps))
            budgets.add(run.budget)
        if len(budgets) > 1:
            raise ConfigError(f"{d}: runs of several budgets ({sorted(budgets)}); replay one budget at a time")
        budget = next(iter(budgets), 0)
        for N, by_K in sorted(by_N.items()):
            Ks = sorted(by_K)
            if len(Ks) < 2:
                raise ConfigError(f"{d}: N = {N} has runs at {len(Ks)} K; a K* grid needs at least 2")
            cat = lambda i, K: np.concatenate([r[i] for r in by_K[K]])
            out.append(dr.GridSeeds(f"{d} N={N}", Ks, [cat(0, K) for K in Ks], [cat(1, K) for K in Ks], budget))
    if not out:
        raise ConfigError("design replay: no finished standard-K runs in the directories given")
    return out


def replay(
    dirs,
    *,
    replays: int = 200,
    half_width: float = 0.05,
    seeds_per_round: int = 16,
    max_seeds: int = 480,
    n_boot: int = 1000,
    seed: int = 0,
) -> Replays:
    """The K* design replayed on finished grids"""
    design = dz.KStarDesign(seeds_per_round=seeds_per_round, max_seeds=max_seeds, half_width=half_width)
    return Replays(replays, seed, [dr.replay(g, design, replays, seed, n_boot) for g in _grids(dirs)])


OPTIONS = {
    "replays": COUNT,
    "slopes": Option(float, 0, 1000, above=True, many=True),
    "totals": Option(int, 16, 4800, many=True),
    "targets": Option(float, 0, 1, above=True, many=True),
    "rel_width": Option(float, 0, 10, above=True),
}
OPTIONS |= {
    "half_width": Option(float, 0, 1),
    "seeds_per_round": Option(int, 1, 4096),
    "max_seeds": Option(int, 1, 100_000),
}
COMMANDS = {"synthetic": synthetic, "replay": replay}
DIRECTORIES = {"synthetic": "none", "replay": "some"}
MARKDOWN = ("synthetic", "replay")
