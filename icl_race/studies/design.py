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
  slope      DIR... [--set given=N:K:LO:HI[:LABEL],...]   K*(N) from K* designs' folders (their posteriors), K* grids'
              folders (logistic fits, per N) and intervals of runs no longer on disk, and the slope of
              log10 K* on log10 N with its interval (issue 54 item 6); + .md
  shared     [--set replays=500 --set slopes=15,8 --set per_k=16]   what a fixed grid's K* interval covers when
              every K trains the same seeds (each seed's outcome a threshold in K), beside independent
              cells: the wide and the focused grid, the within-cell and the by-seed bootstrap; + .md
  versus     GRID DESIGN [FRESH...] [--set name=wide]   a fixed K* grid and a K* design on the same config, side
              by side (item 5's live cases): each one's K* and 95% interval, seeds and seed-steps as trained,
              and the targets (the design's K* inside the grid's interval, its interval no wider, its cost);
              with FRESH folders (seeds neither arm trained, at the same N and budget), each K's count of
              acquirers against each arm's predictive distribution (analysis/design_live.py)
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from icl_race.analysis import design as dz
from icl_race.analysis import design_live as dl
from icl_race.analysis import design_replay as dr
from icl_race.analysis import design_sim as ds
from icl_race.analysis import scale as sc
from icl_race.analysis.draws import Draws
from icl_race.analysis.threshold import Logistic, Slope, acquisition_curve
from icl_race.config import ConfigError
from icl_race.report.format import num
from icl_race.rundir.sweepdir import read_design
from icl_race.studies.inputs import COUNT, TEXT, Option, listed, runs_of

MEDIAN_TRUTHS = ((4389.0, 0.4, 4.0), (4389.0, 0.8, 2.0))  # (median, sigma, budget / median): width 512's
# K = infinity median at N = 32, a spread like its KM CI's and a wider one censored at 2x the median


def synthetic(
    dirs,
    *,
    replays: int = 500,
    slopes=(15.0, 8.0),
    totals=(160, 240, 480),
    targets=(0.1, 0.075, 0.05),
    rel_width: float = 0.25,
    draws: Draws = Draws(0, 1000),
) -> ds.Synthetic:
    """Replays of the designs on known truths"""
    totals, S = sorted(listed(totals)), dz.KStarDesign().seeds_per_round
    bad = [t for t in totals if t % S]
    if bad:
        raise ConfigError(f"--set totals={bad[0]}: must be a multiple of {S} (the design's seeds per round)")
    start = time.monotonic()
    design = dz.KStarDesign(max_seeds=max(totals), half_width=0.0)
    kstar = [
        ds.kstar_case(s, totals, sorted(listed(targets), reverse=True), replays, draws, design) for s in listed(slopes)
    ]
    mdesign = dz.MedianDesign(rel_width=rel_width)
    median = [ds.median_case(m, sg, f, mdesign, replays, draws.seed) for m, sg, f in MEDIAN_TRUTHS]
    return ds.Synthetic(
        replays, draws.seed, kstar, median, dz.record(mdesign), wall_s=round(time.monotonic() - start, 1)
    )


def synthetic_text(r: ds.Synthetic) -> str:
    lines = [f"# Synthetic replays of the designs ({r.replays} replays, seed {r.seed})", ""]
    for c in r.kstar:
        title = (
            f"## K*: slope {c.slope:g} per decade, true K* log-uniform over {num(c.kstar_range[0])}-"
            f"{num(c.kstar_range[1])}, design from the prior 500-4e5, {c.seeds_per_round} seeds a round"
        )
        lines += _table(title, [*c.fixed, *c.stopped])
    for m in r.median:
        title = (
            f"## Median: lognormal, median {num(m.median)}, sigma {m.sigma:g}, budget {num(m.budget)} "
            f"({m.censored:.1%} censored); stops {m.stops}"
        )
        lines += _table(title, [m.rule, m.fixed], width="rel. CI width")
    lines += [f"Cost: {r.cost}.", f"Wall: {r.wall_s:.0f} s."]
    return "\n".join(lines) + "\n"


def _table(
    title: str, arms: list[ds.ArmStats], arm: str = "arm", seeds: str = "seeds (10/50/90%)", width: str = "CI width"
) -> list[str]:
    """A section of arms (`_row`): its title, the table, a blank line."""
    head = f"| {arm} | target | {seeds} | budgets | acquired | coverage (95% CI) | bias | RMSE | {width} |"
    return [title, "", head, "|---|---|---|---|---|---|---|---|---|", *(_row(a) for a in arms), ""]


def _row(s: ds.ArmStats) -> str:
    q = "/".join(num(v) for v in s.seeds_q)
    cov = f"{s.coverage:.3f} [{s.coverage_ci[0]:.3f}, {s.coverage_ci[1]:.3f}]"
    target = "-" if s.target is None else f"{s.target:g}"
    failed = f" ({s.failed} failed)" if s.failed else ""
    return (
        f"| {s.arm}{failed} | {target} | {num(s.seeds)} ({q}) | {num(s.budgets, '{:,.1f}')} | {s.acquired:.2f} | {cov} "
        f"| {num(s.bias, '{:+.3f}')} | {num(s.rmse, '{:.3f}')} | {num(s.width, '{:.3f}')} |"
    )


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


@dataclasses.dataclass(frozen=True)
class Shared:
    """`dr.shared_case` for every slope and layout."""

    replays: int
    seed: int
    cases: list[dr.SharedSeeds]
    wall_s: float

    def text(self) -> str:
        lines = [f"# Fixed K* grids whose K share their seeds ({self.replays} replays, seed {self.seed})", ""]
        for c in self.cases:
            title = (
                f"## {c.layout} grid ({c.n_k} K x {c.per_k} seeds), slope {c.slope:g} per decade, true K* "
                f"log-uniform over {num(ds.KSTAR_RANGE[0])}-{num(ds.KSTAR_RANGE[1])}"
            )
            lines += _table(title, c.arms, arm="seeds, interval", seeds="seed-cells")
        return "\n".join([*lines, f"Wall: {self.wall_s:.0f} s.", ""])


def shared(dirs, *, replays: int = 500, slopes=(15.0, 8.0), per_k: int = 16, draws: Draws = Draws(0, 1000)) -> Shared:
    """Fixed grids on known truths, their K sharing seeds or not"""
    start = time.monotonic()
    cases = [dr.shared_case(s, lay, per_k, replays, draws) for s in listed(slopes) for lay in ("wide", "focused")]
    return Shared(replays, draws.seed, cases, round(time.monotonic() - start, 1))


def _grids(dirs, least: int = 2) -> list[dr.GridSeeds]:
    """Each directory's finished standard-K runs, per N, as the seeds of a grid (kept seeds only) of at least
    `least` K."""
    out = []
    for d in dirs:
        by_N: dict[int, dict[int, list]] = {}
        budgets = set()
        for run in runs_of("design replay", [d]):
            if run.cfg.task.variant != "standard":
                continue
            steps = np.where(run.retired_at >= 0, run.retired_at, run.steps_run)[run.kept]
            cell = (run.t() >= 0, steps, run.seed_ids[run.kept])
            by_N.setdefault(run.cfg.task.N, {}).setdefault(run.cfg.task.K, []).append(cell)
            budgets.add(run.budget)
        if len(budgets) > 1:
            raise ConfigError(f"{d}: runs of several budgets ({sorted(budgets)}); replay one budget at a time")
        budget = next(iter(budgets), 0)
        for N, by_K in sorted(by_N.items()):
            Ks = sorted(by_K)
            if len(Ks) < least:
                raise ConfigError(f"{d}: N = {N} has runs at {len(Ks)} K; a K* grid needs at least {least}")
            # A K's seeds in seed-id order, whatever the order its runs were read in: a grid trained in parts
            # (ensemble.first_seed) then holds the same ids in the same places at every K (grid_ci_by_seed).
            order = {K: np.argsort(np.concatenate([r[2] for r in by_K[K]]), kind="stable") for K in Ks}
            cat = lambda i, K: np.concatenate([r[i] for r in by_K[K]])[order[K]]
            acquired, steps, ids = ([cat(i, K) for K in Ks] for i in range(3))
            out.append(dr.GridSeeds(f"{d} N={N}", Ks, acquired, steps, budget, ids, N))
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
    draws: Draws = Draws(0, 1000),
) -> Replays:
    """The K* design replayed on finished grids"""
    design = dz.KStarDesign(seeds_per_round=seeds_per_round, max_seeds=max_seeds, half_width=half_width)
    return Replays(replays, draws.seed, [dr.replay(g, design, replays, draws) for g in _grids(dirs)])


def versus_text(v: dl.Versus) -> str:
    k = lambda x: "-" if x is None else num(x)
    row = lambda arm, s: (
        f"| {arm} | {k(s.kstar)} [{k(s.ci[0])}, {k(s.ci[1])}] | {s.seeds} | {s.seed_steps:,} ({s.budgets:,.1f}) |"
    )
    lines = [
        f"# {v.name}: the K* grid {v.grid} beside the design {v.design_dir}",
        "",
        "| arm | K* (95% interval) | seeds | seed-steps (budgets) |",
        "|---|---|---|---|",
        row("grid: logistic fit", v.fixed),
        row("design: posterior", v.design),
        row("design's cells: logistic fit", v.design_fit),
        "",
    ]
    if v.fixed_ci_by_seed is not None:
        lo, hi = v.fixed_ci_by_seed
        lines += [
            f"The grid's interval with its seed ids resampled together over every K (its cells share "
            f"initialisations): [{k(lo)}, {k(hi)}].",
            "",
        ]
    lines += [
        f"The design stopped: {v.stop}. Its K* is {'inside' if v.inside else 'outside'} the grid's interval; its "
        f"interval is {'no wider' if v.no_wider else 'wider'}; it spent {v.cost_ratio:.2f} of the grid's "
        f"seed-steps. Intervals: the fits' seed bootstrap ({v.n_boot} draws, seed {v.seed}), the posterior's "
        "equal-tailed credible interval.",
        "",
    ]
    if not v.fresh:
        return "\n".join(lines)
    pred = lambda q: (
        "no K* fitted | - | -" if q is None else f"{q.p:.2f} ({q.expected:.1f}) | {q.at_most:.3f} | {q.at_least:.3f}"
    )
    lines += [
        "## Fresh seeds: which answer do seeds neither arm trained side with?",
        "",
        "| K | seed ids | acquired (95% Wilson) | grid predicts: share (count) | P(<= k) | P(>= k) "
        "| design predicts: share (count) | P(<= k) | P(>= k) |",
        "|---|---|---|---|---|---|---|---|---|",
        *(
            f"| {num(c.K)} | {c.seed_ids[0]}-{c.seed_ids[1]} | {c.acquired} of {c.seeds} [{c.ci[0]:.2f}, "
            f"{c.ci[1]:.2f}] | {pred(c.grid)} | {pred(c.design)} |"
            for c in v.fresh
        ),
        "",
        "Predictions: a mixture of binomials over what each arm knows, the grid's bootstrap replicates of K* at "
        "its fitted slope, the design's posterior over K* and slope (analysis/design_live.py).",
        "",
    ]
    return "\n".join(lines)


def _fresh(dirs, grid: dr.GridSeeds, cells: dr.GridSeeds) -> list[dr.GridSeeds]:
    """Fresh seeds' folders, at the grid's N and budget, their seed ids trained by neither arm."""
    fresh = _grids(dirs, least=1)
    trained = {int(i) for g in (grid, cells) for ids in g.seed_ids or [] for i in ids}
    for f in fresh:
        if (f.N, f.budget) != (grid.N, grid.budget):
            raise ConfigError(
                f"design versus: {f.name} is at N = {f.N}, budget {f.budget}; the grid at N = {grid.N}, "
                f"budget {grid.budget}"
            )
        if again := sorted(trained.intersection(int(i) for ids in f.seed_ids or [] for i in ids)):
            raise ConfigError(
                f"design versus: {f.name} trains seed ids {again[0]}... that an arm trained; fresh seeds need new ids"
            )
    return fresh


def versus(dirs, *, name: str = "", draws: Draws = Draws(0, 1000)) -> dl.Versus:
    """A K* grid beside a K* design on the same config, and fresh seeds' cells against each"""
    if len(dirs) < 2:
        raise ConfigError(f"design versus: takes GRID DESIGN [FRESH...], two directories or more; got {len(dirs)}")
    doc, why = read_design(dirs[1])
    if doc is None or doc.get("kind") != "kstar":
        raise ConfigError(f"{dirs[1]}: not a K* design's folder ({why or 'no design.json of kind kstar'})")
    grids, designs = _grids(dirs[:1]), _grids(dirs[1:2])
    if len(grids) != 1 or len(designs) != 1:
        raise ConfigError(
            f"design versus: the grid and the design must be at one N each; got {len(grids)} and {len(designs)}"
        )
    grid, cells = grids[0], designs[0]
    if grid.budget != cells.budget:
        raise ConfigError(f"design versus: budgets differ ({grid.budget} and {cells.budget}); compare one config")
    fixed = dl.side(grid, *dr.grid_fit(grid, draws))
    post = dl.posterior(cells, dz.KStarDesign(**doc["design"]))
    s = post.summary()
    design = dl.side(cells, s.log10_kstar, s.ci)
    width = lambda a: np.log10(a.ci[1] / a.ci[0]) if None not in a.ci else np.inf
    lo, hi = fixed.ci
    inside = lo is not None and hi is not None and design.kstar is not None and lo <= design.kstar <= hi
    by_id = dr.grid_ci_by_seed(grid, draws)
    fresh = []
    if len(dirs) > 2:
        # The grid's prediction rests on its seeds as its report resamples them: by seed id where every K holds the same.
        x = np.log10(np.asarray(grid.K, float))
        fit = acquisition_curve(x, grid.acquired, draws.bootstrap("versus/fresh", grid.name), grid.seed_ids).fit
        arm = (fit.a, fit.boot_log10_kstar) if isinstance(fit, Logistic) else None  # None: no K*, no prediction
        fresh = [c for f in _fresh(dirs[2:], grid, cells) for c in dl.fresh_cells(f, arm, post)]
    return dl.Versus(
        name or f"{dirs[0]} vs {dirs[1]}",
        str(dirs[0]),
        str(dirs[1]),
        fixed,
        None if by_id is None else [None if v is None else float(10**v) for v in by_id],
        design,
        dl.side(cells, *dr.grid_fit(cells, draws)),
        doc.get("stop"),
        inside,
        bool(width(design) <= width(fixed)),
        design.seed_steps / fixed.seed_steps if fixed.seed_steps else float("inf"),
        draws.n_boot,
        draws.seed,
        sorted(fresh, key=lambda c: c.K),
    )


def _design_point(d, doc: dict, draws: Draws) -> sc.KStarAtN:
    """A K* design's posterior (recomputed from its cells) and draws from it."""
    (cells,) = _grids([d])
    post = dl.posterior(cells, dz.KStarDesign(**doc["design"]))
    s = post.summary()
    boot = post.quantiles(draws.rng("slope/design", str(d)).uniform(size=draws.n_boot))
    source = f"{d}: the design's posterior ({s.seeds} seeds; stopped: {doc.get('stop') or 'not yet'})"
    return sc.KStarAtN(int(cells.N or 0), 10**s.log10_kstar, [10**v for v in s.ci], source, boot)


def _grid_point(grid: dr.GridSeeds, draws: Draws) -> sc.KStarAtN:
    fit = acquisition_curve(
        np.log10(np.asarray(grid.K, float)), grid.acquired, draws.bootstrap("slope/grid", grid.name), grid.seed_ids
    )
    if not isinstance(fit.fit, Logistic):
        raise ConfigError(f"{grid.name}: no K* fitted ({fit.fit.reason}); a slope needs every N's K*")
    f, seeds = fit.fit, sum(a.size for a in grid.acquired)
    source = f"{grid.name}: the grid's logistic fit ({len(grid.K)} K, {seeds} seeds; {fit.ci_method})"
    return sc.KStarAtN(
        int(grid.N or 0), 10**f.log10_kstar, [10**v for v in f.log10_kstar_ci], source, f.boot_log10_kstar
    )


def _given_point(text: str, i: int, draws: Draws) -> sc.KStarAtN:
    """`N:K:LO:HI[:LABEL]`, a K* and its 95% interval from a run no longer on disk (LABEL names it), as a
    two-piece normal."""
    fields = text.split(":")
    try:
        N, k, lo, hi = (float(v) for v in fields[:4])
    except ValueError:
        N = k = lo = hi = math.nan
    if not (len(fields) in (4, 5) and N >= 2 and N.is_integer() and 0 < lo < k < hi < math.inf):
        raise ConfigError(f"--set given={text}: must be N:K:LO:HI[:LABEL] with N an integer >= 2 and 0 < LO < K < HI")
    rng = draws.rng("slope/given", i)
    boot = sc.interval_draws(math.log10(k), [math.log10(lo), math.log10(hi)], 0.95, rng, draws.n_boot)
    return sc.KStarAtN(int(N), k, [lo, hi], f"given: {fields[4] if len(fields) == 5 else text}", boot)


def slope(dirs, *, given: list[str] | None = None, draws: Draws = Draws(0, 2000)) -> sc.KStarSlope:
    """K*(N) from K* designs' folders, grids' folders and intervals `given`, and the slope over them."""
    points = []
    for d in dirs:
        doc, _ = read_design(d)
        if doc is not None and doc.get("kind") == "kstar":
            points.append(_design_point(d, doc, draws))
        elif doc is not None:
            raise ConfigError(f"{d}: a {doc.get('kind')} design; design slope takes K* designs and K* grids")
        else:
            points += [_grid_point(g, draws) for g in _grids([d])]
    points += [_given_point(g, i, draws) for i, g in enumerate(listed(given) if given is not None else [])]
    if len({p.N for p in points}) < 2:
        raise ConfigError(f"design slope: needs K* at >= 2 values of N; got N = {sorted({p.N for p in points})}")
    return sc.kstar_slope(sorted(points, key=lambda p: p.N), draws.n_boot, draws.seed)


def slope_text(r: sc.KStarSlope) -> str:
    lines = ["# K*(N) and the slope of log10 K* on log10 N", "", "| N | K* (95% interval) | source |", "|---|---|---|"]
    lines += [f"| {p.N} | {num(p.kstar)} [{num(p.ci[0])}, {num(p.ci[1])}] | {p.source} |" for p in r.points]
    f = r.fit
    fit = (
        f"**slope {f.slope:.2f} [{f.slope_ci[0]:.2f}, {f.slope_ci[1]:.2f}]** over {f.n_points} points"
        if isinstance(f, Slope) and f.slope_ci is not None and None not in f.slope_ci
        else f"no slope ({getattr(f, 'reason', 'no interval')})"
    )
    return "\n".join([*lines, "", f"{fit}; {r.draws} replicates per N, seed {r.seed}.", "", f"Method: {r.method}.", ""])


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
OPTIONS |= {"name": TEXT, "given": Option(str, many=True), "per_k": Option(int, 2, 4096)}
COMMANDS = {"synthetic": synthetic, "replay": replay, "shared": shared, "versus": versus, "slope": slope}
RENDER = {
    "synthetic": synthetic_text,
    "slope": slope_text,
    "versus": versus_text,
}  # replay, shared: their records' text()
DIRECTORIES = {"synthetic": "none", "replay": "some", "shared": "none", "versus": "some", "slope": "any"}
MARKDOWN = ("synthetic", "replay", "shared", "versus", "slope")
