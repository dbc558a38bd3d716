"""Steady-state seed-steps/s of the classification training step of whichever icl_race is first on
PYTHONPATH, one JSON line on stdout: the side-by-side check of a change to the step (issue 42 item 2).

    for i in 1 2 3 4 5 6; do
        PYTHONPATH=/tmp/base .venv/bin/python benchmarks/step_rate.py >> /tmp/old.jsonl
        .venv/bin/python benchmarks/step_rate.py >> /tmp/new.jsonl
    done

(/tmp/base: `git archive <commit> | tar -x -C /tmp/base`; run as a script, not with -m, so that PYTHONPATH
comes before the work tree.) Runs alternate, so a drift of the shared machine's speed falls on both; compare
the medians of the two files and the pairs' ratios. Besides wall-clock rates (best of `repeats` calls), the
CPU seconds the process spent per seed-step over the same calls: on a machine shared with other jobs the
wall clock measures the neighbours as much as the step, CPU time much less.
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

import icl_race
from icl_race import config
from icl_race.engine.ensemble import init_on_device, seed_keys, steps_on_device
from icl_race.run import compile_cache
from icl_race.systems.classification import ClassificationRace

SHAPES = {"paper": {"task": {"K": 10_000, "N": 100}}, "regime": {"task": {"K": 3600, "N": 32}, "model": {"width": 64}}}


def rates(program, consts, seeds: int, block: int, steps: int, repeats: int) -> dict:
    keys = seed_keys(0, np.arange(seeds))
    carry = init_on_device(program, block, keys, consts)
    run = steps_on_device.lower(program, block, steps, carry, consts, jnp.int32(0)).compile()
    carry, losses = run(carry, consts, jnp.int32(0))  # warm-up
    jax.block_until_ready(losses)
    wall, cpu = [], []
    for r in range(repeats):
        tic, cpu0 = time.perf_counter(), time.process_time()
        carry, losses = run(carry, consts, jnp.int32((r + 1) * steps))
        jax.block_until_ready(losses)
        wall.append(time.perf_counter() - tic)
        cpu.append(time.process_time() - cpu0)
    return {
        "seed_steps_per_s": round(seeds * steps / min(wall), 1),
        "seed_steps_per_cpu_s": round(seeds * steps / min(cpu), 1),
        "finite": bool(np.isfinite(np.asarray(losses)).all()),
    }


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="paper", choices=sorted(SHAPES))
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--block", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    compile_cache.setup()  # so that only the first run of each side compiles
    program, consts = ClassificationRace.from_config(config.from_dict(SHAPES[args.shape]))
    row = rates(program, consts, args.seeds, args.block, args.steps, args.repeats)
    print(json.dumps({"package": icl_race.__file__, **vars(args), **row}), flush=True)
