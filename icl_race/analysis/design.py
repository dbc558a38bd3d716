"""Adaptive designs (issue 54): where the next seeds go, the posterior their outcomes update, and when to
stop. Pure functions of a frozen config, a seed and the outcomes so far; nothing here trains or writes.

The K* design (item 1) fits the model of `analysis.threshold`'s estimator: P(acquire | x) = expit(a (x - b)),
x = log10 K, K* = 10^b, no guess or lapse rate (that estimator has none). The parameters live on a grid:
  b   location log10 K*, a lattice of `step` decades over the prior range [log10 k_lo, log10 k_hi] (the
      paper's 500 to 4e5), uniform prior: the design starts from nowhere in particular;
  a   slope per decade of K, `n_slopes` points log-uniform over [slope_lo, slope_hi] (the project's fits
      are 8-23: a wide prior around them), uniform in log a.
The posterior is the prior times the Bernoulli likelihood of every (K, acquired) outcome, exact on the
grid, so a design's own stopping does not bias it (the likelihood principle; its frequentist coverage
is checked by `analysis.design_sim`).

Placement is Psi-marginal (Kontsevich & Tyler 1999; Prins 2013): each seed goes to the candidate K
that minimises the expected entropy of the posterior of b alone, the slope summed out. A K that pins
the slope counts only as far as it sharpens b; a rule that only samples at the current estimate of b
leaves the slope unknown, and an unknown (possibly shallow) slope widens b's interval. A round's batch
of S seeds is picked greedily: after each pick its outcome is fantasised (drawn from the posterior
predictive with the design's generator) and the working posterior conditioned on it, so that later
picks know the earlier ones will be informed and the batch spreads instead of stacking on one K. The
generator is `draws.generator(seed, "design/kstar", n)`, n the number of outcomes so far: a proposal is
a function of the config, the seed and the outcomes, and a design resumed after a kill proposes
exactly what it would have proposed uninterrupted.

Why not the `questplus` package (2023.1): `QuestPlus.next_stim` gives one stimulus per call (no
batch, and no way to condition on invented outcomes without copying the object's posterior), it
minimises the entropy of the joint posterior (threshold and slope alike: no nuisance parameter, which
is what loses to a fixed grid here), and its psychometric functions are the Weibull, the CSF and the
normal CDF, not the logistic in log10 K. The grid posterior is a few lines of numpy.

Stopping (`kstar_stop`): the equal-tailed `confidence` credible interval of b no wider than
2 half_width, or max_seeds used. The median rule (item 2, `median_check`): seeds are added in blocks
until the Kaplan-Meier median's CI (`analysis.survival.kaplan_meier`) has a relative width
(hi - lo) / median at most `rel_width`, or max_seeds are used. Its `event` says which time it reads:
t_ICL (the default) or the lasting fall (`fall`, the transience time: train.retire_at_fall's t_fell); the
rule is the same on either.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
from scipy.special import expit, log_expit

from icl_race.analysis.draws import generator
from icl_race.configbase import ConfigError

TAIL = 1e-9  # posterior mass in each tail of b or a that a pick's sums leave out (changes no pick)


def _need(ok: bool, field: str, allowed: str, value) -> None:
    if not ok:
        raise ConfigError(f"design.{field} = {value!r}: must be {allowed}")


@dataclasses.dataclass(frozen=True)
class KStarDesign:
    """A K* question: the prior range of K, seeds per round, the stopping rule and the grid."""

    k_lo: float = 500.0
    k_hi: float = 4e5
    seeds_per_round: int = 16
    max_seeds: int = 480
    half_width: float = 0.05  # target half-width of the CI of log10 K*, decades
    confidence: float = 0.95
    slope_lo: float = 1.0  # prior range of the slope a, per decade of K
    slope_hi: float = 100.0
    n_slopes: int = 30
    step: float = 0.005  # the lattice of log10 K*, decades
    candidates_per_decade: int = 30  # the K a seed may be given: log-spaced, rounded to integers

    def __post_init__(self):
        _need(1 <= self.k_lo < self.k_hi, "k_lo, k_hi", "1 <= k_lo < k_hi", (self.k_lo, self.k_hi))
        _need(self.seeds_per_round >= 1, "seeds_per_round", "an integer >= 1", self.seeds_per_round)
        _need(self.max_seeds >= self.seeds_per_round, "max_seeds", ">= seeds_per_round", self.max_seeds)
        _need(self.half_width >= 0, "half_width", ">= 0 decades (0: never stop before max_seeds)", self.half_width)
        _need(0 < self.confidence < 1, "confidence", "in (0, 1)", self.confidence)
        _need(0 < self.slope_lo < self.slope_hi, "slope_lo, slope_hi", "0 < lo < hi", (self.slope_lo, self.slope_hi))
        _need(self.n_slopes >= 2, "n_slopes", "an integer >= 2", self.n_slopes)
        _need(0 < self.step <= 0.1, "step", "in (0, 0.1] decades", self.step)
        _need(self.candidates_per_decade >= 2, "candidates_per_decade", "an integer >= 2", self.candidates_per_decade)

    def locations(self) -> np.ndarray:
        """The lattice of b = log10 K* [L]."""
        lo, hi = math.log10(self.k_lo), math.log10(self.k_hi)
        return np.linspace(lo, hi, int(round((hi - lo) / self.step)) + 1)

    def slopes(self) -> np.ndarray:
        """The slopes a [A], log-spaced."""
        return np.geomspace(self.slope_lo, self.slope_hi, self.n_slopes)

    def candidates(self) -> np.ndarray:
        """The integer K a seed may be proposed, log-spaced over [k_lo, k_hi] (ascending, distinct)."""
        lo, hi = math.log10(self.k_lo), math.log10(self.k_hi)
        n = int(math.ceil((hi - lo) * self.candidates_per_decade)) + 1
        return np.unique(np.round(np.logspace(lo, hi, n)).astype(np.int64))


@dataclasses.dataclass(frozen=True)
class Posterior:
    """The grid posterior: p_LxA[l, s] = P(b = locations[l], a = slopes[s] | outcomes), summing to 1."""

    design: KStarDesign
    p_LxA: np.ndarray
    seeds: int  # outcomes it holds

    def location(self) -> np.ndarray:
        """The marginal posterior of b [L], the slope summed out."""
        return self.p_LxA.sum(1)

    def quantiles(self, qs) -> np.ndarray:
        """Quantiles of b: each lattice point's mass spread evenly over its cell of width `step`."""
        x = self.design.locations()
        edges = np.concatenate([[x[0] - self.design.step / 2], x + self.design.step / 2])
        cdf = np.concatenate([[0.0], np.cumsum(self.location())])
        return np.interp(np.asarray(qs, float) * cdf[-1], cdf, edges)

    def summary(self) -> Summary:
        c = self.design.confidence
        lo, med, hi = self.quantiles([(1 - c) / 2, 0.5, (1 + c) / 2])
        a = self.design.slopes()
        slope = float(np.exp(np.log(a) @ self.p_LxA.sum(0)))  # the posterior mean of log a, as a slope
        return Summary(float(med), [float(lo), float(hi)], float(hi - lo) / 2, slope, self.seeds, c)


