"""The one- and two-layer transformers of arXiv 2412.00104, defined in flax nnx.

nnx only defines and initialises: the engine works on the pure parameter dict (`init`), and `apply`
merges it back inside the jitted computation, so no nnx transform ever runs in the training loop.
Initialisation reproduces PyTorch's defaults (weights and biases ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
LayerNorm eps 1e-5), because the paper's kinetics start from that init.

Shape suffixes: B sequences, N tokens, E token width, W hidden width.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
from flax import nnx

from icl_race.models.attention_kernel import query_attention


def _symmetric_uniform(bound: float):
    return lambda key, shape, dtype=jnp.float32: jax.random.uniform(key, shape, dtype, -bound, bound)


@jax.custom_vjp
def _matmul(x_BxI: jax.Array, w_IxO: jax.Array) -> jax.Array:
    return x_BxI @ w_IxO


def _matmul_fwd(x, w):
    return x @ w, (x, w)


def _matmul_bwd(res, g_BxO):
    """The same two products autodiff would form, spelled so that dW comes out in the kernel's own
    (I, O) layout. Under vmap, autodiff's dW was contracted as (O, I) and transposed inside the
    update's fusion: on CPU that made the MLP's training step 1.22x slower (benchmarks/RESULTS.md).
    Being a custom_vjp, the layers support reverse mode only: jvp / jacfwd of these models raise."""
    x, w = res
    lead = "".join(chr(ord("a") + i) for i in range(x.ndim - 1))  # any leading (batch, token) axes
    return (jnp.einsum(f"{lead}o,io->{lead}i", g_BxO, w), jnp.einsum(f"{lead}i,{lead}o->io", x, g_BxO))


_matmul.defvjp(_matmul_fwd, _matmul_bwd)


def _dense_dot_general(x, w, dimension_numbers, precision=None, **_):
    """nnx.Linear's dot_general hook: its only contraction (last axis of x with the kernel's first)
    through `_matmul`. Precision comes from the context (train.matmul_precision), as for every dot."""
    assert dimension_numbers == (((x.ndim - 1,), (0,)), ((), ())) and precision is None, dimension_numbers
    return _matmul(x, w)


def torch_linear(fan_in: int, fan_out: int, rngs: nnx.Rngs, use_bias: bool = True, dtype=jnp.float32) -> nnx.Linear:
    return nnx.Linear(
        fan_in,
        fan_out,
        use_bias=use_bias,
        rngs=rngs,
        param_dtype=dtype,
        dtype=dtype,
        dot_general=_dense_dot_general,
        kernel_init=nnx.initializers.variance_scaling(1 / 3, "fan_in", "uniform"),  # bound 1/sqrt(fan_in)
        bias_init=_symmetric_uniform(fan_in**-0.5),
    )


@jax.custom_vjp
def _token_sums(x_BxNxE: jax.Array, gu_BxE: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Every token's sum(x), x . gu and sum(x^2), as one variadic reduction over E: one pass over the batch.
    As a contraction (for the first two) and a reduction (for the third) the batch was read twice, 3.3 MB
    per seed-step at the paper shape (benchmarks/RESULTS.md). jax differentiates a variadic reduction
    generically (an associative scan of pads and slices over E), hence the custom_vjp: the transposes."""
    add3 = lambda a, b: (a[0] + b[0], a[1] + b[1], a[2] + b[2])
    terms = (x_BxNxE, x_BxNxE * gu_BxE[:, None], x_BxNxE * x_BxNxE)
    zeros = tuple(jnp.zeros((), t.dtype) for t in terms)
    return jax.lax.reduce(terms, zeros, add3, (x_BxNxE.ndim - 1,))


def _token_sums_fwd(x_BxNxE, gu_BxE):
    return _token_sums(x_BxNxE, gu_BxE), (x_BxNxE, gu_BxE)


def _token_sums_bwd(res, cot):
    """gu's cotangent is the transposed contraction; the tokens' is autodiff's too, for a caller that
    differentiates by the input: in training they are data, nothing reads it, and XLA drops it."""
    x_BxNxE, gu_BxE = res
    dsx_BxN, dxgu_BxN, dsxx_BxN = cot
    dx_BxNxE = dsx_BxN[..., None] + dxgu_BxN[..., None] * gu_BxE[:, None] + 2 * dsxx_BxN[..., None] * x_BxNxE
    return dx_BxNxE, jnp.einsum("bn,bne->be", dxgu_BxN, x_BxNxE)


