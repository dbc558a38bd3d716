"""Theory of arXiv 2501.16265 (Zhang, Singh, Latham & Saxe, ICML 2025).

Normalisation: the paper's, which is the one `icl_race.models.linear_attention` simulates: attention with
1/N (β = (1/N) Σ_n y_n x_n), loss L = E (y_q − ŷ_q)² with no ½, gradient flow τ Ẇ = −½ ∂L/∂W (Eq. 5),
times in units of τ. To overlay a reference-code run (no 1/N), convert its steps with
`icl_race.models.linear_attention.code_units` (t/τ = 2ηN per step for ATTN_M, 2ηN^(2/3) for ATTN_S).

Symbols: λ_1 ≥ … ≥ λ_D the eigenvalues of Λ (every function sorts them descending), e_d the eigenvectors,
c_d = 1 + (1 + tr Λ / λ_d)/N, A = E[Λ̂²] = Λ² + (Λ + tr Λ I)Λ/N (Eq. 15) with eigenvalues a_d = λ_d² c_d.
Pure numpy/scipy in float64; nothing here needs jax.
"""

from __future__ import annotations

import numpy as np

SPECTRA = ("white", "linear", "power", "custom")


def spectrum(kind: str, D: int, *, alpha: float = 2.0, values=None) -> np.ndarray:
    """Eigenvalues λ_1 ≥ … ≥ λ_D of Λ, normalised to Σ λ_d = tr Λ = 1 (numpy float64, descending).

    white: λ_d = 1/D (the reference's `--white_cov`, Λ = I/D, not I); linear: λ_d ∝ d (the reference's
    default, sorted so that λ_1 is the largest: (D, D−1, …, 1)/Σ); power: λ_d ∝ d^(−alpha) (alpha = 2 is the
    single-head test's spectrum); custom: `values`, normalised and sorted descending (must be > 0).
    """
    d = np.arange(1, D + 1, dtype=np.float64)
    if kind == "white":
        lam = np.ones(D)
    elif kind == "linear":
        lam = d[::-1].copy()
    elif kind == "power":
        lam = d ** (-float(alpha))
    elif kind == "custom":
        lam = np.sort(np.asarray(values, np.float64))[::-1]
        if lam.shape != (D,) or np.any(lam <= 0):
            raise ValueError(f"custom spectrum needs {D} positive values, got {values!r}")
    else:
        raise ValueError(f"spectrum {kind!r} not in {SPECTRA}")
    return lam / lam.sum()


def _lams(lambdas) -> np.ndarray:
    lam = np.sort(np.asarray(lambdas, np.float64))[::-1]
    if lam.ndim != 1 or np.any(lam <= 0):
        raise ValueError("lambdas must be a vector of positive eigenvalues")
    return lam


def c_factors(lambdas, N: int) -> np.ndarray:
    """c_d = 1 + (1 + tr Λ / λ_d)/N, d = 1..D (λ sorted descending)."""
    lam = _lams(lambdas)
    return 1.0 + (1.0 + lam.sum() / lam) / N


def plateau_losses(lambdas, N: int) -> np.ndarray:
    """[L(M_0), …, L(M_D)] of Eq. 19: L(M_m) = tr Λ − Σ_{d ≤ m} λ_d / c_d.

    M_m is the fixed point whose map is the in-context PCR on the top m eigenvectors (Eq. 22); L(M_0) = tr Λ
    (the initial plateau) and L(M_D) is the loss of the converged map (Eq. 11). As N → ∞, L(M_m) → Σ_{d>m} λ_d.
    With rank-R heads the conspicuous plateaus are those with R | m: `plateau_losses(...)[::R]`."""
    lam = _lams(lambdas)
    return lam.sum() - np.concatenate([[0.0], np.cumsum(lam / c_factors(lam, N))])


def transition_levels(lambdas, N: int, frac: float) -> np.ndarray:
    """[ℓ_1, …, ℓ_D], ℓ_m = L(M_m) + frac · (L(M_{m−1}) − L(M_m)): the loss that ends transition m−1 → m.

    t_m, the first time the loss is within `frac` of the gap above L(M_m), is the pre-registered time of the
    single-head test (experiments/linear_attention/single_head_protocol.md, frac = 0.05) and the engine's
    event m (systems/linear_attention.py computes the same thresholds from `task.plateau_frac`). A fraction
    of the gap, not an absolute tolerance, because the gaps shrink by ~100x from the first level to the last."""
    L = plateau_losses(lambdas, N)
    return L[1:] + frac * (L[:-1] - L[1:])


