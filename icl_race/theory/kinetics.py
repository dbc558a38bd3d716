"""Kinetics of the race in arXiv 2412.00104 §3 (relations quoted without the
paper's equation numbers).

Time units. The theory's time t is gradient-flow time; this package's runs count SGD steps s. With a
constant learning rate eta, gradient-flow time is t = eta * s (one step moves the parameters by
eta * gradient), so functions here take times in whatever unit the caller passes (eta * steps: the
steps times train.lr). Whether the paper's t is eta * steps or steps (or either times another
constant from its normalisation of the loss) is [unknown]; `icl_race.analysis.memorization.t_icl_ratio`
measures the overall conversion factor as the ratio measured / predicted.

  t_icl_minimal(N, beta0)         = N * sqrt(2 pi) * exp(-beta0)           (minimal model, K = infinity)
  memorization_budget(t, c1)      = 2 * int_0^t c1 dt' (cumulative trapezoid; c1(0) = 1/2 by default)
  budget_at(t, c1, T)             the same integral up to a time T between evaluations (c1 linear in between)
  tail_correction(A, alpha, T)    = 2 A T^(1 - alpha) / (alpha - 1)       (int_T^inf of 2 A t^-alpha, alpha > 1)
  k_star_from_time(t_icl, nu, C)  K* solving C K^nu = t_icl: (t_icl / C)^(1/nu)
"""

from __future__ import annotations

import math

import numpy as np

SQRT_2PI = math.sqrt(2 * math.pi)


def t_icl_minimal(N, beta0):
    """Predicted ICL acquisition time of the minimal model at K = infinity (theory time unit)."""
    return np.asarray(N, float) * SQRT_2PI * np.exp(-np.asarray(beta0, float))


def memorization_budget(t, c1, c1_at_0: float | None = 0.5):
    """I(t) = 2 int_0^t c1 dt' at each time of t (increasing, [T]), c1 [..., T] (seeds leading).

    Cumulative trapezoid over the given grid. With c1_at_0 (default 1/2: sigma(phi = 0), the value at
    an init whose logits are ~0), the point (0, c1_at_0) is prepended so that I counts from t = 0; with
    None the integral starts at t[0] (I(t[0]) = 0). The unit of I is the unit of t."""
    t = np.asarray(t, float)
    c1 = np.asarray(c1, float)
    if c1_at_0 is not None and t[0] > 0:
        t = np.concatenate([[0.0], t])
        c1 = np.concatenate([np.full(c1.shape[:-1] + (1,), c1_at_0), c1], axis=-1)
        drop = 1
    else:
        drop = 0
    seg = 0.5 * (c1[..., 1:] + c1[..., :-1]) * np.diff(t)
    I = 2.0 * np.concatenate([np.zeros(c1.shape[:-1] + (1,)), np.cumsum(seg, axis=-1)], axis=-1)
    return I[..., drop:]


def budget_at(t, c1, T, c1_at_0: float | None = 0.5):
    """I(T) = 2 int_0^T c1 dt' for t[0] <= T <= t[-1], with c1 interpolated linearly to T: on a sparse
    (e.g. log-spaced) grid a T between evaluations is neither rounded down nor up. c1 [..., len(t)]."""
    t, c1 = np.asarray(t, float), np.asarray(c1, float)
    if not t[0] <= T <= t[-1]:
        raise ValueError(f"T = {T} lies outside the evaluated times [{t[0]}, {t[-1]}]")
    i = int(np.searchsorted(t, T))  # t[i - 1] < T <= t[i]
    if t[i] == T:
        return memorization_budget(t[: i + 1], c1[..., : i + 1], c1_at_0)[..., -1]
    w = (T - t[i - 1]) / (t[i] - t[i - 1])
    c1_T = (1 - w) * c1[..., i - 1] + w * c1[..., i]
    return memorization_budget(np.append(t[:i], T), np.concatenate([c1[..., :i], c1_T[..., None]], axis=-1), c1_at_0)[
        ..., -1
    ]


def tail_correction(A, alpha, T):
    """2 int_T^inf A t^-alpha dt = 2 A T^(1-alpha) / (alpha - 1); infinite for alpha <= 1."""
    A, alpha, T = (np.asarray(v, float) for v in (A, alpha, T))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 2 * A * T ** (1 - alpha) / (alpha - 1)
    return np.where(alpha > 1, out, np.inf)


def k_star_from_time(t_icl, nu, C=1.0):
    """The task diversity where the memorization budget C K^nu reaches the ICL time t_icl (both in one
    time unit; with a finite training budget T, I_K(T) in place of I_K(inf))."""
    return (np.asarray(t_icl, float) / C) ** (1.0 / nu)
