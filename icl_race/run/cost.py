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

A measurement trains, so it is kept (`measured`): in costs.json beside the compile cache
(`compile_cache.directory()`; nothing is kept when the cache is off), keyed by what decides it (`key`:
the program's identity, run/identity.py, the device, jax's and icl-race's versions). A second dry run of programs already measured
reads them and trains nothing. The file is a cache, never trusted: one that is not a regular file of at
most 1 MiB, not JSON, or holds an entry out of range is set aside (`costs.damaged-<time>.json`, one line
on stderr) and its programs are measured again.

`project_device` is the other projection, for a GPU this machine is not: the steps of the run at the
rate measured on that GPU (`H200_RATES`), with no measurement at all.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import stat
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from icl_race.run.identity import Identity
    from icl_race.run.records import RunPlan


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
    from icl_race.engine.chunks import ChunkPlan
    from icl_race.engine.ensemble import Layout, start, train
    from icl_race.plots import histogram, png_bytes
    from icl_race.run import compile_cache, compile_stats

    compile_cache.setup()
    cfg = run.cfg
    tr, e = cfg.train, cfg.ensemble
    period = run.chunks.chunks[0][1]
    layout = Layout(block=e.block)
    # one period, in the run's chunk program (its capacity): what each of the run's chunks compiles and runs
    one_period: dict[str, Any] = dict(
        layout=layout, plan=ChunkPlan(((0, period, 1),), run.chunks.capacity), retire=e.retire
    )
    _, compiled0 = compile_stats.snapshot()
    with systems.precision(cfg):
        tic = time.perf_counter()
        program, consts = systems.build(cfg)
        carry, consts = start(program, layout, e.root_seed, np.arange(e.block), consts)
        carry, curves, steps = train(program, consts, carry, **one_period)
        first = time.perf_counter() - tic
        compile_s = compile_stats.snapshot()[1] - compiled0
        tic = time.perf_counter()
        carry, curves, steps = train(program, consts, carry, **one_period)
        period_s = time.perf_counter() - tic
    checkpoint_s = 0.0
    if tr.checkpoint_every:
        from icl_race.run.checkpoint import Checkpointer, host_carry

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


COSTS_FILE = "costs.json"


def key(run: RunPlan, program: Identity) -> str:
    """What decides a cell's measured Cost: its program (`program`, run/identity.py: the static fields,
    the constants' shapes, the chunk plan, retirement, the precision...), the checkpoints `measure` times
    beside it, and where: the host (compile_cache.host_tag), the device kind, jax's and icl-race's versions."""
    import jax

    import icl_race
    from icl_race.run import compile_cache

    parts = [
        program.program,
        run.cfg.train.checkpoint_every,
        compile_cache.host_tag(),
        jax.devices()[0].device_kind,
        jax.__version__,
        icl_race.__version__,
    ]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def measured(
    run: RunPlan, program: Identity, remeasure: bool = False, say: Callable[[str], None] | None = None
) -> Cost:
    """`measure`, or the cost kept for the run's `key` (of its `program`) by an earlier measurement (`remeasure`: measure
    again, and keep the new one). Kept in costs.json beside the compile cache, none when it is off; a
    damaged file is set aside and measured over (`_read`), never an error. `say` hears which, before
    a measurement (which compiles and trains: seconds to minutes)."""
    from icl_race.run import compile_cache

    folder = compile_cache.directory()
    path = None if folder is None else folder / COSTS_FILE
    k, known = key(run, program), _read(path)
    if not remeasure and k in known:
        if say:
            say(f"its cost kept from an earlier measurement ({path})")
        return known[k]
    if say:
        e = run.cfg.ensemble
        say(
            f"measuring on this machine: one block of {e.block} seeds through two evaluation periods of "
            f"{run.chunks.chunks[0][1]:,} steps, compiling first"
        )
    cost = measure(run)
    if path is not None and compile_cache.private(path.parent):
        known[k] = cost
        tmp = path.with_name(f".{COSTS_FILE}.{os.getpid()}")
        tmp.write_text(json.dumps({n: dataclasses.asdict(c) for n, c in known.items()}, indent=1, sort_keys=True))
        tmp.replace(path)  # whole or not at all: a concurrent dry run reads the old file or the new one
    return cost


# A kept file of hundreds of entries is tens of KB; a kept time beyond a year is no measurement.
MAX_COSTS_BYTES, MAX_SECONDS = 1 << 20, 3.2e7


def _cost(entry: Any) -> Cost | None:
    """A kept entry as a Cost; None when it is not one (another version's fields, a value out of range).
    Ranges before arithmetic: a NaN fails every comparison, and an int of 400 digits is compared exactly."""
    names = {f.name for f in dataclasses.fields(Cost)}
    if not isinstance(entry, dict) or set(entry) != names:
        return None
    if not all(type(v) in (int, float) and 0 <= v <= MAX_SECONDS for v in entry.values()):
        return None
    if type(entry["first_period"]) is not int or entry["first_period"] < 1:
        return None
    seconds = {n: float(v) for n, v in entry.items() if n != "first_period"}
    return Cost(first_period=entry["first_period"], **seconds)


def _read(path: Path | None) -> dict[str, Cost]:
    """The costs kept in `path`. A damaged file (not a regular file, say a FIFO that would hang the read;
    over MAX_COSTS_BYTES; not JSON; an entry that is not a Cost in range) is set aside in one line and
    read as empty: every program it held is measured again."""
    if path is None or not (path.exists() or path.is_symlink()):
        return {}
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if st.st_size > MAX_COSTS_BYTES:
            raise ValueError(f"{st.st_size:,} bytes, over {MAX_COSTS_BYTES:,}")
        known = json.loads(path.read_bytes())
        if not isinstance(known, dict):
            raise ValueError("not a JSON object")
        costs = {k: _cost(v) for k, v in known.items()}
        bad = [k for k, c in costs.items() if c is None]
        if bad:
            raise ValueError(f"{len(bad)} of {len(costs)} entries not a measured cost in range")
        return {k: c for k, c in costs.items() if c is not None}
    except (OSError, ValueError, RecursionError) as e:
        aside = path.with_name(f"costs.damaged-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.json")
        try:
            path.rename(aside)
            where = f"set aside as {aside.name}"
        except OSError:
            where = "left as it is"
        print(f"icl-race: {path}: damaged ({e}); {where}, its programs measured again", file=sys.stderr)
        return {}


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


# Seed-steps/s of the paper model (classification, one layer, MLP width 512, N = 100, D = 63, batch 128,
# K = 10,000) in one vmapped block of B seeds, measured on an H200 (benchmarks/RESULTS.md, "First GPU
# check"): the rate saturates from B ~ 256.
H200_RATES = {1: 6_548, 64: 30_423, 256: 32_728, 1024: 33_652, 4096: 33_764}
PAPER_SHAPE = {"N": 100, "layers": 1, "width": 512}
# HBM bandwidth, TB/s: no H100 rate is measured, so the H100's is the H200's scaled by 3.35 / 4.8 (the
# step is launch- and memory-bound, not FLOP-bound: TF32 and bf16 change nothing, RESULTS.md).
HBM_TBS = {"h200": 4.8, "h100": 3.35}
GPUS = tuple(HBM_TBS)


@dataclass(frozen=True)
class DeviceRate:
    device: str
    seed_steps_per_s: float
    estimate: bool  # not the measured rate of this shape on this GPU: scaled (`device_rate` says how)


def device_rate(run: RunPlan, device: str) -> DeviceRate:
    """The run's seed-steps/s on one `device` GPU: the H200's measured rate at the largest measured block
    not above the run's block; for another shape than the paper model's, scaled by N / 100 and by the
    layers (the step's work grows about linearly in each: the regime model's rates halve from N = 32 to
    128 per doubling, RESULTS.md), the width left as it is; for the H100, by the HBM ratio. Either
    scaling makes it an estimate."""
    cfg = run.cfg
    rate = float(H200_RATES[max(b for b in H200_RATES if b <= max(cfg.ensemble.block, 1))])
    # Another system's sections may lack a field: its rate is then the paper model's, an estimate.
    shape = {"N": getattr(cfg.task, "N", None), "layers": getattr(cfg.model, "layers", None)}
    shape["width"] = getattr(cfg.model, "width", None)
    rate *= PAPER_SHAPE["N"] / (shape["N"] or PAPER_SHAPE["N"]) / (shape["layers"] or 1)
    rate *= HBM_TBS[device] / HBM_TBS["h200"]
    return DeviceRate(device, rate, estimate=device != "h200" or shape != PAPER_SHAPE)


def project_device(run: RunPlan, device: str, start_step: int = 0) -> float:
    """Seconds of the run's steps from `start_step` on one `device` GPU at `device_rate`: every seed of
    its padded blocks for the whole budget (early stops and retirement make it shorter); compilation,
    evaluation and checkpoints are not counted."""
    e = run.cfg.ensemble
    padded = math.ceil(e.seeds / e.block) * e.block
    return padded * max(run.cfg.train.steps - start_step, 0) / device_rate(run, device).seed_steps_per_s
