"""A run's chunk plan: where its chunks start, how often each evaluates, and the one program they run in."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

Chunk = tuple[int, int, int]  # (first step, evaluation period, evaluations)


@dataclass(frozen=True)
class ChunkPlan:
    """The chunks of a run, in order (iterating a plan gives them), and the evaluations of the chunk
    program they run in: a shorter chunk runs in it too (`run_chunk`'s capacity), so that it compiles
    nothing new. Fixed by the config alone, so that a resumed run cuts its chunks where an
    uninterrupted one does."""

    chunks: tuple[Chunk, ...]
    capacity: int  # evaluations per chunk program (train.evals_per_chunk)

    @property
    def steps(self) -> int:
        """The budget: where the last chunk ends."""
        if not self.chunks:
            return 0
        t0, period, n = self.chunks[-1]
        return t0 + period * n

    def __iter__(self) -> Iterator[Chunk]:
        return iter(self.chunks)


def chunk_plan(steps: int, eval_every: int, evals_per_chunk: int, spacing: str = "linear") -> ChunkPlan:
    """The chunks of a budget of `steps` (a multiple of eval_every).

    linear: every chunk evaluates every `eval_every` steps. log: chunk c evaluates every
    eval_every * 2**c steps, i.e. evals_per_chunk / log10(2) evaluations per decade of time (what
    power-law tails such as c1(t) need, at a cost in steps that stays proportional to the budget).
    Each period is a static shape, so a log-spaced run compiles one program per distinct period.
    The last chunk is shortened (and the very last period cut to what remains) so that the budget
    is met exactly; it runs in the program of evals_per_chunk periods: a linear run compiles one
    chunk program."""
    plan, t, c = [], 0, 0
    while t < steps:
        period = eval_every * 2**c if spacing == "log" else eval_every
        n = min(evals_per_chunk, (steps - t) // period)
        if n == 0:
            period, n = steps - t, 1
        plan.append((t, period, n))
        t, c = t + period * n, c + 1
    return ChunkPlan(tuple(plan), evals_per_chunk)
