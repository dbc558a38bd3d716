"""The memorization and minimal-model sweeps summarised from their finished runs (`analysis.runs.FinishedRun`:
a study's `rundir.Run`s, read through their typed config) with the estimators of `analysis.memorization`:
per K the c1 tail and the budgets I_K(T) with nu over K (`summarize_memorization`), per (N, beta0) the
t_ICL ratios (`summarize_minimal`), the race's predicted K*(N) (`summarize_race`) beside the measured one
of a report (`measured_k_star`); typed records (studies/memorization.py renders them). Every estimator
draws from its own `Draws.bootstrap()`: a fresh generator at the root, as each did with its own seed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from icl_race.analysis.draws import Draws
from icl_race.analysis.memorization import (
    Beta0Slope,
    KStarPrediction,
    MinimalScaling,
    NuFit,
    TailFit,
    TimeRatio,
    log_t_vs_beta0,
    minimal_scaling,
    nu_fit,
    predict_k_star,
    t_icl_ratio,
    tail_fit,
)
from icl_race.analysis.record import OMIT_NONE, Record
from icl_race.analysis.runs import FinishedRun
from icl_race.analysis.threshold import percentile_ci
from icl_race.theory.kinetics import budget_at, tail_correction


@dataclass(frozen=True)
class DecadeAlpha(Record):  # the tail fit over the decade that ends at t_end
    t_end: float
    alpha: float
    alpha_ci: list | None
    n_times: int


def _alpha_by_decade(t, c1, draws: Draws) -> list[DecadeAlpha]:
    """alpha over each whole decade [t_end / 10, t_end] (t_end a power of ten) inside the evaluated times."""
    lo, hi = np.ceil(np.log10(t[t > 0].min() * 10)), np.floor(np.log10(t.max()))
    fits = ((10.0**k, tail_fit(t, c1, draws.bootstrap(), 1.0, t_end=10.0**k)) for k in np.arange(lo, hi + 1))
    return [DecadeAlpha(te, f.alpha, f.alpha_ci, f.n_times) for te, f in fits]


@dataclass(frozen=True)
class Budget(Record):  # I_K(T) in SGD steps (seed mean, bootstrap CI) and in eta * steps; I_K(T) / I_K(T/10)
    T: float
    I_steps: float
    I_steps_ci: list | None
    I_flow: float
    I_over_I_T10: float | None  # None: T/10 before the first evaluation


@dataclass(frozen=True)
class MemorizationCell(Record):
    K: int
    seeds: int
    t_last: float
    tail: TailFit
    tail_sym: TailFit
    alpha_by_decade: list[DecadeAlpha]
    budgets: list[Budget]
    I_inf_steps: float | None  # None: the budget diverges or is not shown to converge
    t_memorized_median: float


@dataclass(frozen=True)
class Memorization(Record):
    """summarize_memorization: per K (`cells`) the c1 tail fit, I_K(T) at each budget of `Ts` and
    I_K(inf); per budget (`nu`) nu(T) over K with its local exponent per step of K."""

    Ts: list
    cells: list[MemorizationCell]
    nu: list[NuFit]  # per T


def summarize_memorization(runs: Sequence[FinishedRun], draws: Draws, Ts=None) -> Memorization:
    """Per K: the tail fit of c1 and c1_sym over the last decade; alpha over each whole decade of t;
    I_K(T) (SGD steps, eta * steps, seed-bootstrap CI) and I_K(T)/I_K(T/10) at every T of Ts the run
    reached; I_K(inf) = I_K(t_last) + the tail correction where alpha's CI lies above 1 and every seed
    memorized before the tail window (else None: the budget diverges or is not shown to converge).
    Then nu from I_K(T) vs K at each T, over the K whose runs reached T. Ts defaults to the shortest
    run's last evaluation (a common T for every K)."""
    boot = draws.bootstrap()  # one generator for every run's budgets, in turn
    runs = sorted(runs, key=lambda r: r.cfg.task.K)
    if not runs:
        return Memorization([], [], [])
    Ts = sorted(Ts or [min(float(r.eval_steps[-1]) for r in runs)])
    cells = []
    I_at: dict[float, tuple[list, list]] = {T: ([], []) for T in Ts}  # T -> (the K that reached it, their I_K(T))
    for run in runs:
        cfg = run.cfg
        t, c1, lr, K = run.eval_steps.astype(float), run.curve("c1"), cfg.train.lr, cfg.task.K
        tail = tail_fit(t, c1, draws.bootstrap())
        budgets = []
        for T in (T for T in Ts if T <= t[-1]):
            I = budget_at(t, c1, T)
            I_10 = budget_at(t, c1, T / 10) if T / 10 >= t[0] else None
            ratio = float(I.mean() / I_10.mean()) if I_10 is not None else None
            ci = None if I.size < 2 else percentile_ci(boot.replicates(np.mean, I), boot.confidence)  # over seeds
            budgets.append(Budget(T, float(I.mean()), ci, float(I.mean() * lr), ratio))
            I_at[T][0].append(K)
            I_at[T][1].append(I)
        # Extrapolate only a tail that starts after memorization: a window that still holds the fall of c1
        # from 1/2 gives a steep alpha and a meaningless correction.
        t_mem = np.asarray(run.t("memorized"), float)
        converges = (
            tail.alpha_ci is not None and tail.alpha_ci[0] > 1 and np.all(t_mem >= 0) and t_mem.max() <= tail.t_range[0]
        )
        I_inf = float(budget_at(t, c1, t[-1]).mean() + tail_correction(tail.A, tail.alpha, t[-1]))
        sym, decade = tail_fit(t, run.curve("c1_sym"), draws.bootstrap()), _alpha_by_decade(t, c1, draws)
        row = (K, int(c1.shape[0]), float(t[-1]), tail, sym, decade, budgets, I_inf if converges else None)
        cells.append(MemorizationCell(*row, float(np.median(t_mem))))
    nu = [replace(nu_fit(Ks, Is, draws.bootstrap()), T=T, K=Ks) for T, (Ks, Is) in I_at.items() if len(Ks) >= 2]
    return Memorization(Ts, cells, nu)


