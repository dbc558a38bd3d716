"""A sweep's plan, the second of its three jobs: the state of each cell on disk (done / partial / pending),
which cells share one program, each cell's size checked before the first starts, and the dry run's
projection of the wall time (`icl_race.run.cost`), as typed records. It writes nothing.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from icl_race import rundir
from icl_race.config import Config, ConfigError
from icl_race.run.progress import hms
from icl_race.run.sweep.spec import Cell, Sweep


def cell_dir(out: Path, cell: Cell) -> Path:
    return Path(out) / "cells" / cell.name


def status(out: Path, cell: Cell) -> str:
    """done, partial (a checkpoint to resume from) or pending."""
    return rundir.cell_status(cell_dir(out, cell))


def checkpoint_step(out: Path, cell: Cell) -> int:
    return max(rundir.checkpoint_steps(cell_dir(out, cell)), default=0)


def where(cell: Cell) -> str:
    """The cell's swept values, as the logs and errors name it."""
    return ", ".join(f"{k}={v}" for k, v in cell.values.items())


def check_sizes(out: Path, sweep: Sweep) -> None:
    """Every unfinished cell's memory estimate (runner.check_memory), before the first cell starts: a
    cell too large for the device is one line naming it, not a failure hours into the sweep."""
    from icl_race.run.runner import check_memory

    for cell in sweep.cells:
        if status(out, cell) != "done":
            try:
                check_memory(cell.cfg)
            except ConfigError as e:
                raise ConfigError(f"cell {where(cell)}: {e}") from None


def _shape(cfg: Config) -> str:
    """What decides the speed of a step: the static shape of the program."""
    d = cfg.to_dict()
    task = {k: v for k, v in d["task"].items() if k != "K"}  # K is traced: it does not change the step
    return json.dumps(
        [task, d["model"], d["train"]["batch_size"], d["train"]["optimizer"], d["ensemble"]["block"]], sort_keys=True
    )


def program(cfg: Config) -> tuple:
    """What decides which programs a cell compiles: its step's shape and the static sizes of its chunks
    and evaluations (the values the engine traces, K, lr, decays..., are left out). Cells of one key
    share their compilations: the local executor keeps them between such cells (execute.run_local)."""
    tr = cfg.train
    return _shape(cfg), tr.steps, tr.eval_every, tr.evals_per_chunk, tr.eval_size, tr.eval_batch, tr.eval_spacing


@dataclasses.dataclass(frozen=True)
class CellPlan:
    name: str
    status: str  # done, partial, pending
    values: dict[str, Any]
    seconds: float | None  # upper bound on the rest of its run; None: not measured (or nothing left)


@dataclasses.dataclass(frozen=True)
class DryRun:
    """A sweep's cells, their state and an upper bound on the wall time of the rest (`icl_race.run.cost`)."""

    out: str
    executor: str
    cells: list[CellPlan]
    seconds: float  # summed over the cells that were measured
    unmeasured: int  # cells left to run whose shape was not measured (--no-measure)

    def text(self) -> str:
        lines = [f"{len(self.cells)} cells in {self.out}"]
        for c in self.cells:
            eta = "" if c.status == "done" else ("  not measured" if c.seconds is None else f"  <= {hms(c.seconds)}")
            lines.append(f"  {c.name}  {c.status:8s} {', '.join(f'{k}={v}' for k, v in c.values.items())}{eta}")
        done = sum(c.status == "done" for c in self.cells)
        if self.unmeasured == len(self.cells) - done:
            lines.append(f"{done}/{len(self.cells)} done; no projection (not measured)")
            return "\n".join(lines)
        note = f" (+{self.unmeasured} cells not measured)" if self.unmeasured else ""
        how = (
            "cells one after another in one process, each program compiled once"
            if self.executor == "local"
            else "summed over the cells, each a process of its own that compiles its programs"
        )
        lines.append(
            f"{done}/{len(self.cells)} done; projected wall time for the rest <= {hms(self.seconds)}{note} "
            f"({how}; compilation, evaluation and checkpoints measured on this machine's programs; "
            "early stops and retirement make it shorter)"
        )
        return "\n".join(lines)


def dry_run(out: Path, sweep: Sweep, measure: bool = True, executor: str = "local") -> DryRun:
    """The cells with their state and an upper bound on the rest's wall time, writing nothing.

    Each program's costs are measured once (`cost.measure`: one block through its own programs, on this
    machine) and projected over each unfinished cell's plan from its checkpoint (`cost.project`). With
    the local executor a cell of the program the previous cell ran pays no compilation (the sweep keeps
    it; see execute.run_local); with the others every cell is a fresh process and pays it."""
    from icl_race.run import cost
    from icl_race.run.runner import RunPlan

    costs: dict[tuple, cost.Cost] = {}
    cells, total, unmeasured, last_program = [], 0.0, 0, None
    for cell in sweep.cells:
        st, key, seconds = status(out, cell), program(cell.cfg), None
        if st != "done":
            if key not in costs and measure:
                costs[key] = cost.measure(cell.cfg)
            if key in costs:
                seconds = cost.project(
                    RunPlan.of(cell.cfg),  # its layout (the run's device count) and chunk plan
                    costs[key],
                    checkpoint_step(out, cell),
                    compiled=executor == "local" and key == last_program,
                )
                total += seconds
            else:
                unmeasured += 1
            last_program = key
        cells.append(CellPlan(cell.name, st, dict(cell.values), seconds))
    return DryRun(str(out), executor, cells, total, unmeasured)
