"""Where a run directory stands, the one answer every reader gives (`report`, `hist`, `export`, `compare`,
`analyze`, `icl_race.load`, a sweep's cells): `state(DIR)`, a `RunState`.

    finished   results.npz there: committed (with meta.json), or whole from a version that renamed it
               before meta.json, or made by hand (the runner's own test, `layout.is_done`, redoes the
               tail of such a directory: the same arrays)
    training   a live process holds DIR/.lock: its results so far (live.npz) are as of step X of Y
    stopped    not finished and no process holds the lock (killed, interrupted, crashed): its results so
               far are as of step X of Y, and rerunning its command resumes it
    empty      not started: no chunk written yet (no live.npz, no checkpoint), and no process holds the lock

Liveness is the lock, never the presence of live.npz: the runner holds an flock on DIR/.lock for the whole
run (rundir/write.py's `lock`) and the kernel drops it when the process dies, even by SIGKILL. A reader
probes it with a shared lock it lets go at once, never blocking and never writing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import stat
import zipfile
from pathlib import Path

import numpy as np

from icl_race.rundir.layout import LIVE, LOCK, RESULTS, checkpoint_steps

KINDS = ("finished", "training", "stopped", "empty")


@dataclasses.dataclass(frozen=True)
class RunState:
    kind: str  # one of KINDS
    step: int | None = None  # an unfinished run's results so far are as of this step (None: none written)
    budget: int | None = None  # its train.steps (None when its config cannot be read)
    pid: str | None = None  # training: the pid the lock's holder wrote in DIR/.lock

    @property
    def finished(self) -> bool:
        return self.kind == "finished"

    def text(self) -> str:
        """The state in words, as every reader prints it: "stopped at step 150 of 200", "still training
        (pid 4242) as of step 150 of 200", "finished"."""
        if self.finished:
            return "finished"
        holder = f" (pid {self.pid})" if self.pid else ""
        if self.step is None:
            return (
                f"still training{holder}, no chunk written yet"
                if self.kind == "training"
                else "not started (no chunk written yet)"
            )
        if self.kind == "training":
            return f"still training{holder} as of {self.step_text()}"
        return f"stopped at {self.step_text()} (no process holds its lock: killed or interrupted; rerun its command to resume)"

    def as_of(self) -> str | None:
        """What marks each table and figure of an unfinished run's report: "partial, as of step 150 of 200";
        None when finished."""
        if self.finished:
            return None
        return "partial" if self.step is None else f"partial, as of {self.step_text()}"

    def step_text(self) -> str:
        """Where the results so far are as of: "step 150 of 200" (the budget left out when unknown)."""
        return f"step {self.step:,}" + (f" of {self.budget:,}" if self.budget is not None else "")

    def record(self) -> dict:
        """The state as data (report.json, compare.json, export's provenance, analyze's JSON)."""
        return {"state": self.kind, "as_of_step": self.step, "budget": self.budget}


FINISHED = RunState("finished")


def lock_holder(d: Path) -> str | None:
    """The pid written in DIR/.lock when a live process holds it ("unknown" when it wrote none yet), None
    when none does. A shared lock taken without waiting and let go at once: the writer's `lock` retries
    for an instant, so this probe never makes a starting run think its directory is taken."""
    try:
        # O_NONBLOCK: a FIFO planted as .lock does not hang the reader; O_NOFOLLOW: a link is no runner's
        fd = os.open(Path(d) / LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None  # no lock file (never run here), or one no runner can hold
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        except OSError:
            return None  # a file system without locks: no runner holds one there either
        return None
    finally:
        os.close(fd)  # lets the shared lock go


def _live_steps(d: Path) -> tuple[int, int] | None:
    """(steps_run, budget) of DIR/live.npz, read without its curves; None when there is none or it cannot
    be read (the reader that loads it names the damage: rundir/read.py's `load_live`)."""
    path = Path(d) / LIVE
    if not path.is_file():
        return None
    with contextlib.suppress(OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        with np.load(path, allow_pickle=False) as z:
            steps_run, budget = z["steps_run"], z["budget"]
            if steps_run.shape == budget.shape == () and steps_run.dtype.kind == budget.dtype.kind == "i":
                return int(steps_run), int(budget)
    return None


def _budget(d: Path, cfg: dict | None) -> int | None:
    """train.steps of DIR/config.json (`cfg`, when the caller read it), None when it cannot be read (the
    reader that needs it says why)."""
    from icl_race.config import ConfigError
    from icl_race.rundir.files import read_config

    with contextlib.suppress(ConfigError, OSError):
        steps = (cfg or read_config(d))["train"].get("steps")
        return steps if isinstance(steps, int) and not isinstance(steps, bool) else None
    return None


def state(d: str | Path, cfg: dict | None = None) -> RunState:
    """Where the run in `d` stands (the module's docstring): reads the lock, live.npz's two scalars and the
    checkpoints' names, nothing else (config.json's budget too, unless the caller read it: `cfg`)."""
    d = Path(d)
    if (d / RESULTS).exists():
        return FINISHED
    pid = lock_holder(d)
    live = _live_steps(d)
    ckpts = checkpoint_steps(d)
    step, budget = live if live else (ckpts[-1] if ckpts else None, _budget(d, cfg))
    kind = "training" if pid is not None else "stopped" if step is not None else "empty"
    return RunState(kind, step, budget, pid)
