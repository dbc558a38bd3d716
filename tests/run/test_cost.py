"""run/cost.py: `project` is the module's bound computed over a config's chunk plan (known arithmetic on a
made-up Cost), and `measure` on a tiny config's own programs returns positive times."""

import os

import pytest
import tiny

from icl_race import config
from icl_race.run import cost, identity
from icl_race.run.records import RunPlan

# Made-up costs in round numbers, so that every projection below is arithmetic to check by hand.
COST = cost.Cost(setup_s=10.0, compile_s=4.0, period_s=1.0, first_period=50, checkpoint_s=0.5, finish_s=2.0)


def _cfg(**train) -> config.Config:
    """800 steps, evaluated every 50 in chunks of 10: the plan is (0, 50, 10) and (500, 50, 6)."""
    return config.from_dict(tiny.raw(train={"evals_per_chunk": 10, "checkpoint_every": 1, **train}))


def _plan(**train) -> RunPlan:
    return RunPlan.of(_cfg(**train))


def _measured(run: RunPlan, **kw) -> cost.Cost:
    return cost.measured(run, identity.of(run, pack=False), **kw)


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


def _keep_costs_in(monkeypatch, folder) -> list:
    """costs.json under `folder` (the tests' JAX_COMPILATION_CACHE_DIR would turn it off) and `measure`
    replaced by one that counts its calls and returns COST."""
    calls: list = []
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.setenv("ICL_RACE_COMPILE_CACHE", str(folder))
    monkeypatch.setattr(cost, "measure", lambda run: calls.append(run) or COST)
    return calls


def test_a_measured_cost_is_kept_and_measured_again_for_another_program_host_or_jax(monkeypatch, tmp_path):
    import jax

    from icl_race.run import compile_cache

    calls = _keep_costs_in(monkeypatch, tmp_path)
    assert _measured(_plan()) == COST and _measured(_plan()) == COST and len(calls) == 1
    assert len(list(tmp_path.glob(f"*/{cost.COSTS_FILE}"))) == 1
    _measured(_plan(lr=0.05))  # a traced value: the same program, the same cost
    assert len(calls) == 1
    _measured(_plan(eval_every=25))  # another chunk program
    assert len(calls) == 2
    _measured(_plan(), remeasure=True)
    assert len(calls) == 3
    monkeypatch.setattr(jax, "__version__", "0.0.1")
    _measured(_plan())
    assert len(calls) == 4
    monkeypatch.setattr(compile_cache, "host_tag", lambda: "jax-another-host")
    _measured(_plan())
    assert len(calls) == 5
    _measured(_plan())
    assert len(calls) == 5


def test_nothing_is_kept_with_the_compile_cache_off_and_a_damaged_file_is_measured_over(monkeypatch, tmp_path):
    calls = _keep_costs_in(monkeypatch, tmp_path)
    monkeypatch.setenv("ICL_RACE_COMPILE_CACHE", "off")
    _measured(_plan())
    _measured(_plan())
    assert len(calls) == 2 and not any(tmp_path.iterdir())
    monkeypatch.setenv("ICL_RACE_COMPILE_CACHE", str(tmp_path))
    from icl_race.run import compile_cache

    path = compile_cache.directory() / cost.COSTS_FILE
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert _measured(_plan()) == COST and len(calls) == 3
    assert _measured(_plan()) == COST and len(calls) == 3  # written over, then read


def _entry(**fields) -> str:
    import dataclasses
    import json

    return json.dumps({"k": {**dataclasses.asdict(COST), **fields}})


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("a FIFO", lambda p: os.mkfifo(p)),  # read, it would hang the dry run
        ("a folder", lambda p: p.mkdir()),
        ("over 1 MiB", lambda p: p.write_text(" " * (cost.MAX_COSTS_BYTES + 1) + "{}")),
        ("not an object", lambda p: p.write_text("[1, 2]")),
        ("an int of 400 digits", lambda p: p.write_text(_entry(setup_s=10**400))),  # OverflowError once
        ("a string", lambda p: p.write_text(_entry(period_s="fast"))),  # TypeError once
        ("NaN", lambda p: p.write_text(_entry(period_s=float("nan")))),
        ("a negative time", lambda p: p.write_text(_entry(finish_s=-1.0))),
        ("a period of 0", lambda p: p.write_text(_entry(first_period=0))),
        ("another version's fields", lambda p: p.write_text(_entry(new_field=1.0))),
    ],
)
def test_a_damaged_cost_cache_is_set_aside_in_one_line_and_measured_again(monkeypatch, tmp_path, capsys, name, make):
    from icl_race.run import compile_cache

    calls = _keep_costs_in(monkeypatch, tmp_path)
    path = compile_cache.directory() / cost.COSTS_FILE
    path.parent.mkdir(parents=True)
    make(path)
    assert _measured(_plan()) == COST and len(calls) == 1, name
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{path}: damaged" in err and "measured again" in err, (name, err)
    assert len(list(path.parent.glob("costs.damaged-*.json"))) == 1, name  # set aside, not deleted
    assert _measured(_plan()) == COST and len(calls) == 1, name  # the new file is read back
    assert capsys.readouterr().err == ""


def test_a_gpu_projection_is_every_padded_seed_step_at_the_rate_of_the_largest_measured_block(monkeypatch):
    monkeypatch.setattr(cost, "H200_RATES", {1: 100, 4: 400, 64: 1000})
    monkeypatch.setattr(cost, "PAPER_SHAPE", {"N": 8, "layers": 1, "width": 32})  # the tiny config's shape
    # 6 seeds in blocks of 4: 8 padded seeds x 800 steps at block 4's 400 seed-steps/s
    cfg = config.from_dict(tiny.raw(ensemble={"seeds": 6, "block": 4}))
    assert cost.project_device(RunPlan.of(cfg), "h200") == pytest.approx(8 * 800 / 400)
    assert not cost.device_rate(RunPlan.of(cfg), "h200").estimate
    assert cost.project_device(RunPlan.of(cfg), "h200", start_step=600) == pytest.approx(8 * 200 / 400)
    # block 16 is not measured: block 4's rate; the H100 is the HBM ratio 3.35 / 4.8 of it, an estimate
    cfg = config.from_dict(tiny.raw(ensemble={"seeds": 16, "block": 16}))
    h100 = cost.device_rate(RunPlan.of(cfg), "h100")
    assert h100.seed_steps_per_s == pytest.approx(400 * 3.35 / 4.8) and h100.estimate
    # twice the tokens and two layers: a quarter of the rate, an estimate
    cfg = config.from_dict(tiny.raw(task={"N": 16}, model={"layers": 2}, ensemble={"seeds": 4, "block": 4}))
    rate = cost.device_rate(RunPlan.of(cfg), "h200")
    assert rate.seed_steps_per_s == pytest.approx(100) and rate.estimate
