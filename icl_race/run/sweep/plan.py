"""A sweep's plan, the second of its three jobs: the state of each cell on disk (done / partial / pending),
which cells share one program, each cell's size checked before the first starts, and the dry run's
projection of the wall time (`icl_race.run.cost`), as typed records. It writes nothing into the sweep
directory; the dry run's measurements are kept in costs.json beside the compile cache (`cost.measured`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from icl_race import rundir
from icl_race.config import ConfigError
from icl_race.run import identity
from icl_race.run.progress import hms
from icl_race.run.records import RunPlan
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


@dataclasses.dataclass(frozen=True, eq=False)
class Planned:
    """A cell left to train, planned once (`plan_cell`) and carried from the plan (its size, its pack, the dry
    run) to the execution (runner.execute_pack): its RunPlan, and its program's identity, derived on first
    use (run/identity.py; `pack`: with its array constants' values, which packing compares)."""

    cell: Cell
    run: RunPlan
    pack: bool

    @functools.cached_property
    def program(self) -> identity.Identity:
        return identity.of(self.run, self.pack)


def plan_cell(cell: Cell, pack: bool) -> Planned:
    """The cell's one derivation of its RunPlan."""
    return Planned(cell, RunPlan.of(cell.cfg), pack)


def planned(out: Path, sweep: Sweep, known: Mapping[str, Planned] | None = None) -> Iterator[Planned]:
    """The cells left to train (partial or pending), in order, each planned as it comes (`plan_cell`; `known`:
    cells planned before, taken as they are)."""
    for cell in sweep.cells:
        if status(out, cell) in ("partial", "pending"):
            yield (known or {}).get(cell.name) or plan_cell(cell, sweep.pack)


def check_sizes(out: Path, todo: Iterable[Planned]) -> None:
    """Every unfinished cell's memory estimate (host.check_memory), before the first cell starts: a
    cell too large for the device is one line naming it, not a failure hours into the sweep."""
    from icl_race.run.host import check_memory

    for p in todo:
        try:
            check_memory(p.run, out)
        except ConfigError as e:
            raise ConfigError(f"cell {where(p.cell)}: {e}") from None


def packs(todo: Iterable[Planned], pack: bool) -> list[tuple[Planned, ...]]:
    """The cells left to train grouped into packs: with `pack` ([sweep] pack), the cells of one program
    (identity.Identity.pack: the same shapes and chunk plan, differing only in traced values such as K,
    lr, decays, thresholds and seeds) train as the members of one ensemble; without, or for a cell of a
    program of its own, a pack is one cell. In the order of their first cells."""
    groups: dict[Any, list[Planned]] = {}
    for i, p in enumerate(todo):
        groups.setdefault(p.program.pack if pack else i, []).append(p)
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
    packed: bool = False  # the cells of one program train as one ensemble (local executor, [sweep] pack)

    def text(self) -> str:
        rows = [row(c, self.device, self.packed) for c in self.cells]
        return "\n".join([f"{len(self.cells)} cells in {self.out}", *rows, *self.totals()])

    def totals(self) -> list[str]:
        """The lines after the cells' rows: the packs, then the projection of the rest."""
        bound, lines = _bound(self.device), []
        for i, p in enumerate(self.packs if self.packed else []):
            eta = "not measured" if p.seconds is None else f"{bound} {hms(p.seconds)}"
            what = (
                "1 cell, an ensemble" if len(p.cells) == 1 else f"{len(p.cells)} cells of one program as one ensemble"
            )
            lines.append(f"pack {i + 1}: {what} of {p.seeds} seeds, {p.vmaps} vmaps of block {p.block}; {eta}")
        done = sum(c.status == "done" for c in self.cells)
        foreign = sum(c.status == "foreign" for c in self.cells)
        if foreign:
            lines.append(f"{foreign} foreign cells (their folders hold other runs): never run nor counted")
        if self.unmeasured == len(self.cells) - done - foreign:
            lines.append(f"{done}/{len(self.cells)} done; no projection (not measured)")
            return lines
        note = f" (+{self.unmeasured} cells not measured)" if self.unmeasured else ""
        if self.device is not None:
            rate = "an estimate scaled from the H200's measured rate" if self.estimate else "the measured rate"
            lines.append(
                f"{done}/{len(self.cells)} done; projected on one {self.device.upper()} for the rest "
                f"~ {hms(self.seconds)} ({self.seconds / 3600:,.1f} GPU hours, an estimate; every seed's steps at {rate} "
                "of the paper model, benchmarks/RESULTS.md; compilation and evaluation not counted; early "
                "stops and retirement make it shorter)"
            )
            return lines
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
        return lines


def _bound(device: str | None) -> str:
    """A measured projection is an upper bound ("<="); a GPU's, from a rate measured elsewhere and without
    compilation and evaluation, is an estimate ("~")."""
    return "~" if device is not None else "<="


def row(c: CellPlan, device: str | None, packed: bool) -> str:
    """A cell's line of the dry run: its name, state and swept values, then its pack (`packed`: the
    pack's line has the projection) or the bound on its own run."""
    eta = (
        "" if c.status == "done" else "  not measured" if c.seconds is None else f"  {_bound(device)} {hms(c.seconds)}"
    )
    if packed and c.pack is not None:
        eta = f"  pack {c.pack + 1}"
    return f"  {c.name}  {c.status:8s} {', '.join(f'{k}={v}' for k, v in c.values.items())}{eta}"


def dry_run(
    out: Path,
    sweep: Sweep,
    measure: bool = True,
    executor: str = "local",
    remeasure: bool = False,
    device: str | None = None,
    say: Callable[[str], None] = lambda line: None,
    show: Callable[[str], None] = lambda line: None,
) -> DryRun:
    """The cells with their state, their packs (`packs`: the local executor's; another executor runs
    each cell as a process of its own) and an upper bound on the rest's wall time, writing nothing.

    Each program's costs are measured once (`cost.measured`: one block through its own programs, on this
    machine, or the cost an earlier dry run kept for it; `remeasure`: measure again) and projected over
    each pack's plan from its checkpoint (`cost.project`); with `device` (h100, h200), each pack's steps
    at that GPU's measured rate instead (`cost.project_device`), nothing measured. With the local
    executor a pack of the program the previous pack ran pays no compilation (the sweep keeps it; see
    execute.run_local); with the others every cell is a fresh process and pays it. `say` hears each
    measurement as it starts and ends (a line each: one may take minutes); `show` hears `DryRun.text`
    line by line as it is made: each cell's row once the cell is planned (`plan_cell`) and its program
    measured, so a large grid's rows stream, then the packs (whose members are known only at the end)
    and the totals."""
    from icl_race.run import cost
    from icl_race.run.pack import pack_plan

    packed, measuring = executor == "local" and sweep.pack, measure and device is None
    costs: dict[str, cost.Cost] = {}
    index: dict[Any, int] = {}  # a pack's key -> its index, in the order of their first cells
    groups: list[list[Planned]] = []
    rows: list[CellPlan] = []
    plans: list[PackPlan] = []
    estimate, last = False, None  # last: the previous pack's program, which a local pack of the same reuses

    def project(members: list[Planned]) -> PackPlan:
        nonlocal estimate, last
        run, seconds = pack_plan([m.run for m in members]), None
        start, program = checkpoint_step(out, members[0].cell), members[0].program.program if measuring else None
        if device is not None:
            seconds = cost.project_device(run, device, start)
            estimate |= cost.device_rate(run, device).estimate
        elif program in costs:
            seconds = cost.project(run, costs[program], start, compiled=executor == "local" and program == last)
        last = program
        e, unit = run.cfg.ensemble, run.layout.unit
        vmaps = -(-e.seeds // unit) * unit // e.block // run.layout.shards
        return PackPlan([m.cell.name for m in members], e.seeds, e.block, vmaps, seconds)

    show(f"{len(sweep.cells)} cells in {out}")
    for i, cell in enumerate(sweep.cells):
        st = status(out, cell)
        if st in ("partial", "pending"):
            p = plan_cell(cell, packed)
            if measuring and (program := p.program.program) not in costs:
                name = f"program {len(costs) + 1} ({where(cell)})"
                costs[program] = c = cost.measured(p.run, p.program, remeasure, say=lambda line: say(f"{name}: {line}"))
                say(
                    f"{name}: setup {c.setup_s:.1f} s ({c.compile_s:.1f} s compiling), {c.period_s:.2f} s per "
                    f"{c.first_period:,}-step period of one block"
                )
            n = index.setdefault(p.program.pack if packed else i, len(index))
            if n == len(groups):
                groups.append([])
            groups[n].append(p)
            if not packed:  # a pack of one, whole now: projected at once
                plans.append(project(groups[n]))
            rows.append(CellPlan(cell.name, st, dict(cell.values), None if packed else plans[n].seconds, n))
        else:
            rows.append(CellPlan(cell.name, st, dict(cell.values), None))
        show(row(rows[-1], device, packed))
    if packed:  # a pack's members are known at the end
        plans = [project(g) for g in groups]
        rows = [c if c.pack is None else dataclasses.replace(c, seconds=plans[c.pack].seconds) for c in rows]
    seconds = sum(p.seconds for p in plans if p.seconds is not None)
    unmeasured = 0 if device is not None else sum(len(p.cells) for p in plans if p.seconds is None)
    result = DryRun(str(out), executor, rows, seconds, unmeasured, plans, device, estimate, packed)
    for line in result.totals():
        show(line)
    return result


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
