"""A sweep's plan, the second of its three jobs: the state of each cell on disk (done / partial / pending),
which cells share one program, each cell's size checked before the first starts, and the dry run's
projection of the wall time (`icl_race.run.cost`), as typed records. It writes nothing into the sweep
directory; the dry run's measurements are kept in costs.json beside the compile cache (`cost.measured`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from icl_race import rundir
from icl_race.config import ConfigError
from icl_race.run.cost import program
from icl_race.run.progress import hms
from icl_race.run.sweep.spec import Cell, Sweep
from icl_race.rundir import runset


def cell_dir(out: Path, cell: Cell) -> Path:
    return Path(out) / "cells" / cell.name


def status(out: Path, cell: Cell) -> str:
    """done, partial (a checkpoint to resume from), pending, or foreign: the cell's folder holds something
    else than this cell's run (a config of another cell, swapped or copied in, an unreadable config.json,
    files of no run), which the sweep never counts, runs or overwrites (`foreign_reason` says what)."""
    if foreign_reason(out, cell):
        return "foreign"
    return rundir.cell_status(cell_dir(out, cell))


def foreign_reason(out: Path, cell: Cell) -> str:
    """Why cells/<name> is not this cell's run, "" when it is (or is not there yet): a sweep identifies
    a cell by the config its folder records, never by the folder's name alone."""
    d = cell_dir(out, cell)
    try:
        stored = rundir.stored_config(d)
    except ConfigError as e:
        return str(e).removeprefix(f"--out {d}: ")
    if stored is None:  # a run's own files without config.json: a damaged run (summary_row), not foreign
        if d.is_dir() and not any(p.name in (rundir.LOCK, *rundir.RUN_NAMES) for p in d.iterdir()):
            return "holds files of no icl-race run"
        return ""
    if stored != cell.cfg:
        fields = rundir.differing_fields(stored.to_dict(), cell.cfg.to_dict())
        return f"holds the run of another config (differs in {', '.join(fields)}; its digest is {stored.digest()})"
    return ""


def checkpoint_step(out: Path, cell: Cell) -> int:
    return max(rundir.checkpoint_steps(cell_dir(out, cell)), default=0)


def where(cell: Cell) -> str:
    """The cell's swept values, as the logs and errors name it."""
    return ", ".join(f"{k}={v}" for k, v in cell.values.items())


def check_sizes(out: Path, sweep: Sweep) -> None:
    """Every unfinished cell's memory estimate (host.check_memory), before the first cell starts: a
    cell too large for the device is one line naming it, not a failure hours into the sweep."""
    from icl_race.run.host import check_memory
    from icl_race.run.records import RunPlan

    for cell in sweep.cells:
        if status(out, cell) in ("partial", "pending"):
            try:
                check_memory(RunPlan.of(cell.cfg), out)
            except ConfigError as e:
                raise ConfigError(f"cell {where(cell)}: {e}") from None


def packs(out: Path, sweep: Sweep) -> list[tuple[Cell, ...]]:
    """The cells left to train (not done, not foreign), grouped into packs: with sweep.pack, the cells
    of one program (pack.pack_key: the same shapes and chunk plan, differing only in traced values
    such as K, lr, decays, thresholds and seeds) train as the members of one ensemble; without, or for
    a cell of a program of its own, a pack is one cell. In the order of their first cells."""
    from icl_race.run.pack import pack_key
    from icl_race.run.records import RunPlan

    groups: dict[Any, list[Cell]] = {}
    for i, cell in enumerate(sweep.cells):
        if status(out, cell) in ("done", "foreign"):
            continue
        key = pack_key(RunPlan.of(cell.cfg)) if sweep.pack else i
        groups.setdefault(key, []).append(cell)
    return [tuple(g) for g in groups.values()]


@dataclasses.dataclass(frozen=True)
class CellPlan:
    name: str
    status: str  # done, partial, pending, foreign
    values: dict[str, Any]
    seconds: float | None  # upper bound on the rest of its run (its pack's, packed); None: not measured
    pack: int | None = None  # the index of its pack in DryRun.packs; None when it has nothing left to train