def midpoint_levels(lambdas, N: int) -> np.ndarray:
    """[½ (L(M_0) + L(M_1)), …, ½ (L(M_{D−1}) + L(M_D))]: half of each drop, where the single-head test
    reads t_half (an escape time that, unlike t_m, does not depend on the plateau fraction)."""
    L = plateau_losses(lambdas, N)
    return 0.5 * (L[:-1] + L[1:])


def plateau_values(lambdas, N: int) -> np.ndarray:
    """v*_d = (λ_d c_d)^(−1/3), d = 1..D: the value (= key = query norm) of head d once converged (Eq. 20),
    i.e. the fixed point of Eq. 21's scalar ODE for the transition M_{d−1} → M_d."""
    lam = _lams(lambdas)
    return (lam * c_factors(lam, N)) ** (-1.0 / 3.0)


def in_context_covariance(Lambda, N: int):
    """A = E[Λ̂²] = E[β βᵀ] = Λ² + (Λ + tr(Λ) I)Λ / N (Eq. 15), for Λ̂ = (1/N) Σ_n x_n x_nᵀ: the one
    definition, used by the theory and by the simulator's population moments (tasks/regression.py). A jax
    array is computed in its own namespace (jax.numpy, traceable) without this module importing jax;
    anything else as numpy float64."""
    xp = (
        np
        if isinstance(Lambda, np.ndarray) or not hasattr(Lambda, "__array_namespace__")
        else Lambda.__array_namespace__()
    )
    L = np.asarray(Lambda, np.float64) if xp is np else Lambda
    return L @ L + (L + xp.trace(L) * xp.eye(L.shape[0], dtype=L.dtype)) @ L / N


def population_loss(Gamma, Lambda, N: int) -> float:
    """L(Γ) = tr Λ − 2 tr(Γᵀ Λ²) + tr(Γ Λ Γᵀ A): the P = ∞ loss of ŷ = βᵀ Γ x_q."""
    G, L = np.asarray(Gamma, np.float64), np.asarray(Lambda, np.float64)
    return float(np.trace(L) - 2 * np.sum(G * (L @ L)) + np.trace(G @ L @ G.T @ in_context_covariance(L, N)))


def pcr_map(lambdas, N: int, m: int, eigvecs=None) -> np.ndarray:
    """Γ at plateau m, Eq. 22: Σ_{d ≤ m} (λ_d c_d)^(−1) e_d e_dᵀ (in-context principal-component regression).

    eigvecs: columns e_d in the order of `lambdas` as given (default: the standard basis, λ descending).
    As N → ∞ this tends to the projection on the top m eigenvectors; at m = D it equals Eq. 11."""
    lam_in = np.asarray(lambdas, np.float64)
    E = np.eye(len(lam_in)) if eigvecs is None else np.asarray(eigvecs, np.float64)
    order = np.argsort(-lam_in, kind="stable")
    lam, E = lam_in[order], E[:, order]
    g = np.where(np.arange(len(lam)) < m, 1.0 / (lam * c_factors(lam, N)), 0.0)
    return (E * g[None, :]) @ E.T


def converged_map(Lambda, N: int) -> np.ndarray:
    """Γ* = (Λ + (Λ + tr(Λ) I)/N)^(−1) = A^(−1) Λ (Eq. 11): the population optimum, eigenvalues 1/(λ_d c_d)."""
    L = np.asarray(Lambda, np.float64)
    return np.linalg.solve(in_context_covariance(L, N), L)


# ---- ATTN_M, white covariance (Eq. 10) --------------------------------------------------------------


def attn_m_white_map(t, D: int, N: int, w_init: float, s: float | None = None) -> np.ndarray:
    """σ(t) of ŷ = σ(t) βᵀ x_q for ATTN_M (or the MLP on z) under population gradient flow from the aligned,
    balanced init of layer norm w_init (both layers), with white covariance Λ = s I.

    Derivation (Eq. 8 with Λ = sI): with W1 = a r vec(I)ᵀ/√D and w2 = b r, p = ab obeys the logistic
    τ ṗ = 2p (√D s² − s³ c p), c = 1 + (1 + D)/N, so with E = exp(2√D s² t/τ):

        σ(t) = p/√D = E / ( s c (E − 1) + √D / w_init² ).

    s = 1 is the paper's Eq. 10 (stated for Λ = I); the default s = 1/D is the reference's `--white_cov`
    (Λ = I/D, tr Λ = 1), for which the escape is slower by D² (rate 2√D s² = 2/D^(3/2))."""
    s = 1.0 / D if s is None else float(s)
    c = 1.0 + (1.0 + D) / N
    x = 2.0 * np.sqrt(D) * s**2 * np.asarray(t, np.float64)
    # exp(x) / (s c (exp(x) - 1) + √D/w²) written to stay finite for large x
    return 1.0 / (s * c * (1.0 - np.exp(-x)) + np.sqrt(D) / w_init**2 * np.exp(-x))