_token_sums.defvjp(_token_sums_fwd, _token_sums_bwd)


class MLP(nnx.Module):
    """in -> W -> ReLU -> W -> ReLU -> out, biases everywhere."""

    def __init__(self, d_in: int, width: int, d_out: int, rngs: nnx.Rngs, dtype=jnp.float32):
        self.fc1 = torch_linear(d_in, width, rngs, dtype=dtype)
        self.fc2 = torch_linear(width, width, rngs, dtype=dtype)
        self.fc3 = torch_linear(width, d_out, rngs, dtype=dtype)

    def __call__(self, x):
        return self.fc3(jax.nn.relu(self.fc2(jax.nn.relu(self.fc1(x)))))

    def hidden(self, x) -> tuple[jax.Array, jax.Array, jax.Array]:
        """(first ReLU layer, second ReLU layer, output): what an analysis of the MLP reads."""
        h1 = jax.nn.relu(self.fc1(x))
        h2 = jax.nn.relu(self.fc2(h1))
        return h1, h2, self.fc3(h2)


class Attention(nnx.Module):
    """One softmax head, bias-free E x E maps, scale 1 (no 1/sqrt(E)), causal mask with the diagonal."""

    def __init__(self, E: int, rngs: nnx.Rngs):
        self.q = torch_linear(E, E, rngs, use_bias=False)
        self.k = torch_linear(E, E, rngs, use_bias=False)
        self.v = torch_linear(E, E, rngs, use_bias=False)

    def query(self, h_BxNxE: jax.Array) -> jax.Array:
        """Attention output at the last (query) position only, exactly: the causal mask lets the query
        see every token, and s_j = (W_k h_j) . q = h_j . (W_k^T q), so one E-vector per sequence
        replaces the N x N score matrix."""
        q_BxE = self.q(h_BxNxE[:, -1])
        u_BxE = q_BxE @ self.k.kernel[...].T
        a_BxN = jax.nn.softmax(jnp.einsum("bne,be->bn", h_BxNxE, u_BxE), axis=-1)
        return self.v(jnp.einsum("bn,bne->be", a_BxN, h_BxNxE))

    def query_scores(self, h_BxNxE: jax.Array) -> jax.Array:
        """The query's attention logits s_j = (W_k h_j) . (W_q h_q) over all N tokens (itself last)."""
        u_BxE = self.q(h_BxNxE[:, -1]) @ self.k.kernel[...].T
        return jnp.einsum("bne,be->bn", h_BxNxE, u_BxE)

    def causal(self, h_BxNxE: jax.Array) -> jax.Array:
        """Full causal attention at every position (needed below the top layer; the test oracle)."""
        n = h_BxNxE.shape[1]
        s_BxNxN = jnp.einsum("bie,bje->bij", self.q(h_BxNxE), self.k(h_BxNxE))
        s_BxNxN = jnp.where(jnp.tril(jnp.ones((n, n), bool)), s_BxNxN, -jnp.inf)
        return jnp.einsum("bij,bje->bie", jax.nn.softmax(s_BxNxN, axis=-1), self.v(h_BxNxE))


