"""Linear attention of arXiv 2501.16265, in the paper's 1/N normalisation.

Models (parameters are plain dicts of float64 arrays; the blocks the paper holds at zero — ũ_i, ṽ_i, k̃_{i,r}
— are absent, i.e. zero structurally, which is the paper's model exactly; the reference code lets them
drift slightly under finite P):

    attn_m   ATTN_M, H heads:            {"v": (H,), "U": (H, D, D)}          Γ = Σ_i v_i U_i
    attn_s   ATTN_S, H heads of rank R:  {"v": (H,), "k": (H, R, D), "q": (H, R, D)}
                                                                              Γ = Σ_i v_i Σ_r k_ir q_irᵀ
    mlp      two-layer linear net on z = vec(β x_qᵀ), width H:  {"W1": (H, D²), "w2": (H,)}
                                                                              Γ = mat(w2ᵀ W1) (row-major)

Two implementations of the prediction: `predict_tokens` runs attention over the (N+1)-token matrix with
the full (D+1)-dimensional value/key/query matrices (the golden path; also the softmax variant), and the
fast path ŷ = βᵀ Γ x_q, whose training loss needs only the moments of `icl_race.tasks.regression`
(computed there with this module's feature map: context_beta, cubic_features).
Softmax attention (`softmax=True`, attn_m or attn_s parameters) has no fast path: scores are softmaxed over
all N+1 key positions (query included), divided by `temperature` (the reference: 1, no 1/N).

`in_weight=True` (attention kinds, token path only) also trains the blocks the paper holds at zero, from 0
as the reference does: "vt" (H, D) = ṽ_i, the value's x-part of its y row; for attn_m "ut" (H, D) = ũ_i,
the y_m·x_q entries of W^KQ_i; for attn_s "kt" (H, R) = k̃_ir, the keys' y entries. Through them the
prediction can depend on x_q alone (ṽ_iᵀ Λ̂ U_i x_q, v_i (1/N) Σ_n y_n² ũ_iᵀ x_q): a fixed task learned in
the weights.

Normalisation and units. Paper: ATTN(X) = X + Σ_i (1/N) W^V_i X Xᵀ W^{KQ}_i X. The reference code has no
1/N (ŷ_code = N ŷ_paper for the same weights; `predict_tokens(..., normalise=False)`), so a code run with
learning rate η and per-entry init std σ is this model with (`code_units`):
    attn_m, mlp:  weights × √N,      t/τ per GD step = 2 η N;
    attn_s:       weights × N^(1/3), t/τ per GD step = 2 η N^(2/3).
In paper units, gradient flow is τ Ẇ = −½ ∂L/∂W (Eq. 5), so a GD step W −= η ∂L/∂W advances t/τ by 2η.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp

F64 = jnp.float64


def context_beta(x_PxTxD: jax.Array, y_PxT: jax.Array) -> jax.Array:
    """β = (1/N) Σ_{n ≤ N} y_n x_n over the context (the query excluded): the paper's normalisation."""
    N = x_PxTxD.shape[1] - 1
    return jnp.einsum("pn,pnd->pd", y_PxT[:, :N], x_PxTxD[:, :N]) / N


def cubic_features(beta_PxD: jax.Array, xq_PxD: jax.Array) -> jax.Array:
    """z = vec(β x_qᵀ), row-major: z[i*D + j] = β_i x_q,j (the reference's flatten order)."""
    P, D = beta_PxD.shape
    return (beta_PxD[:, :, None] * xq_PxD[:, None, :]).reshape(P, D * D)


