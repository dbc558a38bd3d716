"""A sweep directory read back (`load_sweep`): every folder of cells/ as a `CellEntry` (its swept values,
its status and, when finished, its `Run`), only the grid's cells read as runs (a folder that is not one
is listed with its reason); `skipped_cells` says which cells no analysis can read."""

from __future__ import annotations

import dataclasses
import functools
import json
import tomllib
from pathlib import Path
from typing import Any

from icl_race import config
from icl_race.config import Config, ConfigError
from icl_race.rundir.files import read_config_parsed
from icl_race.rundir.layout import checkpoint_steps, is_done
from icl_race.rundir.read import Run, load_run_results
from icl_race.rundir.state import FINISHED, RunState, state
from icl_race.rundir.sweepstate import SweepState, sweep_state


@dataclasses.dataclass(frozen=True)
class CellEntry:
    """One cell of a sweep directory: its swept values and, when finished, its run."""

    name: str
    dir: Path
    values: dict[str, Any]
    # done | partial (results so far) | pending | unreadable | foreign | outside (not a cell of the grid)
    status: str
    run: Run | None
    config: dict | None
    reason: str = ""  # why there is no run (an unfinished cell's: its `RunState.text`)
    state: RunState | None = None  # where a cell of the grid stands (None: unreadable, foreign, off the grid)


@dataclasses.dataclass(frozen=True)
class SweepDir:
    dir: Path
    fields: list[str]  # the swept fields ([grid] and [zip] of sweep.toml; else those that vary over cells)
    cells: list[CellEntry]
    spec: str | None  # sweep.toml's text
    design: dict | None = None  # design.json (a design sweep's record of its rounds, `read_design`), when readable

    @property
    def runs(self) -> list[Run]:
        return [c.run for c in self.cells if c.run is not None]

    @functools.cached_property
    def state(self) -> SweepState:
        """Where the sweep stands (rundir/sweepstate.py), from its cells as read."""
        return sweep_state(self.spec, self.cells, self.design)

    @property
    def partial(self) -> bool:
        """Not every cell of its grid finished: some training, stopped or not started."""
        return not self.state.done

    def partial_note(self) -> str | None:
        """One line saying which cells are finished and which are not; None when every cell is."""
        if not self.partial:
            return None
        return (
            f"{self.state.as_of()} in {self.dir}; {self.state.unfinished()}; these are its finished cells' "
            "results, not the sweep's"
        )


def is_sweep(d: Path) -> bool:
    return (Path(d) / "cells").is_dir()


def skipped_cells(dirs) -> list[str]:
    """One line per sweep among `dirs` that has cells no analysis can read (damaged, foreign, off the grid):
    what `load_runs` leaves out, said rather than skipped silently. Unfinished cells are not listed."""
    lines = []
    for d in dirs:
        if is_sweep(Path(d)):
            bad = [c for c in load_sweep(Path(d)).cells if c.status in ("unreadable", "foreign", "outside")]
            if bad:
                what = ", ".join(f"{c.name} ({c.status})" for c in bad[:5]) + (", ..." if len(bad) > 5 else "")
                lines.append(f"{d}: {len(bad)} cell{'s' if len(bad) > 1 else ''} left out: {what}")
    return lines


# The fields a design sweep's cells differ in, by its kind (sweep.toml's [design] kind; run/sweep/design_spec.py):
# its swept fields, as a grid's are its [grid] and [zip] fields.
DESIGN_FIELDS = {
    "kstar": ("task.K", "ensemble.first_seed", "ensemble.seeds"),
    "median": ("ensemble.first_seed", "ensemble.seeds"),
}


def _design_fields(spec: dict | None) -> tuple[str, ...]:
    """The swept fields of a design's sweep.toml ([design] kind), () for a grid or an unreadable one."""
    table = spec.get("design") if isinstance(spec, dict) else None
    kind = table.get("kind") if isinstance(table, dict) else None
    return DESIGN_FIELDS.get(kind, ()) if isinstance(kind, str) else ()


DESIGN_JSON = "design.json"
MAX_DESIGN_BYTES = 64 << 20  # ~100 bytes a seed: far beyond any design's seed maximum


def read_design(d: Path) -> tuple[dict | None, str | None]:
    """A design sweep's design.json (run/sweep/design_run.py writes it) read back as every file icl-race
    reads: a regular file of bounded size, JSON, the schema checked. (record, None); (None, why not) when
    it is damaged; (None, None) when there is none."""
    path = Path(d) / DESIGN_JSON
    if not path.exists() and not path.is_symlink():
        return None, None
    if path.is_symlink() or not path.is_file():
        return None, "not a regular file"
    if (size := path.stat().st_size) > MAX_DESIGN_BYTES:
        return None, f"{size:,} bytes, more than the {MAX_DESIGN_BYTES:,} a design.json may hold"
    try:
        doc = json.loads(path.read_bytes())
    except (ValueError, RecursionError) as e:
        return None, f"not JSON ({' '.join(str(e).split())})"
    ok = isinstance(doc, dict) and doc.get("kind") in DESIGN_FIELDS and isinstance(doc.get("design"), dict)
    if not ok or not isinstance(doc.get("rounds"), list) or not all(isinstance(r, dict) for r in doc["rounds"]):
        return None, "not a design's record (kind, design, rounds)"
    return doc, None


