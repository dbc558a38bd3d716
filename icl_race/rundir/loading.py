"""`load(DIR)`, whichever kind of directory it is: a `Run` (a run directory, finished or not: its `state`)
or a `SweepDir` (a directory with cells/), also as `icl_race.load`; `load_runs`, the finished runs of
several, as the studies read them."""

from __future__ import annotations

from pathlib import Path

from icl_race.config import ConfigError
from icl_race.rundir.layout import CONFIG, LIVE, RESULTS
from icl_race.rundir.read import Run, load_live, load_run
from icl_race.rundir.sweepdir import SweepDir, is_sweep, load_sweep


def load_runs(*dirs: str | Path) -> list[Run]:
    """Every run in `dirs` (run or sweep directories, a sweep's finished cells in order) that the runner
    committed (a meta.json), and every unfinished run directory among `dirs` as its results so far
    (`Run.partial`): what the studies' analyses read (icl_race.studies, whose `analyze` refuses the
    unfinished ones unless told otherwise: studies/inputs.py's `check_finished`)."""
    runs = []
    for d in dirs:
        found = load(d)
        runs += found.runs if isinstance(found, SweepDir) else [found]
    return [r for r in runs if r.meta is not None or r.partial]


def load(d: str | Path | Run) -> Run | SweepDir:
    """A run directory as a `Run` (an unfinished one, training or stopped, as its results so far:
    `load_live`; with none written yet, a ConfigError saying where it stands), a sweep
    directory (one with cells/) as a `SweepDir`; a `Run` (one trained in memory: `icl_race.train`) as it
    is, so that every reader of directories takes it too."""
    if isinstance(d, Run):
        return d
    d = Path(d)
    if not d.is_dir():
        raise ConfigError(f"{d}: no such directory")
    if is_sweep(d):
        return load_sweep(d)
    if (d / RESULTS).exists():
        return load_run(d)
    if (d / CONFIG).exists() or (d / LIVE).exists():
        return load_live(d)  # its results so far, or a line saying where it stands
    raise ConfigError(f"{d}: neither a run directory (config.json, results.npz) nor a sweep directory (cells/)")