@dataclass(frozen=True)
class LinearAttention:
    """One of the models above; its fields are validated where a config is (systems/linear_attention_spec.py:
    kind attn_m | attn_s | mlp, 1 <= R <= D, softmax and in_weight for attention only, the aligned init
    for attn_m and mlp)."""

    kind: str
    D: int
    H: int
    R: int = 1
    softmax: bool = False
    temperature: float = 1.0
    in_weight: bool = False

    # ---- parameters ----------------------------------------------------------------------------

    def init(self, key: jax.Array, scale, scheme: str = "balanced") -> dict:
        """Small random initialisation, float64.

        balanced (default): every factor of a head has expected squared norm scale²: v_i ~ N(0, scale²),
          entries of U_i ~ N(0, scale²/D²), of k_i and q_i (R×D) ~ N(0, scale²/(R D)); the MLP as ATTN_M
          (W1 row i = vec(U_i), w2 = v), so the same key gives the same Γ. A layer's norm is ≈ √H·scale.
        entrywise: every entry ~ N(0, scale²), the reference's per-entry std (see `code_units`).
        aligned (attn_m, mlp): Eq. 10's aligned init, v = scale·r, U_i = scale·r_i I/√D with r a random
          unit vector, so both layers have norm exactly scale (w_init of Eq. 10).
        The in_weight blocks start at zero whatever the scheme."""
        params = self._init_core(key, scale, scheme)
        if not self.in_weight:
            return params
        other = {"ut": (self.H, self.D)} if self.kind == "attn_m" else {"kt": (self.H, self.R)}
        return params | {name: jnp.zeros(shape, F64) for name, shape in {"vt": (self.H, self.D), **other}.items()}

    def _init_core(self, key: jax.Array, scale, scheme: str) -> dict:
        D, H, R = self.D, self.H, self.R
        k_v, k_a, k_b = jax.random.split(key, 3)
        scale = jnp.asarray(scale, F64)
        normal = lambda k, shape, std: std * jax.random.normal(k, shape, F64)
        if scheme == "aligned":
            r_H = jax.random.normal(k_v, (H,), F64)
            r_H = r_H / jnp.linalg.norm(r_H)
            U = scale * r_H[:, None, None] * jnp.eye(D, dtype=F64)[None] / math.sqrt(D)
            return self._from_vU(scale * r_H, U)
        bal = scheme == "balanced"
        v = normal(k_v, (H,), scale)
        if self.kind == "attn_s":
            std = scale / math.sqrt(R * D) if bal else scale
            return {"v": v, "k": normal(k_a, (H, R, D), std), "q": normal(k_b, (H, R, D), std)}
        return self._from_vU(v, normal(k_a, (H, D, D), scale / D if bal else scale))

    def _from_vU(self, v_H, U_HxDxD):
        if self.kind == "mlp":
            return {"W1": U_HxDxD.reshape(self.H, self.D * self.D), "w2": v_H}
        return {"v": v_H, "U": U_HxDxD}

    def gamma(self, params: dict) -> jax.Array:
        """Γ_DxD of ŷ = βᵀ Γ x_q."""
        if self.kind == "attn_m":
            return jnp.einsum("h,hij->ij", params["v"], params["U"])
        if self.kind == "attn_s":
            return jnp.einsum("h,hri,hrj->ij", params["v"], params["k"], params["q"])
        return (params["w2"] @ params["W1"]).reshape(self.D, self.D)

    def head_values(self, params: dict) -> jax.Array:
        """v_i (the second-layer weight w2 for the MLP)."""
        return params["w2"] if self.kind == "mlp" else params["v"]

    # ---- token-level forward (golden path, softmax) ------------------------------------------

    def full_matrices(self, params: dict) -> dict:
        """The (D+1)-dimensional matrices of the paper's attention layer: W^V_i (H,E,E) with bottom row
        [0ᵀ, v_i]; ATTN_M: W^KQ_i (H,E,E) = [[U_i, 0], [0ᵀ, 0]]; ATTN_S: W^K_i, W^Q_i (H,R,E) with rows
        [k_irᵀ, 0] and [q_irᵀ, 0]. The zero entries are the blocks the paper holds at zero (or, for the
        last column of W^KQ and of W^Q, entries that only ever multiply the query's y = 0); with in_weight
        ṽ_i, ũ_i, k̃_ir fill their blocks."""
        D, E = self.D, self.D + 1
        WV = jnp.zeros((self.H, E, E), F64).at[:, D, D].set(params["v"])
        out = {"WV": WV.at[:, D, :D].set(params["vt"]) if self.in_weight else WV}
        if self.kind == "attn_m":
            WKQ = jnp.zeros((self.H, E, E), F64).at[:, :D, :D].set(params["U"])
            out["WKQ"] = WKQ.at[:, D, :D].set(params["ut"]) if self.in_weight else WKQ
        else:
            kt = params["kt"][..., None] if self.in_weight else jnp.zeros((*params["k"].shape[:-1], 1), F64)
            out["WK"] = jnp.concatenate([params["k"], kt], axis=-1)
            out["WQ"] = jnp.concatenate([params["q"], jnp.zeros((*params["q"].shape[:-1], 1), F64)], axis=-1)
        return out

    def predict_tokens(self, params: dict, X_PxTxE: jax.Array, normalise: bool = True) -> jax.Array:
        """ŷ_P: the y entry of the query token's output, from the token matrix (query y entry zero).

        Attention over all T = N+1 tokens (query included as a key, as the reference): out_q = x̃_q +
        Σ_i Σ_m a_i(m) W^V_i x̃_m with a_i(m) = x̃_mᵀ W^KQ_i x̃_q / N (ATTN_M) or (W^K_i x̃_m)·(W^Q_i x̃_q) / N
        (ATTN_S); normalise=False: no 1/N (the reference code); softmax: softmax over m of score / temperature.
        Only the query's y entry is formed, never the whole layer: it is all a prediction needs, and the
        whole layer costs (N+1)(D+1) times more."""
        N = X_PxTxE.shape[1] - 1
        if self.kind == "mlp":
            beta_PxD = context_beta(X_PxTxE[..., :-1], X_PxTxE[..., -1]) * (1.0 if normalise else N)
            z_PxF = cubic_features(beta_PxD, X_PxTxE[:, -1, :-1])
            return (z_PxF @ params["W1"].T) @ params["w2"]
        W = self.full_matrices(params)
        xq_PxE = X_PxTxE[:, -1]
        if self.kind == "attn_m":
            scores_PxHxT = jnp.einsum("pme,phe->phm", X_PxTxE, jnp.einsum("hef,pf->phe", W["WKQ"], xq_PxE))
        else:
            keys_PxHxTxR = jnp.einsum("hre,pme->phmr", W["WK"], X_PxTxE)
            query_PxHxR = jnp.einsum("hre,pe->phr", W["WQ"], xq_PxE)
            scores_PxHxT = jnp.einsum("phmr,phr->phm", keys_PxHxTxR, query_PxHxR)
        if self.softmax:
            weights_PxHxT = jax.nn.softmax(scores_PxHxT / self.temperature, axis=2)
        else:
            weights_PxHxT = scores_PxHxT / N if normalise else scores_PxHxT
        values_PxHxT = jnp.einsum("he,pme->phm", W["WV"][:, -1], X_PxTxE)  # y entries of W^V_i x̃_m
        return xq_PxE[:, -1] + jnp.sum(weights_PxHxT * values_PxHxT, axis=(1, 2))

    def token_loss(self, params: dict, X_PxTxE: jax.Array, yq_P: jax.Array) -> jax.Array:
        """Mean squared error on the query, no ½ (reference `MSELoss`)."""
        return jnp.mean((yq_P - self.predict_tokens(params, X_PxTxE)) ** 2)

    # ---- fast path -----------------------------------------------------------------------------

    def predict_fast(self, params: dict, beta_PxD: jax.Array, xq_PxD: jax.Array) -> jax.Array:
        return jnp.einsum("pi,ij,pj->p", beta_PxD, self.gamma(params), xq_PxD)

    def moment_loss(self, params: dict, moments: dict) -> jax.Array:
        if self.softmax or self.in_weight:
            raise ValueError("softmax attention and the in_weight blocks have no sufficient-statistics fast path")
        return gamma_loss(self.gamma(params), moments)


