"""Sections of a classification sweep's report, computed: the threshold K* of a group of finite-K cells
(a `Threshold`), balanced minus standard contexts, and the record of median t_ICL vs N at K = infinity
(a `Scaling`, computed in `classification_sweep`). Each draws from its own named child of the report's
SeedSequence. The records are typed: a fit is its estimates or `NotFitted` (`analysis.record`), both K*
estimators an `analysis.threshold.KStar`. Indices (`cell_index`) point into the report's cells."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from icl_race.analysis import median_n as mn
from icl_race.analysis import threshold as th
from icl_race.analysis.compare import FractionDifference, PairStats, fraction_difference, pair_stats
from icl_race.analysis.draws import Draws
from icl_race.analysis.record import OMIT_NONE, NotFitted, Record, key
from icl_race.analysis.survival import Lognormal, censored_times
from icl_race.analysis.threshold import MedianCI, Slope
from icl_race.report.cell import Bimodality, CellStats, analysed
from icl_race.report.sample import Sample

N_BOOT_SIGMOID = 200
# A cell that trained the same model on the same task for the same budget, but let the race run on past
# the early stop or looked at it more often, sees the same outcome at least as well: the bimodality
# nearest K* is read from the one of those cells with the most seeds (e.g. a 64-seed early-stop-off rerun
# of the K* grid's nearest cell, linked into the same directory).
OBSERVATION_FIELDS = {"train.eval_every", "train.early_stop", "train.stop_when_all_acquired"}
# When a seed stops training once its outcome is decided (frozen past stop_threshold after acquiring;
# settled by settle_iwl after memorizing first, a bet `icl-race analyze race settle` checks on runs
# without it; retired at its lasting fall by retire_at_fall) changes no seed's t_ICL within the budget:
# these do not split a K*(N) or t_ICL(N) group (e.g. K* at N = 32 without the levers and at N = 64 with
# them, one slope); each cell's label still names them. They do change a seed's final accuracy (read when
# it retired), so the paper's sigmoid, which is fitted to final accuracy, gets no slope across N that
# retired seeds differently.
RETIREMENT_FIELDS = {"train.stop_threshold", "train.settle_iwl", "train.retire_at_fall"}


@dataclasses.dataclass(frozen=True)
class NearKstar(Record):
    """At one N, the best-observed cell nearest K* and its bimodality."""

    N: int
    K: int
    cell: str  # its label
    bimodality: Bimodality
    acquired_fraction: float | None
    cell_index: int


@dataclasses.dataclass(frozen=True)
class Heatmap(Record):
    """The acquisition fraction on the (N, K) grid of a group (NaN where no cell ran)."""

    K: list[int]
    N: list[int]
    fraction: np.ndarray  # [N, K]


@dataclasses.dataclass(frozen=True)
class ThresholdInRegime(Record):
    """A group's K* slope over the N in the abrupt regime, and its cells nearest K* there."""

    N: list[int]
    kstar_slope: Slope | NotFitted
    local_slopes: list[WithN]  # per pair of neighbouring N (its N: the pair)
    near_kstar: list[NearKstar]


@dataclasses.dataclass(frozen=True)
class Threshold(Record):
    """K* per N of one group of finite-K cells (the fields in report.json's order)."""

    group: dict[str, object]  # field -> value: the varying fields (other than K and N) shared by the group
    label: str
    variant: str  # "standard", "balanced" or "mixed"
    N: list[int]
    acquisition: dict[int, th.Acquisition]  # N -> the logistic midpoint K*, its bootstrap CI
    paper_sigmoid: dict[int, th.Sigmoid | NotFitted]  # N -> the paper's 4-parameter sigmoid K*
    kstar_slope: Slope | NotFitted  # log10 K* on log10 N
    kstar_slope_N_minus_1: Slope | NotFitted
    kstar_slope_paper_sigmoid: Slope | NotFitted
    near_kstar: list[NearKstar]  # per N
    heatmap: Heatmap
    in_regime: ThresholdInRegime | None = None


