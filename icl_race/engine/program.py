"""The program: what the engine trains, a hashable bundle (a frozen dataclass) of pure per-seed functions.

A system's program subclasses `Program`, which declares every member the engine reads and gives the
optional ones their defaults; the engine reads them as attributes, never by probing. `consts` holds a
run's traced values shared by every seed (K, learning rate, item pools...), so changing them never
recompiles; only the program's static fields (shapes) do, which is why it must be hashable: it is a
static argument of every jitted function of the engine.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax

Consts = dict[str, Any]  # name -> array or pytree, traced; a packed run's members differ in scalars only
State = Any  # one seed's pytree (parameters, optimizer state, label maps...): the program's own
Carry = dict[str, Any]  # the ensemble's device carry: key, state, t_first (and streak, member, kept), leading axis S


class Program(Protocol):
    """What the engine (engine/ensemble.py) trains; subclass it to take the defaults of the optional members."""

    # The event whose first passage is the run's headline time; the early stop waits for it.
    stop_event: str
    # A seed stops updating once this event fires (train.early_stop = "freeze"); None: never.
    freeze_event: str | None = None
    # (event, k) pairs: such an event's time is the first evaluation of its first run of k consecutive ones.
    confirm: tuple[tuple[str, int], ...] = ()

    @property
    def event_names(self) -> tuple[str, ...]:
        """The conditions whose first passage is recorded, in the order `events` names them."""
        ...

    @property
    def settle_event(self) -> str | None:
        """An event that decides a seed's race against stop_event (memorized before ICL, say): it fires
        only while stop_event has not; from then on the seed is frozen, records nothing and retires."""
        return None

    @property
    def fall_event(self) -> str | None:
        """An event that ends a seed's run after stop_event (ICL lost, say): it counts only at evaluations
        after stop_event's first passage; from then on the seed is frozen, records nothing and retires."""
        return None

    def init(self, key: jax.Array, consts: Consts) -> State: ...

    def step(self, state: State, consts: Consts, key: jax.Array) -> tuple[State, jax.Array]:
        """One optimisation step: the new state and the training loss."""
        ...

    def probe(self, state: State, consts: Consts, key: jax.Array) -> dict[str, jax.Array]:
        """One evaluation: scalars by name."""
        ...

    def events(self, probes: dict[str, jax.Array], consts: Consts) -> dict[str, jax.Array]:
        """Per event, whether its condition holds at this evaluation."""
        ...

    def params(self, state: State) -> Any:
        """A seed's trained parameters (the model's pytree) in its state: what train.keep_params keeps."""
        return state["params"]

    def work_bytes(self) -> int:
        """Bytes of one seed's largest live intermediates, for the memory estimate (engine/memory.py);
        0 when the system does not say."""
        return 0
