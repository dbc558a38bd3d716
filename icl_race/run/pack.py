"""The training phase, of one run or of a pack: runs of one program (run/identity.py: the same shapes and chunk
plan, differing only in traced values: K, lr, decays, thresholds, seeds), each prepared in its own
directory at the same step, trained as the members of one ensemble (`train_pack`). A lone run is a pack
of one (`train_phase`), trained on its own carry."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from icl_race.run.records import Prepared, RunPlan, Trained
from icl_race.run.signals import Stop


def pack_plan(runs: Sequence[RunPlan]) -> RunPlan:
    """The plan of a pack as one run: the first run's, with the pack's seeds (for the memory check and
    the dry run's projection); a lone run's own."""
    if len(runs) == 1:
        return runs[0]
    first = runs[0]
    e = dataclasses.replace(first.cfg.ensemble, seeds=sum(r.cfg.ensemble.seeds for r in runs))
    return dataclasses.replace(first, cfg=dataclasses.replace(first.cfg, ensemble=e))


def train_phase(prep: Prepared, stop: Stop, on_chunk: Callable | None = None) -> Trained:
    """The chunks from the prepared carry to the budget (or the early stop), checkpointing every
    train.checkpoint_every chunks and where a stop signal ends the run; `on_chunk` (the progress line,
    or a retraining's hook) sees the engine's `Progress` after each chunk. A pack of one."""
    return train_pack([prep], stop, on_chunk)[0]


def train_pack(cells: Sequence[Prepared], stop: Stop, on_chunk: Callable | None = None) -> list[Trained]:
    """The runs `cells` trained as the members of one ensemble: their seeds one after another in one
    carry, each seed with its run's constants (`engine.ensemble.MEMBER`), in vmaps of the runs' common
    block, so that each seed computes exactly what it does in its run alone. Each member stops on its
    own test (engine `train`'s members) and checkpoints into its own directory, as it would alone;
    returns each run's `Trained`. One run is trained on its own carry, as it always was."""
    import jax

    from icl_race.engine.ensemble import MEMBER, concat_history, finished_members, member_rows, train
    from icl_race.run.checkpoint import host_carry
    from icl_race.run.compile_stats import Counters

    first, lone = cells[0], len(cells) == 1
    cfg, tr = first.cfg, first.cfg.train
    members = [len(p.seed_ids) for p in cells]
    seeds = sum(members)
    rows = [slice(None)] if lone else member_rows(members)
    consts, carry, history = (first.consts, first.carry, first.history) if lone else _packed(cells)
    stop_event = first.program.stop_event if tr.stop_when_all_acquired else None
    t_first0 = jax.device_get(carry["t_first"])
    done = list(finished_members({k: v[:seeds] for k, v in t_first0.items()}, members, stop_event))
    columns = [len(history[1]) if history and d else None for d in done]  # a member's evaluations, once done
    saved = [p.start for p in cells]  # the step of each run's newest checkpoint
    computed = [0] * len(cells)  # seed-steps this process computed per run

    def each_chunk(p):
        for i, n in enumerate(p.member_seeds):
            computed[i] += int(n) * p.chunk_steps
        if on_chunk:
            on_chunk(p)
        stopping = p.step < tr.steps and stop.requested
        host = None
        for i, prep in enumerate(cells):
            # A member that finishes while others train on saves once more, at its last chunk: it computes
            # nothing after it, so a stop or a kill later on resumes it there, finished, rather than from
            # an older checkpoint that it would train from again. When every member has finished, the
            # pack commits now and the checkpoint would be deleted unread.
            ckpt, every = prep.checkpointer, prep.cfg.train.checkpoint_every
            due = stopping or (p.finished[i] and not p.finished.all()) or (every and p.chunks_done % every == 0)
            if ckpt and not done[i] and p.step < tr.steps and due:
                host = host if host is not None else host_carry(p.carry)
                curves, steps_seen = concat_history(p.history, p.eval_steps)
                ckpt.save(
                    p.step,
                    {
                        "carry": _rows({k: v for k, v in host.items() if k != MEMBER}, rows[i]),
                        "curves": _rows(curves, rows[i]),
                        "eval_steps": steps_seen,
                    },
                    {"config_digest": prep.run.digest, "config": prep.cfg.to_dict()},
                )
                saved[i] = p.step
        for i, d in enumerate(p.finished):
            if d and not done[i]:
                done[i], columns[i] = True, sum(len(s) for s in p.eval_steps)
        if stopping:
            # A finished member resumes finished: the members still training name the resume step.
            stop.check(p.step, min((s for s, d in zip(saved, done) if not d), default=p.step))

    stop.check(first.start, first.start)  # a signal that arrived before training (or between a sweep's cells)
    with contextlib.ExitStack() as closing:  # each checkpointer's last save waited for, then closed, even if one fails
        for ckpt in (p.checkpointer for p in cells if p.checkpointer):
            closing.callback(ckpt.close)
            closing.callback(ckpt.wait)
        carry, curves, eval_steps = train(
            first.program,
            consts,
            carry,
            layout=first.run.layout,
            plan=first.run.chunks,
            live_seeds=seeds,
            start_step=first.start,
            history=history,
            retire=cfg.ensemble.retire,
            stop_event=stop_event,
            on_chunk=each_chunk,
            members=members,
        )
    spent = Counters.now().since(first.since)
    t_first = jax.device_get(carry["t_first"])
    kept = _kept_params(first.program, carry, {k for p in cells for k in p.cfg.train.kept})
    return [
        Trained(
            t_first={k: v[r] for k, v in t_first.items()},
            curves={k: v[r, :T] for k, v in curves.items()},
            eval_steps=eval_steps[:T],
            seed_steps_computed=computed[i],
            run_seconds=spent.clock,
            compiles=spent.compiles,
            compile_seconds=spent.compile_seconds,
            compile_cache_hits=spent.cache_hits,
            pack=None if lone else (len(cells), sum(computed)),
            params={k: _rows(kept[k], r) for k in cells[i].cfg.train.kept},
        )
        for i, (r, T) in enumerate(
            zip(member_rows(members), [c if c is not None else len(eval_steps) for c in columns])
        )
    ]


def _kept_params(program, carry, kinds: set[str]) -> dict:
    """Every seed's parameters on the host, at the end of training ("final": a member that finished early
    stopped computing then, as it does alone) and at its first passage ("at_t_icl", engine/kept.py)."""
    import jax

    from icl_race.engine.kept import KEPT

    trees = {"final": lambda: program.params(carry["state"]), "at_t_icl": lambda: carry[KEPT]["at"]}
    return {k: jax.device_get(trees[k]()) for k in sorted(kinds)}


def _rows(tree, r: slice):
    """The rows `r` of every leaf of a host tree (a packed carry's or curves' part of one member)."""
    import jax

    return tree if r == slice(None) else jax.tree.map(lambda a: a if np.ndim(a) == 0 else a[r], tree)


def _packed(cells: Sequence[Prepared]):
    """(consts, carry, history) of a pack: the constants the runs share, and their seeds one after
    another (each run's padding dropped; the pack padded to a whole number of its layout's units with
    copies of its last seed, discarded like any padding), each seed carrying the constants in which the
    runs differ. Only scalars may differ (identity.Identity.pack): an array constant is one program's input."""
    import jax

    from icl_race.engine.ensemble import MEMBER
    from icl_race.engine.sharding import place
    from icl_race.run.checkpoint import device_carry, host_carry

    first = cells[0]
    sizes = [len(p.seed_ids) for p in cells]
    padded = -(-sum(sizes) // first.run.layout.unit) * first.run.layout.unit
    fill = lambda a: np.concatenate([a, np.repeat(a[-1:], padded - len(a), axis=0)])
    values = [jax.device_get(p.consts) for p in cells]
    differ = [k for k in values[0] if any(not np.array_equal(v[k], values[0][k]) for v in values[1:])]
    if any(np.ndim(values[0][k]) for k in differ):
        raise ValueError(f"runs that differ in the array constants {differ} do not share one program")
    consts = {k: v for k, v in first.consts.items() if k not in differ}
    member = {k: fill(np.concatenate([np.full(n, v[k]) for v, n in zip(values, sizes)])) for k in differ}
    hosts = [host_carry(p.carry) for p in cells]
    carry = jax.tree.map(lambda *a: fill(np.concatenate([x[:n] for x, n in zip(a, sizes)])), *hosts)
    carry, consts = place(device_carry({**carry, MEMBER: member}), consts, first.run.layout.shards)
    history = None
    if first.history is not None:  # all or none: the runs stand at one step
        curves = jax.tree.map(
            lambda *a: fill(np.concatenate([x[:n] for x, n in zip(a, sizes)])),
            *[p.history[0] for p in cells if p.history is not None],
        )
        history = (curves, first.history[1])
    return consts, carry, history
