"""The one-layer model's query-only attention with its LayerNorm folded in, as Pallas kernels (issue 42 item 3;
selected by model.attention_kernel = "pallas", `OneLayer.__call__`).

Per sequence, with x_NxE its raw tokens and gu = g * u (the LayerNorm scale times u = W_k^T q):

    m_n = mean_e x_ne,  r_n = rsqrt(mean_e x_ne^2 - m_n^2 + eps),  s_n = r_n (x_n . gu - m_n sum(gu)),
    a = softmax(s),  w_n = a_n r_n,  wx = sum_n w_n x_n,  wm = sum_n w_n m_n,

and the caller forms the attention output v(g * (wx - wm) + b). The folded XLA path adds b . u to every score:
a constant per sequence, which the softmax cancels, so the kernels leave it out (its gradient, sum_n ds_n b,
is zero because the ds_n sum to zero). The backward kernel is given dwx and dwm and returns dgu:

    dw_n = dwx . x_n + dwm m_n,  da_n = dw_n r_n,  ds_n = a_n (da_n - sum_k a_k da_k),
    dgu = sum_n ds_n r_n (x_n - m_n).

It recomputes m, r and a from the tokens instead of storing them: it has to read the tokens anyway (for dw and
dgu), so the recomputation costs no HBM traffic and the forward writes nothing but wx and wm. The tokens are
data: their cotangent is not formed (it would be a (B, N, E) write, the traffic these kernels exist to avoid);
`query_attention` returns a zero one, so differentiate the model with respect to its parameters only.

One sequence per program instance (grid over the batch; under the engine's vmap over seeds, pallas_call's
batching rule adds the seed axis to the grid). Each kernel loads its sequence's N x E tile once (25 KB at the
paper's N = 100, E = 65) and does both contractions from it on chip: the step's token traffic becomes the
sampler's write and one read per kernel, against one write and four reads in the fused XLA step
(benchmarks/RESULTS.md, "The Pallas kernels' traffic").

The materialised batch, not a gather from the pool by id inside the kernel: the token tensor is built from a
pool (ids of four constructions: target present, balanced, bursty, distinct), a bank or fresh Gaussians, with
the label slots set per sequence and the item-noise lever on top, and it is read by the evaluation's forward and
the analyses too; a kernel that gathered rows itself would have to rebuild the label slots and the noise, a
second copy of the samplers. The gather is the bigger win (the token tensor would never exist in HBM) and the
next step, if the GPU shows the kernels worth it.

GPU lowering (Pallas' Triton backend): block shapes must be powers of two, so the tile is
(next_power_of_2(N), next_power_of_2(E)), 128 x 128 at the paper shape. The padding happens only in the
BlockSpec: the array stays (B, N, E) in HBM, Triton masks the out-of-bounds lanes of each block's load (no
traffic for them, no padded copy), and the kernels mask the tile themselves (`_tile`), so that whatever the
masked lanes hold (Triton leaves them undefined; interpret mode fills them with NaN) never reaches a sum.
Rows of 65 floats are not 128-byte aligned; a pool stored with its rows padded once at set-up
(tasks.classification.token_table) would align them, at the cost of a wider materialised batch, which is
why it is not done for this version. NOT RUN ON A GPU: no GPU was lent while it was written. On the CPU,
tests/models/test_attention_kernel.py lowers the kernels for CUDA (jax.export) through Pallas' Triton lowering rules to Triton IR,
and `make roofline-gpu` compiles them with the whole step for an H100 and an H200 (deviceless); their results on
a chip are checked only by benchmarks/gpu_fill.py's "pallas" section (against the XLA path, and timed). XLA's own
GPU compile of the step gathers the tokens inside its reductions and never stores the batch, which these kernels
need stored: there it accesses fewer bytes than the step with the kernels (benchmarks/RESULTS.md). jax 0.12 deprecates the Triton backend in favour of Mosaic GPU, a
different kernel model (warpgroups, TMA): a port, if the GPU finds these kernels worth keeping. On any other
backend (the CPU) the kernels run with interpret=True, which lowers each to a loop over the program instances:
correct, and slow (~250x the XLA step at the paper shape); for tests.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

EPS = 1e-5  # nnx.LayerNorm's default, OneLayer's LayerNorm
# Untuned: a 128 x 128 float32 tile is 64 KB, 64 registers a thread at 8 warps; no GPU to tune it on.
_GPU_PARAMS = plgpu.CompilerParams(num_warps=8, num_stages=1)


def _tile(x_ref, gu_ref, N: int, E: int):
    """The sequence's tokens with the padded lanes zeroed, and its per-token mean m, inverse deviation r
    and attention weights a (zero on padded rows)."""
    Np, Ep = x_ref.shape
    row_Npx1 = jax.lax.broadcasted_iota(jnp.int32, (Np, 1), 0) < N
    col_1xEp = jax.lax.broadcasted_iota(jnp.int32, (1, Ep), 1) < E
    x_NpxEp = jnp.where(row_Npx1 & col_1xEp, x_ref[...], 0.0)
    gu_1xEp = jnp.where(col_1xEp, gu_ref[...][None, :], 0.0)
    m_Np = jnp.sum(x_NpxEp, axis=1) / E
    var_Np = jnp.maximum(jnp.sum(x_NpxEp * x_NpxEp, axis=1) / E - m_Np * m_Np, 0.0)
    r_Np = jax.lax.rsqrt(var_Np + EPS)
    s_Np = r_Np * (jnp.sum(x_NpxEp * gu_1xEp, axis=1) - m_Np * jnp.sum(gu_1xEp))
    s_Np = jnp.where(row_Npx1[:, 0], s_Np, -jnp.inf)
    e_Np = jnp.exp(s_Np - jnp.max(s_Np))
    return x_NpxEp, col_1xEp, m_Np, r_Np, e_Np / jnp.sum(e_Np)


def _forward_kernel(x_ref, gu_ref, wx_ref, wm_ref, *, N: int, E: int):
    x_NpxEp, _, m_Np, r_Np, a_Np = _tile(x_ref, gu_ref, N, E)
    w_Np = a_Np * r_Np
    wx_ref[...] = jnp.sum(w_Np[:, None] * x_NpxEp, axis=0)
    wm_ref[...] = jnp.sum(w_Np * m_Np)


def _backward_kernel(x_ref, gu_ref, dwx_ref, dwm_ref, dgu_ref, *, N: int, E: int):
    x_NpxEp, col_1xEp, m_Np, r_Np, a_Np = _tile(x_ref, gu_ref, N, E)
    dwx_1xEp = jnp.where(col_1xEp, dwx_ref[...][None, :], 0.0)
    da_Np = (jnp.sum(x_NpxEp * dwx_1xEp, axis=1) + dwm_ref[...] * m_Np) * r_Np
    ds_Np = a_Np * (da_Np - jnp.sum(a_Np * da_Np))
    c_Np = ds_Np * r_Np
    dgu_Ep = jnp.sum(c_Np[:, None] * x_NpxEp, axis=0) - jnp.sum(c_Np * m_Np)
    dgu_ref[...] = jnp.where(col_1xEp[0], dgu_Ep, 0.0)


def interpret() -> bool:
    """Whether the kernels run in interpret mode: off a GPU (module docstring). benchmarks/roofline.py --target
    compiles them for a GPU from a process whose only backend is the CPU, and says no."""
    return jax.default_backend() != "gpu"


def _call(kernel, name: str, x_BxNxE: jax.Array, vectors: tuple, scalars: tuple, out_shape):
    """pallas_call of `kernel` over the batch: the (N, E) tile of x padded to powers of two in its BlockSpec,
    each E-vector (B, E) as a (Ep,) block and each scalar (B,) as a () block of the sequence."""
    B, N, E = x_BxNxE.shape
    Np, Ep = pl.next_power_of_2(N), pl.next_power_of_2(E)
    tile = pl.BlockSpec((None, Np, Ep), lambda b: (b, 0, 0))
    vector = pl.BlockSpec((None, Ep), lambda b: (b, 0))
    scalar = pl.BlockSpec((None,), lambda b: (b,))
    specs = {(B, E): vector, (B,): scalar}
    return pl.pallas_call(
        functools.partial(kernel, N=N, E=E),
        grid=(B,),
        in_specs=[tile, *(vector for _ in vectors), *(scalar for _ in scalars)],
        out_specs=[specs[o.shape] for o in out_shape],
        out_shape=out_shape,
        interpret=interpret(),
        compiler_params=_GPU_PARAMS,
        name=name,
    )(x_BxNxE, *vectors, *scalars)


def _forward(x_BxNxE: jax.Array, gu_BxE: jax.Array) -> tuple[jax.Array, jax.Array]:
    B, _, E = x_BxNxE.shape
    out = (jax.ShapeDtypeStruct((B, E), x_BxNxE.dtype), jax.ShapeDtypeStruct((B,), x_BxNxE.dtype))
    wx_BxE, wm_B = _call(_forward_kernel, "query_attention_fwd", x_BxNxE, (gu_BxE,), (), out)
    return wx_BxE, wm_B


@jax.custom_vjp
def query_attention(x_BxNxE: jax.Array, gu_BxE: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(wx_BxE, wm_B) of the module docstring, by the forward kernel; reverse mode by the backward kernel
    (gradient with respect to gu only: the tokens' cotangent is returned as zero)."""
    return _forward(x_BxNxE, gu_BxE)


