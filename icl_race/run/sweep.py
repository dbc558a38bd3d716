"""Sweeps: the Cartesian grid over any config fields, one hash-named run directory per cell.

A sweep file is a config (the same [task]/[model]/[train]/[ensemble] sections, optionally on top of
`base = "other.toml"`) plus a [grid] table mapping "section.key" to a list of values:

    base = "demo.toml"
    [grid]
    "task.K" = [500, 1000, 2000]
    "task.N" = [8, 16]

An optional [zip] table holds fields that vary together (equal-length lists, taken row by row), e.g. a
budget and an evaluation period that scale with N; its rows are crossed with the [grid]:

    [zip]
    "task.N" = [16, 64]
    "train.steps" = [8000, 32000]

Layout of DIR: sweep.toml (the resolved spec), cells/<config digest>/ (one run directory each, see
rundir/layout.py), summary.csv (one row per cell, rewritten after every cell). Finished cells are skipped
and partial ones resume from their checkpoints, so rerunning the command is always safe; cells
locked by another process are left to it, so several workers can share one DIR.

Cells that differ only in traced values (K, learning rate, weight decay, thresholds) reuse one
compilation: K_max is set to the largest K of the grid unless the spec sets it.
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import io
import itertools
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from icl_race import config, rundir, systems
from icl_race.config import Config, ConfigError, name_of, short
from icl_race.run.progress import hms


@dataclasses.dataclass(frozen=True)
class Cell:
    values: dict[str, Any]  # the swept fields of this cell
    cfg: Config

    @property
    def name(self) -> str:
        return self.cfg.digest()


@dataclasses.dataclass(frozen=True)
class Sweep:
    raw: dict  # the resolved spec: base sections merged, plus "grid" (and "zip" if given)
    cells: tuple[Cell, ...]

    @property
    def fields(self) -> list[str]:
        return [*self.raw["grid"], *self.raw.get("zip", {})]


def _merge(base: dict, top: dict, base_path: Path) -> dict:
    """`top`'s tables updated onto `base`'s, key by key; a section that is a table in one file and a
    value in the other is refused, naming the base (which of the two was meant is not ours to guess)."""
    out = copy.deepcopy(base)
    for sec, table in top.items():
        if sec in out and isinstance(out[sec], dict) != isinstance(table, dict):
            said = [
                f"[{name_of(sec)}] a table" if isinstance(v, dict) else f"{name_of(sec)} = {short(v)}"
                for v in (out[sec], table)
            ]
            raise ConfigError(
                f"{base_path}: {said[0]} here, {said[1]} in the file based on it; a section is "
                "a table in both or in neither"
            )
        out.setdefault(sec, {}).update(table) if isinstance(table, dict) else out.__setitem__(sec, table)
    return out


def _resolve(path: Path, what: str, chain: tuple[Path, ...] = ()) -> dict:
    """A spec file with its `base` merged under it; a base may have a base of its own (relative to
    itself), so a variant of a sweep can name that sweep as its base and inherit its grid."""
    if path.resolve() in chain:
        raise ConfigError(f"{path}: base files form a cycle: {' -> '.join(p.name for p in (*chain, path))}")
    raw = config.read_toml(path, what)
    base = raw.pop("base", None)
    if base is None:
        return raw
    if not isinstance(base, str):
        raise ConfigError(f"{path}: base = {short(base)}: expected a path to a config TOML")
    return _merge(_resolve(path.parent / base, "config file", (*chain, path.resolve())), raw, path.parent / base)


def load(path: str | Path, overrides: list[str] = ()) -> Sweep:
    raw = _resolve(Path(path), "sweep file")
    grid = raw.pop("grid", {})
    zipped = raw.pop("zip", {})
    raw = config.apply_overrides(raw, list(overrides))
    return expand(raw, grid, zipped)


def _check_fields(table, name: str) -> None:
    if not isinstance(table, dict):
        raise ConfigError(f'[{name}]: expected a table of "section.key" = [values]')
    for field, values in table.items():
        sec, _, key = field.partition(".")
        if sec not in config.SECTIONS or key not in config.field_names(sec):
            raise ConfigError(f'{name} field {short(field)}: not a config field (section.key, e.g. "task.K")')
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{name} field {short(field)}: expected a non-empty list of values")
        # Same value and type: true == 1 in Python, but true is a value of its own for the field to refuse.
        twice = next((v for i, v in enumerate(values) if any(v == w and type(v) is type(w) for w in values[:i])), None)
        if name == "grid" and twice is not None:  # a [zip] column may repeat a value in other rows
            raise ConfigError(f"grid field {short(field)}: the value {short(twice)} is listed twice (one cell each)")


def _pool_K(raw: dict):
    """The item-pool K of a cell's raw config (its system's `pool_K`), or None; a cell whose kinds are
    not registered is left for its validation to name."""
    try:
        system = systems.of(raw)
    except ConfigError:
        return None
    return system.pool_K(raw.get("task") or {}) if system.pool_K else None


def expand(raw: dict, grid: dict, zipped: dict | None = None) -> Sweep:
    """The cells of a sweep: every combination of the grid's values, crossed with the rows of the
    zipped fields, on top of `raw`."""
    zipped = zipped or {}
    _check_fields(grid, "grid")
    _check_fields(zipped, "zip")
    if len({len(v) for v in zipped.values()}) > 1:
        raise ConfigError(
            "[zip]: every field needs a list of the same length "
            f"(got {', '.join(f'{k}: {len(v)}' for k, v in zipped.items())})"
        )
    if set(grid) & set(zipped):
        raise ConfigError(f"{short(sorted(set(grid) & set(zipped))[0])}: in both [grid] and [zip]")
    rows = list(zip(*zipped.values())) if zipped else [()]
    combos = [g + z for g in (itertools.product(*grid.values()) if grid else [()]) for z in rows]
    swept = [*grid, *zipped]
    raws = []
    for combo in combos:
        cell = copy.deepcopy(raw)
        for field, value in zip(swept, combo):
            sec, _, key = field.partition(".")
            cell.setdefault(sec, {})[key] = value
        raws.append(cell)
    # One compilation for every K: a common pool size, unless the spec chose one.
    # A K that is not an integer is left for the cell's validation to name.
    ks = [k for c in raws for k in [_pool_K(c)] if config.as_float(k) is not None]
    if "task.K" in swept and "K_max" not in raw.get("task", {}) and "task.K_max" not in swept and ks:
        for c in raws:
            c.setdefault("task", {})["K_max"] = int(max(ks))
    cells = []
    for combo, cell_raw in zip(combos, raws):
        values = dict(zip(swept, combo))
        try:
            cells.append(Cell(values, config.from_dict(cell_raw)))
        except ConfigError as e:
            where = ", ".join(f"{k}={short(v)}" for k, v in values.items())
            raise ConfigError(f"cell {where}: {e}" if where else str(e)) from None  # a one-cell sweep: no values
    seen = {}
    for cell in cells:
        other = seen.setdefault(cell.name, cell)
        if other is not cell:
            raise ConfigError(f"cells {other.values} and {cell.values} are the same config (one run directory)")
    return Sweep({**raw, "grid": grid, **({"zip": zipped} if zipped else {})}, tuple(cells))


def spec_toml(sweep: Sweep) -> str:
    """The resolved spec as TOML (a small writer: our values are strings, numbers, bools, lists)."""

    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, float) and math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return repr(v)

    lines = []
    for sec, table in sweep.raw.items():
        lines.append(f"[{sec}]")
        lines += [f"{json.dumps(k) if sec in ('grid', 'zip') else k} = {value(v)}" for k, v in table.items()]
        lines.append("")
    return "\n".join(lines)


# ---- state of the cells on disk ----------------------------------------------------------------


def cell_dir(out: Path, cell: Cell) -> Path:
    return Path(out) / "cells" / cell.name


def refuse_links(out: Path, sweep: Sweep) -> None:
    """Refuse a sweep directory where a path it writes (its own files, cells/, a cell) is a symbolic
    link, before any cell starts; each cell's run checks its own files again (rundir.refuse_links)."""
    rundir.refuse_links(out, (*rundir.SWEEP_NAMES, *(f"cells/{c.name}" for c in sweep.cells)))
    for cell in sweep.cells:
        rundir.refuse_links(cell_dir(out, cell))


