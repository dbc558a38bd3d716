"""The seed-ensemble engine: knows programs, keys, chunks and first passages, never a task or model.

What it trains is a *program* (engine/program.py: init, step, probe, events and the events' roles, a
hashable bundle of pure per-seed functions) with its `consts`, the run's traced values; in the chunks of
a `ChunkPlan` (engine/chunks.py).

Randomness: seed s owns key_s = fold_in(key(root), seed_id) and three streams derived from it (init,
train, probe); step t's data come from fold_in(train_stream, t). A seed's trajectory therefore depends
only on its own key, whatever the ensemble around it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from icl_race.engine.chunks import Chunk, ChunkPlan
from icl_race.engine.kept import KEPT, capture
from icl_race.engine.program import Carry, Consts, Program
from icl_race.engine.sharding import on_each_device, place

INIT_STREAM, TRAIN_STREAM, PROBE_STREAM = 0, 1, 2


@dataclass(frozen=True)
class Layout:
    """How the seed axis is laid out: `block` seeds per vmap, split over `shards` devices.

    Why blocks: XLA picks kernels (and so float rounding) by the batch width, and the ICL transition
    amplifies rounding differences of 1e-8 into different t_ICL. A fixed vmap width makes a seed's
    trajectory bit-identical in an ensemble of any size (measured on CPU: widths 2 and 8 differ, the
    position inside a block and the number of blocks do not). With several devices, each runs the
    single-device program on its own contiguous share of the blocks (engine/sharding.py)."""

    block: int = 16
    shards: int = 1  # devices; each runs the single-device program on its own contiguous share

    @property
    def unit(self) -> int:
        return self.block * self.shards


def seed_keys(root_seed: int, seed_ids: np.ndarray) -> jax.Array:
    root = jax.random.key(root_seed)
    return jax.vmap(lambda s: jax.random.fold_in(root, s))(jnp.asarray(seed_ids, jnp.uint32))


def _over_seeds(one_seed, block: int, consts, carry, *args):
    """Apply a per-seed function to one device's seeds (leading axis S): blocks of `block` seeds per
    vmap, one block after another."""
    batched = jax.vmap(one_seed, in_axes=(None, 0) + (None,) * len(args))
    S = jax.tree.leaves(carry)[0].shape[0]
    if S % block:
        raise ValueError(f"{S} seeds on a device is not a multiple of block {block}; pad with `start`")
    if S == block:
        return batched(consts, carry, *args)
    out = jax.lax.map(
        lambda c: batched(consts, c, *args), jax.tree.map(lambda a: a.reshape(S // block, block, *a.shape[1:]), carry)
    )
    return jax.tree.map(lambda a: a.reshape(S, *a.shape[2:]), out)


DIVERGED = "diverged"  # engine-level event: the training loss of a period was NaN or infinite


# A packed ensemble's per-seed constants (run/pack.py): the carry's {name: [S]} of the traced
# values in which its members differ (K, learning rate, decays...). They ride in the carry, so that
# taking, retiring and sharding seeds takes their constants along; a lone run's carry has none.
MEMBER = "member"


def _init_seed(program: Program, consts: Consts, key: jax.Array) -> Carry:
    carry = {
        "key": key,
        "state": program.init(jax.random.fold_in(key, INIT_STREAM), consts),
        "t_first": {e: jnp.int32(-1) for e in (*program.event_names, DIVERGED)},
    }
    if program.confirm:  # only then, so that other runs' carries (and checkpoints) keep their shape
        carry["streak"] = {e: {"n": jnp.int32(0), "start": jnp.int32(-1)} for e, _ in program.confirm}
    return carry


def _with_member(consts, member):
    """The constants one seed trains with: the shared ones, overridden by its own (a packed ensemble's
    members differ in traced values only: K, learning rate, decays..., so they share one program)."""
    return {**consts, **member} if member else consts


@functools.partial(jax.jit, static_argnums=(0, 1))
def init_on_device(program: Program, block: int, keys_S: jax.Array, consts: Consts) -> Carry:
    return _over_seeds(functools.partial(_init_seed, program), block, consts, keys_S)


def start(program: Program, layout: Layout, root: int, seed_ids: np.ndarray, consts: Consts) -> tuple[Carry, Consts]:
    """The ensemble carry at step 0 and its constants, laid out over layout's devices. `seed_ids` are
    extended with the next ids up to whole units (layout.unit): the extra seeds are trained and then
    discarded, so that every seed is computed in a vmap of exactly `block` seeds. Seed s's key is
    fold_in(key(root), s); the keys are split along the seed axis, the constants put on every
    device (engine/sharding.py), and each device initialises its seeds with the single-device program."""
    ids = np.asarray(seed_ids, np.int64)
    keys_S = seed_keys(root, np.concatenate([ids, ids.max() + 1 + np.arange(-len(ids) % layout.unit)]))
    keys_S, consts = place(keys_S, consts, layout.shards)
    return on_each_device(functools.partial(init_on_device, program, layout.block), keys_S, consts), consts


def _tree_where(cond, on_true, on_false):
    return jax.tree.map(lambda a, b: jnp.where(cond, a, b), on_true, on_false)


def _train_steps(program: Program, n_steps, consts, carry, t0):
    """n_steps optimisation steps of one seed, starting after t0 completed steps."""
    train_key = jax.random.fold_in(carry["key"], TRAIN_STREAM)
    # A diverged seed stops updating too (from the evaluation that saw its loss go non-finite).
    frozen = carry["t_first"][DIVERGED] >= 0
    if program.freeze_event:
        frozen |= carry["t_first"][program.freeze_event] >= 0
    for end in _ends(program):
        frozen |= carry["t_first"][end] >= 0

    def one(state, t):
        new_state, loss = program.step(state, consts, jax.random.fold_in(train_key, t))
        return _tree_where(frozen, state, new_state), loss

    # t comes through xs, unbatched: a batched counter would turn cheap control flow into selects.
    state, losses = jax.lax.scan(one, carry["state"], t0 + jnp.arange(n_steps))
    return {**carry, "state": state}, losses


def _period(program: Program, eval_every, consts, carry, t0):
    """eval_every steps, then one evaluation at t0 + eval_every; first passages recorded on device."""
    carry, losses = _train_steps(program, eval_every, consts, carry, t0)
    t_end = t0 + eval_every
    probe_key = jax.random.fold_in(jax.random.fold_in(carry["key"], PROBE_STREAM), t_end)
    probes = program.probe(carry["state"], consts, probe_key)
    fired = {**program.events(probes, consts), DIVERGED: ~jnp.isfinite(jnp.mean(losses))}
    if fall := program.fall_event:
        # A fall counts only after stop_event's first passage at an earlier evaluation, so its
        # confirming streak starts after t_stop (analysis/outcome.py's lasting fall).
        fired[fall] &= carry["t_first"][program.stop_event] >= 0
    at = dict.fromkeys(fired, t_end)
    if "streak" in carry:
        streak = {}
        for e, k in program.confirm:
            n, start = carry["streak"][e]["n"], carry["streak"][e]["start"]
            streak[e] = {"n": jnp.where(fired[e], n + 1, 0), "start": jnp.where(fired[e] & (n == 0), t_end, start)}
            fired[e], at[e] = streak[e]["n"] >= k, streak[e]["start"]
        carry = {**carry, "streak": streak}
    if ends := _ends(program):
        # A settled or fallen seed's run is over: its frozen weights' later evaluations record nothing
        # (a threshold crossed by the probe's sampling noise is not an event of training).
        open_ = functools.reduce(jnp.logical_and, [carry["t_first"][e] < 0 for e in ends])
        fired = {e: f & open_ for e, f in fired.items()}
    if settle := program.settle_event:
        # The race settles only for a seed whose stop_event has not fired, at this evaluation or before.
        fired[settle] &= (carry["t_first"][program.stop_event] < 0) & ~fired[program.stop_event]
    t_first = {e: jnp.where((t < 0) & fired[e], at[e], t).astype(jnp.int32) for e, t in carry["t_first"].items()}
    if KEPT in carry:  # train.keep_params: the parameters at the stop event's first passage (engine/kept.py)
        carry = {**carry, KEPT: capture(program, carry, t_first)}
    return {**carry, "t_first": t_first}, {"train_loss": jnp.mean(losses), **probes}


def _chunk_one_seed(program: Program, eval_every, capacity, consts, carry, t0, n):
    """The first n of `capacity` evaluation periods (n traced: one program serves every chunk length of a
    run, the last shorter chunk included). The predicate is not batched, so under vmap it stays a cond:
    a skipped period costs nothing, and its metrics are NaN."""
    consts = _with_member(consts, carry.get(MEMBER))
    shapes = jax.eval_shape(lambda c: _period(program, eval_every, consts, c, t0)[1], carry)

    def body(c, i):
        return jax.lax.cond(
            i < n,
            lambda c: _period(program, eval_every, consts, c, t0 + i * eval_every),
            lambda c: (c, jax.tree.map(lambda s: jnp.full(s.shape, jnp.nan, s.dtype), shapes)),
            c,
        )

    return jax.lax.scan(body, carry, jnp.arange(capacity))


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3), donate_argnums=4)
def chunk_on_device(program: Program, block: int, eval_every: int, capacity: int, carry, consts, t0, n):
    one_seed = functools.partial(_chunk_one_seed, program, eval_every, capacity)
    return _over_seeds(one_seed, block, consts, carry, t0, n)


@jax.jit
def _take(carry, idx_U):
    """The seeds idx_U of a carry (an index past the end reads the last seed: a filler, never written back)."""
    return jax.tree.map(lambda a: a.at[idx_U].get(mode="clip"), carry)


@functools.partial(jax.jit, donate_argnums=0)
def _put(carry, idx_U, part):
    """carry with the seeds idx_U replaced by part's; indices past the end (fillers) are dropped."""
    return jax.tree.map(lambda a, p: a.at[idx_U].set(p, mode="drop"), carry, part)


