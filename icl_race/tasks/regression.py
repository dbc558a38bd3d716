"""In-context linear regression of arXiv 2501.16265, in float64.

A sequence µ has N context tokens [x_n; y_n] and a query [x_q; 0] (last), with x ~ N(0, Λ), one task
vector w_µ per sequence and y = w_µᵀx (no label noise). Λ has trace 1. Every linear model of the paper
predicts ŷ = βᵀ Γ x_q with β = (1/N) Σ_n y_n x_n (the paper's mean, not the reference code's sum), so
training only ever needs the sufficient statistics of (y_q, β ⊗ x_q):

    L(Γ) = s − 2 ⟨Γ, C⟩_F + vec(Γ)ᵀ S vec(Γ),  s = E y_q²,  C = E y_q β x_qᵀ,  S = E z zᵀ,  z = vec(β x_qᵀ)

with vec row-major (z[i*D + j] = β_i x_q,j). `finite_moments` gives them exactly for a fixed training set
(averages over its P sequences), `population_moments` for P = ∞ (s = tr Λ, C = Λ², S = A ⊗ Λ with A the
in-context covariance of Eq. 15, `theory.linear_attention.in_context_covariance`).

Everything here is a pure function of keys and needs float64: call it inside `with jax.enable_x64(True):`
(or with JAX_ENABLE_X64=1); the functions raise otherwise rather than silently computing in float32.

Shape suffixes: P sequences, T = N + 1 tokens (query last), D input dims, E = D + 1 token dims,
F = D² cubic-feature dims.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from icl_race.models.linear_attention import context_beta, cubic_features
from icl_race.theory.linear_attention import (
    in_context_covariance,
    spectrum,  # noqa: F401 (re-exported: the spectra of Λ)
)

F64 = jnp.float64


def require_x64(what: str = "linear attention") -> None:
    """Raise unless float64 is enabled (globally or by the `jax.enable_x64(True)` context manager)."""
    if jax.dtypes.canonicalize_dtype(jnp.float64) != np.dtype("float64"):
        raise RuntimeError(
            f"{what} needs float64: run inside `with jax.enable_x64(True):` "
            "or set JAX_ENABLE_X64=1 (not flipped globally by the library on purpose)"
        )


# ---- covariance -------------------------------------------------------------------------------------


def random_rotation(key: jax.Array, D: int) -> jax.Array:
    """A Haar-random orthogonal D×D matrix (QR of a Gaussian with the signs of diag(R) fixed)."""
    require_x64()
    q, r = jnp.linalg.qr(jax.random.normal(key, (D, D), F64))
    return q * jnp.sign(jnp.diagonal(r))[None, :]


def covariance(lambdas_D, key: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """(Λ_DxD, E_DxD): Λ = E diag(λ) Eᵀ, whose column d is the eigenvector e_d of λ_d.

    E = I (eigenvectors along the standard basis, e_1 the largest) unless a key is given, in which case E is
    Haar-random as in the reference (which rotates its λ_d ∝ d spectrum by a random Q)."""
    require_x64()
    lam_D = jnp.asarray(lambdas_D, F64)
    D = lam_D.shape[0]
    E_DxD = jnp.eye(D, dtype=F64) if key is None else random_rotation(key, D)
    return (E_DxD * lam_D[None, :]) @ E_DxD.T, E_DxD


def _sym_power(M_DxD: jax.Array, p: float) -> jax.Array:
    lam_D, V_DxD = jnp.linalg.eigh(M_DxD)
    return (V_DxD * jnp.maximum(lam_D, 0.0)[None, :] ** p) @ V_DxD.T


# ---- the finite training set ------------------------------------------------------------------------


def fixed_task_vector(key: jax.Array, D: int) -> jax.Array:
    """The in-weight task's single w (reference `gen_dataset`): N(0, I_D) rescaled to norm exactly √D."""
    require_x64()
    w_D = jax.random.normal(key, (D,), F64)
    return w_D * np.sqrt(D) / jnp.linalg.norm(w_D)


