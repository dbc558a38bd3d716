"""The progress line of a run (`ProgressBar`, called by the runner after each chunk) and `hms`, the
durations it and the sweep's projections print."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable

import numpy as np


class ProgressBar:
    """One line per chunk, from the engine's `Progress`: progress, seed-steps/s, the fraction of seeds
    that have reached the headline event, the seeds still training (live: all of them, or fewer once
    seeds retire), the time elapsed and a bound on the time left. Redrawn in
    place on a terminal and in a Jupyter notebook (whose output areas take a carriage return as one);
    on a pipe, a line at most every `every` seconds (and the last). `stream`: sys.stderr as it is when
    the bar is made (a notebook's kernel replaces it).

    The rate is the training's own: the chunk's computed seed-steps (its live seeds when seeds retire)
    over its seconds less the compilation
    inside it (`compiled()`: the process's compile seconds so far, run/compile_stats.py by default),
    so that the first chunk does not show a speed orders of magnitude below the run's.

    The time left is an upper bound ("<=") at the speed measured so far, so it counts everything the
    rest of the training costs:

        steps left x wall seconds per step (compilation taken out)
        + chunk programs not compiled yet x the longest compilation a chunk has had

    The seconds per step are the wall time since the end of the first chunk (which carries one-off
    costs; until a second one ends, the first chunk's own time less its compilation stands in), so
    they include the evaluations and the host's work between chunks (checkpoints, retirement). No
    later chunk costs more per step: evaluations are as frequent (linear spacing) or sparser (log),
    and retirement and the early stop only take work away. Compilation is counted per program, not
    per step, because it is paid once: a linear run compiles its one chunk program in its first
    chunk and nothing after it; a log-spaced run compiles one per new evaluation period, which `plan`
    (the run's `engine.chunks.ChunkPlan`) tells. Without a plan no compilation is expected."""

    def __init__(
        self,
        event: str = "icl",
        stream=None,
        every: float = 10.0,
        clock=time.monotonic,
        compiled: Callable[[], float] | None = None,
        plan: Iterable[tuple[int, int, int]] = (),
    ):
        if compiled is None:
            from icl_race.run import compile_stats

            compiled = lambda: compile_stats.snapshot()[1]
        stream = sys.stderr if stream is None else stream
        self.event, self.stream, self.every, self.clock, self.compiled = event, stream, every, clock, compiled
        self.plan = list(plan)
        self.label = "ICL acquired" if event == "icl" else event
        self.tty = stream.isatty() or type(stream).__module__.startswith("ipykernel")
        self.last = -1e9  # when the last line was written (on a pipe)
        self.start = clock()
        self.compiled_last = compiled()  # compile seconds at the end of the last chunk
        self.first: tuple[float, int, float] | None = None  # (time, step, compile seconds) after the first chunk
        self.longest_compile = 0.0
        self.periods_run: set[int] = set()

    def __call__(self, p) -> None:
        now, compiled = self.clock(), self.compiled()
        chunk_compile = compiled - self.compiled_last
        self.compiled_last = compiled
        self.longest_compile = max(self.longest_compile, chunk_compile)
        frac = p.step / p.steps
        acquired = int(np.sum(p.t_first[self.event] >= 0))
        # the seeds the chunk computed: with retirement fewer than the run's, and the rate is the machine's
        rate = p.chunk_seeds * p.chunk_steps / max(p.chunk_seconds - chunk_compile, 1e-9)
        if self.first is None:
            self.first = (now, p.step, compiled)
            per_step = (p.chunk_seconds - chunk_compile) / p.chunk_steps
        else:
            since, step, compiled_then = self.first
            per_step = (now - since - (compiled - compiled_then)) / max(p.step - step, 1)
        self.periods_run |= {period for t0, period, n in self.plan if t0 + period * n == p.step}
        to_compile = {period for t0, period, _ in self.plan if t0 >= p.step} - self.periods_run
        left = (p.steps - p.step) * max(per_step, 0.0) + len(to_compile) * self.longest_compile
        bar = "#" * int(24 * frac) + "-" * (24 - int(24 * frac))
        line = (
            f"[{bar}] step {p.step:,}/{p.steps:,} | {rate:,.0f} seed-steps/s | "
            f"{self.label} {acquired}/{p.seeds} ({acquired / p.seeds:.0%}) | {p.chunk_seeds}/{p.seeds} live | "
            f"{hms(now - self.start)} elapsed, <= {hms(left)} left"
        )
        done = p.step >= p.steps or acquired == p.seeds
        if self.tty:
            self.stream.write("\r" + line + ("\n" if done else ""))
        elif done or now - self.last >= self.every:
            self.stream.write(line + "\n")
            self.last = now
        self.stream.flush()


def hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s"
