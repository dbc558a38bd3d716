"""`icl-race analyze STUDY SUBCOMMAND DIR...`: each study's analyses of run directories, one command.

A study module (`icl_race/studies/<study>.py`) is glue only: it reads run or sweep directories
(`icl_race.runset`), hands their arrays to pure functions in `icl_race.analysis` / `icl_race.theory`,
and returns their typed result, which has a `text()` (markdown) and is a dataclass (its JSON). The
command writes the JSON to `experiments/<study>/results/<subcommand>.json` (or --out) and prints the text.

    COMMANDS = {"lr": lr}          # in the study module: subcommand -> fn(dirs, n_boot, seed) -> result
    FIGURES = {"kinf": figure}     # optional: subcommand -> fn(result) -> Figure, written as <out>.png
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path

from icl_race import rundir
from icl_race.config import ConfigError

STUDIES = ("scale",)


def commands(study: str) -> dict:
    if study not in STUDIES:
        raise ConfigError(f"study {study!r}: expected one of {', '.join(STUDIES)}")
    return importlib.import_module(f"icl_race.studies.{study}").COMMANDS


def run(study: str, sub: str, dirs: list[str], out: Path | None, n_boot: int = 2000, seed: int = 0):
    """The analysis `study sub` of `dirs`, its JSON written to `out` (default
    experiments/<study>/results/<sub>.json); returns (result, path written)."""
    table = commands(study)
    if sub not in table:
        raise ConfigError(f"analyze {study} {sub!r}: expected one of {', '.join(table)}")
    result = table[sub](dirs, n_boot=n_boot, seed=seed)
    out = Path(out) if out else Path("experiments") / study / "results" / f"{sub}.json"
    if out.exists() and out.is_dir():
        raise ConfigError(f"--out {out}: is a directory; give a file name")
    out.parent.mkdir(parents=True, exist_ok=True)
    rundir.atomic_write(out, (json.dumps({"study": study, "analysis": sub, "dirs": [str(d) for d in dirs],
                                          "result": dataclasses.asdict(result)}, indent=1) + "\n").encode())
    figure = getattr(importlib.import_module(f"icl_race.studies.{study}"), "FIGURES", {}).get(sub)
    if figure is not None:  # beside the JSON, same name
        from icl_race.plots import png_bytes

        rundir.atomic_write(out.with_suffix(".png"), png_bytes(figure(result), dpi=150))
    return result, out