def status(out: Path, cell: Cell) -> str:
    return rundir.cell_status(cell_dir(out, cell))


def checkpoint_step(out: Path, cell: Cell) -> int:
    return max(rundir.checkpoint_steps(cell_dir(out, cell)), default=0)


SUMMARY_FIELDS = [
    "cell",
    "status",
    "seeds",
    "acquired",
    "acquired_fraction",
    "median_t_icl",
    "censored",
    "diverged",
    "steps_run",
    "budget",
    "seed_steps_per_s",
]


def summary_row(out: Path, cell: Cell) -> dict:
    row = {"cell": cell.name, **cell.values, "status": status(out, cell), "seeds": cell.cfg.ensemble.seeds}
    if row["status"] == "done":
        try:
            run = rundir.load_run(cell_dir(out, cell))
        except ConfigError:  # committed but unreadable: left for `icl-race run --redo` on the cell
            return {**row, "status": "damaged"}
        t = run.t()
        # The Kaplan-Meier median (censored seeds kept): "" when more than half never reached the event.
        med = run.km_median()
        row.update(
            acquired=int(np.sum(t >= 0)),
            acquired_fraction=round(float(np.mean(t >= 0)), 4) if t.size else "",
            median_t_icl="" if med is None else med,
            censored=int(np.sum(t < 0)),
            diverged=int(np.sum(run.diverged)),
            steps_run=run.steps_run,
            budget=run.budget,
            seed_steps_per_s=run.meta.get("seed_steps_per_s", ""),
        )
    return row


