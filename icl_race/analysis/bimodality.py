"""Is a sample bimodal? Three views of one 1-D sample (log t_ICL of acquired seeds, or final accuracy).

  dip test     Hartigan & Hartigan's dip statistic with its p-value against the uniform null, from the
               `diptest` package (C++ implementation of the reference algorithm; p-value interpolated
               from its table of the null distribution). p < 0.05 rejects unimodality.
  BC           bimodality coefficient (g^2 + 1) / (kappa + 3 (n-1)^2 / ((n-2)(n-3))) with the bias-corrected
               skewness g and excess kurtosis kappa; BC > 5/9 (the value of a uniform) suggests
               bimodality. Strong skew alone can also push BC over 5/9, so it is supporting evidence.
  mixture BIC  1- vs 2-component Gaussian mixture fitted by EM; Delta BIC = BIC_1 - BIC_2 > 0 favours
               two components (> 10: strong). Component standard deviations are floored at 10% of the
               sample's, so a component cannot collapse onto a pile of tied values (t_ICL takes values
               on the evaluation grid) and fake a mode.
The verdict `bimodal` is the dip test's (p < 0.05); BC and BIC are reported beside it, and `agreement`
says whether the three point the same way ("bimodal", "unimodal") or not ("disagree"): a dip test that
keeps unimodality while BC and Delta BIC both favour two modes is a disagreement, not a "not bimodal".
On fewer than MIN_N values the dip test has little power (it misses even well-separated modes about
half the time at n = 10): such a sample is flagged `underpowered`.

Values on a grid (t_ICL is a multiple of the evaluation period, an accuracy a multiple of 1/eval_size)
have ties, which make the dip test reject unimodality spuriously. `dequantize` spreads each value
uniformly over its grid cell (the true crossing time of an evaluation at step t lies in
(t - eval_every, t]) with a fixed generator, before any of the three statistics is computed.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import stats

from icl_race.analysis.draws import generator
from icl_race.analysis.record import OMIT_NONE, Record

BC_UNIFORM = 5.0 / 9.0
MIN_N = 20  # below this a dip test has too little power for a verdict


def dequantize(x: np.ndarray, step, seed: int = 0) -> np.ndarray:
    """x - U * step with U ~ Uniform[0, 1) from a fixed generator: a grid value spread over its cell
    (step: one number, or one per value)."""
    x = np.asarray(x, float)
    if np.all(np.asarray(step) <= 0):
        return x
    return x - generator(seed).random(x.shape) * step


def grid_periods(t: np.ndarray, eval_steps: np.ndarray) -> np.ndarray:
    """For times t on the evaluation grid, the length of the period each ended (t minus the previous
    evaluation, or t for the first): the spread to give t in `dequantize` on any grid, even log-spaced."""
    grid = np.concatenate([[0], np.asarray(eval_steps, float)])
    i = np.searchsorted(grid, np.asarray(t, float))
    return grid[np.clip(i, 1, len(grid) - 1)] - grid[np.clip(i - 1, 0, len(grid) - 2)]


def dip_test(x: np.ndarray) -> tuple[float | None, float | None]:
    """The dip statistic and its p-value (None, None for fewer than 4 distinct values)."""
    x = np.asarray(x, float)
    if x.size < 4 or np.ptp(x) == 0:
        return None, None
    import diptest

    dip, p = diptest.diptest(x)
    return float(dip), float(p)


def bimodality_coefficient(x: np.ndarray) -> float | None:
    x = np.asarray(x, float)
    n = x.size
    if n < 4 or np.ptp(x) == 0:
        return None
    g = stats.skew(x, bias=False)
    k = stats.kurtosis(x, bias=False)
    return float((g * g + 1) / (k + 3 * (n - 1) ** 2 / ((n - 2) * (n - 3))))


def _norm_logpdf(x, mu, sd):
    return -0.5 * ((x - mu) / sd) ** 2 - np.log(sd) - 0.5 * math.log(2 * math.pi)


@dataclasses.dataclass(frozen=True)
class Mixture(Record):
    """One Gaussian against two by BIC (`gaussian_mixture`); None and no fits for fewer than 5 distinct values."""

    bic1: float | None
    bic2: float | None
    delta_bic: float | None
    prefers: int | None
    one: dict | None = dataclasses.field(default=None, metadata=OMIT_NONE)  # mean, sd
    two: dict | None = dataclasses.field(default=None, metadata=OMIT_NONE)  # weights, means, sds


def gaussian_mixture(x: np.ndarray, sd_floor_frac: float = 0.1, max_iter: int = 500, tol: float = 1e-9) -> Mixture:
    """EM for a two-component 1-D Gaussian mixture (best of three starts) and BIC against one Gaussian."""
    x = np.asarray(x, float)
    n = x.size
    if n < 5 or np.ptp(x) == 0:
        return Mixture(None, None, None, None)
    sd_all = x.std()
    floor = sd_floor_frac * sd_all
    ll1 = float(_norm_logpdf(x, x.mean(), sd_all).sum())
    q = np.quantile(x, [0.1, 0.25, 0.5, 0.75, 0.9])
    best: tuple[float, np.ndarray, np.ndarray, np.ndarray] | None = None
    for m1, m2 in ((q[1], q[3]), (q[0], q[4]), (q[0], q[2])):
        w, mu, sd = np.array([0.5, 0.5]), np.array([m1, m2], float), np.array([sd_all / 2, sd_all / 2])
        prev = -np.inf
        for _ in range(max_iter):
            logp = np.log(w) + _norm_logpdf(x[:, None], mu, sd)  # [n, 2]
            top = logp.max(1, keepdims=True)
            lse = top[:, 0] + np.log(np.exp(logp - top).sum(1))
            ll = float(lse.sum())
            r = np.exp(logp - lse[:, None])
            nk = r.sum(0) + 1e-12
            w = np.clip(nk / n, 1e-6, 1)
            w = w / w.sum()
            mu = (r * x[:, None]).sum(0) / nk
            sd = np.maximum(np.sqrt((r * (x[:, None] - mu) ** 2).sum(0) / nk), floor)
            if ll - prev < tol * max(1.0, abs(ll)):
                break
            prev = ll
        if best is None or ll > best[0]:
            best = (ll, w, mu, sd)
    assert best is not None  # the loop above ran its three starts
    ll2, w, mu, sd = best
    order = np.argsort(mu)
    bic1 = -2 * ll1 + 2 * math.log(n)
    bic2 = -2 * ll2 + 5 * math.log(n)
    one = {"mean": float(x.mean()), "sd": float(sd_all)}
    two = {"weights": w[order].tolist(), "means": mu[order].tolist(), "sds": sd[order].tolist()}
    return Mixture(float(bic1), float(bic2), float(bic1 - bic2), 2 if bic2 < bic1 else 1, one, two)


@dataclasses.dataclass(frozen=True)
class Modality(Record):
    """Dip test, bimodality coefficient and mixture BIC of one sample (`summarize`), or why it was not
    measured."""

    n: int
    dip: float | None
    dip_p: float | None
    bc: float | None
    bc_above_5_9: bool | None
    mixture: Mixture
    bimodal: bool | None
    agreement: str | None  # "bimodal", "unimodal", "disagree"; None: too few values
    underpowered: bool
    not_measured: str | None = dataclasses.field(default=None, metadata=OMIT_NONE)

    @property
    def delta_bic(self) -> float | None:
        return self.mixture.delta_bic


def summarize(x: np.ndarray, alpha: float = 0.05) -> Modality:
    """Dip test, bimodality coefficient and mixture BIC of one sample, and the verdict."""
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    dip, p = dip_test(x)
    bc = bimodality_coefficient(x)
    mix = gaussian_mixture(x)
    votes = [
        v
        for v in (
            None if p is None else p < alpha,
            None if bc is None else bc > BC_UNIFORM,
            None if mix.delta_bic is None else mix.delta_bic > 0,
        )
        if v is not None
    ]
    return Modality(
        int(x.size),
        dip,
        p,
        bc,
        None if bc is None else bool(bc > BC_UNIFORM),
        mix,
        None if p is None else bool(p < alpha),
        None if p is None else "bimodal" if all(votes) else "unimodal" if not any(votes) else "disagree",
        bool(x.size < MIN_N),
    )
