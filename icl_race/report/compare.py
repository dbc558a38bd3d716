"""Two or more unrelated runs (or sweep cells) side by side: `icl-race compare DIR DIR... --out OUT`.

    compare(DIRS)  ->  Comparison: per run (a group, named by its folder or `--label`) the Kaplan-Meier
                       curve of one event's time with its band, median, seed counts, acquired fraction
                       (Wilson CI), outcome classes and state (an unfinished run's results so far said
                       first, as of which step: rundir/state.py); every later group against the first (the
                       reference): the median ratio with its bootstrap CI, the log-rank test and their
                       verdict (`analysis.compare`); the config fields whose values differ, with each
                       run's value (the seed count is a size, not a difference)
    verdict(c)     ->  one line per later group in words (`report.verdict`): which is sooner only where the
                       ratio's CI excludes 1 and the log-rank test agrees, else "no clear difference"
    write(c, OUT)  ->  OUT/compare.md, OUT/compare.json, OUT/figures/km.png and .pdf

Statistics in `analysis/`, the figure in `plots/compare.py`, rendering here; imports no jax.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from icl_race import rundir
from icl_race.analysis.compare import PairStats, compare_to_reference
from icl_race.analysis.draws import Draws
from icl_race.analysis.outcome import CLASSES, of_results
from icl_race.analysis.survival import KaplanMeier, kaplan_meier, proportion_ci
from icl_race.config import BOOT_DEFAULT, ConfigError, check_bootstrap
from icl_race.report.compare_input import read
from icl_race.report.format import ci_text, figure_files, jsonable, num, p_value
from icl_race.report.verdict import RULE, cell, ci, logrank_text, reaches, sentence
from icl_race.rundir import owner, runset

# Fields that size an ensemble rather than change what it trains: each group's seed count is its `n`,
# never listed among the differences (a run of 32 seeds is not another experiment than one of 16).
SIZES = ("ensemble.seeds",)


@dataclasses.dataclass(frozen=True)
class Group:
    name: str  # its `--label`, else its folder's name (with parents where two folders share one)
    dir: Path
    n: int  # kept (not diverged) seeds, those the statistics use
    diverged: int
    reached: int
    acquired_ci: tuple[float, float]  # Wilson score CI of reached / n at the km's confidence
    censor_at: int  # when the unreached seeds stopped being observed (`Run.censor_at`)
    first_eval: int  # the run's first evaluation step: the earliest an event can be seen (the figure's left end)
    km: KaplanMeier
    outcomes: dict[str, int] | None  # `analysis.outcome` classes (about ICL); None for other systems
    state: str = "finished"  # rundir/state.py: finished, or training / stopped (its results so far)
    partial: str | None = None  # an unfinished run's line (`Run.partial_note`: as of which step of its budget)


@dataclasses.dataclass(frozen=True)
class Comparison:
    event: str
    groups: list[Group]
    versus_first: list[PairStats]  # groups[1:] each against groups[0]
    differences: dict[str, list]  # section.field -> its value in each group
    n_boot: int
    seed: int


def _group(name: str, run: rundir.Run, event: str) -> Group:
    times, observed = run.censored(event)
    if times.size == 0:
        raise ConfigError(f"{run.dir}: no seed to compare (all {run.diverged.size} diverged)")
    o = of_results(run.times, run.diverged, run.curves, run.eval_steps)
    km = kaplan_meier(times, observed)
    return Group(
        name,
        run.dir,
        int(times.size),
        int(run.diverged.sum()),
        int(observed.sum()),
        proportion_ci(int(observed.sum()), int(times.size), km.confidence),
        run.censor_at(event),
        int(run.eval_steps[0]),
        km,
        None if o is None else {c: o.count(c) for c in CLASSES},
        run.state.kind,
        run.partial_note(),
    )


def compare(
    dirs: list[str | Path],
    event: str | None = None,
    n_boot: int = BOOT_DEFAULT,
    seed: int = 0,
    labels: list[str] | None = None,
) -> Comparison:
    """Read and compare the runs in `dirs` (the first is the reference), named by `labels` (one per
    directory) or their folders; `event` defaults to the first run's headline. Every refusal is a
    one-line ConfigError, before anything is computed."""
    check_bootstrap(n_boot, seed)
    return of_runs(*read(dirs, event, labels), Draws(seed, n_boot))


def of_runs(named: list[str], runs: list[rundir.Run], event: str, draws: Draws) -> Comparison:
    """The comparison of runs `read` (compare_input.py) has read and checked."""
    groups = [_group(name, r, event) for name, r in zip(named, runs)]
    pairs = compare_to_reference([r.censored(event) for r in runs], draws)
    fields = [f for f in runset.differing([r.config for r in runs]) if f not in SIZES]
    return Comparison(
        event, groups, pairs, {f: [runset.value(r.config, f) for r in runs] for f in fields}, draws.n_boot, draws.seed
    )


def _value(v) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def label(c: Comparison, i: int) -> str:
    """'adam: train.optimizer=adam': a group's name with its values of the first few differing fields."""
    shown = [f"{f}={_value(v[i])}" for f, v in list(c.differences.items())[:3]]
    return f"{c.groups[i].name}: {', '.join(shown)}" if shown else c.groups[i].name


