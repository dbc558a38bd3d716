"""SIGINT and SIGTERM while a run trains: the first asks it to stop at the next chunk boundary (with a
checkpoint there), a second exits at once. While a command only measures (`sweep --dry-run`, `bench`),
the first exits at once: there is nothing to keep that is not already written whole.

    with stop_on_signals() as stop:   # installs the handling; re-entrant (a sweep holds it across cells)
        ...
        stop.check(step, checkpoint_step)  # at a chunk boundary: raises Interrupted once a signal came

    with exit_on_signals("the dry run's measurements"):   # the first signal: one line, exit 130 / 143
        ...

The signals received live on the `Stop` the context hands out, never in a module-level flag: the
installed handler carries it, so a nested `stop_on_signals` (a run inside a sweep) finds the same one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

WANTED = (signal.SIGINT, signal.SIGTERM)
# The same signal again within this long of the first is the same stop delivered twice, not a second
# request: GNU `timeout` signals the command and then its whole process group, microseconds apart (seen:
# a sweep under `timeout` exited at once, losing its work since the last checkpoint). A person's second
# Ctrl-C comes later than this.
SAME_STOP_S = 0.1


class Interrupted(Exception):
    """SIGINT or SIGTERM stopped the run at a chunk boundary; str() says how to resume."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.signum = signum


@dataclasses.dataclass(eq=False)
class Stop:
    """The stop signals received so far (appended by the watcher thread), the first one decides."""

    received: list[int] = dataclasses.field(default_factory=list)

    @property
    def requested(self) -> bool:
        return bool(self.received)

    def check(self, step: int, checkpoint_step: int | None) -> None:
        """Raise Interrupted if a stop signal arrived; `checkpoint_step` is where a rerun resumes."""
        if not self.received:
            return
        signum = self.received[0]
        where = (
            f"rerun the same command to resume from the checkpoint at step {checkpoint_step:,}"
            if checkpoint_step
            else "no checkpoint (train.checkpoint_every = 0 or none yet): a rerun starts from step 0"
        )
        raise Interrupted(signum, f"stopped by {signal.Signals(signum).name} at step {step:,}; {where}")


@dataclasses.dataclass(frozen=True, eq=False)
class _Handler:
    """The Python-level handler while the handling is installed: it does nothing (the watcher thread
    acts on the signal) and carries the stop, so that a nested `stop_on_signals` finds it."""

    stop: Stop

    def __call__(self, signum, frame) -> None:
        pass


@contextlib.contextmanager
def stop_on_signals() -> Iterator[Stop]:
    """SIGINT and SIGTERM are recorded on the `Stop` this yields (see `Stop.check`); a second one exits
    at once (exit 128 + signal, the last checkpoint left as it is), unless it is the first one delivered
    twice (`SAME_STOP_S`).

    The second signal is acted on by a thread reading the interpreter's wake-up fd (`_watching`), not
    by the Python handler: that runs only when the main thread returns from a device computation, which
    may take a whole chunk. Re-entrant: inside an active one it yields that one's stop (a sweep holds it
    across its cells). Off the main thread, which cannot install handlers, it installs nothing and yields
    a stop no signal reaches."""
    current = signal.getsignal(signal.SIGINT)
    if isinstance(current, _Handler):
        yield current.stop
        return
    stop = Stop()
    first_at = [0.0]

    def on_signal(signum: int) -> None:
        now = time.monotonic()
        if stop.received and signum == stop.received[0] and now - first_at[0] < SAME_STOP_S:
            return
        first_at[0] = first_at[0] or now
        stop.received.append(signum)
        if len(stop.received) > 1:
            _exit(
                signum, "interrupted again: exiting at once; rerun the same command to resume from the last checkpoint"
            )

    with _watching(stop, on_signal):
        yield stop


@contextlib.contextmanager
def exit_on_signals(doing: str) -> Iterator[None]:
    """The first SIGINT or SIGTERM exits at once (128 + signal) with one line saying it stopped `doing`:
    for work that keeps nothing half-done (a dry run's or bench's measurements: what they keep is written
    whole), where waiting for a compilation or a measured period to end could take minutes. Off the main
    thread it installs nothing."""
    with _watching(Stop(), lambda signum: _exit(signum, f"stopped by {signal.Signals(signum).name} during {doing}")):
        yield


def _exit(signum: int, message: str) -> None:
    """One line on stderr and the process ends now, from the watcher thread: whatever the main thread is in."""
    os.write(2, f"icl-race: {message}\n".encode())
    os._exit(128 + signum)


@contextlib.contextmanager
def _watching(stop: Stop, on_signal: Callable[[int], None]) -> Iterator[None]:
    """SIGINT and SIGTERM handed to `on_signal` on a thread that reads the interpreter's wake-up fd, while
    the Python-level handler (which carries `stop`, for a nested `stop_on_signals`) does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    r, w = os.pipe()
    os.set_blocking(w, False)

    def watch():
        while data := os.read(r, 64):
            for signum in data:
                if signum in WANTED:
                    on_signal(signum)

    handler = _Handler(stop)
    previous = {s: signal.signal(s, handler) for s in WANTED}
    previous_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    watcher = threading.Thread(target=watch, name="icl-race-signals", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous_fd)
        for s, h in previous.items():
            signal.signal(s, h)
        os.close(w)
        watcher.join()
        os.close(r)
