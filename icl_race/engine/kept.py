"""Parameters kept at a seed's first passage of the stop event (train.keep_params = "at_t_icl"), captured
on the device inside the chunk, at the evaluation that records the passage: the host sees the ensemble
only between chunks, when the seed has trained on.

They ride in the carry under KEPT (present only when asked for, so that other runs' carries and
checkpoints keep their shape): "at" holds each seed's parameters at its first passage (NaN until then),
and where the stop event needs k evaluations in a row (`Program.confirm`), "pending" holds those at the
start of the current streak, which become "at" when the streak is confirmed: the event's time is the
streak's start, so its parameters are those of that evaluation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from icl_race.engine.program import Carry, Program

KEPT = "kept"


def _confirmed(program: Program) -> bool:
    return program.stop_event in dict(program.confirm)


def copies(program: Program) -> int:
    """Parameter copies per seed the carry holds under KEPT (for the memory estimate)."""
    return 2 if _confirmed(program) else 1


def with_kept(program: Program, carry: Carry) -> Carry:
    """`carry` (leading seed axis S) with a KEPT entry of NaN parameters: elementwise on the carry's own
    arrays, so that it is laid out over the devices as they are."""
    nan = jax.tree.map(lambda a: a * jnp.nan, program.params(carry["state"]))
    return {**carry, KEPT: {"at": nan, **({"pending": nan} if _confirmed(program) else {})}}


def capture(program: Program, carry: Carry, t_first: dict[str, jax.Array]) -> dict:
    """One seed's KEPT after an evaluation: `carry` is its carry with the evaluated state and the
    streaks updated, but the first passages before the evaluation; `t_first` those after it."""
    kept, params, e = carry[KEPT], program.params(carry["state"]), program.stop_event
    where = lambda c, a, b: jax.tree.map(lambda x, y: jnp.where(c, x, y), a, b)
    source = params
    if "pending" in kept:  # a streak that begins at this evaluation: its parameters, should it be confirmed
        source = where(carry["streak"][e]["n"] == 1, params, kept["pending"])
        kept = {**kept, "pending": source}
    passed = (carry["t_first"][e] < 0) & (t_first[e] >= 0)
    return {**kept, "at": where(passed, source, kept["at"])}