def _ratio(p: PairStats) -> str:
    if p.ratio.ratio is None:
        return "not defined (a median not reached: see the acquired fractions)"
    return f"{num(p.ratio.ratio, '{:.3g}')} {ci(p.ratio)}"


def _fraction(g: Group) -> str:
    """'3/16 (19% [7%, 43%]) by step 400': the seeds that reached the event within the budget."""
    lo, hi = g.acquired_ci
    return f"{g.reached}/{g.n} ({g.reached / g.n:.0%} [{lo:.0%}, {hi:.0%}]) by step {g.censor_at:,}"


def verdict(c: Comparison, i: int) -> str:
    """Group i against the reference in words (`report.verdict.sentence`: a group is sooner only where the
    median ratio's CI excludes 1 and the log-rank test agrees at alpha). Where a median is not reached
    there is no ratio, so no difference is called: the fractions that reached the event within each
    budget (Wilson CIs) and the log-rank p instead. The seed counts close the line: sizes, not differences."""
    a, g, p = c.groups[0], c.groups[i], c.versus_first[i - 1]
    sizes = f"{g.name} {g.n} seeds, {a.name} {a.n}"
    if p.ratio.ratio is not None:
        return f"{sentence(p, g.name, a.name, c.event)}; {sizes}"
    if a.reached == 0 and g.reached == 0:
        head = f"Neither {a.name} nor {g.name} {reaches(c.event)} within the budget"
    else:
        head = f"No median ratio between {g.name} and {a.name} (a median not reached), so no difference called"
    return f"{head}: {a.name} {_fraction(a)}, {g.name} {_fraction(g)}; {logrank_text(p)}; {sizes}"