@dataclasses.dataclass(frozen=True)
class Summary:
    """What a design round reports: the posterior median of log10 K*, its equal-tailed credible interval
    and half-width (decades), the slope (exp of the posterior mean of log a), the seeds behind it."""

    log10_kstar: float
    ci: list[float]
    half_width: float
    slope: float
    seeds: int
    confidence: float


def prior(design: KStarDesign) -> Posterior:
    L, A = design.locations().size, design.slopes().size
    return Posterior(design, np.full((L, A), 1.0 / (L * A)), 0)


def _log_likelihood(design: KStarDesign, K: np.ndarray, acquired: np.ndarray) -> np.ndarray:
    """sum over seeds of log P(outcome | b, a) [L, A], the seeds grouped by K."""
    ks, inv = np.unique(np.asarray(K, float), return_inverse=True)
    n = np.bincount(inv, minlength=ks.size).astype(float)
    s = np.bincount(inv, weights=np.asarray(acquired, bool).astype(float), minlength=ks.size)
    b, a = design.locations(), design.slopes()
    out = np.zeros((b.size, a.size))
    for x, n_k, s_k in zip(np.log10(ks), n, s):
        z = a[None, :] * (x - b[:, None])
        out += s_k * log_expit(z) + (n_k - s_k) * log_expit(-z)
    return out