def retired(program: Program, t_first: dict[str, np.ndarray], live_seeds: int) -> np.ndarray:
    """Per seed of the carry, whether its results can no longer change, so that it leaves the
    computation: a seed frozen by the early stop once every event has fired (its state no longer
    changes and no first passage is left to record), a diverged seed (frozen since its divergence:
    its later evaluations are of NaN weights), a settled or fallen seed (frozen, recording nothing), and
    the padding beyond `live_seeds`."""
    done = np.asarray(t_first[DIVERGED]) >= 0
    if program.freeze_event:  # the freeze event is one of the events, so "all fired" implies frozen
        done |= np.all([np.asarray(t_first[e]) >= 0 for e in _racing(program)], axis=0)
    for end in _ends(program):
        done |= np.asarray(t_first[end]) >= 0
    done[live_seeds:] = True
    return done


def _ends(program: Program) -> list[str]:
    """The events that end a seed's run when they fire: the settle event and the fall event."""
    return [e for e in (program.settle_event, program.fall_event) if e]


def _racing(program: Program) -> list[str]:
    """The events a seed still in the race can fire (all but those that end it)."""
    return [e for e in program.event_names if e not in _ends(program)]


def blocks_of(live_L: np.ndarray, unit: int, end: int) -> list[np.ndarray]:
    """The live seeds' indices in blocks of exactly `unit` (the vmap width that makes a seed's
    rounding its own); the last block is filled up with the index `end` (one past the carry), which
    _take reads as the last seed and _put drops."""
    filled = np.concatenate([live_L, np.full(-len(live_L) % unit, end)]).astype(np.int32)
    return [filled[i : i + unit] for i in range(0, len(filled), unit)]