def write_summary(out: Path, sweep: Sweep) -> Path:
    buf = io.StringIO()
    fields = ["cell", *sweep.fields, *SUMMARY_FIELDS[1:]]
    w = csv.DictWriter(buf, fieldnames=fields, restval="")
    w.writeheader()
    for cell in sweep.cells:
        w.writerow(summary_row(out, cell))
    path = Path(out) / "summary.csv"
    rundir.atomic_write(path, buf.getvalue().encode())
    return path


def store_spec(out: Path, sweep: Sweep, log) -> None:
    path = Path(out) / "sweep.toml"
    text = spec_toml(sweep)
    if path.exists() and path.read_text() != text:
        backup = path.with_name(f"sweep.previous-{time.strftime('%Y%m%dT%H%M%S')}.toml")
        path.rename(backup)
        log(f"{out}: the sweep spec changed; the previous one is kept as {backup.name} (finished cells are reused)")
    if not path.exists():
        rundir.atomic_write(path, text.encode())


# ---- running -------------------------------------------------------------------------------------


def run_cell(cfg_dict: dict, out: str) -> str:
    """One cell, in this process (the unit of work of every executor; picklable for submitit)."""
    from icl_race.run.runner import execute

    try:
        execute(config.from_dict(cfg_dict), Path(out), progress=False, log=lambda m: None)
    except rundir.Locked:
        return "running elsewhere"
    return "done"