def update(post: Posterior, K, acquired) -> Posterior:
    """The posterior after more (K, acquired) outcomes."""
    K, acquired = np.atleast_1d(K), np.atleast_1d(acquired)
    if K.shape != acquired.shape:
        raise ValueError(f"update: {K.size} K for {acquired.size} outcomes")
    if K.size and (K.min() < post.design.k_lo or K.max() > post.design.k_hi):
        raise ValueError(f"update: K outside the design's range [{post.design.k_lo:g}, {post.design.k_hi:g}]")
    log_p = np.log(np.maximum(post.p_LxA, 1e-300)) + _log_likelihood(post.design, K, acquired)
    p = np.exp(log_p - log_p.max())
    return Posterior(post.design, p / p.sum(), post.seeds + int(K.size))


def posterior(design: KStarDesign, K=(), acquired=()) -> Posterior:
    """The posterior of every outcome so far, from the prior."""
    return update(prior(design), np.asarray(K, float), np.asarray(acquired, bool))


def _support(m: np.ndarray) -> slice:
    """The rows holding all but TAIL of the mass on each side."""
    c = np.cumsum(m)
    return slice(int(np.searchsorted(c, TAIL)), int(np.searchsorted(c, c[-1] - TAIL)) + 1)


def _xlogx(v: np.ndarray, axis) -> np.ndarray:
    return np.sum(v * np.log(np.where(v > 0, v, 1.0)), axis=axis)