class OneLayer(nnx.Module):
    """logit = MLP(h_q + attn_q), h = LayerNorm(x); the paper's main model. `attention_kernel` computes the
    query-only attention's two contractions over the tokens: "xla" (the folded einsums below) or "pallas"
    (models/attention_kernel.py; model.attention_kernel)."""

    def __init__(self, E: int, width: int, rngs: nnx.Rngs, attention_kernel: str = "xla"):
        self.ln = nnx.LayerNorm(E, epsilon=1e-5, rngs=rngs)
        self.attn = Attention(E, rngs)
        self.mlp = MLP(E, width, 1, rngs)
        self.attention_kernel = attention_kernel

    def __call__(self, x_BxNxE: jax.Array) -> jax.Array:
        """Equal to mlp(h_q + attn.query(h)) with h = ln(x), with the LayerNorm folded into the query-only
        attention (exact up to float rounding): h_j = r_j (x_j - m_j) * g + b with per-token mean m_j and
        inverse deviation r_j, which carry no parameter, so
            s_j = h_j . u = r_j (x_j . gu - m_j sum(gu)) + b . u,      gu = g * u,
            sum_j a_j h_j = g * (sum_j w_j x_j - sum_j w_j m_j) + b,  w_j = a_j r_j.
        The centring is folded into the two contractions too, so no (B, N, E) tensor but the batch itself
        is stored, and it is read four times: one reduction over E for the means, mean squares and x . gu
        (`_token_sums`), the weighted sum over N, and the transposes of the two contractions in the backward
        pass (benchmarks/roofline.py counts the passes in the compiled step; tests/test_roofline.py keeps
        them from coming back). The variance is mean(x^2) - m^2, as nnx.LayerNorm computes it."""
        ln, attn = self.ln, self.attn
        assert ln.scale is not None and ln.bias is not None  # built with LayerNorm's default scale and bias
        g_1xE, b_1xE = ln.scale[...][None], ln.bias[...][None]
        # The query's LayerNorm from its own token, so that the scores need no other token's statistics.
        h_BxE = ln(x_BxNxE[:, -1])
        u_BxE = attn.q(h_BxE) @ attn.k.kernel[...].T
        gu_BxE = g_1xE * u_BxE
        if self.attention_kernel == "pallas":  # the same wx and wm, each kernel reading the tokens once
            wx_BxE, wm_B = query_attention(x_BxNxE, gu_BxE)
            wm_Bx1 = wm_B[:, None]
        else:
            wx_BxE, wm_Bx1 = self._folded_contractions(x_BxNxE, u_BxE, gu_BxE, b_1xE)
        o_BxE = attn.v(g_1xE * (wx_BxE - wm_Bx1) + b_1xE)
        return self.mlp(h_BxE + o_BxE)[:, 0]

    def _folded_contractions(
        self, x_BxNxE: jax.Array, u_BxE: jax.Array, gu_BxE: jax.Array, b_1xE: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        """sum_j w_j x_j and sum_j w_j m_j (`__call__`'s docstring) by XLA's contractions over the tokens."""
        ln = self.ln
        # One reduction over E gives every token's mean, x . gu and mean square: the batch is read once.
        E = x_BxNxE.shape[-1]
        sx_BxN, xgu_BxN, sxx_BxN = _token_sums(x_BxNxE, gu_BxE)
        m_BxN = sx_BxN / E
        var_BxN = jnp.maximum(sxx_BxN / E - m_BxN * m_BxN, 0.0)
        r_BxN = jax.lax.rsqrt(var_BxN + ln.epsilon)
        s_BxN = r_BxN * (xgu_BxN - m_BxN * jnp.sum(gu_BxE, axis=-1, keepdims=True)) + jnp.sum(
            b_1xE * u_BxE, axis=-1, keepdims=True
        )
        w_BxN = jax.nn.softmax(s_BxN, axis=-1) * r_BxN
        wx_BxE = jnp.einsum("bn,bne->be", w_BxN, x_BxNxE)
        return wx_BxE, jnp.sum(w_BxN * m_BxN, axis=-1, keepdims=True)

    def reference(self, x_BxNxE: jax.Array) -> jax.Array:
        """The unfolded form (LayerNorm on every token, then the query-only attention): the test oracle."""
        h_BxNxE = self.ln(x_BxNxE)
        return self.mlp(h_BxNxE[:, -1] + self.attn.query(h_BxNxE))[:, 0]

    def memory_logit(self, x_BxNxE: jax.Array) -> jax.Array:
        """The in-weights path alone: the logit with the attention output removed, a function of the
        query token only (the theory's phi(x_q))."""
        return self.mlp(self.ln(x_BxNxE[:, -1]))[:, 0]

    def query_scores(self, x_BxNxE: jax.Array) -> jax.Array:
        """The readout attention's logits for the query (unfolded LayerNorm; analysis, not training)."""
        return self.attn.query_scores(self.ln(x_BxNxE))

    def activations(self, x_BxNxE: jax.Array) -> dict[str, jax.Array]:
        """The forward pass with what analysis reads along it (unfolded LayerNorm): the query's attention
        logits [B, N] and weights, the MLP's two ReLU layers [B, W] and the logit [B]."""
        h_BxNxE = self.ln(x_BxNxE)
        s_BxN = self.attn.query_scores(h_BxNxE)
        h1_BxW, h2_BxW, out_Bx1 = self.mlp.hidden(h_BxNxE[:, -1] + self.attn.query(h_BxNxE))
        return {
            "query_scores": s_BxN,
            "attention": jax.nn.softmax(s_BxN, axis=-1),
            "relu1": h1_BxW,
            "relu2": h2_BxW,
            "logit": out_Bx1[:, 0],
        }


class TwoLayer(nnx.Module):
    """x = LN(X); x += Attn1(x); x = MLP1(x) per token (no residual); logit = readout(x_q + Attn2(x)_q)."""

    def __init__(self, E: int, width: int, rngs: nnx.Rngs):
        self.ln = nnx.LayerNorm(E, epsilon=1e-5, rngs=rngs)
        self.attn1 = Attention(E, rngs)
        self.mlp1 = MLP(E, width, E, rngs)
        self.attn2 = Attention(E, rngs)
        self.readout = MLP(E, width, 1, rngs)

    def __call__(self, x_BxNxE: jax.Array) -> jax.Array:
        h_BxNxE = self.ln(x_BxNxE)
        h_BxNxE = self.mlp1(h_BxNxE + self.attn1.causal(h_BxNxE))
        return self.readout(h_BxNxE[:, -1] + self.attn2.query(h_BxNxE))[:, 0]

    def memory_logit(self, x_BxNxE: jax.Array) -> jax.Array:
        """Both attention outputs removed: readout(mlp1(ln(x_q))), a function of the query token only."""
        return self.readout(self.mlp1(self.ln(x_BxNxE[:, -1])))[:, 0]

    def query_scores(self, x_BxNxE: jax.Array) -> jax.Array:
        """The readout attention's (attn2's) logits for the query, on the first layer's output."""
        h_BxNxE = self.ln(x_BxNxE)
        return self.attn2.query_scores(self.mlp1(h_BxNxE + self.attn1.causal(h_BxNxE)))


# Top-level submodules on the in-context path; weight decay treats them as one group.
ATTENTION_PATH = frozenset({"ln", "attn", "attn1", "attn2"})


def scale_qk(params: dict, scale: jax.Array) -> dict:
    """Every attention's query and key weights times `scale` (model.qk_init_scale). Traced, so a sweep
    over it compiles once; at 1 the product is exact, so the default init is unchanged bit for bit."""
    return {
        m: {n: jax.tree.map(lambda w: w * scale, sub) if n in ("q", "k") else sub for n, sub in p.items()}
        if m in ATTENTION_PATH and "q" in p
        else p
        for m, p in params.items()
    }


@dataclass(frozen=True)
class Transformer:
    """A hashable handle on one architecture: pure `init(key) -> params`, `apply(params, x) -> logits`."""

    E: int
    width: int = 512
    layers: int = 1
    attention_kernel: str = "xla"  # xla | pallas (one layer only: OneLayer's)

    def module(self, rngs: nnx.Rngs) -> OneLayer | TwoLayer:
        if self.layers == 1:
            return OneLayer(self.E, self.width, rngs, self.attention_kernel)
        if self.attention_kernel != "xla":
            raise ValueError(f"attention_kernel = {self.attention_kernel!r}: the one-layer model only")
        return TwoLayer(self.E, self.width, rngs)

    def init(self, key: jax.Array) -> dict:
        return nnx.to_pure_dict(nnx.state(self.module(nnx.Rngs(params=key)), nnx.Param))

    def apply(self, params: dict, x_BxNxE: jax.Array) -> jax.Array:
        return nnx.merge(_graphdef(self), params)(x_BxNxE)

    def memory_logit(self, params: dict, x_BxNxE: jax.Array) -> jax.Array:
        return self.bind(params).memory_logit(x_BxNxE)

    def query_scores(self, params: dict, x_BxNxE: jax.Array) -> jax.Array:
        return self.bind(params).query_scores(x_BxNxE)

    def attention(self, params: dict, x_BxNxE: jax.Array) -> jax.Array:
        """The query's attention weights [B, N] over the N tokens (itself last): the readout attention's
        softmax, what a seed's kept parameters (rundir.Run.params) show without retraining."""
        return jax.nn.softmax(self.query_scores(params, x_BxNxE), axis=-1)

    def activations(self, params: dict, x_BxNxE: jax.Array) -> dict[str, jax.Array]:
        """One layer only (`OneLayer.activations`): what the levers' collapse analysis reads."""
        m = self.bind(params)
        if not isinstance(m, OneLayer):
            raise ValueError("activations: the one-layer model only")
        return m.activations(x_BxNxE)

    def bind(self, params: dict) -> OneLayer | TwoLayer:
        """The module holding `params`, for tests and analysis that call its methods."""
        return nnx.merge(_graphdef(self), params)


@functools.cache
def _graphdef(spec: Transformer):
    return nnx.graphdef(nnx.eval_shape(lambda: spec.module(nnx.Rngs(0))))
