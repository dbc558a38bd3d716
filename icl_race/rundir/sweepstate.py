"""Where a sweep stands, as every reader says it (`report`, `hist`, the sweep's own warnings): `sweep_state`,
a `SweepState` of its grid's cells (sweep.toml's [grid] and [zip]; the cell folders when it has none, or is
a design's, whose later rounds are not known yet), each finished, training (a live process holds its lock),
stopped (killed or interrupted) or not started (no folder yet, or no chunk written), and whether a design
has stopped (design.json). Made from the cells as `load_sweep` read them once (each cell's `RunState`), so
it and the report's numbers are of one snapshot.
"""

from __future__ import annotations

import dataclasses
import itertools
import tomllib
from collections.abc import Sequence
from typing import Any, Protocol

from icl_race.rundir.state import RunState


class Cell(Protocol):
    """What is read of a cell (sweepdir.py's `CellEntry`, frozen: read-only)."""

    @property
    def name(self) -> str: ...
    @property
    def values(self) -> dict[str, Any]: ...
    @property
    def status(self) -> str: ...
    @property
    def state(self) -> RunState | None: ...


SHOWN = 5  # the cells named in the line per kind; report.json lists every one


@dataclasses.dataclass(frozen=True)
class SweepState:
    cells: int  # the grid's cells
    finished: int
    training: tuple[str, ...] = ()  # each unfinished cell named by its grid values, and where it stands
    stopped: tuple[str, ...] = ()
    not_started: tuple[str, ...] = ()
    open_design: bool = False  # a design that has not stopped (design.json): more rounds may follow

    @property
    def done(self) -> bool:
        unfinished = self.training or self.stopped or self.not_started or self.open_design
        return self.finished >= self.cells and not unfinished

    @property
    def kind(self) -> str:
        """finished; training while a process holds one of its cells; else stopped (rerun the sweep to go on)."""
        return "finished" if self.done else "training" if self.training else "stopped"

    def as_of(self) -> str | None:
        """What marks each table and figure of an unfinished sweep's report: "partial: 2 of 3 cells
        finished"; None when every cell is."""
        return None if self.done else f"partial: {self.finished:,} of {self.cells:,} cells finished"

    def unfinished(self) -> str:
        """The unfinished cells by kind, in one line: "training: train.lr=0.1 at step 150 of 200; not
        started: train.lr=0.02" ("" when every cell is finished)."""
        kinds = [
            ("training", self.training),
            ("stopped (rerun the sweep to resume)", self.stopped),
            ("not started", self.not_started),
        ]
        more = lambda cells: f", and {len(cells) - SHOWN:,} more" if len(cells) > SHOWN else ""
        named = [f"{what}: {', '.join(cells[:SHOWN])}{more(cells)}" for what, cells in kinds if cells]
        return "; ".join(named + (["the design has not stopped: more rounds may follow"] if self.open_design else []))

    def record(self) -> dict:
        """The state as data (report.json, hist --json)."""
        return {
            "state": self.kind,
            "cells_finished": self.finished,
            "grid_cells": self.cells,  # not "cells": a sweep report's list of its cells
            "training": list(self.training),
            "stopped": list(self.stopped),
            "not_started": list(self.not_started),
            **({"open_design": True} if self.open_design else {}),
        }


def _same(value) -> Any:
    """A swept value as compared: numbers as floats (TOML's 1e3 is config.json's 1000), lists as tuples."""
    if isinstance(value, tuple | list):
        return tuple(_same(v) for v in value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


def _key(values: dict) -> tuple:
    return tuple(sorted((k, repr(_same(v))) for k, v in values.items()))


def grid_points(spec: str | None) -> list[dict[str, Any]] | None:
    """Every cell of sweep.toml's grid as its swept values ([grid] crossed with the rows of [zip]); None
    when there is no such spec to read (none, unreadable, a design's, or one without [grid] or [zip], whose
    cells are its folders)."""
    try:
        table = tomllib.loads(spec) if spec is not None else None
    except (tomllib.TOMLDecodeError, RecursionError):
        return None
    if not isinstance(table, dict) or "design" in table:
        return None
    grid, zipped = table.get("grid", {}), table.get("zip", {})
    if not isinstance(grid, dict) or not isinstance(zipped, dict) or not (grid or zipped):
        return None
    if not all(isinstance(v, list) for v in [*grid.values(), *zipped.values()]):
        return None
    rows = list(zip(*zipped.values())) if zipped else [()]
    fields = [*grid, *zipped]
    return [dict(zip(fields, g + z)) for g in itertools.product(*grid.values()) for z in rows]


def _name(values: dict, folder: str) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items()) or folder


def sweep_state(spec: str | None, cells: Sequence[Cell], design: dict | None = None) -> SweepState:
    """Where the sweep stands: its grid's points (`grid_points`) matched to the cells read (by their swept
    values); without a grid, the cells as read, and for a design (`design`: its design.json) whether it
    has stopped. Cells that are not the grid's (unreadable, foreign, off the grid) are not counted: the
    report lists them apart."""
    ours = [c for c in cells if c.status in ("done", "partial", "pending")]
    points = grid_points(spec)
    started = {_key(c.values) for c in ours}
    missing = [] if points is None else [p for p in points if _key(p) not in started]
    by_kind: dict[str, list[str]] = {"training": [], "stopped": [], "empty": []}
    for c in ours:
        if (st := c.state) is not None and not st.finished:
            by_kind[st.kind].append(_name(c.values, c.name) + ("" if st.step is None else f" at {st.step_text()}"))
    return SweepState(
        cells=len(ours) if points is None else len(points),
        finished=sum(c.status == "done" for c in ours),
        training=tuple(by_kind["training"]),
        stopped=tuple(by_kind["stopped"]),
        not_started=tuple([*by_kind["empty"], *(_name(p, "") for p in missing)]),
        open_design=design is not None and design.get("stop") is None,
    )