@dataclasses.dataclass(frozen=True)
class ScalingInRegime(Record):
    """Median t_ICL vs N over the N of a group in the abrupt regime."""

    N: list[int]
    median_vs_N: mn.MedianVsN | NotFitted  # NotFitted, without a reason, with fewer than 2 N


@dataclasses.dataclass(frozen=True)
class WithN(Record):
    """A fit with the N it was made at (one N, or the pair of a local slope), N written first."""

    N: int | list[int]
    fit: Slope | Lognormal | NotFitted

    def to_json(self) -> dict:
        return {"N": self.N, **self.fit.to_json()}


@dataclasses.dataclass(frozen=True)
class Scaling(Record):
    """Median t_ICL vs N of one group of K = infinity cells (the fields in report.json's order)."""

    group: dict[str, object]
    label: str
    median_vs_N: mn.MedianVsN  # KM median per N, linear and log-log fits
    lognormal_per_N: list[WithN]  # per N, a cell's lognormal fit (`analysis.survival.fit_lognormal`)
    cell_index: list[int]
    in_regime: ScalingInRegime | None = None


@dataclasses.dataclass(frozen=True)
class RegimeRow(Record):
    """One N's regime, judged on one cell (`classification_sweep._regime_by_N`)."""

    N: int
    source: str  # "K = infinity" or the largest K, a proxy
    cell: str
    rise_fraction: MedianCI
    plateau: MedianCI
    plateau_reaches_threshold: float | None
    abrupt: bool | None  # None: no seed acquired
    paper_rule: bool  # every cell of this N uses the paper's acquisition rule


@dataclasses.dataclass(frozen=True)
class Counts(Record):
    """Per (N, K) cell of one side: k of n seeds."""

    k: np.ndarray
    n: np.ndarray


@dataclasses.dataclass(frozen=True)
class Difference(FractionDifference):
    """Standard minus balanced for one metric (`analysis.compare.fraction_difference`), and each side's counts."""

    standard: Counts
    balanced: Counts


@dataclasses.dataclass(frozen=True)
class Balanced(Record):
    """Balanced minus standard contexts over the (N, K) cells of a group that have both."""

    group: dict[str, object]
    label: str
    N: list[int]
    K: list[int]
    ci_method: str
    # per (N, K): balanced against standard, median t_ICL ratio, log-rank test and verdict (`analysis.compare`)
    t_icl: list[PairStats] = dataclasses.field(metadata=key("t_icl_balanced_vs_standard"))
    # per metric of BALANCED_METRICS
    acc_above: Difference = dataclasses.field(metadata=key("acc_above_0.75"))
    acquired: Difference
    reference_above: list[float] | None = dataclasses.field(
        default=None, metadata=key("balanced_reference_icl_test_above_0.75") | OMIT_NONE
    )  # the balanced cells' fraction > 0.75 on the reference's ICL test, where every cell has it

    def metric(self, name: str) -> Difference:
        return {"acc_above_0.75": self.acc_above, "acquired": self.acquired}[name]


def group_label(fields: dict) -> str:
    return ", ".join(f"{k.split('.', 1)[1]}={v}" for k, v in sorted(fields.items())) or "all cells"


def observation_rank(s: Sample) -> tuple:
    """Of two cells of the same physics, the better observed ranks higher: one that reads final accuracy at
    the budget (no train.settle_iwl) before one that does not, then the one with more seeds."""
    return s.reads_final_accuracy, s.n_seeds


def best_observed(j: int, conds: list[dict], samples: list[Sample]) -> int:
    """Of the cells that differ from cell j only in how they are observed or retire seeds (OBSERVATION_FIELDS,
    RETIREMENT_FIELDS), the best observed (`observation_rank`); j on ties."""

    def physics(i):
        return {k: v for k, v in conds[i].items() if k not in OBSERVATION_FIELDS | RETIREMENT_FIELDS}

    target = physics(j)
    return max(
        (i for i in range(len(conds)) if physics(i) == target), key=lambda i: (*observation_rank(samples[i]), i == j)
    )


