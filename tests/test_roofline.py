"""The passes over the token tensor in the compiled paper-shape training step (benchmarks/roofline.py):
a change that stores a second (B, N, E) tensor, or reads the batch once more, fails here."""

from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from icl_race import config
from icl_race.systems.classification import ClassificationRace

B, N, E = 128, 100, 65


@pytest.fixture
def roofline(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "benchmarks"))
    import roofline

    return roofline


def test_the_paper_step_writes_the_batch_once_and_reads_it_five_times(roofline):
    # The sampler's gather writes it; the contraction over E for the means and x . gu, the mean squares,
    # the weighted sum over N and the transposes of the two contractions read it (before issue 42: written
    # twice, read six times, 48 MB per seed-step).
    program, consts = ClassificationRace.from_config(config.from_dict({"task": {"K": 10_000, "N": N}}))
    compiled, _ = roofline.compile_step(program, consts, seeds=1)
    passes = roofline.token_passes(compiled.as_text(), B * N * E)
    assert passes["writes"] <= 1 and passes["reads"] <= 5, passes


def test_the_count_sees_a_stored_tensor_and_each_contraction_that_reads_it(roofline):
    """The counter itself, on a step with a known answer: a centred copy of the batch stored (the barrier
    keeps XLA from fusing it away) and read by the two contractions of the query's attention."""

    def step(x, u):
        xc = jax.lax.optimization_barrier(x - jnp.mean(x, axis=-1, keepdims=True))
        s = jnp.einsum("bne,be->bn", xc, u)
        return jnp.einsum("bn,bne->be", jax.nn.softmax(s, axis=-1), xc)

    shapes = jax.ShapeDtypeStruct((B, N, E), jnp.float32), jax.ShapeDtypeStruct((B, E), jnp.float32)
    passes = roofline.token_passes(jax.jit(step).lower(*shapes).compile().as_text(), B * N * E)
    assert passes == {"writes": 1, "reads": 3, "slice_reads": 0}, passes  # x once, xc twice


def test_the_pallas_estimate_adds_the_kernels_to_a_step_that_reads_no_whole_batch(roofline):
    """`--kernel pallas`: with the kernels stood in for, the rest of the step writes the batch once (the sampler,
    kept materialised for the kernels) and reads none of it whole, so every token read in the estimate is the
    kernels' analytic one (models/attention_kernel.py: one read of the tokens per kernel)."""
    raw = {"task": {"K": 3600, "N": 32}, "model": {"width": 64}}
    program, consts = ClassificationRace.from_config(config.from_dict(raw))
    row = roofline.pallas_estimate("regime", program, consts, seeds=1, token_elements=128 * 32 * 65)
    assert row["token_passes"]["writes"] == 1 and row["token_passes"]["reads"] == 0, row["token_passes"]
    kernels = row["kernel_bytes_per_seed_step"]
    assert kernels["forward_read"] > 128 * 32 * 65 * 4 and kernels["backward_read"] > 128 * 32 * 65 * 4
    assert row["bytes_per_seed_step"] == row["rest_of_step_bytes_per_seed_step"] + sum(kernels.values())