@dataclass(frozen=True)
class MinimalCell(Record):
    """One (N, beta0) cell: t_ICL over N sqrt(2 pi) e^-beta0 in SGD steps (ratio) and in eta * steps
    (ratio_flow); with beta0_random (beta0 None) and >= 3 acquired seeds, the slope of ln t_ICL on beta0."""

    N: int
    beta0: float | None
    seeds: int
    ratio: TimeRatio
    ratio_flow: TimeRatio
    median_t_icl: float | None
    ln_t_vs_beta0: Beta0Slope | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True)
class Minimal(Record):
    """summarize_minimal: per (N, beta0) cell the t_ICL ratios; the scaling over fixed-beta0 cells."""

    cells: list[MinimalCell]
    scaling: MinimalScaling | None = None  # with >= 2 fixed-beta0 cells


def summarize_minimal(runs: Sequence[FinishedRun], draws: Draws) -> Minimal:
    """Per cell (N, beta0): measured t_ICL vs N sqrt(2 pi) e^-beta0 (`MinimalCell`). Over all fixed-beta0
    cells: minimal_scaling."""
    cells, fixed = [], []
    for run in runs:
        cfg, t_icl = run.cfg, run.t("icl")
        N, lr, random_beta0 = cfg.task.N, cfg.train.lr, getattr(cfg.model, "beta0_random", False)
        # the beta0 each seed drew (the probe "beta0"), else the config's one value
        beta0 = run.curve("beta0")[:, 0] if "beta0" in run.curves else np.full(t_icl.shape, cfg.model.beta0)
        ratios = t_icl_ratio(t_icl, N, beta0, draws.bootstrap()), t_icl_ratio(t_icl, N, beta0, draws.bootstrap(), lr)
        median = float(np.median(t_icl[t_icl > 0])) if np.any(t_icl > 0) else None
        cell = MinimalCell(N, None if random_beta0 else cfg.model.beta0, int(t_icl.size), *ratios, median)
        if not random_beta0:
            fixed.append((N, cell.beta0, t_icl, float(run.budget)))
        elif np.sum(t_icl > 0) >= 3:
            cell = replace(cell, ln_t_vs_beta0=log_t_vs_beta0(t_icl, beta0, draws.bootstrap()))
        cells.append(cell)
    cells.sort(key=lambda c: (c.N, c.beta0 if c.beta0 is not None else 0))
    if len(fixed) < 2:
        return Minimal(cells)
    Ns, beta0s, t_icls, censor_ats = zip(*fixed)
    return Minimal(cells, minimal_scaling(Ns, beta0s, t_icls, censor_ats, draws.bootstrap()))


