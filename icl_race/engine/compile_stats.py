"""Counts XLA compilations and their seconds through jax's monitoring events.

Used for `meta.json`'s compile seconds and by tests that assert one compilation serves many cells.
"""

from __future__ import annotations

import threading

from jax import monitoring

_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)
_lock = threading.Lock()
_totals = {"compiles": 0, "seconds": 0.0}


def _listener(event: str, duration: float, **_) -> None:
    if event in _EVENTS:
        with _lock:
            _totals["seconds"] += duration
            _totals["compiles"] += event == _EVENTS[-1]


monitoring.register_event_duration_secs_listener(_listener)


def snapshot() -> tuple[int, float]:
    """(backend compilations so far, seconds spent tracing, lowering and compiling so far)."""
    with _lock:
        return _totals["compiles"], _totals["seconds"]