def run_chunk(
    program: Program,
    layout: Layout,
    eval_every: int,
    n_evals: int,
    carry: Carry,
    consts: Consts,
    t0,
    capacity: int | None = None,
    live_L: np.ndarray | None = None,
):
    """n_evals evaluation periods for the whole ensemble, in the program of `capacity` periods (default
    n_evals; `train` passes its plan's, so that a shorter chunk compiles nothing new). Metrics come back
    on the host as {name: [S, n_evals]}.

    Given `live_L`, for those seeds only: they are packed into blocks of the same width, each block
    runs the one-block program (one compilation whatever the number of live seeds), and its seeds are
    written back into the full carry; a seed that did not run has NaN metrics (`train` holds its last
    evaluated value there)."""
    # Dispatched, not waited for: the metrics stay on the device, `capacity` columns, the first n_evals the chunk's.
    chunk = functools.partial(chunk_on_device, program, layout.block, eval_every, capacity or n_evals)
    n = jax.device_put(np.int32(n_evals))
    if live_L is None:
        carry, metrics = on_each_device(chunk, carry, consts, t0, n)
        return carry, {k: v[:, :n_evals] for k, v in jax.device_get(metrics).items()}
    S = jax.tree.leaves(carry)[0].shape[0]
    sharding = jax.tree.leaves(carry)[0].sharding
    parts = []
    for idx_U in blocks_of(live_L, layout.unit, S):
        block = _take(carry, idx_U)
        if len(sharding.device_set) > 1:  # each device takes one block of the `unit` seeds
            block = jax.device_put(block, sharding)
        block, metrics = on_each_device(chunk, block, consts, t0, n)  # the blocks queue; metrics read after the last
        carry = _put(carry, idx_U, block)
        parts.append((idx_U, metrics))
    full: dict[str, np.ndarray] = {}
    for idx_U, metrics in parts:
        real = idx_U < S
        for k, v in jax.device_get(metrics).items():
            full.setdefault(k, np.full((S, n_evals, *v.shape[2:]), np.nan, v.dtype))[idx_U[real]] = v[real, :n_evals]
    return carry, full


