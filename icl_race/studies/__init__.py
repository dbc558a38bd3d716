"""`icl-race analyze STUDY SUBCOMMAND [DIR...]`: each study's analyses of run directories, one command.

A study module (`icl_race/studies/<study>.py`) is glue only: it reads run or sweep directories
(`icl_race.rundir.runset`), or trains the seeds a test needs itself (`icl_race.run.retrain`, a system's integrator),
hands their arrays to pure functions in `icl_race.analysis` / `icl_race.theory`, and returns their typed
result, which has a `text()` (markdown) and is a dataclass (its JSON). The
command writes the JSON to `experiments/<study>/results/<subcommand>.json` (or --out) and prints the text.

    COMMANDS = {"lr": lr}          # in the study module: subcommand -> fn(dirs, n_boot, seed, **options) -> result
    FIGURES = {"lr": figures}      # optional: subcommand -> fn(result) -> {suffix: matplotlib figure}
    DIRECTORIES = {"ceiling": "none", "kstar": "any"}   # optional: what a subcommand takes besides
                                   # the default, one or more directories ("some"); "none": it computes
                                   # everything itself (a Monte Carlo, its own training)
    MARKDOWN = ("single_head",)    # optional: subcommands whose text() is also written, as <out stem>.md

A subcommand's own options come from `--set NAME=VALUE` (`options`): a number, a string, or a comma-
separated list of them, passed to its function as keyword arguments. A result field whose metadata says
{"json": False} (e.g. the points behind a figure) stays out of the JSON. Figures are written as PNG
next to the JSON: <out stem><suffix>.png.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
from pathlib import Path

import numpy as np

from icl_race import rundir
from icl_race.config import ConfigError

STUDIES = ("scale", "race", "memorization", "levers", "linear_attention")
DIRECTORIES = ("some", "any", "none")


def commands(study: str) -> dict:
    if study not in STUDIES:
        raise ConfigError(f"study {study!r}: expected one of {', '.join(STUDIES)}")
    return importlib.import_module(f"icl_race.studies.{study}").COMMANDS


def parse_option(text: str) -> tuple[str, object]:
    """`NAME=VALUE` of --set: VALUE a number, a string, or a comma-separated list of them."""
    name, eq, value = text.partition("=")
    if not eq or not name.strip():
        raise ConfigError(f"--set {text!r}: expected NAME=VALUE")
    items = [_scalar(v.strip()) for v in value.split(",")]
    return name.strip().replace("-", "_"), items if "," in value else items[0]


def _scalar(v: str):
    for kind in (int, float):
        try:
            return kind(v)
        except ValueError:
            pass
    return v


def payload(result) -> dict:
    """The result as JSON-ready values: its fields but those marked {"json": False}."""
    return {f.name: _plain(getattr(result, f.name)) for f in dataclasses.fields(result) if f.metadata.get("json", True)}


def _plain(v):
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return _plain(v.tolist())
    if isinstance(v, np.generic):
        return v.item()
    return v


def run(
    study: str,
    sub: str,
    dirs: list[str],
    out: Path | None,
    n_boot: int | None = None,
    seed: int = 0,
    options: dict | None = None,
):
    """The analysis `study sub` of `dirs`, its JSON written to `out` (default
    experiments/<study>/results/<sub>.json), its markdown (MARKDOWN) and figures beside it; returns (result, paths written).
    n_boot None: the study function's own default."""
    module = importlib.import_module(f"icl_race.studies.{study}") if study in STUDIES else None
    table = commands(study)
    if sub not in table:
        raise ConfigError(f"analyze {study} {sub!r}: expected one of {', '.join(table)}")
    _check_dirs(study, sub, getattr(module, "DIRECTORIES", {}).get(sub, "some"), dirs)
    kwargs = dict(options or {}) | {"seed": seed} | ({} if n_boot is None else {"n_boot": n_boot})
    takes = [n for n, p in inspect.signature(table[sub]).parameters.items() if p.kind == p.KEYWORD_ONLY]
    unknown = sorted(set(options or {}) - set(takes))
    if unknown:
        raise ConfigError(
            f"analyze {study} {sub}: no option {', '.join(unknown)} (--set takes "
            f"{', '.join(n for n in takes if n not in ('n_boot', 'seed')) or 'none'})"
        )
    out = Path(out) if out else Path("experiments") / study / "results" / f"{sub}.json"
    if out.exists() and out.is_dir():
        raise ConfigError(f"--out {out}: is a directory; give a file name")
    md = out.with_name(f"{out.stem}.md") if sub in getattr(module, "MARKDOWN", ()) else None
    if md == out:
        raise ConfigError(f"--out {out}: its tables go to <stem>.md beside the JSON; give the JSON another name")
    result = table[sub](list(dirs), **kwargs)
    out.parent.mkdir(parents=True, exist_ok=True)
    rundir.atomic_write(
        out,
        (
            json.dumps(
                {"study": study, "analysis": sub, "dirs": [str(d) for d in dirs], "result": payload(result)}, indent=1
            )
            + "\n"
        ).encode(),
    )
    written = [out]
    if md:
        rundir.atomic_write(md, result.text().encode())
        written.append(md)
    figures = getattr(module, "FIGURES", {}).get(sub)
    if figures:
        from icl_race.plots import png_bytes

        for suffix, fig in figures(result).items():
            path = out.with_name(f"{out.stem}{suffix}.png")
            rundir.atomic_write(path, png_bytes(fig, dpi=110))  # whole or not at all, like every file we write
            written.append(path)
    return result, written


def _check_dirs(study: str, sub: str, takes: str, dirs) -> None:
    """One line before any work: directories given to a subcommand that takes none, or none given to one
    that needs some (which would otherwise summarise nothing, or fail deep inside)."""
    if takes not in DIRECTORIES:
        raise ValueError(f"icl_race.studies.{study}.DIRECTORIES[{sub!r}] = {takes!r}: expected one of {DIRECTORIES}")
    if takes == "none" and dirs:
        raise ConfigError(f"analyze {study} {sub}: takes no directories (got {', '.join(map(str, dirs))})")
    if takes == "some" and not dirs:
        raise ConfigError(f"analyze {study} {sub}: give one or more run or sweep directories")
