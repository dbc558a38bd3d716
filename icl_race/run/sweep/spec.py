"""A sweep file -> its cells: the first of a sweep's three jobs (then plan.py, execute.py), pure: it
reads the sweep file and its bases, writes nothing and imports no jax.

The file format is in the package's docstring (icl_race/run/sweep/__init__.py). A cell is one Config per
point of the grid (crossed with the [zip] rows), named by its config digest: the name of its run
directory, so the hash must never change for a config that did not (test_sweep checks known names).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tomli_w

from icl_race import config, systems
from icl_race.config import Config, ConfigError, name_of, short

# The most cells one sweep may hold. Each cell is a run directory and a Config built and checked before any
# work (~2 ms each on 2 cores): 10,000 cells take ~20 s to expand, and the paper's largest figure has 150.
MAX_CELLS = 10_000


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

    @property
    def pack(self) -> bool:
        """[sweep] pack (default true): cells of one program train as members of one ensemble
        (plan.packs); false: one cell after another, each its own ensemble."""
        return self.raw.get("sweep", {}).get("pack", True)


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


def load(path: str | Path, overrides: Sequence[str] = ()):
    """The sweep file's cells (a Sweep), or, with a [design] section, its question (a design_spec.Design)."""
    raw = _resolve(Path(path), "sweep file")
    grid = raw.pop("grid", {})
    zipped = raw.pop("zip", {})
    raw = config.apply_overrides(raw, list(overrides))
    if "design" in raw:
        from icl_race.run.sweep.design_spec import parse

        # A design based on a grid's file takes its config, not its cells: only its own [grid] is refused.
        own = config.read_toml(Path(path), "sweep file")
        _check_options(raw.get("sweep", {}))
        return parse(raw, own.get("grid", {}), own.get("zip", {}))
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


def _check_options(options) -> None:
    """The [sweep] table: how the sweep runs, not what a cell is (no cell's config holds it)."""
    if not isinstance(options, dict):
        raise ConfigError("[sweep]: expected a table (pack = true | false)")
    for key, value in options.items():
        if key != "pack":
            raise ConfigError(f"sweep.{short(key)}: not a sweep option (the only one is pack = true | false)")
        if not isinstance(value, bool):
            raise ConfigError(f"sweep.pack = {short(value)}: must be true or false")


def expand(raw: dict, grid: dict, zipped: dict | None = None) -> Sweep:
    """The cells of a sweep: every combination of the grid's values, crossed with the rows of the
    zipped fields, on top of `raw` (whose [sweep] table, if any, is the sweep's options)."""
    zipped = zipped or {}
    raw = dict(raw)
    options = raw.pop("sweep", {})
    _check_options(options)
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
    count = math.prod(len(v) for v in grid.values()) * len(rows)
    if count > MAX_CELLS:
        sizes = " x ".join([*(str(len(v)) for v in grid.values()), *([f"{len(rows)} [zip] rows"] if zipped else [])])
        raise ConfigError(
            f"[grid]: {sizes} = {count:,} cells, more than the {MAX_CELLS:,} a sweep may hold "
            "(each is a run directory, built and checked before any work); split it into several sweeps"
        )
    combos = [g + z for g in (itertools.product(*grid.values()) if grid else [()]) for z in rows]
    swept = [*grid, *zipped]
    raws = []
    for combo in combos:
        point = copy.deepcopy(raw)
        for field, value in zip(swept, combo):
            sec, _, key = field.partition(".")
            point.setdefault(sec, {})[key] = value
        raws.append(point)
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
    seen: dict[str, Cell] = {}
    for cell in cells:
        other = seen.setdefault(cell.name, cell)
        if other is not cell:
            raise ConfigError(f"cells {other.values} and {cell.values} are the same config (one run directory)")
    return Sweep(
        {**raw, **({"sweep": options} if options else {}), "grid": grid, **({"zip": zipped} if zipped else {})},
        tuple(cells),
    )


def spec_toml(sweep: Sweep) -> str:
    """The resolved spec as TOML, written by tomli-w (what DIR/sweep.toml holds)."""
    return tomli_w.dumps(sweep.raw)


def same_spec(text: str, sweep: Sweep) -> bool:
    """Whether a stored sweep.toml is `sweep`'s spec. Compared as what it says, not as bytes: a file
    written by an older icl-race (its own TOML writer: inline arrays) is the same spec when it parses to
    the same tables, keys in the same order, values of the same types (both sides rendered by tomli-w,
    so 1 and 1.0 differ, as they did as text)."""
    try:
        return tomli_w.dumps(tomllib.loads(text)) == spec_toml(sweep)
    except (tomllib.TOMLDecodeError, RecursionError, TypeError, ValueError):
        return False
