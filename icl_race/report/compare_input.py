"""What `icl-race compare` reads, checked before any statistics: the runs, their names and the event
compared (`read`), and the files it writes (NAMES). Light (no scipy, no matplotlib), so that the command
refuses a bad input in one line and says what it does before report/compare.py's statistics are imported."""

from __future__ import annotations

from pathlib import Path

from icl_race import rundir
from icl_race.config import ConfigError
from icl_race.rundir import runset

NAMES = ("compare.md", "compare.json", "figures/km.png", "figures/km.pdf")  # what `write` writes


def read(
    dirs: list[str | Path], event: str | None, labels: list[str] | None = None
) -> tuple[list[str], list[rundir.Run], str]:
    """(names, runs, event) of `dirs`: each run named by `labels` or its folder (`names`), `event`
    defaulting to the first run's headline; every refusal a one-line ConfigError."""
    if len(dirs) < 2:
        raise ConfigError("compare needs at least two run directories")
    named = names(dirs, labels)
    runs = runset.load(list(dirs), sweeps=False).runs
    event = event or runs[0].headline
    for r in runs:
        if event not in r.times:
            raise ConfigError(f"{r.dir}: no event {event!r} (its events: {', '.join(r.times)})")
    return named, runs, event


def names(dirs: list[str | Path], labels: list[str] | None = None) -> list[str]:
    """The groups' names: `labels` (one per directory, distinct), else each folder's name with as many
    parent folders as tell two different folders apart; a directory given twice gets ' (2)', ' (3)', ..."""
    if labels:
        if len(labels) != len(dirs):
            raise ConfigError(
                f"--label: {len(labels)} given for {len(dirs)} directories (one per directory, in their order)"
            )
        for x in labels:
            if not x.strip() or labels.count(x) > 1:
                raise ConfigError(f"--label {x!r}: expected a distinct, non-empty name for each directory")
        return list(labels)
    parts = [Path(d).resolve().parts for d in dirs]
    distinct, short = len(set(parts)), [p[-1] for p in parts]
    for k in range(1, max(map(len, parts)) + 1):
        short = ["/".join(p[-k:]) for p in parts]
        if len(set(short)) == distinct:
            break
    seen: dict[str, int] = {}
    out = []
    for x in short:
        seen[x] = seen.get(x, 0) + 1
        out.append(x if seen[x] == 1 else f"{x} ({seen[x]})")
    return out
