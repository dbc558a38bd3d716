"""Retirement (ensemble.retire): seeds whose results can no longer change leave the computation at
chunk boundaries, and every seed's results stay exactly what a run without retirement gives."""

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from seeds import first_seeds, train_seeds

from icl_race import config
from icl_race.engine.chunks import chunk_plan
from icl_race.engine.ensemble import (
    DIVERGED,
    Layout,
    blocks_of,
    retired,
    retirement_steps,
    seed_keys,
    start,
    train,
)
from icl_race.engine.program import Program
from icl_race.run import compile_stats
from icl_race.systems import build

EVAL_EVERY = 10


@dataclass(frozen=True)
class Staggered(Program):
    """A toy program whose seeds cross the thresholds at different, known evaluations: seed s reads
    the accuracy trace shifted by `lag` = its key's draw in 0..7, so it fires "hit" (> 0.5) at
    evaluation 3 + lag and "high" (> 0.9) at 5 + lag."""

    freeze_event: str | None = "high"
    event_names = ("hit", "high")

    def init(self, key, consts):
        return {"updates": jnp.int32(0), "lag": jax.random.randint(key, (), 0, 8)}

    def step(self, state, consts, key):
        return {**state, "updates": state["updates"] + 1}, jnp.float32(0)

    def probe(self, state, consts, key):
        i = jnp.maximum(state["updates"] // EVAL_EVERY - 1 - state["lag"], 0)
        return {"acc": consts["trace"][i] + 0.001 * jax.random.uniform(key)}  # a fresh draw per evaluation

    def events(self, probes, consts):
        return {"hit": probes["acc"] > 0.5, "high": probes["acc"] > 0.9}


@dataclass(frozen=True)
class Settling(Staggered):
    """Staggered plus IWL's side of the race: a seed with an odd lag memorizes at evaluation 2, before
    its "hit" (3 + lag), and so settles; one with an even lag memorizes at 8 + lag, after its hit, which
    must not settle it. "noise" fires at random evaluations, frozen or not."""

    stop_event = "hit"
    settle_event = "settled"
    event_names = ("hit", "high", "noise", "settled")

    def probe(self, state, consts, key):
        memorized = state["updates"] // EVAL_EVERY >= jnp.where(state["lag"] % 2 == 1, 2, 8 + state["lag"])
        return {
            **super().probe(state, consts, key),
            "memorized": memorized,
            "draw": jax.random.uniform(jax.random.fold_in(key, 1)),
        }

    def events(self, probes, consts):
        return {**super().events(probes, consts), "noise": probes["draw"] > 0.8, "settled": probes["memorized"]}


@dataclass(frozen=True)
class Falling(Staggered):
    """Staggered whose odd-lag seeds lose the hit: below 0.9 from evaluation 10 + lag on (the fall event,
    confirmed over 3 evaluations). Every seed starts below 0.9 too, before its hit: that must not count.
    "noise" fires at random evaluations, frozen or not."""

    freeze_event: str | None = None
    stop_event = "hit"
    fall_event = "fell"
    confirm = (("fell", 3),)
    event_names = ("hit", "high", "noise", "fell")

    def probe(self, state, consts, key):
        out = super().probe(state, consts, key)
        lost = (state["lag"] % 2 == 1) & (state["updates"] // EVAL_EVERY >= 10 + state["lag"])
        return {**out, "acc": jnp.where(lost, 0.3, out["acc"]), "draw": jax.random.uniform(jax.random.fold_in(key, 1))}

    def events(self, probes, consts):
        return {**super().events(probes, consts), "noise": probes["draw"] > 0.8, "fell": probes["acc"] < 0.9}


TRACE = {"trace": jnp.asarray([0.0, 0.2, 0.4, 0.6, 0.8, 0.95] + [0.97] * 30, jnp.float32)}
PLAN = chunk_plan(200, EVAL_EVERY, 2)


def _staggered(seeds=10, block=4, retire=True, program=Staggered(), **kw):
    layout = Layout(block)
    carry, _ = start(program, layout, 0, np.arange(seeds), TRACE)
    live = []
    carry, curves, steps = train(
        program,
        TRACE,
        carry,
        layout=layout,
        live_seeds=seeds,
        retire=retire,
        on_chunk=lambda p: live.append(p.chunk_seeds),
        plan=PLAN,
        **kw,
    )
    t_first = {k: np.asarray(v)[:seeds] for k, v in jax.device_get(carry["t_first"]).items()}
    return t_first, {k: v[:seeds] for k, v in curves.items()}, steps, live


def test_blocks_keep_their_width_and_fillers_point_past_the_end():
    blocks = blocks_of(np.array([0, 3, 5, 6, 9]), 4, 12)
    assert [b.tolist() for b in blocks] == [[0, 3, 5, 6], [9, 12, 12, 12]]
    assert blocks_of(np.array([], np.int64), 4, 12) == []


def test_a_seed_retires_once_frozen_with_every_event_fired_or_diverged():
    program = Staggered()
    t_first = {
        "hit": np.array([30, 30, -1, 40, -1]),
        "high": np.array([50, -1, -1, -1, -1]),
        DIVERGED: np.array([-1, -1, 70, -1, -1]),
    }
    # seed 0 frozen with both events; 1 has "hit" only (still trains); 2 diverged; 3, 4 live; 4 is padding
    np.testing.assert_array_equal(retired(program, t_first, live_seeds=4), [True, False, True, False, True])
    # without the early stop nothing freezes, so only divergence (and padding) retires
    np.testing.assert_array_equal(retired(Staggered(freeze_event=None), t_first, 4), [False, False, True, False, True])
    plan = chunk_plan(100, 10, 2)  # chunks end at 20, 40, 60, 80, 100
    np.testing.assert_array_equal(
        retirement_steps(program, {k: v[:4] for k, v in t_first.items()}, plan, 100), [60, -1, 80, -1]
    )
    assert retirement_steps(program, {k: v[:1] for k, v in t_first.items()}, plan, 60)[0] == -1  # ran to its end


def test_retired_seeds_leave_and_their_results_are_unchanged():
    t_on, curves_on, steps_on, live = _staggered(retire=True)
    t_off, curves_off, steps_off, full = _staggered(retire=False)
    assert full == [10] * len(full) and live[0] == 10 and live[-1] < live[0], live
    assert sorted(live, reverse=True) == live, "seeds only leave"
    for k in t_off:
        np.testing.assert_array_equal(t_on[k], t_off[k], err_msg=k)
    at = retirement_steps(Staggered(), t_on, PLAN, int(steps_on[-1]))
    assert np.sum(at >= 0) >= 5 and len(set(at[at >= 0].tolist())) > 1, at
    np.testing.assert_array_equal(steps_on, steps_off)
    for s in range(10):
        evaluated = steps_on <= at[s] if at[s] >= 0 else np.ones(steps_on.size, bool)
        np.testing.assert_array_equal(curves_on["acc"][s, evaluated], curves_off["acc"][s, evaluated])
        # after its retirement a seed's curve holds its last evaluated value
        np.testing.assert_array_equal(curves_on["acc"][s, ~evaluated], curves_on["acc"][s, evaluated][-1])


def test_once_every_seed_retired_the_run_goes_on_to_its_budget_computing_nothing():
    _, curves, steps, live = _staggered(seeds=4)
    assert steps[-1] == PLAN.steps and curves["acc"].shape == (4, steps.size)
    assert live[-1] == 0 and live[0] == 4, live


def test_resumed_after_retirements_equals_uninterrupted():
    layout, seeds = Layout(4), 10
    fresh = lambda: start(Staggered(), layout, 0, np.arange(seeds), TRACE)[0]
    kw = dict(layout=layout, live_seeds=seeds, retire=True, plan=PLAN)
    saved = {}
    _, curves, steps = train(
        Staggered(),
        TRACE,
        fresh(),
        **kw,
        on_chunk=lambda p: saved.setdefault(p.chunks_done, (jax.device_get(p.carry), p.step, p.chunk_seeds)),
    )
    carry, at, live = saved[5]
    assert live < seeds, "the resume point should come after some seeds retired"
    history = ({k: v[:, :10] for k, v in curves.items()}, steps[:10])
    carry, resumed, resumed_steps = train(Staggered(), TRACE, carry, start_step=at, history=history, **kw)
    np.testing.assert_array_equal(resumed_steps, steps)
    for k in curves:
        np.testing.assert_array_equal(resumed[k], curves[k], err_msg=k)


def test_one_compilation_whatever_the_number_of_live_seeds():
    _staggered(seeds=12, retire=True)  # compiles the one-block chunk, _take and _put
    before, _ = compile_stats.snapshot()
    _, _, _, live = _staggered(seeds=12, retire=True)
    assert len(set(live)) >= 3, live  # three or more live counts, one program
    assert compile_stats.snapshot()[0] == before


def test_a_real_seed_is_bit_identical_alone_in_64_and_among_retiring_neighbours(tiny_raw):
    """The classification race at lr 0.1 amplifies a rounding difference of 1e-8 into another t_ICL:
    with the early stop on, seeds freeze at different times and retire, and the packing into fewer
    blocks must not change the rounding of the seeds left."""
    raw = {
        **tiny_raw,
        "train": {
            **tiny_raw["train"],
            "early_stop": "freeze",
            "stop_threshold": 0.9,
            "icl_threshold": 0.9,
            "icl_levels": [0.6],
            "steps": 1500,
            "evals_per_chunk": 2,
            "stop_when_all_acquired": False,
        },
    }
    cfg = config.from_dict(raw)
    program, consts = build(cfg)
    tr = cfg.train

    def run(ids, retire):
        live = []
        carry, curves, steps = train_seeds(
            program,
            consts,
            cfg,
            ids,
            block=8,
            live_seeds=len(ids),
            retire=retire,
            on_chunk=lambda p: live.append(p.chunk_seeds),
        )
        return (*first_seeds(len(ids), carry, curves), steps, live)

    t_off, curves_off, steps, _ = run(np.arange(24), retire=False)
    t_on, curves_on, _, live = run(np.arange(24), retire=True)
    at = retirement_steps(program, t_on, chunk_plan(tr.steps, tr.eval_every, tr.evals_per_chunk), int(steps[-1]))
    assert live[-1] <= 16 and np.sum(at >= 0) >= 8, (live, at)  # whole blocks left the computation
    for k in t_off:
        np.testing.assert_array_equal(t_on[k], t_off[k], err_msg=k)
    for s in range(24):
        evaluated = steps <= at[s] if at[s] >= 0 else np.ones(steps.size, bool)
        for k in curves_off:
            np.testing.assert_array_equal(curves_on[k][s, evaluated], curves_off[k][s, evaluated], err_msg=k)
    late = int(np.argmax(np.where(at >= 0, -1, t_on["icl"])))  # a seed still training after others retired
    t_alone, curves_alone, _, _ = run([late], retire=True)
    for k in t_off:
        assert t_alone[k][0] == t_off[k][late], k
    for k in curves_off:
        np.testing.assert_array_equal(curves_alone[k][0], curves_on[k][late], err_msg=k)


def test_freezing_at_acquisition_leaves_every_first_passage_up_to_t_icl_unchanged(tiny_raw):
    """The K*-grid setting (train.stop_threshold = train.icl_threshold): a seed freezes, and so retires, at
    its t_ICL instead of at the paper's 0.99. Up to that evaluation its training is the same, so its
    t_ICL and the rise's first passages are those of the 0.99 run: what K* (the acquired fraction) and
    the t_ICL distribution read is unchanged, only the curves after t_ICL are no longer computed."""

    def run(stop_threshold):
        raw = {
            **tiny_raw,
            "train": {
                **tiny_raw["train"],
                "early_stop": "freeze",
                "stop_threshold": stop_threshold,
                "icl_threshold": 0.9,
                "icl_levels": [0.6, 0.75],
                "steps": 1200,
                "evals_per_chunk": 2,
                "stop_when_all_acquired": False,
            },
        }
        cfg = config.from_dict(raw)
        program, consts = build(cfg)
        carry, _, _ = train_seeds(program, consts, cfg, np.arange(8), block=8, retire=True)
        return jax.device_get(carry["t_first"])

    at_099, at_090 = run(0.99), run(0.9)
    # Enough seeds acquire for the test to mean something: here all 8 by step 600 of the 1,200, so half of
    # them acquiring leaves a wide margin on another CPU, whose trajectories differ.
    assert np.sum(at_099["icl"] >= 0) >= 4, at_099["icl"]
    for e in ("icl", "icl60", "icl75"):
        np.testing.assert_array_equal(at_090[e], at_099[e], err_msg=e)
    np.testing.assert_array_equal(at_090["converged"], at_090["icl"])  # frozen at acquisition


def test_a_seed_settled_before_its_stop_event_freezes_records_nothing_more_and_retires():
    """The settle event (train.settle_iwl: IWL won the race) ends a seed's race: frozen from it on, no
    later first passage (not even one its frozen weights' noisy evaluations would cross), retired at
    the chunk's end; it never fires for a seed whose stop_event fired first. Results are identical
    with and without retirement."""
    program = Settling()
    t_on, curves_on, steps, live = _staggered(seeds=12, program=program, retire=True)
    t_off, curves_off, _, _ = _staggered(seeds=12, program=program, retire=False)
    for k in t_off:
        np.testing.assert_array_equal(t_on[k], t_off[k], err_msg=k)
    settled = t_on["settled"] >= 0
    lag = np.asarray(
        jax.vmap(lambda k: program.init(jax.random.fold_in(k, 0), TRACE)["lag"])(seed_keys(0, np.arange(12)))
    )
    np.testing.assert_array_equal(settled, lag % 2 == 1)  # odd lags memorize before their hit, even ones after
    assert 0 < settled.sum() < 12, lag
    np.testing.assert_array_equal(t_on["settled"][settled], 2 * EVAL_EVERY)
    assert np.all(t_on["hit"][settled] < 0) and np.all(t_on["hit"][~settled] >= 0)
    assert np.all(t_on["noise"][settled] <= 2 * EVAL_EVERY), "nothing recorded after settling"
    assert np.all(np.max(np.where(np.isnan(curves_off["acc"]), 0, curves_off["acc"])[settled], axis=1) < 0.5), (
        "frozen before the rise"
    )
    at = retirement_steps(program, t_on, PLAN, int(steps[-1]))
    np.testing.assert_array_equal(at[settled], 2 * EVAL_EVERY)  # the first chunk ends at evaluation 2
    for s in range(12):  # every curve value up to a seed's retirement, as without retirement
        evaluated = steps <= at[s] if at[s] >= 0 else np.ones(steps.size, bool)
        for k in curves_off:
            np.testing.assert_array_equal(curves_on[k][s, evaluated], curves_off[k][s, evaluated], err_msg=k)
    assert live[1] <= 12 - settled.sum(), live
    np.testing.assert_array_equal(retired(program, t_on, 12)[settled], True)


def test_a_settled_classification_seed_retires_with_its_results_unchanged(tiny_raw):
    """train.settle_iwl on the classification race: at K = 200 (N = 8, width 32) IWL wins within a few
    hundred steps; every seed that settles leaves, and every first passage and curve value up to
    retirement equals the run without retirement."""
    raw = {
        **tiny_raw,
        "task": {**tiny_raw["task"], "K": 200},
        "train": {**tiny_raw["train"], "settle_iwl": 0.9, "evals_per_chunk": 2},
        "ensemble": {"seeds": 8},
    }
    cfg = config.from_dict(raw)
    program, consts = build(cfg)
    assert program.settle_event == "settled" and "settled" in program.event_names
    assert "settled" not in build(config.from_dict(tiny_raw))[0].event_names  # off by default

    def run(retire):
        live = []
        carry, curves, steps = train_seeds(
            program, consts, cfg, np.arange(8), block=4, retire=retire, on_chunk=lambda p: live.append(p.chunk_seeds)
        )
        return jax.device_get(carry["t_first"]), curves, steps, live

    t_off, curves_off, steps, _ = run(False)
    t_on, curves_on, _, live = run(True)
    for k in t_off:
        np.testing.assert_array_equal(t_on[k], t_off[k], err_msg=k)
    settled = t_on["settled"] >= 0
    assert settled.sum() >= 4 and live[-1] <= 8 - settled.sum(), (t_on, live)  # all 8 here, by step 200
    for e in ("icl", "icl60", "icl75", "converged"):  # nothing after the race settled
        assert np.all((t_on[e][settled] < 0) | (t_on[e][settled] <= t_on["settled"][settled])), e
    at = retirement_steps(program, t_on, chunk_plan(cfg.train.steps, cfg.train.eval_every, 2), int(steps[-1]))
    for s in range(8):
        evaluated = steps <= at[s] if at[s] >= 0 else np.ones(steps.size, bool)
        for k in curves_off:
            np.testing.assert_array_equal(curves_on[k][s, evaluated], curves_off[k][s, evaluated], err_msg=k)


def test_a_seed_that_loses_its_stop_event_falls_once_confirmed_freezes_and_retires():
    """The fall event (train.retire_at_fall: ICL lost) counts only after the stop event's first passage
    (the low evaluations before the hit do not), at the first evaluation of its confirming streak, as
    analysis/outcome.py's lasting fall reads it from the curves; from it on the seed is frozen, records
    nothing and retires. Results are identical with and without retirement."""
    from icl_race.analysis.outcome import lasting_fall

    program = Falling()
    t_on, curves_on, steps, live = _staggered(seeds=12, program=program, retire=True)
    t_off, curves_off, _, _ = _staggered(seeds=12, program=program, retire=False)
    for k in t_off:
        np.testing.assert_array_equal(t_on[k], t_off[k], err_msg=k)
    lag = np.asarray(
        jax.vmap(lambda k: program.init(jax.random.fold_in(k, 0), TRACE)["lag"])(seed_keys(0, np.arange(12)))
    )
    fell = t_on["fell"] >= 0
    np.testing.assert_array_equal(fell, lag % 2 == 1)
    assert 0 < fell.sum() < 12, lag
    np.testing.assert_array_equal(t_on["fell"][fell], (10 + lag[fell]) * EVAL_EVERY)  # the first low evaluation
    assert np.all(t_on["hit"] >= 0) and np.all(t_on["fell"][fell] > t_on["hit"][fell])
    np.testing.assert_array_equal(t_on["fell"], lasting_fall(curves_off["acc"], steps, t_on["hit"], 0.9, 3))
    assert np.all(t_on["noise"][fell] <= t_on["fell"][fell] + 2 * EVAL_EVERY), "nothing recorded after the fall"
    at = retirement_steps(program, t_on, PLAN, int(steps[-1]))
    # retired at the end of the chunk that confirmed the fall (-1: confirmed in the last chunk)
    assert np.all((at[fell] < 0) | (at[fell] >= t_on["fell"][fell] + 2 * EVAL_EVERY)), at
    assert np.sum(at[fell] > 0) >= 3 and np.all(at[~fell] < 0), at
    for s in range(12):  # every curve value up to a seed's retirement, as without retirement
        evaluated = steps <= at[s] if at[s] >= 0 else np.ones(steps.size, bool)
        for k in curves_off:
            np.testing.assert_array_equal(curves_on[k][s, evaluated], curves_off[k][s, evaluated], err_msg=k)
    assert live[-1] == 12 - np.sum(at > 0), live
    np.testing.assert_array_equal(retired(program, t_on, 12), fell)


def test_retire_at_fall_adds_the_lasting_fall_to_the_classification_race(tiny_raw):
    """train.retire_at_fall builds the "fell" event, confirmed over analysis/outcome.py's LASTING
    evaluations below its LEVEL; off by default, so other runs keep their result keys."""
    from icl_race.analysis.events import LASTING, LEVEL

    raw = {**tiny_raw, "train": {**tiny_raw["train"], "retire_at_fall": True, "early_stop": "off"}}
    program, consts = build(config.from_dict(raw))
    assert program.fall_event == "fell" and ("fell", LASTING) in program.confirm
    probes = {"icl_acc": jnp.float32(LEVEL - 0.01), "iwl_acc": jnp.float32(0.5)}
    assert bool(program.events(probes, consts)["fell"])
    assert not bool(program.events({**probes, "icl_acc": jnp.float32(LEVEL)}, consts)["fell"])
    assert "fell" not in build(config.from_dict(tiny_raw))[0].event_names
