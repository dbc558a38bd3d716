"""A sweep file's [design] section -> a Design: the question a sweep asks instead of a grid (issue 54).
Pure, like spec.py: it reads tables, writes nothing and imports no jax.

    base = "kstar_w512_N32.toml"
    [design]
    kind = "kstar"            # K*: where half the seeds acquire ICL within the budget
    axis = "task.K"           # the only axis of a K* design (may be left out)
    k_lo = 500                # the prior range of K (the paper's)
    k_hi = 400000
    seeds_per_round = 16
    max_seeds = 480
    half_width = 0.05         # stop when the 95 % CI of log10 K* is no wider than 2 x this

    [design]
    kind = "median"           # the Kaplan-Meier median t_ICL of the config's one cell
    block = 16                # seeds per round
    max_seeds = 256
    rel_width = 0.25          # stop when (hi - lo) / median of its 95 % CI is at most this
    event = "t_icl"           # or "fall": the lasting fall (needs train.retire_at_fall = true)

Every other section is the config every round's cells share (N, width, lr, budget; a K* design sets task.K
per cell, and task.K_max to its largest K unless the file sets it). A round's cells are
ordinary sweep cells, hash-named run directories: one per distinct K of the round, each with its own
contiguous range of seed ids (ensemble.first_seed, ensemble.seeds), so that no seed is trained twice and
the cells of one K pool in every report (report/sample.py's `pool`). The statistics (placement, the
posterior, the stopping rules) are analysis/design.py's.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

import tomli_w

from icl_race import config
from icl_race.analysis import design as dz
from icl_race.config import Config, ConfigError, name_of, short
from icl_race.rundir.sweepdir import DESIGN_FIELDS

PARAMS: dict[str, type[dz.KStarDesign] | type[dz.MedianDesign]] = {"kstar": dz.KStarDesign, "median": dz.MedianDesign}
TYPES = {"int": int, "float": float, "str": str}  # the annotations of the designs' fields, as written


@dataclasses.dataclass(frozen=True)
class Design:
    """A design sweep: its resolved spec (what sweep.toml stores), the config every cell shares and the
    design's parameters. Its cells exist round by round (`round_cells`); `first_seed` numbers its seeds."""

    raw: dict
    base: dict  # the shared config's raw tables (task.K_max set for a K* design)
    kind: str
    params: dz.KStarDesign | dz.MedianDesign
    cfg: Config  # the shared config at its own values: root seed, first seed, budget

    @property
    def fields(self) -> list[str]:
        """What differs between its cells: summary.csv's columns, the report's swept fields."""
        return list(DESIGN_FIELDS[self.kind])

    @property
    def run_event(self) -> str | None:
        """The run event whose first passage is a seed's time: the headline (None: t_ICL), or "fell" for a
        median design on the fall."""
        return dz.EVENTS[self.params.event] if isinstance(self.params, dz.MedianDesign) else None

    @property
    def pack(self) -> bool:
        return self.raw.get("sweep", {}).get("pack", True)


def _option(kind: str, key: str, value: Any) -> Any:
    fields = {f.name: TYPES[str(f.type)] for f in dataclasses.fields(PARAMS[kind])}
    if key not in fields:
        raise ConfigError(f"design.{name_of(key)}: not an option of a {kind} design ({', '.join(fields)})")
    want = fields[key]
    if want is str:  # a choice (MedianDesign.event): the design's own check names the values allowed
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or (want is int and not isinstance(value, int)):
        raise ConfigError(f"design.{key} = {short(value)}: must be {'an integer' if want is int else 'a number'}")
    if not math.isfinite(value):
        raise ConfigError(f"design.{key} = {short(value)}: must be finite")
    return want(value)


def parse(raw: dict, grid: dict, zipped: dict) -> Design:
    """The [design] table of a resolved sweep file (`raw` holds it) -> a Design, every field checked in
    one line naming it; a design has no [grid] or [zip] (one question per folder)."""
    if grid or zipped:
        raise ConfigError(
            "[design]: a design sweep has no [grid] or [zip] (one question per folder; a grid of designs is several files)"
        )
    table = raw["design"]
    if not isinstance(table, dict):
        raise ConfigError('[design]: expected a table (kind = "kstar" | "median", ...)')
    table = dict(table)
    kind = table.pop("kind", None)
    if kind not in PARAMS:
        raise ConfigError(f'design.kind = {short(kind)}: must be "kstar" or "median"')
    axis = table.pop("axis", "task.K") if kind == "kstar" else None
    if axis != "task.K" and kind == "kstar":
        raise ConfigError(f'design.axis = {short(axis)}: a kstar design varies "task.K" only')
    params = PARAMS[kind](**{k: _option(kind, k, v) for k, v in table.items()})
    base = copy.deepcopy({k: v for k, v in raw.items() if k not in ("design", "sweep")})
    if isinstance(params, dz.KStarDesign):
        ks = params.candidates()
        task = base.setdefault("task", {})
        if task.get("variant", "standard") != "standard":
            raise ConfigError(f'task.variant = {short(task["variant"])}: a kstar design runs the "standard" task')
        if "K_max" in task and config.as_float(task["K_max"]) is not None and task["K_max"] < ks[-1]:
            raise ConfigError(
                f"task.K_max = {short(task['K_max'])}: below the design's largest K ({ks[-1]:,}, design.k_hi)"
            )
        task.setdefault("K_max", int(ks[-1]))  # one item pool for every round: one compilation
        task["K"] = int(ks[0])  # the shared config at the design's smallest K; each cell sets its own
    cfg = config.from_dict(base)  # the shared config, checked as any cell's ([sweep]: by spec.load)
    if isinstance(params, dz.MedianDesign) and params.event == "fall" and not cfg.train.retire_at_fall:
        raise ConfigError(
            'train.retire_at_fall = false: a median design on the fall (design.event = "fall") reads each seed\'s '
            "t_fell, which only train.retire_at_fall = true records; set it to true"
        )
    per = params.seeds_per_round if isinstance(params, dz.KStarDesign) else params.block
    if cfg.ensemble.block > per:
        raise ConfigError(
            f"ensemble.block = {cfg.ensemble.block}: above the design's {per} seeds a round (each round would be "
            f"padded to {cfg.ensemble.block} seeds, computed and thrown away); set ensemble.block <= {per}"
        )
    last = cfg.ensemble.first_seed + params.max_seeds - 1
    if last > config.KEY_MAX:
        raise ConfigError(
            f"design.max_seeds = {params.max_seeds}: seed ids from ensemble.first_seed = {cfg.ensemble.first_seed} "
            f"would pass {config.KEY_MAX}"
        )
    return Design(raw, base, kind, params, cfg)


def spec_text(design: Design) -> str:
    """The resolved design file as TOML (what DIR/sweep.toml holds), written by tomli-w."""
    return tomli_w.dumps(design.raw)


def first_difference(stored: dict, now: dict, prefix: str = "") -> str | None:
    """The first field (section.key) in which two sweep files' tables differ, or None."""
    for key in [*stored, *(k for k in now if k not in stored)]:
        a, b = stored.get(key), now.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            if (found := first_difference(a, b, f"{prefix}{key}.")) is not None:
                return found
        elif a != b or type(a) is not type(b):
            return f"{prefix}{key}"
    return None