def t_icl_pair(reference: Sample, other: Sample, draws: Draws) -> PairStats:
    """Two cells' t_ICL distributions, each censored at its own time: the median ratio other / reference
    (each cell's seeds resampled from its own generator, named by its cells), log-rank test and verdict."""
    boots = (draws.bootstrap("t_icl", *reference.cells), draws.bootstrap("t_icl", *other.cells))
    return pair_stats(censored_times(reference.t, reference.censor_at), censored_times(other.t, other.censor_at), boots)


def _slope(Ns: list, fits: Mapping[int, th.Logistic | th.Sigmoid | NotFitted], log_N) -> Slope | NotFitted:
    """The slope of log10 K* on log_N(N) over the N whose K* was estimated (by either estimator)."""
    fitted = {N: f for N in Ns if isinstance(f := fits[N], (th.Logistic, th.Sigmoid))}
    return th.power_law_slope(
        log_N(np.array(list(fitted), float)),
        np.array([f.b for f in fitted.values()]),
        np.stack([f.boot_log10_kstar for f in fitted.values()]) if fitted else None,
    )


def _finite_K(s: Sample) -> int:
    """The K of a finite-K cell (the groups that `threshold` is given hold no other)."""
    if s.K is None:
        raise ValueError(f"{s.label}: K = infinity in a group of finite-K cells")
    return s.K


def threshold(
    gfields: dict, idx: list[int], samples: list[Sample], stats: list[CellStats], draws: Draws, best
) -> Threshold:
    """K* per N of one group of finite-K cells (logistic midpoint; the paper's sigmoid where it is
    determined), the slope of log K* on log N, the heatmap and the cells nearest K* (`best(j)`: the
    best-observed rerun of cell j)."""
    label = group_label(gfields) if gfields else "finite K"
    Ns = sorted({samples[i].N for i in idx})
    curves, sigmoids, near = {}, {}, []
    Ks = sorted({_finite_K(samples[i]) for i in idx})
    grid = np.full((len(Ns), len(Ks)), np.nan)
    for N in Ns:
        by_K: dict[int, list[int]] = {}
        for i in sorted(idx, key=lambda i: observation_rank(samples[i]), reverse=True):  # stable: ties in order
            if samples[i].N == N:
                by_K.setdefault(_finite_K(samples[i]), []).append(i)
        sub = [by_K[K] for K in sorted(by_K)]
        x = np.log10(sorted(by_K))
        cells = [c for at_K in sub for i in at_K for c in samples[i].cells]
        acquired, final, seeds = zip(*(_each_seed_once(at_K, samples) for at_K in sub))
        curves[N] = th.acquisition_curve(x, list(acquired), draws.bootstrap("acquisition", *cells), list(seeds))
        sigmoids[N] = (
            th.paper_sigmoid(x, list(final), draws.bootstrap("paper_sigmoid", *cells, most=N_BOOT_SIGMOID))
            if all(samples[i].reads_final_accuracy for at_K in sub for i in at_K)
            else NotFitted("final accuracy is read at retirement (train.settle_iwl, train.retire_at_fall)")
        )
        for K, a in zip(sorted(by_K), acquired):
            grid[Ns.index(N), Ks.index(K)] = a.mean() if a.size else np.nan
        if isinstance(fit := curves[N].fit, th.Logistic):
            j = best(sub[int(np.argmin(np.abs(x - fit.b)))][0])
            st = analysed(stats[j])
            near.append(NearKstar(N, samples[j].K, stats[j].label, st.bimodality, st.acquired_fraction, j))
    variants = {samples[i].variant for i in idx}
    logistic = {N: a.fit for N, a in curves.items()}
    retirements = {tuple(samples[i].condition().get(k) for k in sorted(RETIREMENT_FIELDS)) for i in idx}
    sigmoid_slope = (
        _slope(Ns, sigmoids, np.log10)
        if len(retirements) == 1
        else NotFitted(
            "the cells retire seeds differently (train.stop_threshold, train.settle_iwl, train.retire_at_fall), "
            "which changes final accuracy"
        )
    )
    return Threshold(
        gfields,
        label,
        variants.pop() if len(variants) == 1 else "mixed",
        Ns,
        curves,
        sigmoids,
        _slope(Ns, logistic, np.log10),
        _slope(Ns, logistic, lambda n: np.log10(n - 1)),
        sigmoid_slope,
        near,
        Heatmap(Ks, Ns, grid),
    )


