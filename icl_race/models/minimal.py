"""The bare item MLP (the memorization task) and the minimal model of
arXiv 2412.00104 §3, as hashable handles with pure `init(key) -> params` and
`apply(params, x) -> logits` like `models.transformer.Transformer`.

Both MLPs are D -> W -> ReLU -> W -> ReLU -> 1 with PyTorch-default init (`models.transformer.MLP`).

Minimal model, on the classification tokens x_BxNxE = [item (D) | onehot(label) (2)] (query last, its
label slot zeroed):
    logit = phi(x_q) + w * sum_j softmax_j(beta * x_q . x_j) * y_j,   y_j = onehot_1 - onehot_0
over all N tokens including the query (whose y is 0): raw items, no LayerNorm, no learned q/k/v.
w and beta are scalars under params["attn"] (so the attention weight-decay group applies to them),
phi's weights under params["mlp"]. w(0) = 0; beta(0) is set by the caller (`init(key, beta0)`).

Shape suffixes: B sequences/items, N tokens, D item dims, E = D + 2.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
from flax import nnx

from icl_race.models.transformer import MLP


@dataclass(frozen=True)
class ItemMLP:
    D: int
    width: int = 512
    dtype: str = "float32"  # float64 (inside jax.enable_x64) for tails where float32 updates round away

    def init(self, key: jax.Array) -> dict:
        mlp = MLP(self.D, self.width, 1, nnx.Rngs(params=key), dtype=jnp.dtype(self.dtype))
        return nnx.to_pure_dict(nnx.state(mlp, nnx.Param))

    def apply(self, params: dict, x_BxD: jax.Array) -> jax.Array:
        return nnx.merge(_mlp_graphdef(self.D, self.width, self.dtype), params)(x_BxD)[..., 0]


@functools.cache
def _mlp_graphdef(D: int, width: int, dtype: str = "float32"):
    return nnx.graphdef(nnx.eval_shape(lambda: MLP(D, width, 1, nnx.Rngs(0), dtype=jnp.dtype(dtype))))


@dataclass(frozen=True)
class MinimalModel:
    D: int
    width: int = 512

    @property
    def phi(self) -> ItemMLP:
        return ItemMLP(self.D, self.width)

    def init(self, key: jax.Array, beta0=0.0) -> dict:
        return {"mlp": self.phi.init(key), "attn": {"w": jnp.float32(0.0), "beta": jnp.asarray(beta0, jnp.float32)}}

    def query_scores(self, params: dict, x_BxNxE: jax.Array) -> jax.Array:
        """The attention logits beta x_q . x_j over all N tokens (the query last)."""
        items_BxNxD = x_BxNxE[..., : self.D]
        return params["attn"]["beta"] * jnp.einsum("bnd,bd->bn", items_BxNxD, items_BxNxD[:, -1])

    def attention_term(self, params: dict, x_BxNxE: jax.Array) -> jax.Array:
        """sum_j softmax_j(beta x_q . x_j) y_j (without w)."""
        y_BxN = x_BxNxE[..., self.D + 1] - x_BxNxE[..., self.D]
        return jnp.sum(jax.nn.softmax(self.query_scores(params, x_BxNxE), axis=-1) * y_BxN, axis=-1)

    def memory_logit(self, params: dict, x_BxNxE: jax.Array) -> jax.Array:
        """phi(x_q): the in-weights term alone."""
        return self.phi.apply(params["mlp"], x_BxNxE[:, -1, : self.D])

    def apply(self, params: dict, x_BxNxE: jax.Array) -> jax.Array:
        return self.memory_logit(params, x_BxNxE) + params["attn"]["w"] * self.attention_term(params, x_BxNxE)
