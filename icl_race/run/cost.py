"""What a run costs on this machine: measured on its own programs, projected over its chunk plan.

`sweep --dry-run` prints an upper bound ("<=") on a sweep's wall time. A bound from the training step
alone left out what small cells mostly pay (a 2-cell sweep projected at <= 4 s took 51 s, 42 s of it
compiling), so the measurement runs the cell's own code path on one block of seeds: the system's build,
the init program, and one evaluation period through `engine.ensemble.train` (the run's chunk program,
evaluation and retirement's packing included), twice: the first time pays every compilation, the second
is one period's steady cost. With a checkpoint and the finishing figure timed as well,

    cell <= setup + blocks * sum over the plan's chunks of n * period_s * max(1, period / first period)
            + blocks * checkpoints * checkpoint_s + finish_s

is an upper bound on an uninterrupted run of the cell: early stops, retirement and the shorter last
period only take from it. `setup` (build + compilation) is charged once per program a process compiles:
a local sweep's cells of one program share it, a submitit or Slurm cell is a process of its own.
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from icl_race.run.runner import RunPlan


@dataclass(frozen=True)
class Cost:
    """One block's costs of a cell's programs, measured on this machine, in seconds."""

    setup_s: float  # build the system, compile (or load) every program, initialise: what a first cell pays
    compile_s: float  # the part of setup_s spent compiling: what a later cell of the same program saves
    period_s: float  # one evaluation period of `first_period` steps and its evaluation, one block
    first_period: int
    checkpoint_s: float  # one checkpoint of one block's carry (0: the run writes none)
    finish_s: float  # the commit's histogram figure


def measure(run: RunPlan) -> Cost:
    """Run one block of the run's seeds through its own programs for two evaluation periods; nothing written
    but a temporary checkpoint. Measured on one block on one device (`Layout(block)`), whatever the
    run's own layout: `project` scales it by the run's blocks per device."""
    import numpy as np

    from icl_race import systems
    from icl_race.engine.ensemble import Layout, init_ensemble, seed_keys, train
    from icl_race.plots import histogram, png_bytes
    from icl_race.run import compile_cache, compile_stats

    compile_cache.setup()
    cfg, chunks = run.cfg, run.chunks
    tr, e = cfg.train, cfg.ensemble
    period = chunks[0][1]
    layout = Layout(block=e.block)
    one_period: dict[str, Any] = dict(
        layout=layout, steps=period, eval_every=period, evals_per_chunk=tr.evals_per_chunk, retire=e.retire
    )
    _, compiled0 = compile_stats.snapshot()
    with systems.precision(cfg):
        tic = time.perf_counter()
        program, consts = systems.build(cfg)
        carry = init_ensemble(program, layout, seed_keys(e.root_seed, np.arange(e.block)), consts)
        carry, curves, steps = train(program, consts, carry, **one_period)
        first = time.perf_counter() - tic
        compile_s = compile_stats.snapshot()[1] - compiled0
        tic = time.perf_counter()
        carry, curves, steps = train(program, consts, carry, **one_period)
        period_s = time.perf_counter() - tic
    checkpoint_s = 0.0
    if tr.checkpoint_every:
        from icl_race.run.checkpoint import Checkpointer
        from icl_race.run.runner import host_carry

        with tempfile.TemporaryDirectory(prefix="icl-race-cost-") as d:
            ckpt = Checkpointer(Path(d) / "checkpoints", keep=1)
            tic = time.perf_counter()
            ckpt.save(period, {"carry": host_carry(carry), "curves": curves, "eval_steps": steps}, {})
            ckpt.wait()
            checkpoint_s = time.perf_counter() - tic
            ckpt.close()
    tic = time.perf_counter()
    t_S = np.where(np.arange(e.seeds) % 2, -1, np.linspace(tr.eval_every, tr.steps, e.seeds).astype(np.int64))
    png_bytes(histogram(t_S, tr.steps, title="t", xlabel="t"), dpi=120)
    finish_s = time.perf_counter() - tic
    return Cost(
        setup_s=max(first - period_s, 0.0),
        compile_s=compile_s,
        period_s=period_s,
        first_period=period,
        checkpoint_s=checkpoint_s,
        finish_s=finish_s,
    )


def project(run: RunPlan, cost: Cost, start_step: int = 0, compiled: bool = False, shards: int | None = None) -> float:
    """Upper bound, in seconds, on the rest of the run from `start_step` (a checkpoint's step) on `shards`
    devices (default: the run's layout's); `compiled`: the process already holds the cell's programs (a
    local sweep's previous cell of the same program), so only the build is paid again."""
    chunks = [c for c in run.chunks if c[0] >= start_step]
    if shards is None:
        shards = run.layout.shards
    tr, e = run.cfg.train, run.cfg.ensemble
    blocks = math.ceil(e.seeds / (e.block * shards))
    setup = cost.setup_s - (cost.compile_s if compiled else 0.0)
    # Each further period length (log spacing) is a program of its own: one more chunk compilation each.
    setup += cost.compile_s * (len({p for _, p, _ in chunks}) - 1)
    periods = sum(n * cost.period_s * max(1.0, p / cost.first_period) for _, p, n in chunks)
    saves = len(chunks) // tr.checkpoint_every if tr.checkpoint_every else 0
    return setup + blocks * (periods + saves * cost.checkpoint_s) + cost.finish_s
