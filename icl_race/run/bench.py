"""`icl-race bench`: compile seconds (of the init program and of the training step) and steady-state
seed-steps/s of the training step.

Method (JAX's benchmarking guidance): compile ahead of time and time it separately; warm up once;
then time `steps` steps per repeat with block_until_ready and keep the best repeat. Only training
steps are timed (sampling, forward, backward, update, all on the device); evaluation is not.
"""

from __future__ import annotations

import json
import time

from icl_race import config


def measure(cfg: config.Config, seeds: int, steps: int, repeats: int, block: int | None = None) -> dict:
    """Compile seconds, steady-state seed-steps/s and memory of cfg's training step at `seeds` seeds, in
    vmaps of `block` seeds (default: one vmap of all of them). On a CPU, block 1 is the fast layout."""
    from icl_race.run import compile_cache
    from icl_race.systems import build, precision

    compile_cache.setup()
    with precision(cfg):
        program, consts = build(cfg)
        return measure_program(program, consts, seeds, steps, repeats, block=block)


def measure_program(program, consts, seeds: int, steps: int, repeats: int, block: int | None = None) -> dict:
    """The same for any engine program on one device: vmaps of `block` seeds (default: all of them in
    one vmap), one block after another."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from icl_race.engine.ensemble import Layout, init_on_device, seed_keys, steps_on_device

    layout = Layout(block=block or seeds)
    keys = seed_keys(0, np.arange(seeds))
    tic = time.perf_counter()
    init = init_on_device.lower(program, layout.block, keys, consts).compile()
    init_compile_s = time.perf_counter() - tic
    carry = init(keys, consts)
    jax.block_until_ready(carry)
    t0 = jnp.int32(0)
    tic = time.perf_counter()
    compiled = steps_on_device.lower(program, layout.block, steps, carry, consts, t0).compile()
    compile_s = time.perf_counter() - tic
    mem = compiled.memory_analysis()
    carry, losses = compiled(carry, consts, t0)
    jax.block_until_ready(losses)
    best = float("inf")
    for r in range(repeats):
        tic = time.perf_counter()
        carry, losses = compiled(carry, consts, jnp.int32((r + 1) * steps))
        jax.block_until_ready(losses)
        best = min(best, time.perf_counter() - tic)
    peak = None
    if mem is not None:
        peak = mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes - mem.alias_size_in_bytes
    return {
        "seeds": seeds,
        "block": layout.block,
        "init_compile_s": round(init_compile_s, 2),
        "compile_s": round(compile_s, 2),
        "step_ms": round(1e3 * best / steps, 3),
        "seed_steps_per_s": round(seeds * steps / best, 1),
        "peak_bytes": peak,
        "bytes_per_seed": None if peak is None else int(peak / seeds),
        "finite": bool(np.isfinite(np.asarray(losses)).all()),
    }


def main(args) -> int:
    from icl_race.rundir.provenance import provenance

    try:
        sizes = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        raise config.ConfigError(
            f"--seeds {config.short(args.seeds)}: expected comma-separated integers >= 1"
        ) from None
    if not sizes or min(sizes) < 1:
        raise config.ConfigError(f"--seeds {config.short(args.seeds)}: expected comma-separated integers >= 1")
    if args.block is not None and any(s % args.block for s in sizes):
        raise config.ConfigError(f"--block {args.block}: must divide every --seeds size ({args.seeds})")
    cfg = config.from_dict(config.apply_overrides({}, args.overrides))
    header = {
        **provenance(),
        # every system's task and model sections as they are (a memorization task has no N, say)
        "config": {
            "task": cfg.to_dict()["task"],
            "model": cfg.to_dict()["model"],
            "batch_size": cfg.train.batch_size,
            "optimizer": cfg.train.optimizer,
        },
        "steps_per_repeat": args.steps,
    }
    if not args.json:
        print(f"device {header['device']}; {header['config']}")
        print(
            f"{'seeds':>6} {'block':>6} {'init compile s':>15} {'step compile s':>15} {'ms/step':>10} "
            f"{'seed-steps/s':>13} {'peak MB':>9} {'MB/seed':>8}"
        )
    rows = []
    for s in sizes:
        row = measure(cfg, s, args.steps, args.repeats, args.block)
        rows.append(row)
        if not args.json:
            mb = lambda b: "-" if b is None else f"{b / 2**20:.1f}"
            print(
                f"{s:>6} {row['block']:>6} {row['init_compile_s']:>15.2f} {row['compile_s']:>15.2f} {row['step_ms']:>10.2f} "
                f"{row['seed_steps_per_s']:>13,.1f} "
                f"{mb(row['peak_bytes']):>9} {mb(row['bytes_per_seed']):>8}",
                flush=True,
            )
    if args.json:
        print(json.dumps({**header, "rows": rows}, indent=2))
    return 0