def markdown(c: Comparison) -> str:
    conf = f"{c.groups[0].km.confidence:.0%}"
    ref = c.groups[0].name
    out = [
        f"# Comparison of t_{c.event} over {len(c.groups)} runs",
        "",
        *[f"**{g.partial}.**" for g in c.groups if g.partial],
        *[f"**{verdict(c, i)}.**" for i in range(1, len(c.groups))],
        "",
        f"Reference: {ref} (the first directory). Times to `{c.event}` of the kept (not diverged) seeds; a "
        "seed that never reached it is censored when its run stopped observing it.",
        "",
        f"| group | directory | seeds | reached [{conf} CI, Wilson] | censored at | KM median [{conf} CI] "
        "| diverged | ICL outcomes |",
        "|---|---|---:|---:|---:|---|---:|---|",
    ]
    for g in c.groups:
        outcomes = ", ".join(f"{k} {v}" for k, v in g.outcomes.items()) if g.outcomes is not None else "n/a"
        median = "not reached" if g.km.median is None else f"{num(g.km.median)} {ci_text(g.km.median_ci)}"
        lo, hi = g.acquired_ci
        out.append(
            f"| {g.name} | `{g.dir}` | {g.n} | {g.reached} ({g.reached / g.n:.0%} [{lo:.0%}, {hi:.0%}]) "
            f"| {g.censor_at:,} | {median} | {g.diverged} | {outcomes} |"
        )
    out += [
        "",
        f"| vs {ref} | median ratio [{conf} CI] | replicates with a median not reached | log-rank p (statistic) "
        "| verdict |",
        "|---|---|---:|---|---|",
    ]
    for g, p in zip(c.groups[1:], c.versus_first):
        stat = "n/a" if p.logrank.statistic is None else f"{p.logrank.statistic:.3g}"
        out.append(
            f"| {g.name} / {ref} | {_ratio(p)} "
            f"| {p.ratio.unreached} of {p.ratio.n_boot} | {p_value(p.logrank.p)} ({stat}) "
            f"| {cell(p.verdict, g.name, ref)} |"
        )
    first = c.versus_first[0]
    out += [
        "",
        f"Median ratio: the group's Kaplan-Meier median over {ref}'s; CI: {first.ratio.method}; {c.n_boot} "
        f"replicates from numpy SeedSequence({c.seed}) (one child per group). "
        f"Log-rank: {first.logrank.method}. {RULE}",
        "",
    ]
    if c.differences:
        out += [
            "## Config differences",
            "",
            f"| field | {' | '.join(g.name for g in c.groups)} |",
            f"|---|{'---|' * len(c.groups)}",
        ]
        out += [f"| `{f}` | {' | '.join(f'`{_value(v)}`' for v in vals)} |" for f, vals in c.differences.items()]
    else:
        out += ["The configs are identical (every field, defaults included)."]
    return "\n".join(out + ["", "Figure: figures/km.png (and .pdf)", ""])


def summary(c: Comparison) -> str:
    """For the terminal: the verdict of each group against the reference first (`verdict`), then one
    line each with the ratio as the table gives it and the fields that differ."""
    lines = [g.partial for g in c.groups if g.partial] + [verdict(c, i) for i in range(1, len(c.groups))]
    for i, p in enumerate(c.versus_first, start=1):
        diff = ", ".join(f for f, v in c.differences.items() if v[i] != v[0])
        lines.append(
            f"{label(c, i)} vs {c.groups[0].name}: t_{c.event} median ratio {_ratio(p)}, log-rank p {p_value(p.logrank.p)}; "
            f"{f'differ in {diff}' if diff else 'same config'}"
        )
    return "\n".join(lines)


def figure(c: Comparison):
    """The groups' Kaplan-Meier curves on one axis, each over its whole observation (`plots.compare`)."""
    from icl_race.plots.compare import km_overlay

    return km_overlay(
        [g.km.to_json() for g in c.groups],
        [label(c, i) for i in range(len(c.groups))],
        [g.censor_at for g in c.groups],
        c.event,
        start=min(g.first_eval for g in c.groups),
    )


def write(c: Comparison, out: str | Path, force: bool = False) -> list[str]:
    """OUT/compare.md, OUT/compare.json and the figure, as one, into a folder compare owns
    (rundir/owner.py); returns the paths written, relative to OUT."""
    from icl_race.rundir.provenance import icl_race_version

    out = Path(out)
    figures = figure_files(figure(c), "km")
    record = jsonable(dataclasses.asdict(c)) | {
        "verdict": [verdict(c, i) for i in range(1, len(c.groups))],
        "icl_race_version": icl_race_version(),
        "figures": list(figures),
    }
    record_json = (json.dumps(record, indent=1, allow_nan=False) + "\n").encode()
    files = {"compare.md": markdown(c).encode(), "compare.json": record_json, **figures}
    return owner.write_files(out, "compare", files, force=force)