def sample_dataset(
    key: jax.Array,
    P: int,
    N: int,
    Lambda_DxD: jax.Array,
    *,
    center: bool = True,
    whiten: bool = True,
    icl_fraction: float = 1.0,
    w_fixed_D: jax.Array | None = None,
) -> dict[str, jax.Array]:
    """P sequences of N context tokens and a query, drawn once (the reference's fixed training set).

    center: subtract from x its mean over the P sequences, per (position, coordinate), query included
    (reference data.py). whiten: make the task vectors' empirical mean exactly 0 and empirical covariance
    (unbiased, /(P−1)) exactly I (reference `whiten`; needs P > D). Both default on, as the figures used;
    switch both off for the "ideal" i.i.d. data of the population theory. y is computed from the centred x.

    icl_fraction c < 1 mixes in the in-weight task (reference `--icl c`, with w_fixed_D from
    `fixed_task_vector`): the first int(c·P) = ⌊cP⌋ sequences keep their own task vectors, not whitened
    (the reference dropped whitening of this subset), the others all use w_fixed_D; at c = 0 the context
    y are pure N(0, 1) noise and only y_q = w_fixedᵀx_q, so the context carries nothing about the target.

    Returns x_PxTxD (query last), w_PxD, y_PxT (the query's true y included; `tokens` zeroes it)."""
    require_x64()
    D = Lambda_DxD.shape[0]
    k_x, k_w = jax.random.split(key)
    x_PxTxD = jax.random.normal(k_x, (P, N + 1, D), F64) @ _sym_power(Lambda_DxD, 0.5)
    if center:
        x_PxTxD = x_PxTxD - jnp.mean(x_PxTxD, axis=0, keepdims=True)
    w_raw_PxD = w_PxD = jax.random.normal(k_w, (P, D), F64)
    if whiten:
        if P <= D:
            raise ValueError(f"whitening needs P > D, got P = {P}, D = {D}")
        w_PxD = w_PxD - jnp.mean(w_PxD, axis=0, keepdims=True)
        w_PxD = w_PxD @ _sym_power(w_PxD.T @ w_PxD / (P - 1), -0.5)
    if w_fixed_D is None:
        if icl_fraction != 1:
            raise ValueError("icl_fraction < 1 needs w_fixed_D, the in-weight task vector")
        return {"x_PxTxD": x_PxTxD, "w_PxD": w_PxD, "y_PxT": jnp.einsum("ptd,pd->pt", x_PxTxD, w_PxD)}
    # c may be traced (per-seed data inside a jitted init), so its cases are selects, not branches:
    # int(c P) = floor(c P) for c >= 0, and the whitened set is used only at c = 1.
    c = jnp.asarray(icl_fraction, F64)
    in_context_P = jnp.arange(P) < jnp.floor(c * P)
    mixture_PxD = jnp.where(in_context_P[:, None], w_raw_PxD, w_fixed_D[None, :])
    w_PxD = jnp.where(c < 1, mixture_PxD, w_PxD)
    y_PxT = jnp.einsum("ptd,pd->pt", x_PxTxD, w_PxD)
    noise_PxN = jax.random.normal(jax.random.fold_in(key, 0), (P, N), F64)
    y_PxT = y_PxT.at[:, :N].set(jnp.where(c <= 0, noise_PxN, y_PxT[:, :N]))
    return {"x_PxTxD": x_PxTxD, "w_PxD": w_PxD, "y_PxT": y_PxT}


def tokens(data: dict) -> tuple[jax.Array, jax.Array]:
    """(X_PxTxE, y_q_P): token rows [x_n; y_n] with the query's y entry zeroed, and the query targets."""
    x_PxTxD, y_PxT = data["x_PxTxD"], data["y_PxT"]
    y_PxT_in = y_PxT.at[:, -1].set(0.0)
    return jnp.concatenate([x_PxTxD, y_PxT_in[:, :, None]], axis=-1), y_PxT[:, -1]


def finite_moments(data: dict) -> dict[str, jax.Array]:
    """Exact averages over the training set of y_q², y_q β x_qᵀ and z zᵀ: with them the fast path's loss
    is the token-level training loss to float error (cost O(P D⁴) once, then O(D⁴) per step)."""
    x_PxTxD, y_PxT = data["x_PxTxD"], data["y_PxT"]
    P = x_PxTxD.shape[0]
    beta_PxD, xq_PxD, yq_P = context_beta(x_PxTxD, y_PxT), x_PxTxD[:, -1], y_PxT[:, -1]
    z_PxF = cubic_features(beta_PxD, xq_PxD)
    return {
        "s": jnp.mean(yq_P**2),
        "C_DxD": jnp.einsum("p,pi,pj->ij", yq_P, beta_PxD, xq_PxD) / P,
        "S_FxF": z_PxF.T @ z_PxF / P,
    }


# ---- the population (P = ∞) -------------------------------------------------------------------------


def population_moments(Lambda_DxD: jax.Array, N: int) -> dict[str, jax.Array]:
    """s = tr Λ, C = Λ², S = A ⊗ Λ (row-major vec: S[(i,j),(k,l)] = A_ik Λ_jl): the P = ∞ limit of
    `finite_moments` for ideal (uncentred, unwhitened) data, i.e. the paper's theory model exactly."""
    require_x64()
    L = jnp.asarray(Lambda_DxD, F64)
    return {"s": jnp.trace(L), "C_DxD": L @ L, "S_FxF": jnp.kron(in_context_covariance(L, N), L)}