def attn_m_white_loss(t, D: int, N: int, w_init: float, s: float | None = None) -> np.ndarray:
    """L(t) along Eq. 10: with Γ = σ I and Λ = s I, L = D s − 2 D s² σ + D s³ c σ²."""
    s = 1.0 / D if s is None else float(s)
    c = 1.0 + (1.0 + D) / N
    sig = attn_m_white_map(t, D, N, w_init, s)
    return D * s - 2 * D * s**2 * sig + D * s**3 * c * sig**2


def attn_m_white_half_time(D: int, N: int, w_init: float, s: float | None = None) -> float:
    """The time σ(t) reaches half its final value 1/(s c): τ ln(√D/(s c w_init²) − 1) / (2√D s²)."""
    s = 1.0 / D if s is None else float(s)
    c = 1.0 + (1.0 + D) / N
    return float(np.log(np.sqrt(D) / (s * c * w_init**2) - 1.0) / (2 * np.sqrt(D) * s**2))


# ---- ATTN_S rank 1: the scalar ODE of one transition (Eqs. 20-21) ------------------------------------


def scalar_ode_rhs(v, lam: float, c: float):
    """τ dv/dt of Eq. 21 for transition M_m → M_{m+1} (λ = λ_{m+1}, c = c_{m+1}): λ² v² − λ³ c v⁵."""
    v = np.asarray(v, np.float64)
    return lam**2 * v**2 - lam**3 * c * v**5


def _F(u):
    # An antiderivative of 1/(u² (1 − u³)) (partial fractions), valid on both sides of u = 1 (+inf at 1).
    with np.errstate(divide="ignore"):
        return (
            -1.0 / u
            - np.log(np.abs(1.0 - u)) / 3.0
            + np.log(u**2 + u + 1.0) / 6.0
            - np.arctan((2.0 * u + 1.0) / np.sqrt(3.0)) / np.sqrt(3.0)
        )


def scalar_ode_time(v, v0: float, lam: float, c: float):
    """The exact time (in τ) Eq. 21 takes from v0 to v, for 0 < v0, v between v0 and v* = (λc)^(−1/3).

    With u = v/v*, τ dv/dt = λ² v² (1 − u³) integrates to t = τ [F(u) − F(u0)] / (λ² v*) with
    F(u) = −1/u − ln|1 − u|/3 + ln(u² + u + 1)/6 − arctan((2u + 1)/√3)/√3 [derived; tested against an ODE
    solver]. For u0 ≪ 1 the leading term gives the escape estimate τ/(λ² v0) (see `escape_time`)."""
    vstar = (lam * c) ** (-1.0 / 3.0)
    return (_F(np.asarray(v, np.float64) / vstar) - _F(v0 / vstar)) / (lam**2 * vstar)


def scalar_ode_solution(t, v0: float, lam: float, c: float, iters: int = 200) -> np.ndarray:
    """v(t) solving Eq. 21 from v(0) = v0 > 0 (t in τ), by inverting `scalar_ode_time` (bisection in u,
    exact to float64: u is monotone in t and tends to 1, i.e. v → v*)."""
    if v0 <= 0:
        raise ValueError("Eq. 21 is solved here for v0 > 0 (a head that grows towards v*)")
    vstar = (lam * c) ** (-1.0 / 3.0)
    u0 = v0 / vstar
    target = _F(u0) + lam**2 * vstar * np.asarray(t, np.float64)
    if u0 == 1.0:
        return np.full_like(target, vstar)
    lo, hi = np.full_like(target, u0), np.full_like(target, 1.0)
    for _ in range(iters):  # F rises from u0 towards u = 1 on either side of 1: lo is u0's side
        mid = 0.5 * (lo + hi)
        below = _F(mid) < target
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return 0.5 * (lo + hi) * vstar


def escape_time(lam: float, v0):
    """The escape-time estimate τ / (λ_{m+1}² v(t_m)): the blow-up time of the quadratic part
    τ dv/dt = λ² v² of Eq. 21, valid for v(t_m) ≪ v*."""
    return 1.0 / (lam**2 * np.asarray(v0, np.float64))


def staircase(lambdas, N: int) -> dict[str, np.ndarray]:
    """Reference values for an ATTN_S staircase: per transition m → m+1 (m = 0..D−1) the λ_{m+1}, c_{m+1},
    v*_{m+1} and the plateau losses before (L(M_m)) and after (L(M_{m+1}))."""
    lam = _lams(lambdas)
    L = plateau_losses(lam, N)
    return {"lam": lam, "c": c_factors(lam, N), "vstar": plateau_values(lam, N), "L_before": L[:-1], "L_after": L[1:]}