@functools.partial(jax.jit, static_argnums=(0, 1, 2), donate_argnums=3)
def steps_on_device(program: Program, block: int, n_steps: int, carry, consts, t0):
    """Training steps only, no evaluation, on one device: what `icl-race bench` times."""
    return _over_seeds(functools.partial(_train_steps, program, n_steps), block, consts, carry, t0)


@dataclass
class Progress:
    """What the host loop hands to its callback after each chunk (before the next is dispatched)."""

    step: int
    steps: int
    seeds: int
    t_first: dict[str, np.ndarray]  # the run's seeds only (not the padding)
    chunk_seconds: float
    chunk_steps: int
    chunks_done: int
    chunk_seeds: int  # the run's seeds computed in the chunk (all of them, or the live ones when retiring)
    carry: Carry  # the device carry: copy what you need now, the next chunk donates it
    history: list[dict[str, np.ndarray]]
    eval_steps: list[np.ndarray]
    finished: np.ndarray  # per member of the ensemble (`train`'s members): done, computed no more
    member_seeds: np.ndarray  # per member, its seeds computed in the chunk


def concat_history(history, eval_steps) -> tuple[dict[str, np.ndarray], np.ndarray]:
    curves = {k: np.concatenate([h[k] for h in history], axis=1) for k in history[0]} if history else {}
    return curves, np.concatenate(eval_steps) if eval_steps else np.zeros(0, np.int64)


def _finished(t_first, stop_event) -> bool:
    return bool(stop_event) and bool(np.all((t_first[stop_event] >= 0) | (t_first[DIVERGED] >= 0)))


def member_rows(members: Sequence[int]) -> list[slice]:
    """Each member's rows of a packed carry: the members' seeds one after another, the padding last."""
    ends = np.cumsum([0, *members])
    return [slice(int(a), int(b)) for a, b in zip(ends[:-1], ends[1:])]


def finished_members(t_first: dict[str, np.ndarray], members: Sequence[int], stop_event: str | None) -> np.ndarray:
    """Per member of a packed ensemble, whether it is done: every one of its seeds fired `stop_event`
    (or diverged), the test that ends a lone run early."""
    return np.array([_finished({e: v[r] for e, v in t_first.items()}, stop_event) for r in member_rows(members)])


def _hold(metrics: dict[str, np.ndarray], live_L: np.ndarray, previous: dict[str, np.ndarray] | None) -> None:
    """A retired seed's curves hold its last evaluated value (its state is frozen, so that is what a
    new evaluation would estimate, up to the probe's sampling noise); `retirement_steps` says from
    when. Padding, retired from the start, stays NaN."""
    if previous is None:
        return
    held = np.ones(next(iter(metrics.values())).shape[0], bool)
    held[live_L] = False
    for k, v in metrics.items():
        v[held] = previous[k][held, -1:]


def retirement_steps(
    program: Program, t_first: dict[str, np.ndarray], plan: Iterable[Chunk], steps_run: int
) -> np.ndarray:
    """Per seed, the step of the last evaluation a run with retirement made of it (the end of the
    chunk in which it became `retired`; its curves hold that value after), -1 for a seed evaluated
    to the run's last step: a pure function of the first passages and the chunk plan."""
    seeds = len(t_first[DIVERGED])
    done = retired(program, t_first, seeds)
    evals = np.concatenate([t0 + period * np.arange(1, n + 1) for t0, period, n in plan])
    k = dict(program.confirm)

    def seen(e: str) -> np.ndarray:
        """When the host saw event e: a confirmed event's time is its streak's start, seen k - 1 evaluations later."""
        t = np.asarray(t_first[e])
        later = np.minimum(np.searchsorted(evals, t) + k.get(e, 1) - 1, evals.size - 1)
        return np.where(t >= 0, evals[later], t)

    since = np.max([seen(e) for e in _racing(program)], axis=0)
    for end in _ends(program):
        since = np.where(np.asarray(t_first[end]) >= 0, seen(end), since)
    since = np.where(np.asarray(t_first[DIVERGED]) >= 0, t_first[DIVERGED], since)
    ends = np.array([t0 + period * n for t0, period, n in plan])
    at = ends[np.minimum(np.searchsorted(ends, since), len(ends) - 1)]
    return np.where(done & (at < steps_run), at, -1).astype(np.int64)


