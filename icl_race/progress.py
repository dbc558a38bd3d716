"""The progress line of a run (`ProgressBar`, called by the runner after each chunk) and `hms`, the
durations it and the sweep's projections print."""

from __future__ import annotations

import sys
import time

import numpy as np


class ProgressBar:
    """One line per chunk: progress, seed-steps/s, the fraction of seeds that have reached the headline
    event, the time elapsed and an estimate of the time left. Redrawn in place on a terminal; on a pipe,
    a line at most every `every` seconds (and the last). The estimate is the steps left at the training
    rate since the first chunk (which carries the compilation); an early stop only shortens it."""

    def __init__(self, event: str = "icl", stream=sys.stderr, every: float = 10.0, clock=time.monotonic):
        self.event, self.stream, self.every, self.clock, self.last = event, stream, every, clock, -1e9
        self.label = "ICL acquired" if event == "icl" else event
        self.tty = stream.isatty()
        self.start = clock()
        self.first: tuple[float, int] | None = None  # (time, step) at the end of the first chunk

    def __call__(self, p) -> None:
        now = self.clock()
        frac = p.step / p.steps
        acquired = int(np.sum(p.t_first[self.event] >= 0))
        rate = p.seeds * p.chunk_steps / max(p.chunk_seconds, 1e-9)
        if self.first is None:
            self.first = (now, p.step)
            steps_per_s = p.chunk_steps / max(p.chunk_seconds, 1e-9)
        else:
            steps_per_s = (p.step - self.first[1]) / max(now - self.first[0], 1e-9)
        left = (p.steps - p.step) / max(steps_per_s, 1e-9)
        bar = "#" * int(24 * frac) + "-" * (24 - int(24 * frac))
        line = (f"[{bar}] step {p.step:,}/{p.steps:,} | {rate:,.0f} seed-steps/s | "
                f"{self.label} {acquired}/{p.seeds} ({acquired / p.seeds:.0%}) | "
                + (f"{p.chunk_seeds} live | " if p.chunk_seeds < p.seeds else "") +
                f"{hms(now - self.start)} elapsed, <= {hms(left)} left")
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
