"""`icl-race bench`: what a training costs on this machine.

`icl-race bench CONFIG [--set ...]` (`of_config`): the config's own run, measured as `sweep --dry-run`
measures a cell (run/cost.py: one block of its seeds through its own programs for two evaluation
periods, the evaluation and its cadence included), printed as seeds per block, seed-steps/s, seconds
per 1,000 steps per seed and the projected wall time of its budget for its seeds (an upper bound).

`icl-race bench` without CONFIG: compile seconds (of the init program and of the training step) and
steady-state seed-steps/s of the training step alone at the paper's shape, for several ensemble sizes.
Method (JAX's benchmarking guidance): compile ahead of time and time it separately; warm up once;
then time `steps` steps per repeat with block_until_ready and keep the best repeat. Only training
steps are timed (sampling, forward, backward, update, all on the device); evaluation is not.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable

from icl_race import config, systems

# The paper-shape benchmark's defaults (its options are refused with CONFIG, whose run says all). A CPU
# gets the two small sizes: 64 and 256 seeds of the paper's step took ~6 minutes on 2 cores.
SIZES, CPU_SIZES, STEPS, REPEATS = "1,8,64,256", "1,8", 3, 3


@dataclasses.dataclass(frozen=True)
class ConfigBench:
    """One config's measured rates and its run's projection on this machine."""

    config: str  # the file, as given
    describe: str  # the system's one-line description of the config
    seeds: int  # ensemble.seeds: the run projected
    budget: int  # train.steps
    eval_every: int
    block: int  # seeds per vmap (ensemble.block): one block is what is measured
    blocks: int  # blocks per device the run trains one after another
    devices: int
    setup_s: float  # build, compile (or load from the cache) and initialise, paid once per run
    compile_s: float  # of setup_s
    seed_steps_per_s: float  # one block's training with its evaluations, on one device
    s_per_1000_steps_per_seed: float  # 1000 / seed_steps_per_s
    projected_s: float  # an upper bound on the run's wall time (run/cost.py: `project`)

    def text(self, device: str) -> str:
        from icl_race.run.progress import hms

        head = (
            f"device {device}; {self.config}: {self.describe}, {self.seeds} seeds, {self.budget:,} steps, "
            f"evaluated every {self.eval_every:,} (timed with its evaluations)"
        )
        cols = ("seeds/block", "blocks", "devices", "setup s", "seed-steps/s", "s/1k steps/seed", "projected wall")
        row = (
            f"{self.block:,}",
            f"{self.blocks:,}",
            f"{self.devices}",
            f"{self.setup_s:.1f}",
            f"{self.seed_steps_per_s:,.1f}",
            f"{self.s_per_1000_steps_per_seed:.3g}",
            f"<= {hms(self.projected_s)}",
        )
        widths = [max(len(c), len(v)) for c, v in zip(cols, row)]
        line = lambda vals: "  ".join(v.rjust(w) for v, w in zip(vals, widths))
        bound = (
            "projected wall: an upper bound on an uninterrupted run on this machine (setup, every chunk with its "
            "evaluations, the checkpoints and the finish, as measured; early stops and retirement only shorten "
            "it; another process's load on this machine is not counted)"
        )
        return "\n".join([head, line(cols), line(row), bound])


def of_config(
    path: str,
    overrides: list[str],
    block: int | None = None,
    remeasure: bool = False,
    say: Callable[[str], None] = lambda line: None,
) -> ConfigBench:
    """The config at `path` (with `overrides`, and `block` as ensemble.block) timed through its own
    programs (`cost.measured`: the cost a dry run or bench kept for them, unless `remeasure`) and its run
    projected (`cost.project`); `say` hears what it is doing."""
    import math

    from icl_race.systems import of

    cfg = config.load(path, [*overrides, *([] if block is None else [f"ensemble.block={block}"])])
    say(f"{path}: {of(cfg).describe(cfg)}, {cfg.ensemble.seeds} seeds: timing its programs")
    from icl_race.run import cost, identity
    from icl_race.run.records import RunPlan

    run = RunPlan.of(cfg)
    c = cost.measured(run, identity.of(run, pack=False), remeasure, say=lambda line: say(f"{path}: {line}"))
    e, tr = cfg.ensemble, cfg.train
    rate = e.block * c.first_period / max(c.period_s, 1e-9)
    return ConfigBench(
        config=str(path),
        describe=of(cfg).describe(cfg),
        seeds=e.seeds,
        budget=tr.steps,
        eval_every=tr.eval_every,
        block=e.block,
        blocks=math.ceil(e.seeds / (e.block * run.layout.shards)),
        devices=run.layout.shards,
        setup_s=round(c.setup_s, 3),
        compile_s=round(c.compile_s, 3),
        seed_steps_per_s=round(rate, 1),
        s_per_1000_steps_per_seed=1000 / rate,
        projected_s=round(cost.project(run, c), 1),
    )


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


def default_sizes(quiet: bool) -> str:
    """The ensemble sizes of a bare `bench`, by the machine: a GPU's, or a CPU's (said in one line)."""
    import jax

    if jax.default_backend() != "cpu":
        return SIZES
    if not quiet:
        print(f"on a CPU: seeds {CPU_SIZES} (a GPU's default is {SIZES}; --seeds chooses)", flush=True)
    return CPU_SIZES


def _sizes(seeds: str, block: int | None) -> list[int]:
    """--seeds as ensemble sizes, each a multiple of --block; refused in one line otherwise."""
    try:
        sizes = [int(s) for s in seeds.split(",")]
    except ValueError:
        raise config.ConfigError(f"--seeds {config.short(seeds)}: expected comma-separated integers >= 1") from None
    if not sizes or min(sizes) < 1:
        raise config.ConfigError(f"--seeds {config.short(seeds)}: expected comma-separated integers >= 1")
    if block is not None and any(s % block for s in sizes):
        raise config.ConfigError(f"--block {block}: must divide every --seeds size ({seeds})")
    return sizes


def _say(line: str) -> None:
    """What bench is doing, on stderr as it starts each step (its table or JSON goes to stdout)."""
    print(f"bench: {line}", file=sys.stderr, flush=True)


# SIGINT and SIGTERM end a bench at once (run/signals.py): it keeps nothing but the costs it measured, each
# written whole (run/cost.py).
STOPPED = "bench (nothing is lost: a cost measured is kept whole)"


def main(args) -> int:
    from icl_race.run.signals import exit_on_signals
    from icl_race.rundir.provenance import provenance

    if args.config is not None:
        given = [f"--{name}" for name in ("seeds", "steps", "repeats") if getattr(args, name) is not None]
        if given:
            raise config.ConfigError(
                f"{given[0]}: only for the paper-shape benchmark (without CONFIG); CONFIG's run is timed "
                "as it is: change it with --set, e.g. --set ensemble.seeds=64"
            )
        with exit_on_signals(STOPPED):
            result = of_config(args.config, args.overrides, args.block, args.remeasure, _say)
        header = provenance()
        if args.json:
            print(json.dumps({**header, **dataclasses.asdict(result)}, indent=2))
        else:
            print(result.text(header["device"]))
        return 0
    sizes = None if args.seeds is None else _sizes(args.seeds, args.block)
    steps, repeats = args.steps or STEPS, args.repeats or REPEATS
    cfg = config.from_dict(config.apply_overrides({}, args.overrides))
    with exit_on_signals(STOPPED):
        _say(
            f"compile seconds and seed-steps/s of the training step of {systems.of(cfg).describe(cfg)}, "
            f"batch {cfg.train.batch_size}, {steps} steps x {repeats} repeats per ensemble size"
        )
        return _paper_shape(cfg, sizes or _sizes(default_sizes(args.json), args.block), steps, repeats, args)


def _paper_shape(cfg: config.Config, sizes: list[int], steps: int, repeats: int, args) -> int:
    """The table (or JSON) of the training step's costs per ensemble size."""
    from icl_race.rundir.provenance import provenance

    header = {
        **provenance(),
        # every system's task and model sections as they are (a memorization task has no N, say)
        "config": {
            "task": cfg.to_dict()["task"],
            "model": cfg.to_dict()["model"],
            "batch_size": cfg.train.batch_size,
            "optimizer": cfg.train.optimizer,
        },
        "steps_per_repeat": steps,
    }
    if not args.json:
        print(f"device {header['device']}; {header['config']}")
        print(
            f"{'seeds':>6} {'block':>6} {'init compile s':>15} {'step compile s':>15} {'ms/step':>10} "
            f"{'seed-steps/s':>13} {'peak MB':>9} {'MB/seed':>8}"
        )
    rows = []
    for s in sizes:
        row = measure(cfg, s, steps, repeats, args.block)
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