def _query_attention_fwd(x_BxNxE, gu_BxE):
    return _forward(x_BxNxE, gu_BxE), (x_BxNxE, gu_BxE)


def _query_attention_bwd(res, cotangents):
    x_BxNxE, gu_BxE = res
    dwx_BxE, dwm_B = cotangents
    B, _, E = x_BxNxE.shape
    out = (jax.ShapeDtypeStruct((B, E), gu_BxE.dtype),)
    (dgu_BxE,) = _call(_backward_kernel, "query_attention_bwd", x_BxNxE, (gu_BxE, dwx_BxE), (dwm_B,), out)
    return None, dgu_BxE


query_attention.defvjp(_query_attention_fwd, _query_attention_bwd)


def hbm_bytes_per_sequence(N: int, E: int, itemsize: int = 4) -> dict[str, int]:
    """What each kernel reads from and writes to HBM for one sequence (the analytic traffic; XLA's cost
    analysis cannot see into an interpret-mode kernel): the forward reads the tokens and gu and writes wx and
    wm; the backward reads the tokens, gu, dwx and dwm and writes dgu. Padded lanes are masked, not fetched."""
    return {
        "forward_read": itemsize * (N * E + E),
        "forward_write": itemsize * (E + 1),
        "backward_read": itemsize * (N * E + 2 * E + 1),
        "backward_write": itemsize * E,
    }
