"""run/cost.py: `project` is the module's bound computed over a config's chunk plan (known arithmetic on a
made-up Cost), and `measure` on a tiny config's own programs returns positive times."""

import pytest
import tiny

from icl_race import config
from icl_race.run import cost
from icl_race.run.runner import RunPlan

# Made-up costs in round numbers, so that every projection below is arithmetic to check by hand.
COST = cost.Cost(setup_s=10.0, compile_s=4.0, period_s=1.0, first_period=50, checkpoint_s=0.5, finish_s=2.0)


def _cfg(**train) -> config.Config:
    """800 steps, evaluated every 50 in chunks of 10: the plan is (0, 50, 10) and (500, 50, 6)."""
    return config.from_dict(tiny.raw(train={"evals_per_chunk": 10, "checkpoint_every": 1, **train}))


def _plan(**train) -> RunPlan:
    return RunPlan.of(_cfg(**train))


def test_a_linear_plan_costs_setup_plus_each_period_and_checkpoint_plus_the_finish():
    # 16 periods of 1 s and 2 checkpoints of 0.5 s for the one block of 4 seeds: 10 + (16 + 1) + 2
    assert cost.project(_plan(), COST) == pytest.approx(29.0)
    assert cost.project(_plan(checkpoint_every=0), COST) == pytest.approx(10 + 16 + 2)
    assert cost.project(_plan(checkpoint_every=5), COST) == pytest.approx(10 + 16 + 2)  # 2 chunks // 5: no save


def test_blocks_shards_a_resume_and_a_compiled_process_scale_their_own_terms():
    cfg = config.from_dict(
        {**tiny.raw(train={"evals_per_chunk": 10, "checkpoint_every": 1}), "ensemble": {"seeds": 40, "block": 8}}
    )
    assert cost.project(RunPlan.of(cfg), COST) == pytest.approx(10 + 5 * 17 + 2)  # 5 blocks of 8, one after another
    assert cost.project(RunPlan.of(cfg), COST, shards=2) == pytest.approx(
        10 + 3 * 17 + 2
    )  # ceil(40 / 16) blocks a device
    assert cost.project(RunPlan.of(cfg), COST, compiled=True) == pytest.approx(6 + 5 * 17 + 2)  # only the build again
    # From the checkpoint at step 500: the second chunk alone (6 periods, 1 save).
    assert cost.project(RunPlan.of(cfg), COST, start_step=500) == pytest.approx(10 + 5 * (6 + 0.5) + 2)


def test_a_log_plan_pays_one_compilation_per_further_period_and_longer_periods_in_proportion():
    """log spacing, 800 steps, evaluations every 50 * 2**c in chunks of 2: (0, 50, 2), (100, 100, 2),
    (300, 200, 2), then the 100 steps left as (700, 100, 1): three period lengths, two more programs."""
    cfg = _cfg(eval_spacing="log", evals_per_chunk=2)
    periods = 2 * 1 + 2 * 2 + 2 * 4 + 1 * 2  # n * period_s * period / first_period
    assert cost.project(RunPlan.of(cfg), COST) == pytest.approx(10 + 2 * 4 + (periods + 4 * 0.5) + 2)


@pytest.mark.parametrize("checkpoint_every", [1, 0])
def test_measure_on_a_tiny_programme_returns_positive_times(checkpoint_every):
    shape = {"task": {"K": 40, "N": 4}, "model": {"width": 8}}  # the smallest that trains: the times are under test
    cfg = config.from_dict(
        tiny.small(**shape, train={"checkpoint_every": checkpoint_every}, ensemble={"seeds": 2, "block": 2})
    )
    c = cost.measure(RunPlan.of(cfg))
    assert c.first_period == cfg.train.eval_every  # linear spacing: the first period is eval_every
    assert c.period_s > 0 and c.finish_s > 0
    assert c.setup_s >= 0 and 0 <= c.compile_s
    assert (c.checkpoint_s > 0) == bool(checkpoint_every)  # no checkpoint timed when the run writes none
    assert cost.project(RunPlan.of(cfg), c) >= c.setup_s + c.finish_s
