"""The memory estimate made before a run (engine/memory.py + each system's work_bytes) against what
XLA's memory_analysis reports for the compiled chunk, and the refusal of sizes no machine can hold."""

import jax
import jax.numpy as jnp
import pytest
import tiny

from icl_race import config
from icl_race.engine import memory
from icl_race.engine.ensemble import Layout, chunk_on_device, init_on_device
from icl_race.systems import build, precision

CASES = {
    "classification": {
        "task": {"K": 1000, "N": 32},
        "model": {"width": 64},
        "train": {"batch_size": 128, "eval_size": 256},
    },
    "two-layer": {
        "task": {"K": 1000, "N": 32},
        "model": {"width": 64, "layers": 2},
        "train": {"batch_size": 64, "eval_size": 128},
    },
    "memorization": {
        "task": {"kind": "memorization", "K": 4000},
        "model": {"width": 128},
        "train": {"batch_size": 256},
    },
    "linear attention, tokens": {"task": {"kind": "linear_regression", "P": 2000, "path": "tokens"}},
}


@pytest.mark.parametrize("name", CASES)
def test_estimate_bounds_what_xla_allocates_for_the_chunk(name):
    raw = CASES[name]
    raw = {**raw, "train": {**raw.get("train", {}), "eval_every": 10, "steps": 100}}
    cfg = config.from_dict(raw)
    block = 2
    with precision(cfg):
        program, consts = memory.abstract_build(lambda: build(cfg))
        est = memory.estimate(
            program,
            consts,
            layout=Layout(block),
            seeds=block,
            evals=10,
            checkpoints=False,
            on_cpu=False,
        )
        keys = jax.eval_shape(lambda: jax.vmap(jax.random.key)(jnp.arange(block)))
        carry = jax.eval_shape(lambda k, c: init_on_device(program, block, k, c), keys, consts)
        xla = (
            chunk_on_device.lower(program, block, 10, 2, carry, consts, jnp.int32(0), jnp.int32(2))
            .compile()
            .memory_analysis()
        )
    measured = xla.argument_size_in_bytes + xla.temp_size_in_bytes
    assert measured <= est.device <= 4 * measured, (name, est.parts(), measured)


@pytest.mark.parametrize(
    "overrides",
    tiny.IMPOSSIBLE_SIZES,
)
def test_impossible_sizes_are_refused_naming_the_field_to_lower(overrides):
    from icl_race.run.host import check_memory
    from icl_race.run.records import RunPlan

    demo = config.read_toml("experiments/demo.toml")
    with pytest.raises(config.ConfigError, match=r"^memory: this run needs about") as e:
        check_memory(RunPlan.of(config.from_dict(config.apply_overrides(demo, overrides))))
    field = overrides[-1].partition("=")[0]
    assert field in str(e.value).partition("; lower ")[2], str(e.value)


@pytest.mark.parametrize(
    "path",
    [
        "experiments/demo.toml",
        "experiments/memorization/minimal_cpu.toml",
        "experiments/memorization/mlp_cpu.toml",
        "experiments/memorization/mlp_tail_f64_cpu.toml",
        "experiments/linear_attention/fig3.toml",
    ],
)
def test_every_system_is_estimated_and_its_cpu_experiments_fit(path):
    from icl_race.run import sweep
    from icl_race.run.host import check_memory
    from icl_race.run.records import RunPlan

    for cell in sweep.load(path).cells:
        check_memory(RunPlan.of(cell.cfg))