def run_local(out: Path, sweep: Sweep, log=print, progress: bool = True) -> None:
    import jax

    from icl_race.run.runner import execute

    last_program = None
    for i, cell in enumerate(sweep.cells, 1):
        where = ", ".join(f"{k}={v}" for k, v in cell.values.items()) or "(single cell)"
        st = status(out, cell)
        if st == "done":
            log(f"[{i}/{len(sweep.cells)}] {where}: done, skipped")
            continue
        log(
            f"[{i}/{len(sweep.cells)}] {where}: {'resuming' if st == 'partial' else 'running'} -> {cell_dir(out, cell)}"
        )
        # jit keeps every compiled program for the life of the process: ~44 MB per cell of a new shape,
        # never released (benchmarks/compile_memory.py). A cell of another program drops the last one's,
        # so the worker's memory stays flat over any number of shapes; cells of one program (a K or lr
        # axis) still share its compilation.
        if last_program is not None and _program(cell.cfg) != last_program:
            jax.clear_caches()
        last_program = _program(cell.cfg)
        try:
            execute(cell.cfg, cell_dir(out, cell), progress=progress, log=log)
        except rundir.Locked:
            log(f"[{i}/{len(sweep.cells)}] {where}: running in another process, left to it")
        write_summary(out, sweep)


def run_submitit(out: Path, sweep: Sweep, cluster: str | None, params: dict, wait: bool, log=print) -> None:
    """All unfinished cells as one job array (Slurm, or submitit's local executor for testing)."""
    try:
        import submitit
    except ImportError:
        raise ConfigError("--executor slurm needs submitit: pip install 'icl-race[slurm]'") from None
    todo = [c for c in sweep.cells if status(out, c) != "done"]
    if not todo:
        log(f"{out}: every cell is done")
        write_summary(out, sweep)
        return
    ex = submitit.AutoExecutor(folder=Path(out) / "submitit", cluster=cluster)
    ex.update_parameters(**{k: v for k, v in params.items() if v is not None})
    jobs = ex.map_array(run_cell, [c.cfg.to_dict() for c in todo], [str(cell_dir(out, c)) for c in todo])
    log(f"{out}: submitted {len(jobs)} cells as job array {jobs[0].job_id.split('_')[0]}")
    if wait:
        for job in jobs:
            job.result()
        write_summary(out, sweep)
        log(f"{out}: all {len(jobs)} cells finished; summary in {Path(out) / 'summary.csv'}")
    else:
        log(f"rerun the same `icl-race sweep` command afterwards to write {Path(out) / 'summary.csv'}")


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
    it; see run_local); with the others every cell is a fresh process and pays it."""
    from icl_race.run import cost
    from icl_race.run.runner import layout  # its device count: the one the run will use

    costs: dict[tuple, cost.Cost] = {}
    cells, total, unmeasured, last_program = [], 0.0, 0, None
    for cell in sweep.cells:
        st, key, seconds = status(out, cell), _program(cell.cfg), None
        if st != "done":
            if key not in costs and measure:
                costs[key] = cost.measure(cell.cfg)
            if key in costs:
                seconds = cost.project(
                    cell.cfg,
                    costs[key],
                    checkpoint_step(out, cell),
                    compiled=executor == "local" and key == last_program,
                    shards=layout(cell.cfg).shards,
                )
                total += seconds
            else:
                unmeasured += 1
            last_program = key
        cells.append(CellPlan(cell.name, st, dict(cell.values), seconds))
    return DryRun(str(out), executor, cells, total, unmeasured)


def _shape(cfg: Config) -> tuple:
    """What decides the speed of a step: the static shape of the program."""
    d = cfg.to_dict()
    task = {k: v for k, v in d["task"].items() if k != "K"}  # K is traced: it does not change the step
    return json.dumps(
        [task, d["model"], d["train"]["batch_size"], d["train"]["optimizer"], d["ensemble"]["block"]], sort_keys=True
    )


def _program(cfg: Config) -> tuple:
    """What decides which programs a cell compiles: its step's shape and the static sizes of its chunks
    and evaluations (the values the engine traces, K, lr, decays..., are left out)."""
    tr = cfg.train
    return _shape(cfg), tr.steps, tr.eval_every, tr.evals_per_chunk, tr.eval_size, tr.eval_batch, tr.eval_spacing
