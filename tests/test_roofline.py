"""The passes over the token tensor in the compiled paper-shape training step (benchmarks/roofline.py):
a change that stores a second (B, N, E) tensor, reads the batch once more, copies a weight matrix every step
or builds the batch with a token-sized mask (which the GPU compile stores) fails here."""

import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from icl_race import config
from icl_race.systems.classification import ClassificationRace
from icl_race.tasks import classification as task

B, N, E = 128, 100, 65


@pytest.fixture(scope="module")
def roofline():
    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    try:
        import roofline
    finally:
        sys.path.pop(0)
    return roofline


@pytest.fixture(scope="module")
def paper_step(roofline):
    """The compiled paper-shape step of one seed: its HLO text, its carry and the compiled program."""
    program, consts = ClassificationRace.from_config(config.from_dict({"task": {"K": 10_000, "N": N}}))
    compiled, carry = roofline.compile_step(program, consts, seeds=1)
    return compiled.as_text(), carry, compiled


def test_the_paper_step_writes_the_batch_once_and_reads_it_four_times(roofline, paper_step):
    # The sampler's gather writes it; the reduction over E for the means, mean squares and x . gu, the
    # weighted sum over N and the transposes of the two contractions read it (before issue 42: written
    # twice, read six times, 48 MB per seed-step).
    passes = roofline.token_passes(paper_step[0], B * N * E)
    assert passes["writes"] <= 1 and passes["reads"] <= 4, passes


def test_the_analysis_of_a_deviceless_compile_is_xla_own(roofline, paper_step):
    # `--target`'s executables have no cost_analysis(); the module's analysis run by hand must be the one XLA
    # gives a compiled program, here on the CPU's.
    own, by_hand = paper_step[2].cost_analysis(), roofline.cost(paper_step[2], deviceless=True)
    assert by_hand["bytes accessed"] == own["bytes accessed"] and by_hand["flops"] == own["flops"]


def test_the_batch_is_built_without_a_token_sized_mask():
    # XLA's GPU compile gathers the tokens from the pool inside each reduction that reads them, so the batch never
    # exists; a (B, N, E) mask computed from the labels (the label slots set with a select) it stored and read
    # seven times: 21.7 MB per seed-step at S = 256, 15.0 without (benchmarks/RESULTS.md). Every (B, N, E) value
    # of the sampler is made from values of at most E elements (the mask of the item columns), or is a float
    # gather or a float select.
    table, labels = jnp.zeros((50, E)), jnp.zeros(50, jnp.int8)
    ids = jax.ShapeDtypeStruct((B, N), jnp.int32)

    def equations(jaxpr):  # into the jaxprs of calls (jnp.where is one)
        for eqn in jaxpr.eqns:
            inner = [
                p.jaxpr if hasattr(p, "jaxpr") else p
                for p in eqn.params.values()
                if hasattr(p, "eqns") or hasattr(p, "jaxpr")
            ]
            yield from (e for j in inner for e in equations(j)) if inner else [eqn]

    shaped = lambda v: getattr(v.aval, "shape", ())
    built = [e for e in equations(jax.make_jaxpr(task.pooled_sequences)(table, labels, ids).jaxpr)]
    assert any(e.primitive.name == "gather" and shaped(e.outvars[0]) == (B, N, E) for e in built)
    for eqn in built:
        if any(shaped(v) == (B, N, E) for v in eqn.outvars):
            small = all(math.prod(shaped(v)) <= E for v in eqn.invars)
            floats = all(jnp.issubdtype(v.aval.dtype, jnp.floating) for v in eqn.outvars)  # a gathered mask is not
            assert small or (floats and eqn.primitive.name in ("gather", "select_n")), eqn


def test_the_paper_step_copies_no_mlp_kernel(roofline, paper_step):
    # Without optim.update's barrier XLA copied the 512 x 512 and 65 x 512 kernels every step (2.4 MB); at
    # most the query kernel's E x E copy is left (optim._matrices_before_updates says why).
    assert max(roofline.matrix_copies(paper_step[0], paper_step[1], seeds=1), default=0) <= E * E


@pytest.mark.parametrize("read_after_update", [True, False])
def test_the_copy_count_sees_a_matrix_copied_every_step(roofline, read_after_update):
    """The counter itself, on loops with known answers: a matrix read in a product that nothing orders before
    its own update in place is copied every step; without that read it is not. The carry is donated, so the
    program's entry copies nothing."""

    def body(w, _):
        return w - 0.1 * jnp.tanh(w), (jnp.sum(w @ w) if read_after_update else 0.0)

    w = jax.ShapeDtypeStruct((1, 8, 8), jnp.float32)
    run = jax.jit(lambda w: jax.lax.scan(body, w, length=3), donate_argnums=0)
    hlo = run.lower(w).compile().as_text()
    assert roofline.matrix_copies(hlo, {"state": {"w": w}}, seeds=1) == ([64] if read_after_update else [])


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
