"""Statistics reports of a run or sweep directory, and the `hist` terminal view.

    write_report(DIR)  ->  DIR/report.md, DIR/report.json, DIR/figures/<name>.png and .pdf
    hist_text(DIR)     ->  a text histogram of the headline time with the censored count, and a summary line

One module per system's report (classification_run, classification_sweep, regression, memorization),
composed from the statistics in `icl_race.analysis` and the figures in `icl_race.plots`; `format` and
`paper` are shared. The directories are read through `icl_race.rundir`. Imports no jax.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from icl_race import rundir
from icl_race.config import ConfigError
from icl_race.report import classification_run, classification_sweep, memorization, regression
from icl_race.report.format import jsonable, save_figure

N_BOOT = 2000


def _check_dir(d: Path) -> str:
    if not d.is_dir():
        raise ConfigError(f"{d}: no such directory")
    if rundir.is_sweep(d):
        return "sweep"
    if (d / rundir.CONFIG).exists() or (d / rundir.RESULTS).exists():
        return "run"
    raise ConfigError(f"{d}: neither a run directory (config.json, results.npz) nor a sweep directory (cells/)")


def _task_kind(d: Path) -> str:
    """task.kind of a run directory, or of a sweep's first cell that has a config (classification when
    none has one yet: the report then lists the unfinished cells)."""
    configs = [d / "config.json"] if (d / "config.json").exists() else sorted((d / "cells").glob("*/config.json"))
    return rundir.read_config(configs[0].parent)["task"].get("kind", "classification") if configs else "classification"


def _load(d: Path, kind: str):
    """The directory as a `rundir.Run` or `rundir.SweepDir`, after the one-line refusals."""
    task_kind = _task_kind(d)
    if task_kind == "memorization":
        memorization.refuse(d)
    return task_kind, (rundir.load_run(d) if kind == "run" else rundir.load_sweep(d))


def write_report(d: str | Path, n_boot: int = N_BOOT, seed: int = 0) -> list[str]:
    """Write DIR/report.md, DIR/report.json and DIR/figures/*.png|pdf; returns the written paths
    relative to DIR."""
    d = Path(d)
    kind = _check_dir(d)
    rng = np.random.default_rng(seed)
    task_kind, found = _load(d, kind)
    if task_kind == "linear_regression":  # losses and transition times, not t_ICL: a report of its own
        report, md, figs = regression.run_report(found) if kind == "run" else regression.sweep_report(found)
    elif kind == "run":
        report, md, figs = classification_run.run_report(classification_run.run_dict(found), n_boot, rng)
    else:
        report, md, figs = classification_sweep.sweep_report(found, n_boot, rng)
    from icl_race import __version__

    written = []
    for name, fig in figs.items():
        written += save_figure(fig, d / "figures", name)
    report |= {"icl_race_version": __version__, "n_boot": n_boot, "seed": seed, "figures": written}
    rundir.atomic_write(d / "report.json", (json.dumps(jsonable(report), indent=1, allow_nan=False) + "\n").encode())
    rundir.atomic_write(d / "report.md", md.encode())
    return ["report.md", "report.json", *written]


def hist_text(d: str | Path, bins: int = 12) -> str:
    """The `hist` view of a classification run or sweep directory."""
    d = Path(d)
    kind = _check_dir(d)
    _, found = _load(d, kind)
    if kind == "run":
        return classification_run.hist_text(found, bins)
    return classification_sweep.hist_text(found)