def gamma_loss(Gamma_DxD: jax.Array, moments: dict) -> jax.Array:
    """L(Γ) = s − 2⟨Γ, C⟩_F + vec(Γ)ᵀ S vec(Γ) (row-major vec), exact for the data the moments came from."""
    g_F = Gamma_DxD.reshape(-1)
    return moments["s"] - 2.0 * jnp.sum(Gamma_DxD * moments["C_DxD"]) + g_F @ (moments["S_FxF"] @ g_F)


def optimal_gamma(moments: dict) -> jax.Array:
    """The minimiser of `gamma_loss` over all Γ (least squares of y_q on z): Eq. 11's map for population
    moments. Every ATTN_M, and ATTN_S with R·H ≥ D, can represent it."""
    D = moments["C_DxD"].shape[0]
    return jnp.linalg.lstsq(moments["S_FxF"], moments["C_DxD"].reshape(-1))[0].reshape(D, D)


def code_units(kind: str, N: int, lr: float, init_std: float) -> dict:
    """A reference-code run (no 1/N, GD with rate lr, per-entry init std init_std) in this model's units:
    {"dt": t/τ per GD step, "scale": per-entry std to use with init scheme "entrywise", "power": the
    weight rescaling N^power}. Check: N = 31, attn_m, lr = 1e-3 gives dt = 0.062."""
    power = 1 / 3 if kind == "attn_s" else 1 / 2
    return {"dt": 2.0 * lr * N ** (2 * power), "scale": init_std * N**power, "power": power}
