"""Counts XLA compilations and their seconds through jax's monitoring events.

Used for `meta.json`'s compile seconds and by tests that assert one compilation serves many cells. A
program loaded from the persistent compilation cache (icl_race/run/compile_cache.py) counts as a
compilation whose seconds are the load's, and also as a cache hit.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from jax import monitoring

_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)
_lock = threading.Lock()
_HIT = "/jax/compilation_cache/cache_hits"
_totals: dict[str, float] = {"compiles": 0, "seconds": 0.0, "hits": 0}


def _listener(event: str, duration_secs: float, **_) -> None:
    if event in _EVENTS:
        with _lock:
            _totals["seconds"] += duration_secs
            _totals["compiles"] += event == _EVENTS[-1]


def _hit_listener(event: str, **_) -> None:
    if event == _HIT:
        with _lock:
            _totals["hits"] += 1


monitoring.register_event_duration_secs_listener(_listener)
monitoring.register_event_listener(_hit_listener)


def snapshot() -> tuple[int, float]:
    """(backend compilations so far, seconds spent tracing, lowering and compiling so far)."""
    with _lock:
        return int(_totals["compiles"]), _totals["seconds"]


def cache_hits() -> int:
    """Programs loaded from the persistent compilation cache so far (each also counts as a compilation)."""
    with _lock:
        return int(_totals["hits"])


@dataclass(frozen=True)
class Counters:
    """The clock and the counters above at one moment; a run's seconds and compilations are what
    they grew by (`since`) between the build of its program and the end of its training."""

    clock: float  # time.perf_counter()
    compiles: int
    compile_seconds: float
    cache_hits: int

    @classmethod
    def now(cls) -> Counters:
        return cls(time.perf_counter(), *snapshot(), cache_hits())

    def since(self, earlier: Counters) -> Counters:
        return Counters(
            self.clock - earlier.clock,
            self.compiles - earlier.compiles,
            self.compile_seconds - earlier.compile_seconds,
            self.cache_hits - earlier.cache_hits,
        )