def train(
    program: Program,
    consts: Consts,
    carry: Carry,
    *,
    layout: Layout,
    plan: ChunkPlan,
    live_seeds: int | None = None,
    stop_event: str | None = None,
    start_step: int = 0,
    history: tuple[dict[str, np.ndarray], np.ndarray] | None = None,
    retire: bool = False,
    on_chunk: Callable[[Progress], None] | None = None,
    members: Sequence[int] | None = None,
) -> tuple[Carry, dict[str, np.ndarray], np.ndarray]:
    """The host loop: the chunks of `plan` until its budget, or until every live seed has fired
    `stop_event` (or diverged).

    Only the first `live_seeds` seeds (default all) count for the stop test and progress; the rest
    are padding. With `retire`, each chunk computes only the seeds whose results can still change
    (`retired`: decided at the chunk boundary from the first passages alone), packed into blocks of
    the same width (`run_chunk`'s `live_L`), so a seed's results are bit-identical to a run without retirement
    and a run pays for Σ min(t_i, budget) rather than S × the slowest seed; a retired seed's curves
    hold their last evaluated value from its retirement on (`_hold`). To resume, pass the checkpointed
    carry, `start_step` (a chunk boundary of the plan) and `history` (curves, eval steps): a resumed
    run computes exactly what an uninterrupted one does (the retired set is a function of the carry).
    Returns (carry, curves {metric: [S, T]}, eval_steps [T]). The host sees one small summary per
    chunk; nothing crosses to the host inside one.

    `members` (seeds per member, summing to live_seeds; default one member) packs several runs of one
    program into this ensemble (run/pack.py): each member stops on its own `stop_event` test, and from
    then on its seeds are computed no more (they leave as retired seeds do), so each member computes
    exactly what it would alone; `Progress.finished` says which members are done.
    """
    hist = [history[0]] if history and history[1].size else []
    steps_seen = [history[1]] if history and history[1].size else []
    seeds = live_seeds or jax.tree.leaves(carry)[0].shape[0]
    own = lambda tf: {e: v[:seeds] for e, v in tf.items()}  # the run's seeds, not the padding
    members = list(members or [seeds])
    rows = member_rows(members)
    if start_step not in [t0 for t0, _, _ in plan] + [plan.steps]:
        raise ValueError(f"start_step {start_step} is not a chunk boundary")
    chunks = 0
    t_first = jax.device_get(carry["t_first"])  # on the host once per chunk: the stop test, retirement, progress
    for t, period, n in (chunk for chunk in plan if chunk[0] >= start_step):
        done_M = finished_members(own(t_first), members, stop_event)
        if done_M.all():
            break
        tic = time.perf_counter()
        computed, member_seeds, live_L = seeds, np.array(members), None
        if retire or done_M.any():  # a finished member's seeds leave the computation like retired ones
            out_S = retired(program, t_first, seeds) if retire else np.arange(len(t_first[DIVERGED])) >= seeds
            for r in (r for r, done in zip(rows, done_M) if done):
                out_S[r] = True
            live_L = np.flatnonzero(~out_S)
            computed = live_L.size
            member_seeds = np.array([np.sum(~out_S[r]) for r in rows])
        if live_L is not None and not live_L.size:
            # every seed has its final results: the curves hold them to the budget, nothing is computed
            metrics = {k: np.repeat(v[:, -1:], n, axis=1) for k, v in hist[-1].items()}
        else:
            carry, metrics = run_chunk(program, layout, period, n, carry, consts, jnp.int32(t), plan.capacity, live_L)
            if live_L is not None:
                _hold(metrics, live_L, hist[-1] if hist else None)
        hist.append(metrics)
        steps_seen.append(t + period * np.arange(1, n + 1))
        chunks += 1
        t_first = jax.device_get(carry["t_first"])
        if on_chunk:
            on_chunk(
                Progress(
                    step=t + period * n,
                    steps=plan.steps,
                    seeds=seeds,
                    t_first=own(t_first),
                    chunk_seconds=time.perf_counter() - tic,
                    chunk_steps=n * period,
                    chunks_done=chunks,
                    chunk_seeds=computed,
                    carry=carry,
                    history=hist,
                    eval_steps=steps_seen,
                    finished=finished_members(own(t_first), members, stop_event),
                    member_seeds=member_seeds,
                )
            )
    return (carry, *concat_history(hist, steps_seen))