def _each_seed_once(cells: list[int], samples: list[Sample]) -> tuple[np.ndarray, np.ndarray, list]:
    """Whether each kept seed of the cells run at one (N, K) acquired ICL, its final ICL accuracy and its
    (root seed, seed id), each seed once: a seed in two of them (a rerun that observes or retires it
    differently, e.g. without train.settle_iwl) is read from the first, in the order given (the best observed
    first)."""
    seen: set[tuple[int, int]] = set()
    acquired, final, keys = [], [], []
    for i in cells:
        s = samples[i]
        ids = [k for k, kept in zip(s.seed_keys, s.kept) if kept]
        new = np.array([k not in seen for k in ids], bool)
        seen.update(ids)
        acquired.append((s.t >= 0)[new])
        final.append(s.final_icl[new])
        keys += [k for k, fresh in zip(ids, new) if fresh]
    return np.concatenate(acquired), np.concatenate(final), keys


BALANCED_METRICS = (
    ("acc_above_0.75", "fraction with final ICL accuracy > 0.75"),
    ("acquired", "fraction acquiring ICL within the budget"),
)


def _counts(stats: list[CellStats], ids: list[int], metric: str) -> tuple[np.ndarray, np.ndarray]:
    if metric == "acquired":
        return np.array([stats[i].acquired for i in ids]), np.array([stats[i].n_seeds for i in ids])
    return (
        np.array([analysed(stats[i]).final_icl_acc.above for i in ids]),
        np.array([analysed(stats[i]).final_icl_acc.n for i in ids]),
    )


def balanced(
    gfields: dict, idx: list[int], conds: list[dict], samples: list[Sample], stats: list[CellStats], draws: Draws
) -> Balanced | None:
    """Balanced minus standard contexts over the (N, K) cells of a group that have both, with the two
    t_ICL distributions compared per cell (`t_icl_pair`); None without such a pair."""
    table: dict[tuple, int] = {}
    for i in idx:
        table.setdefault((conds[i]["task.N"], conds[i]["task.K"], conds[i]["task.variant"]), i)
    pairs = sorted({(N, K) for N, K, _ in table if (N, K, "standard") in table and (N, K, "balanced") in table})
    if not pairs:
        return None
    label = group_label(gfields) if gfields else "all"
    si = [table[(N, K, "standard")] for N, K in pairs]
    bi = [table[(N, K, "balanced")] for N, K in pairs]
    diffs = {}
    for metric, _ in BALANCED_METRICS:
        ks, ns = _counts(stats, si, metric)
        kb, nb = _counts(stats, bi, metric)
        diff = fraction_difference(
            ks, ns, kb, nb, draws.bootstrap(metric, *(c for i in si + bi for c in samples[i].cells))
        )
        diffs[metric] = Difference(**vars(diff), standard=Counts(ks, ns), balanced=Counts(kb, nb))
    ref = [analysed(stats[i]).final_icl_ref_acc for i in bi]
    return Balanced(
        gfields,
        label,
        [N for N, _ in pairs],
        [K for _, K in pairs],
        "bootstrap percentile, binomial resampling of each cell",
        [t_icl_pair(samples[s], samples[b], draws) for s, b in zip(si, bi)],
        diffs["acc_above_0.75"],
        diffs["acquired"],
        [r.fraction for r in ref if r is not None] if None not in ref else None,
    )
