"""The classification program: variants end to end, decay groups, frozen groups, memory-path probes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from seeds import train_seeds

from icl_race import config
from icl_race.engine.ensemble import Layout, start
from icl_race.systems import build


def _run(raw, seeds=2):
    cfg = config.from_dict(raw)
    program, consts = build(cfg)
    return (program, consts, *train_seeds(program, consts, cfg, np.arange(seeds), block=seeds))


def test_infinite_variant_learns_icl_and_cannot_memorize():
    raw = {
        "task": {"variant": "infinite", "N": 8},
        "model": {"width": 32},
        "train": {"lr": 0.1, "batch_size": 64, "steps": 2400, "eval_every": 100, "eval_size": 1000},
    }
    _, _, carry, curves, _ = _run(raw, seeds=4)
    # IWL is at chance by construction (sd of a 1000-sequence accuracy: 0.016).
    assert np.abs(curves["iwl_acc"] - 0.5).max() < 0.07
    assert np.sum(carry["t_first"]["icl"] >= 0) >= 3, "ICL should be acquired at K = infinity"


def test_balanced_variant_reports_both_icl_tests():
    raw = {
        "task": {"variant": "balanced", "K": 200, "N": 8},
        "model": {"width": 16},
        "train": {"batch_size": 16, "steps": 20, "eval_every": 10, "eval_size": 50},
    }
    _, _, _, curves, _ = _run(raw)
    for k in ("icl_acc", "icl_ref_acc", "iwl_acc", "train_loss"):
        assert curves[k].shape == (2, 2) and np.isfinite(curves[k]).all()


def test_two_layer_with_frozen_readout_trains_everything_else():
    raw = {
        "task": {"K": 200, "N": 8},
        "model": {"layers": 2, "width": 16, "freeze_readout": True},
        "train": {"batch_size": 16, "steps": 20, "eval_every": 10, "eval_size": 50},
    }
    program, consts, carry, _, _ = _run(raw)
    init, _ = start(program, Layout(2), 0, np.arange(2), consts)
    same = jax.tree.map(lambda a, b: bool(jnp.all(a == b)), carry["state"]["params"], init["state"]["params"])
    assert all(jax.tree.leaves(same["readout"]))
    assert not any(jax.tree.leaves(same["attn1"])) and not any(jax.tree.leaves(same["mlp1"]))


@pytest.mark.parametrize(
    "freeze, frozen, trained", [("attention", ("ln", "attn"), ("mlp",)), ("mlp", ("mlp",), ("ln", "attn"))]
)
def test_frozen_group_stays_bit_identical_to_init(freeze, frozen, trained):
    raw = {
        "task": {"K": 200, "N": 8},
        "model": {"width": 16, "freeze": freeze},
        "train": {
            "lr": 0.1,
            "batch_size": 16,
            "steps": 20,
            "eval_every": 10,
            "eval_size": 50,
            "weight_decay_attn": 0.01,
            "weight_decay_mlp": 0.01,
        },
    }
    program, consts, carry, _, _ = _run(raw)
    init, _ = start(program, Layout(2), 0, np.arange(2), consts)
    same = jax.tree.map(lambda a, b: bool(jnp.all(a == b)), carry["state"]["params"], init["state"]["params"])
    assert all(v for m in frozen for v in jax.tree.leaves(same[m]))
    assert not any(v for m in trained for v in jax.tree.leaves(same[m]))


def test_memory_path_c_statistics_of_a_silent_mlp():
    # phi = 0 for every query: sigma(-phi) = 1/2, so c1 = 1/2, c2 = 1 - (1/4)/(1/2) = 1/2, c3 = e^0 = 1.
    program, consts = build(
        config.from_dict({"task": {"K": 200, "N": 8}, "model": {"width": 16}, "train": {"eval_size": 300}})
    )
    state = program.init(jax.random.key(0), consts)
    fc3 = jax.tree.map(jnp.zeros_like, state["params"]["mlp"]["fc3"])
    state["params"]["mlp"]["fc3"] = fc3
    probes = program.probe(state, consts, jax.random.key(1))
    for suffix in ("", "_sym"):
        np.testing.assert_allclose(
            [probes[f"c1{suffix}"], probes[f"c2{suffix}"], probes[f"c3{suffix}"]], [0.5, 0.5, 1.0], rtol=1e-6
        )
    np.testing.assert_allclose(probes["iwl_loss"], np.log(2), rtol=1e-6)  # the whole logit is 0 too


def test_step_is_sgd_with_coupled_decay_per_group():
    raw = {
        "task": {"K": 200, "N": 8},
        "model": {"width": 16},
        "train": {"lr": 0.05, "weight_decay_attn": 0.3, "weight_decay_mlp": 0.01},
    }
    program, consts = build(config.from_dict(raw))
    state = program.init(jax.random.key(0), consts)
    key = jax.random.key(1)
    new, _ = program.step(state, consts, key)
    x, y = program.train_batch(state, consts, key, program.batch_size)
    g = jax.grad(program.loss)(state["params"], x, y)
    p = state["params"]
    for group, wd in (("ln", 0.3), ("attn", 0.3), ("mlp", 0.01)):
        expected = jax.tree.map(lambda p, g: p - 0.05 * (g + wd * p), p[group], g[group])
        jax.tree.map(
            lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7), new["params"][group], expected
        )


def test_matmul_precision_holds_for_the_run_only():
    import jax

    from icl_race.systems import precision

    with precision(config.from_dict({"train": {"matmul_precision": "bfloat16"}})):
        assert jax.config.jax_default_matmul_precision == "bfloat16"
    assert jax.config.jax_default_matmul_precision is None


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="a property of XLA's CPU backend")
def test_a_cpu_computes_every_matmul_precision_in_full_float32(tiny_raw):
    # Why the report pools a CPU run at any train.matmul_precision with a GPU run at "highest"
    # (report/sample.py, condition): on a CPU the setting changes no bit of a run.
    from icl_race.systems import precision

    runs = {}
    for prec in ("default", "highest", "bfloat16"):
        raw = {**tiny_raw, "train": {**tiny_raw["train"], "steps": 100, "matmul_precision": prec}}
        with precision(config.from_dict(raw)):
            _, _, carry, curves, _ = _run(raw)
        runs[prec] = jax.tree.leaves((carry["state"], curves))
    for prec in ("highest", "bfloat16"):
        assert all(np.array_equal(a, b) for a, b in zip(runs["default"], runs[prec])), prec


def _init_state(raw, key=0):
    program, consts = build(config.from_dict(raw))
    return program, consts, program.init(jax.random.key(key), consts)


def test_beta0_is_measured_at_init_and_scales_with_the_square_of_qk_init_scale():
    raw = {"task": {"variant": "infinite", "N": 16}, "model": {"width": 16}}
    program, consts, state = _init_state(raw)
    _, _, sharp = _init_state({**raw, "model": {"width": 16, "qk_init_scale": 3.0}})
    # s_j is bilinear in (W_q, W_k): scaling both by c scales every log-odds by c^2.
    np.testing.assert_allclose(sharp["beta0"], 9.0 * state["beta0"], rtol=1e-4)
    # Recorded in every evaluation (constant), and different between seeds.
    probes = program.probe(state, consts, jax.random.key(1))
    assert probes["beta0"] == state["beta0"]
    assert len({float(_init_state(raw, key=k)[2]["beta0"]) for k in range(4)}) == 4


def test_beta0_of_the_minimal_model_is_its_inverse_temperature():
    # The definition on the minimal model: s_copy - s_j = beta (|x_q|^2 - x_q . x_j), whose mean is beta
    # (|x|^2 ~ 1: sd 0.18 per sequence, 0.006 over 1024 of them).
    program, _, state = _init_state(
        {"task": {"variant": "infinite", "N": 16}, "model": {"kind": "minimal", "width": 8}}
    )
    params = {**state["params"], "attn": {**state["params"]["attn"], "beta": jnp.float32(2.0)}}
    np.testing.assert_allclose(program.initial_sharpness(params, jax.random.key(3)), 2.0, atol=0.05)


def test_zipf_changes_the_training_items_but_not_the_icl_test():
    # A Zipf ICL test over novel items labelled by id made the output bias score 0.1-0.9 at init; the
    # test must be the uniform one, the same batch as without the lever for the same key and state.
    raw = {"task": {"K": 400, "N": 8}, "model": {"width": 16}}
    program, consts, state = _init_state(raw)
    zipf, zconsts, _ = _init_state({**raw, "task": {**raw["task"], "zipf_alpha": 1.5}})
    key = jax.random.key(5)
    for a, b in zip(program.icl_batch(state, consts, key, 64), zipf.icl_batch(state, zconsts, key, 64)):
        np.testing.assert_array_equal(a, b)
    # ...while the training batch does change: its targets concentrate on the frequent ids.
    x_u, _ = program.train_batch(state, consts, key, 2000)
    x_z, _ = zipf.train_batch(state, zconsts, key, 2000)
    pool = np.asarray(consts["pool"])[:, :63]
    top = lambda x: np.mean(np.linalg.norm(np.asarray(x)[:, -1, :63] - pool[0], axis=-1) < 1e-5)
    # P(item 0) = 1 / sum_k (k + 1)^-1.5 = 0.39 over K = 400 under Zipf, 1/400 uniform.
    assert top(x_z) > 0.3 and top(x_u) < 0.02


def test_zipf_run_reports_iwl_accuracy_by_band_and_memorizes_frequent_items_first():
    raw = {
        "task": {"K": 400, "N": 8, "zipf_alpha": 1.5},
        "model": {"width": 32},
        "train": {"lr": 0.1, "batch_size": 64, "steps": 400, "eval_every": 100, "eval_size": 1000},
    }
    _, consts, _, curves, _ = _run(raw)
    # P(k) >= 1/400 for (k + 1)^1.5 <= 400 / sum_k (k + 1)^-1.5 = 400 / 2.51, i.e. k + 1 <= 29.
    assert int(consts["n_frequent"]) == 29
    # ~7% of uniform IWL targets are frequent; each is seen ~100x more often than a rare one in training.
    assert np.all(curves["iwl_acc_frequent"][:, -1] > 0.9)
    assert np.all(curves["iwl_acc_rare"][:, -1] < curves["iwl_acc_frequent"][:, -1] - 0.2)


@pytest.mark.parametrize("variant", ["standard", "infinite", "balanced"])
def test_item_noise_and_bursts_train_in_every_variant_that_allows_them(variant):
    task_raw = {"variant": variant, "K": 200, "N": 8, "epsilon": 0.5}
    if variant == "standard":
        task_raw |= {"burstiness": 7, "p_bursty": 0.5}
    if variant == "infinite":
        task_raw |= {"noise_bank": 4096}
    raw = {
        "task": task_raw,
        "model": {"width": 16},
        "train": {"batch_size": 16, "steps": 20, "eval_every": 10, "eval_size": 50},
    }
    _, _, _, curves, _ = _run(raw)
    assert all(np.isfinite(curves[k]).all() for k in ("icl_acc", "iwl_acc", "train_loss", "beta0"))