def budgets_by_K(mlp_runs: Sequence[FinishedRun], T: float) -> tuple[tuple, tuple]:
    """(K, per-seed I_K(T)) of the MLP-only runs that reached T, in increasing K."""
    reached = sorted((r for r in mlp_runs if r.eval_steps[-1] >= T), key=lambda r: r.cfg.task.K)
    I_by_K = tuple(budget_at(r.eval_steps.astype(float), r.curve("c1"), T) for r in reached)
    return tuple(r.cfg.task.K for r in reached), I_by_K


def summarize_race(
    mlp_runs: Sequence[FinishedRun], kinf_runs: Sequence[FinishedRun], T: float, draws: Draws
) -> KStarPrediction:
    """nu from the MLP-only cells' I_K(T) (T: the race's training budget, in SGD
    steps) and the median t_ICL(N) of K = infinity race cells (e.g. the transformer) give the predicted
    K*(N) (predict_k_star)."""
    kinf = sorted(kinf_runs, key=lambda r: r.cfg.task.N)
    K, I_by_K = budgets_by_K(mlp_runs, T)
    N, budgets = [r.cfg.task.N for r in kinf], [float(r.budget) for r in kinf]
    fit = predict_k_star(K, I_by_K, np.array(N), [r.t("icl") for r in kinf], budgets, draws.bootstrap())
    # The race's condition can also be tested with t_ICL measured at a finite K (above K*): each row
    # names the K its t_ICL run trained at.
    t_K = ["inf" if getattr(r.cfg.task, "variant", None) == "infinite" else r.cfg.task.K for r in kinf]
    return replace(fit, T=T, K=list(K), N=N, per_N=[replace(x, t_icl_K=k) for x, k in zip(fit.per_N, t_K)])


@dataclass(frozen=True)
class MeasuredAtN(Record):
    N: int
    k_star: float | None
    k_star_ci: list


@dataclass(frozen=True)
class MeasuredKStar(Record):  # a report's threshold group: K*(N) and its slope on N as report.json wrote it
    per_N: list[MeasuredAtN]
    k_star_slope: dict


def measured_k_star(report: dict) -> MeasuredKStar:
    """The measured K*(N) of an `icl-race report` (report.json): its one threshold group of standard
    contexts (labelled "finite K" in a plain K* sweep, by its fields in a directory that also holds
    K = infinity cells). ValueError when there is no such group or more than one."""
    standard = [t for t in report["thresholds"] if t.get("variant", "standard") == "standard"]
    if len(standard) != 1:
        raise ValueError(
            f"expected one K* group of standard contexts, found {len(standard)}"
            + (f" ({'; '.join(t['label'] for t in standard)})" if standard else "")
        )
    th = standard[0]
    per_N = [MeasuredAtN(int(n), a["kstar"], a["kstar_ci"]) for n, a in th["acquisition"].items()]
    return MeasuredKStar(per_N, th["kstar_slope"])
