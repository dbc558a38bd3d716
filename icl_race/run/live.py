"""A run's results so far, for a reader while it trains: after a chunk, results.npz's arrays of the steps
trained (run/commit.py's `results_arrays` of a `Trained` of what the chunk's `Progress` holds) are
written to DIR/live.npz, atomically, so that `icl_race.load(DIR)` and `icl-race report DIR` read the
partial curves and first passages of the last chunk written (`rundir.Run.partial`). The commit removes
the file with the checkpoints (`rundir.finish`): results.npz is then the run.

Writing costs a copy of the curves so far: it is done after a chunk only when `every` seconds have
passed since the last write, and at least 20 times as long as that write took, so that it never takes
more than a twentieth of a long run's time whatever the curves' size."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from icl_race import rundir
from icl_race.run.records import Prepared, Trained

EVERY_S = 10.0  # the least interval between two writes
SHARE = 20  # and at least this many times the last write's duration


class LiveResults:
    """The runner's `on_chunk` hook that writes DIR/live.npz (see the module's docstring)."""

    def __init__(self, out: Path, prepared: Prepared, every: float | None = None, clock=time.monotonic):
        self.path = Path(out) / rundir.LIVE
        self.prepared, self.clock = prepared, clock
        self.every = EVERY_S if every is None else every
        self.next = clock()  # the first chunk is written

    def __call__(self, p) -> None:
        if p.step >= p.steps or self.clock() < self.next:
            return  # the last chunk is committed as results.npz instead
        from icl_race.engine.ensemble import concat_history
        from icl_race.run.commit import results_arrays

        tic = self.clock()
        seeds = len(self.prepared.seed_ids)
        curves, eval_steps = concat_history(p.history, p.eval_steps)
        # the first passages, curves and steps so far (results.npz's arrays need no time or compile counts)
        so_far = Trained(
            t_first={k: np.asarray(v) for k, v in p.t_first.items()},
            curves={k: v[:seeds] for k, v in curves.items()},
            eval_steps=eval_steps,
        )
        # the headline event, which a finished run's meta.json names (there is no meta.json yet)
        headline = np.array(self.prepared.program.stop_event)
        arrays = {**results_arrays(self.prepared, so_far), rundir.LIVE_HEADLINE: headline}
        rundir.atomic_write(self.path, rundir.npz_bytes(arrays))
        now = self.clock()
        self.next = now + max(self.every, SHARE * (now - tic))  # module globals: a test writes every chunk
