"""The Pallas kernels of the query-only attention (models/attention_kernel.py, model.attention_kernel = "pallas"),
run here in interpret mode (the CPU): the same model as the XLA path, forward and gradient, under vmap over seeds
and along a training run; the config switch and its refusals. Tiny shapes; N and E not powers of two, so the
kernels' padded, masked tiles are exercised."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tiny

from icl_race import config
from icl_race.configbase import ConfigError
from icl_race.engine.ensemble import init_on_device, seed_keys, steps_on_device
from icl_race.models.attention_kernel import query_attention
from icl_race.models.transformer import Transformer
from icl_race.systems.classification import ClassificationRace

E, W = 65, 16
XLA, PALLAS = Transformer(E=E, width=W), Transformer(E=E, width=W, attention_kernel="pallas")


def _params(key=5):
    return jax.tree.map(lambda a: a * 1.7 + 0.1, XLA.init(jax.random.key(key)))  # a non-trivial LayerNorm


def _batch(B=8, N=12, key=6):
    kx, ky = jax.random.split(jax.random.key(key))
    return jax.random.normal(kx, (B, N, E)), jnp.where(jax.random.bernoulli(ky, 0.5, (B,)), 1.0, -1.0)


def _grad(spec, p, x, y):
    return jax.grad(lambda p: jnp.mean(jax.nn.softplus(-y * spec.apply(p, x))))(p)


@pytest.mark.parametrize("N", [12, 2])
def test_forward_equals_the_xla_path_and_the_unfolded_model(N):
    p = _params()
    x, _ = _batch(N=N)
    out = PALLAS.apply(p, x)
    np.testing.assert_allclose(out, XLA.apply(p, x), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out, XLA.bind(p).reference(x), rtol=1e-5, atol=1e-5)


def _plain(x_BxNxE, gu_BxE):
    """The kernels' outputs by the module docstring's formulas, as plain jnp (autodiff gives their gradient)."""
    m_BxN = jnp.mean(x_BxNxE, axis=-1)
    r_BxN = jax.lax.rsqrt(jnp.var(x_BxNxE, axis=-1) + 1e-5)
    s_BxN = r_BxN * jnp.einsum("bne,be->bn", x_BxNxE - m_BxN[..., None], gu_BxE)
    w_BxN = jax.nn.softmax(s_BxN, axis=-1) * r_BxN
    return jnp.einsum("bn,bne->be", w_BxN, x_BxNxE), jnp.sum(w_BxN * m_BxN, axis=-1)


def test_the_kernels_are_the_formulas_and_their_autodiff_in_float64():
    """The kernels' math, free of float32 rounding: in float64, forward and gu's cotangent equal the plain
    formulas and their autodiff to 1e-12 (the model itself computes in float32, so this is tested here)."""
    with jax.enable_x64(True):
        x = jax.random.normal(jax.random.key(1), (6, 12, E), jnp.float64)
        gu = 3 * jax.random.normal(jax.random.key(2), (6, E), jnp.float64)  # sharp enough to be far from uniform
        cot = (jax.random.normal(jax.random.key(3), (6, E), jnp.float64), jnp.linspace(-1.0, 1.0, 6))
        ours, vjp_ours = jax.vjp(query_attention, x, gu)
        plain, vjp_plain = jax.vjp(_plain, x, gu)
        for a, b in [*zip(ours, plain, strict=True), (vjp_ours(cot)[1], vjp_plain(cot)[1])]:
            assert a.dtype == jnp.float64
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_parameter_gradient_equals_the_xla_paths():
    # float32, B = 32, N = 20: measured within 1.1e-5 of each leaf's largest entry (the folded XLA path's own
    # test against the unfolded model allows 1e-4, the bound used here)
    p = _params()
    x, y = _batch(B=32, N=20)
    for a, b in zip(jax.tree.leaves(_grad(PALLAS, p, x, y)), jax.tree.leaves(_grad(XLA, p, x, y)), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-4 * float(jnp.max(jnp.abs(b))))


def test_a_seed_alone_equals_the_seed_inside_an_ensemble():
    """Under vmap over seeds pallas_call's batching rule adds the seed axis to the grid: each seed's program
    instances are the ones it runs alone, forward and backward."""
    x_SxBxNxE = jax.random.normal(jax.random.key(1), (3, 4, 12, E))
    gu_SxBxE = jax.random.normal(jax.random.key(2), (3, 4, E))
    cot_SxBxE = jax.random.normal(jax.random.key(3), (3, 4, E))

    def forward_and_dgu(x, gu, cot):
        (wx, wm), vjp = jax.vjp(query_attention, x, gu)
        return wx, wm, vjp((cot, jnp.sum(cot, axis=-1)))[1]

    together = jax.jit(jax.vmap(forward_and_dgu))(x_SxBxNxE, gu_SxBxE, cot_SxBxE)
    for s in range(3):
        alone = jax.jit(forward_and_dgu)(x_SxBxNxE[s], gu_SxBxE[s], cot_SxBxE[s])
        for a, b in zip(alone, together, strict=True):
            np.testing.assert_allclose(a, b[s], rtol=1e-6, atol=1e-6)


def test_training_follows_the_xla_trajectory():
    """The tests' tiny config, 300 steps of 2 seeds with each kernel. Measured: the losses agree to 6e-8 for the
    first 200 steps, 3e-5 at step 300, where the ICL transition has begun amplifying float rounding (the engine's
    note: 1e-8 -> 1e-1 within 300 steps at lr 0.1); asserted to 1e-4 over the first 100."""
    losses = {}
    for kernel in ("xla", "pallas"):
        program, consts = ClassificationRace.from_config(config.from_dict(tiny.raw(model={"attention_kernel": kernel})))
        carry = init_on_device(program, 2, seed_keys(0, np.arange(2)), consts)
        _, losses[kernel] = steps_on_device(program, 2, 300, carry, consts, jnp.int32(0))
    assert np.isfinite(losses["pallas"]).all()
    np.testing.assert_allclose(losses["pallas"][:, :100], losses["xla"][:, :100], rtol=0, atol=1e-4)
    assert (losses["pallas"][:, -10:].mean(axis=1) < losses["pallas"][:, :10].mean(axis=1)).all()  # it trains


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ({"attention_kernel": "triton"}, 'model.attention_kernel = \'triton\': must be one of "xla", "pallas"'),
        ({"attention_kernel": "pallas", "layers": 2}, "model.attention_kernel = 'pallas': must be \"xla\" unless"),
    ],
)
def test_the_switch_is_validated_in_one_line(model, message):
    with pytest.raises(ConfigError) as err:
        config.from_dict(tiny.raw(model=model))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_the_default_is_xla_and_only_the_one_layer_model_has_the_kernels():
    assert config.from_dict(tiny.raw()).model.attention_kernel == "xla"
    with pytest.raises(ValueError, match="one-layer model only"):
        Transformer(E=E, width=W, layers=2, attention_kernel="pallas").init(jax.random.key(0))


# jax 0.12 deprecates Pallas' Triton backend in favour of Mosaic GPU (docs/gpu.md); it still lowers and runs
@pytest.mark.filterwarnings("ignore:The Pallas Triton backend is deprecated:DeprecationWarning")
def test_the_kernels_lower_to_triton_for_a_gpu_without_one():
    """The part of the GPU path a CPU can check: jax.export lowers the paper-shape kernels, forward and backward
    under a vmap over seeds, for CUDA as if on an H100 (the backend and the GPU's description mocked), through
    Pallas' Triton lowering rules (power-of-two tiles, every op of the kernels) to Triton IR in XLA's Triton
    custom calls. Not checked here: Triton's compilation of that IR for the chip, and running it."""
    from unittest import mock

    from jax import export
    from jax._src.pallas.triton import pallas_call_registration
    from jax.experimental.pallas import triton as plgpu

    def forward_and_dgu(x, gu):
        (wx, wm), vjp = jax.vjp(query_attention, x, gu)
        return wx, wm, vjp((wx, wm))[1]

    h100 = plgpu.get_gpu_info_from_version(plgpu.GpuVersion.H100)
    shapes = jax.ShapeDtypeStruct((2, 128, 100, E), jnp.float32), jax.ShapeDtypeStruct((2, 128, E), jnp.float32)
    triton = "__gpu$xla.gpu.triton"
    with (
        mock.patch.object(jax, "default_backend", lambda: "gpu"),
        mock.patch.object(pallas_call_registration.gpu_info_lib, "get_gpu_info", lambda: h100),
    ):
        exported = export.export(
            jax.jit(jax.vmap(forward_and_dgu)),
            platforms=["cuda"],
            disabled_checks=[export.DisabledSafetyCheck.custom_call(triton)],
        )(*shapes)
    calls = [line for line in exported.mlir_module().splitlines() if f"custom_call @{triton}" in line]
    assert len(calls) == 2
    assert all("grid_x = 128 : i32, grid_y = 2 : i32" in c for c in calls)  # a program per sequence, per seed
    assert 'name = "query_attention_fwd"' in calls[0] and 'name = "query_attention_bwd"' in calls[1]