def cell_status(d: Path) -> str:
    """The sweep's question before it runs a cell (run/sweep/plan.py): done, partial (a checkpoint to resume
    from) or pending; what a reader says of the cell is its `state` (rundir/state.py)."""
    if is_done(d):
        return "done"
    return "partial" if checkpoint_steps(d) else "pending"


def _flat(cfg: dict) -> dict:
    return {f"{s}.{k}": v for s, sec in cfg.items() if isinstance(sec, dict) for k, v in sec.items()}


def _grid_fields(spec: str | None, configs: list[dict]) -> list[str]:
    """The [grid] and [zip] fields of sweep.toml; without a readable one, the fields whose values differ."""
    try:
        if spec is None:
            return _varying(configs)
        table = tomllib.loads(spec)
        if designed := _design_fields(table):
            return list(designed)
        axes = [table.get("grid", {}), table.get("zip", {})]
        if not all(isinstance(a, dict) for a in axes):  # refused by `icl-race sweep`; here, not a reason to fail
            return _varying(configs)
        return [*axes[0], *axes[1]]
    except (tomllib.TOMLDecodeError, RecursionError):
        return _varying(configs)


def _varying(configs: list[dict]) -> list[str]:
    flats = [_flat(c) for c in configs]
    keys = sorted({k for f in flats for k in f})
    return [k for k in keys if len({json.dumps(f.get(k), default=str) for f in flats}) > 1]


def _plain(value):
    """A config value as TOML reads it (tuples as lists), to compare a stored config with sweep.toml."""
    return [_plain(v) for v in value] if isinstance(value, tuple | list) else value


def _not_a_cell(name: str, cfg: dict, typed: Config | None, spec: dict | None) -> str:
    """Why the folder cells/<name> holding `cfg` (`typed`: as parsed, None when it could not be) is not a
    cell of the sweep `spec` (sweep.toml parsed), "" when it is: a folder named by a config digest (as
    `icl-race sweep` names them) that holds another config (a swapped or copied cell), or a config off the
    grid (a cell of an earlier grid, or of another sweep). A hand-made sweep's own names (no digest) are
    taken as they are."""
    digest = typed.digest() if typed is not None else None
    if digest and len(name) == len(digest) and all(ch in "0123456789abcdef" for ch in name) and name != digest:
        return f"foreign: holds the run of another config (digest {digest}), not the cell its name says"
    if not isinstance(spec, dict):
        return ""
    flat = {k: _plain(v) for k, v in _flat(cfg).items()}
    grid: dict = g if isinstance(g := spec.get("grid"), dict) else {}
    for field, values in grid.items():
        if isinstance(values, list) and field in flat and flat[field] not in values:
            return f"not in this sweep's grid ({field} = {flat[field]!r}; sweep.toml lists {values})"
    zipped: dict = z if isinstance(z := spec.get("zip"), dict) else {}
    if zipped and all(isinstance(v, list) and f in flat for f, v in zipped.items()):
        if tuple(flat[f] for f in zipped) not in list(zip(*zipped.values())):
            return f"not in this sweep's grid (its {', '.join(zipped)} are no row of sweep.toml's [zip])"
    for sec, table in spec.items():
        if sec in config.SECTIONS and isinstance(table, dict):
            for key, value in table.items():
                swept = f"{sec}.{key}" in zipped or f"{sec}.{key}" in grid or f"{sec}.{key}" in _design_fields(spec)
                if f"{sec}.{key}" in flat and flat[f"{sec}.{key}"] != value and not swept:
                    return (
                        f"not in this sweep's grid ({sec}.{key} = {flat[f'{sec}.{key}']!r}; sweep.toml says {value!r})"
                    )
    return ""


def load_sweep(d: Path) -> SweepDir:
    """Every cell of a sweep directory; a finished one (results.npz there) is read as a `Run`. Only the
    grid's cells are read: a folder that is not one (`_not_a_cell`) is listed with its reason, no run."""
    d = Path(d)
    entries: list[tuple[Path, dict | None, str, Run | None, str, RunState | None]] = []
    spec_text = (d / "sweep.toml").read_text() if (d / "sweep.toml").is_file() else None
    try:
        spec = tomllib.loads(spec_text) if spec_text is not None else None
    except (tomllib.TOMLDecodeError, RecursionError):
        spec = None
    for c in sorted(p for p in (d / "cells").iterdir() if p.is_dir()):
        try:
            cfg, typed = read_config_parsed(c)  # its one parse: the cell's digest, its Run.cfg
        except ConfigError as e:
            entries.append((c, None, "unreadable", None, str(e), None))
            continue
        if why := _not_a_cell(c.name, cfg, typed, spec):
            entries.append((c, cfg, "foreign" if why.startswith("foreign") else "outside", None, why, None))
            continue
        st = state(c, cfg)  # every reader's answer: finished, training or stopped as of a step, or empty
        if not st.finished:
            entries.append((c, cfg, "pending" if st.step is None else "partial", None, st.text(), st))
            continue
        try:
            entries.append((c, cfg, "done", load_run_results(c, (cfg, typed))[0], "", FINISHED))
        except ConfigError as e:
            entries.append((c, cfg, "unreadable", None, str(e), None))
    fields = _grid_fields(spec_text, [cfg for _, cfg, *_ in entries if cfg is not None])
    cells = [
        CellEntry(c.name, c, {f: _flat(cfg).get(f) for f in fields} if cfg else {}, st, run, cfg, why, rs)
        for c, cfg, st, run, why, rs in entries
    ]
    return SweepDir(d, fields, cells, spec_text, read_design(d)[0])
