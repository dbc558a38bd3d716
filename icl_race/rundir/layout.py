"""The run directory's layout, what both its writer (rundir/write.py) and its readers (rundir/files.py,
read.py, sweepdir.py) agree on: the names, when a run is done, and the errors.

    DIR/config.json        the resolved config, written first (a different config is refused)
    DIR/results.npz        seed_ids[S]; t_<event>[S] per event of the system (steps, -1 = not reached
                           within what the run observed: censored); diverged[S]; eval_steps[T]; every
                           probe as [S, T, ...]; steps_run, budget
    DIR/meta.json          config, versions, device, compile/run seconds, seed_steps_per_s, stop_event
    DIR/t_<stop>_hist.png  histogram of the headline time
    DIR/checkpoints/       orbax checkpoints of the unfinished run (run/checkpoint.py)
    DIR/params/<at>/       with train.keep_params: every seed's parameters (orbax; leading axis S, as seed_ids)
                           "final" and/or "at_t_icl", written by the commit before results.npz (`Run.params`)
    DIR/live.npz           while it trains: results.npz's arrays as of the last chunk written (run/live.py),
                           read as a partial run (`rundir.load`); removed once the run is committed
    DIR/.lock              held (flock) by the process running in DIR

A run is done when results.npz and meta.json are both there (`is_done`, the one test the runner and
sweeps use): the commit renames results.npz last.
"""

from __future__ import annotations

import re
from pathlib import Path

from icl_race.config import ConfigError

CONFIG, RESULTS, META, LOCK, CHECKPOINTS = "config.json", "results.npz", "meta.json", ".lock", "checkpoints"
PARAMS = "params"  # DIR/params/<at>/: the kept parameters (train.keep_params), at "final" and/or "at_t_icl"
LIVE, LIVE_HEADLINE = "live.npz", "headline"  # live.npz holds the headline event's name beside the arrays
SCALARS = ("steps_run", "budget")
# Every name icl-race writes, moves or deletes inside a run directory (the histograms and damaged-*
# folders are matched by pattern in `refuse_links`), and inside a sweep directory.
RUN_NAMES = (
    CONFIG,
    RESULTS,
    META,
    LOCK,
    CHECKPOINTS,
    LIVE,
    PARAMS,
    f"{CHECKPOINTS}.damaged",
    "figures",
    "report.md",
    "report.json",
)
SWEEP_NAMES = ("cells", "sweep.toml", "summary.csv", "design.json", "submitit", "figures", "report.md", "report.json")


class RunDirError(ConfigError):
    """The directory holds another run, or is locked by another process (`Locked`)."""


class Locked(RunDirError):
    """Another icl-race process is running in the directory."""


class DamagedFileError(ConfigError):
    """A file of a run directory cannot be read back (truncated, overwritten, not what it should be)."""


def temporary_of(name: str) -> str | None:
    """The name whose staged temporary `name` is (`.NAME.tmp<pid>`, rundir/write.py's `_tmp_name`), or None."""
    m = re.fullmatch(r"\.(.+)\.tmp\d+", name)
    return m[1] if m else None


def holds_others(d: Path, names: tuple[str, ...] = RUN_NAMES) -> bool:
    """`d` exists and holds something a writer of `names` did not put there: a folder it did not create,
    which it may write into only when it is its own (rundir/owner.py; a run's: `write.check`). Its lock
    and the temporaries of its names are its own: a kill during the first staged write leaves one."""
    own = lambda n: n == LOCK or temporary_of(n) in names
    return Path(d).is_dir() and any(not own(p.name) for p in Path(d).iterdir())


def is_done(d: Path) -> bool:
    """The run in `d` is finished: its final commit (results.npz renamed last) happened."""
    return (Path(d) / RESULTS).exists() and (Path(d) / META).exists()


def half_finished(d: Path) -> bool:
    """results.npz without meta.json: a run killed while finishing, by a version that renamed results first."""
    return (Path(d) / RESULTS).exists() and not (Path(d) / META).exists()


def checkpoint_steps(d: Path) -> list[int]:
    ckpts = Path(d) / CHECKPOINTS
    return sorted(int(p.name) for p in ckpts.iterdir() if p.name.isdigit()) if ckpts.is_dir() else []