@dataclasses.dataclass(frozen=True)
class PackPlan:
    """Cells trained as one ensemble: its members, seeds, and vmaps of `block` seeds (engine Layout)."""

    cells: list[str]
    seeds: int
    block: int
    vmaps: int  # blocks of the padded ensemble, per device
    seconds: float | None


@dataclasses.dataclass(frozen=True)
class DryRun:
    """A sweep's cells, their state and an upper bound on the wall time of the rest (`icl_race.run.cost`)."""

    out: str
    executor: str
    cells: list[CellPlan]
    seconds: float  # summed over the packs that were measured
    unmeasured: int  # cells left to run whose shape was not measured (--no-measure)
    packs: list[PackPlan] = dataclasses.field(default_factory=list)
    device: str | None = None  # projected for this GPU at its measured rate (cost.project_device), not measured
    estimate: bool = False  # with device: a rate scaled from another GPU or shape (cost.device_rate)

    def text(self) -> str:
        # A measured projection is an upper bound ("<="); a GPU's, from a rate measured elsewhere and
        # without compilation and evaluation, is an estimate ("~").
        bound = "~" if self.device is not None else "<="
        lines = [f"{len(self.cells)} cells in {self.out}"]
        for c in self.cells:
            eta = (
                "" if c.status == "done" else ("  not measured" if c.seconds is None else f"  {bound} {hms(c.seconds)}")
            )
            if c.pack is not None and len(self.packs[c.pack].cells) > 1:
                eta = f"  pack {c.pack + 1}"
            lines.append(f"  {c.name}  {c.status:8s} {', '.join(f'{k}={v}' for k, v in c.values.items())}{eta}")
        for i, p in enumerate(self.packs):
            if len(p.cells) > 1:
                eta = "not measured" if p.seconds is None else f"{bound} {hms(p.seconds)}"
                lines.append(
                    f"pack {i + 1}: {len(p.cells)} cells of one program as one ensemble of {p.seeds} seeds, "
                    f"{p.vmaps} vmaps of block {p.block}; {eta}"
                )
        done = sum(c.status == "done" for c in self.cells)
        foreign = sum(c.status == "foreign" for c in self.cells)
        if foreign:
            lines.append(f"{foreign} foreign cells (their folders hold other runs): never run nor counted")
        if self.unmeasured == len(self.cells) - done - foreign:
            lines.append(f"{done}/{len(self.cells)} done; no projection (not measured)")
            return "\n".join(lines)
        note = f" (+{self.unmeasured} cells not measured)" if self.unmeasured else ""
        if self.device is not None:
            rate = "an estimate scaled from the H200's measured rate" if self.estimate else "the measured rate"
            lines.append(
                f"{done}/{len(self.cells)} done; projected on one {self.device.upper()} for the rest "
                f"~ {hms(self.seconds)} ({self.seconds / 3600:,.1f} GPU hours, an estimate; every seed's steps at {rate} "
                "of the paper model, benchmarks/RESULTS.md; compilation and evaluation not counted; early "
                "stops and retirement make it shorter)"
            )
            return "\n".join(lines)
        how = (
            "packs one after another in one process, each program compiled once"
            if self.executor == "local"
            else "summed over the cells, each a process of its own that compiles its programs"
        )
        lines.append(
            f"{done}/{len(self.cells)} done; projected wall time for the rest <= {hms(self.seconds)}{note} "
            f"({how}; compilation, evaluation and checkpoints measured on this machine's programs; "
            "early stops and retirement make it shorter)"
        )
        return "\n".join(lines)