@functools.lru_cache(maxsize=16)
def _picking(design: KStarDesign) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What every pick of a design reads: the candidates' lattice indices (each candidate's log10 K
    snapped to the lattice of b, off by under 0.1 of a step for K >= 500: a pick only compares
    entropies; the posterior update uses the exact K) and the table T[d, s] = expit(a_s d step) over
    every lattice offset d, so that a pick gathers P(acquire) instead of evaluating it."""
    b, a = design.locations(), design.slopes()
    j_C = np.round((np.log10(design.candidates().astype(float)) - b[0]) / design.step).astype(np.int64)
    d = np.arange(-(b.size - 1), b.size) * design.step
    return design.candidates(), j_C, expit(d[:, None] * a[None, :]).astype(np.float32)


def expected_entropy(design: KStarDesign, p_LxA: np.ndarray) -> np.ndarray:
    """The expected entropy of b's marginal posterior after one seed at each candidate K [C], the
    slope summed out (Psi-marginal). With m1[c, l] = P(b_l, acquire at K_c) and q[c] = P(acquire):
    E[H] = q H(m1 / q) + (1 - q) H(m0 / (1 - q)) = -sum m1 log m1 - sum m0 log m0 + q log q + (1-q) log(1-q).
    The sums leave out the tails of b and a that hold less than TAIL of the mass, and run in float32
    (a pick compares entropies that differ in the second or third digit)."""
    _, j_C, table = _picking(design)
    ls, ss = _support(p_LxA.sum(1)), _support(p_LxA.sum(0))
    p = p_LxA[ls, ss].astype(np.float32)
    offset = j_C[:, None] - np.arange(ls.start, ls.stop)[None, :] + design.locations().size - 1
    m1_CxL = np.einsum("cla,la->cl", table[:, ss][offset], p)
    m0_CxL = p.sum(1)[None, :] - m1_CxL
    q = m1_CxL.sum(1)
    return -_xlogx(m1_CxL, 1) - _xlogx(m0_CxL, 1) + _xlogx(q[:, None], 1) + _xlogx(1 - q[:, None], 1)


def propose(post: Posterior, seed: int = 0, size: int | None = None) -> np.ndarray:
    """The next round's K, one per seed (`size`, default seeds_per_round, capped by what max_seeds
    leaves), in the order picked: greedy Psi-marginal picks with fantasised outcomes (module docstring).
    A run resumed after a kill must give the posterior of every outcome so far (`posterior`): the same
    outcomes then give the same numbers, so the same picks."""
    design = post.design
    n = min(design.seeds_per_round if size is None else size, design.max_seeds - post.seeds)
    if n <= 0:
        return np.empty(0, np.int64)
    rng = generator(seed, "design/kstar", post.seeds)
    cand, j_C, table = _picking(design)
    L = design.locations().size
    p = post.p_LxA
    picks = []
    for _ in range(n):
        c = int(np.argmin(expected_entropy(design, p)))  # ties: the smallest K
        picks.append(c)
        pc = table[j_C[c] - np.arange(L) + L - 1].astype(float)  # P(acquire at K_c | b, a) [L, A]
        acquire = rng.random() < float(np.sum(p * pc))
        p = p * (pc if acquire else 1 - pc)
        p = p / p.sum()
    return cand[picks]


def kstar_stop(post: Posterior) -> str | None:
    """Why the design stops now: "precise" (the CI's half-width <= half_width), "max_seeds", or None."""
    if post.seeds and post.summary().half_width <= post.design.half_width:
        return "precise"
    return "max_seeds" if post.seeds >= post.design.max_seeds else None


# A median design's events: its option's value -> the run's event whose first passage is a seed's time
# (None: the headline, t_ICL; "fell": the lasting fall that train.retire_at_fall records as t_fell).
EVENTS = {"t_icl": None, "fall": "fell"}


@dataclasses.dataclass(frozen=True)
class MedianDesign:
    """A median question: seeds in blocks until the KM median's CI is narrow enough, or max_seeds."""

    block: int = 16
    max_seeds: int = 256
    rel_width: float = 0.25  # target (hi - lo) / median of the KM median's CI
    confidence: float = 0.95
    event: str = "t_icl"  # whose median: t_ICL or the lasting fall (EVENTS)

    def __post_init__(self):
        _need(self.block >= 1, "block", "an integer >= 1", self.block)
        _need(self.max_seeds >= self.block, "max_seeds", ">= block", self.max_seeds)
        _need(self.rel_width > 0, "rel_width", "> 0", self.rel_width)
        _need(0 < self.confidence < 1, "confidence", "in (0, 1)", self.confidence)
        _need(isinstance(self.event, str) and self.event in EVENTS, "event", '"t_icl" or "fall"', self.event)


def record(design: KStarDesign | MedianDesign) -> dict:
    """A design's parameters as its records hold them (design.json's "design"): a median design's event
    only when it is not t_ICL, so that the records of t_ICL designs read as they did before the option."""
    return {k: v for k, v in dataclasses.asdict(design).items() if (k, v) != ("event", "t_icl")}


@dataclasses.dataclass(frozen=True)
class MedianCheck:
    """The KM median of the seeds so far, its CI, the CI's relative width (None when the median or an
    end of the CI is not reached) and why the rule stops (None: add a block)."""

    seeds: int
    median: float | None
    ci: list[float | None]
    rel_width: float | None
    stop: str | None


def median_check(design: MedianDesign, times, observed) -> MedianCheck:
    """The median rule after the seeds so far (times: t_ICL or the censoring time; observed: reached)."""
    times, observed = np.asarray(times, float), np.asarray(observed, bool)
    if times.size == 0:  # no seed yet: nothing to stop on
        return MedianCheck(0, None, [None, None], None, None)
    # survival imports scipy.stats (~0.5 s); a design file is parsed before a sweep's first line, so the
    # median's estimator loads here, where a round is checked (tests/test_first_line.py).
    from icl_race.analysis.survival import kaplan_meier

    km = kaplan_meier(times, observed, design.confidence)
    med, (lo, hi) = km.median, km.median_ci
    rel = None if med is None or lo is None or hi is None else (hi - lo) / med
    stop = "precise" if rel is not None and rel <= design.rel_width else None
    if stop is None and times.size >= design.max_seeds:
        stop = "max_seeds"
    return MedianCheck(int(times.size), med, [lo, hi], rel, stop)
