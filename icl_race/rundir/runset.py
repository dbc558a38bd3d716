"""Several run directories read together, for the commands that look across runs (export, compare).

A directory is a run or a sweep (its finished cells); each is read through `icl_race.rundir.load`, so
a missing, foreign or damaged directory is the same one-line `ConfigError` as everywhere else. What
tells the runs apart is their config: the fields a sweep declares ([grid], [zip]) and every field whose
value differs between any two of the runs (`rundir.differing_fields` against the first run: a field
differs somewhere exactly when some run differs from the first in it).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from icl_race import rundir
from icl_race.config import ConfigError


@dataclasses.dataclass(frozen=True)
class RunSet:
    runs: list[rundir.Run]
    fields: list[str]  # `section.field`s that tell the runs apart: a sweep's declared ones first, then the rest
    skipped: list[str]  # sweep cells without a finished run: "<cell dir>: <why>"


def value(cfg: dict, field: str) -> Any:
    """The value of `section.field` in a config dict (None when absent)."""
    section, _, name = field.partition(".")
    return (cfg.get(section) or {}).get(name)


def differing(configs: list[dict]) -> list[str]:
    """`section.field` of every field whose value is not the same in all `configs`."""
    return sorted({f for c in configs[1:] for f in rundir.differing_fields(configs[0], c)})


def load(dirs: list[str | Path], sweeps: bool = True) -> RunSet:
    """The finished runs of `dirs` in order (a sweep's cells in its order); with `sweeps` False a sweep
    directory is refused (a tool that compares runs one by one names its cells instead)."""
    runs, declared, skipped = [], [], []
    for d in dirs:
        found = rundir.load(d)
        if isinstance(found, rundir.Run):
            runs.append(found)
            continue
        if not sweeps:
            raise ConfigError(f"{d}: a sweep directory; give its cells one by one ({Path(d) / 'cells'}/<name>)")
        runs += found.runs
        declared += [f for f in found.fields if f not in declared]
        skipped += [f"{c.dir}: {c.reason}" for c in found.cells if c.run is None]
    if not runs:
        raise ConfigError(f"{', '.join(map(str, dirs))}: no finished run (every sweep cell is unfinished)")
    rest = [f for f in differing([r.config for r in runs]) if f not in declared]
    return RunSet(runs, declared + rest, skipped)