def dry_run(
    out: Path,
    sweep: Sweep,
    measure: bool = True,
    executor: str = "local",
    remeasure: bool = False,
    device: str | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> DryRun:
    """The cells with their state, their packs (`packs`: the local executor's; another executor runs
    each cell as a process of its own) and an upper bound on the rest's wall time, writing nothing.

    Each program's costs are measured once (`cost.measured`: one block through its own programs, on this
    machine, or the cost an earlier dry run kept for it; `remeasure`: measure again) and projected over
    each pack's plan from its checkpoint (`cost.project`); with `device` (h100, h200), each pack's steps
    at that GPU's measured rate instead (`cost.project_device`), nothing measured. With the local
    executor a pack of the program the previous pack ran pays no compilation (the sweep keeps it; see
    execute.run_local); with the others every cell is a fresh process and pays it. `say` hears each
    measurement as it starts and ends (a line each: one may take minutes)."""
    from icl_race.run import cost
    from icl_race.run.pack import pack_plan
    from icl_race.run.records import RunPlan

    grouped = (
        packs(out, sweep)
        if executor == "local"
        else [(c,) for c in sweep.cells if status(out, c) in ("partial", "pending")]
    )
    costs: dict[tuple, cost.Cost] = {}
    pack_of: dict[str, int] = {}
    plans, total, unmeasured, last_program, estimate = [], 0.0, 0, None, False
    for i, pack in enumerate(grouped):
        key, run, seconds = program(pack[0].cfg), pack_plan([RunPlan.of(c.cfg) for c in pack]), None
        if device is not None:
            seconds = cost.project_device(run, device, checkpoint_step(out, pack[0]))
            estimate |= cost.device_rate(run, device).estimate
            total += seconds
        elif key not in costs and measure:
            name = f"program {len(costs) + 1} ({where(pack[0])}{f' and {len(pack) - 1} more cells' if len(pack) > 1 else ''})"
            costs[key] = c = cost.measured(run, remeasure, say=lambda line: say(f"{name}: {line}"))
            say(
                f"{name}: setup {c.setup_s:.1f} s ({c.compile_s:.1f} s compiling), {c.period_s:.2f} s per "
                f"{c.first_period:,}-step period of one block"
            )
        if device is None and key in costs:
            start = checkpoint_step(out, pack[0])
            seconds = cost.project(run, costs[key], start, compiled=executor == "local" and key == last_program)
            total += seconds
        elif device is None:
            unmeasured += len(pack)
        last_program = key
        e, unit = run.cfg.ensemble, run.layout.unit
        vmaps = -(-e.seeds // unit) * unit // e.block // run.layout.shards
        plans.append(PackPlan([c.name for c in pack], e.seeds, e.block, vmaps, seconds))
        pack_of |= {c.name: i for c in pack}
    cells = [
        CellPlan(
            c.name,
            status(out, c),
            dict(c.values),
            plans[pack_of[c.name]].seconds if c.name in pack_of else None,
            pack_of.get(c.name),
        )
        for c in sweep.cells
    ]
    return DryRun(str(out), executor, cells, total, unmeasured, plans, device, estimate)


def unreusable(out: Path, sweep: Sweep) -> str | None:
    """One line when finished cells in `out` belong to an earlier grid that differs from this one only in
    fields every cell of this grid shares (an edited base value, or task.K_max: a common pool size that
    expansion sets from the grid's largest K): their runs are another config, so none is reused. Said
    before any training, with what changed; None when there is nothing of the kind."""
    cells = Path(out) / "cells"
    if not cells.is_dir():
        return None
    names = {c.name for c in sweep.cells}
    by_values = {tuple(c.values.values()): c for c in sweep.cells}
    dicts = [c.cfg.to_dict() for c in sweep.cells]
    varying = set(runset.differing(dicts))  # every other field is one that all this grid's cells share
    changed: dict[str, set] = {}
    count = 0
    for d in sorted(p for p in cells.iterdir() if p.name not in names and p.is_dir() and not p.is_symlink()):
        try:
            old = rundir.stored_config(d) if rundir.is_done(d) else None
        except ConfigError:
            continue
        if old is None:
            continue
        was = old.to_dict()
        twin = by_values.get(tuple(runset.value(was, f) for f in sweep.fields))
        if twin is None:
            continue
        fields = rundir.differing_fields(was, twin.cfg.to_dict())
        if fields and not varying & set(fields):
            count += 1
            for f in fields:
                changed.setdefault(f, set()).add(repr(runset.value(was, f)))
    if not count:
        return None
    what = ", ".join(
        f"{f} ({' | '.join(sorted(v))} then, {runset.value(dicts[0], f)!r} now)" for f, v in changed.items()
    )
    return (
        f"{count} finished cells of an earlier grid cannot be reused: they differ from this grid's cells only in "
        f"{what}, which every cell shares (task.K_max is the grid's largest K unless the file sets it); "
        "set the old value in the sweep file to reuse them"
    )
