"""Every statistic of one classification sample (a run, or a sweep's pooled cell) as one typed record.

    analyze(sample)  ->  CellStats: survival and never-acquired fraction, tail fits, bimodality, the regime,
                         final accuracies and every seed's outcome (analysis.outcome.CLASSES:
                         diverged, `analysis.outcome`)

Pure computing: no text, no figures. Seeds with t_icl < 0 are right-censored at `sample.censor_at`;
diverged seeds are excluded from every statistic but the outcome counts."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from icl_race.analysis import bimodality as bm
from icl_race.analysis import outcome as oc
from icl_race.analysis import regime as rg
from icl_race.analysis import survival as sv
from icl_race.analysis.draws import Bootstrap, Draws, generator
from icl_race.analysis.record import OMIT_NONE, NotFitted, Record, key, record_json
from icl_race.config import BOOT_DEFAULT
from icl_race.report.paper import PAPER
from icl_race.report.sample import Sample

CI_METHODS = {
    "never_acquired": "Wilson score",
    "kaplan_meier": "Greenwood, log-log band, inverted for the median",
    "lognormal": "Wald (observed information)",
    "tail": "Wald (alpha); Vuong's likelihood ratio",
    "regime": "bootstrap percentile over seeds",
    "outcomes": "Wilson score",
}


@dataclasses.dataclass(frozen=True)
class Above(Record):
    """Final accuracies: their median and how many of n lie above the paper's 0.75."""

    median: float | None
    above: int = dataclasses.field(metadata=key("above_0.75"))
    n: int = 0

    @property
    def fraction(self) -> float:
        return self.above / self.n


@dataclasses.dataclass(frozen=True)
class OutcomeStats(Record):
    """What every seed did: counts per class, each class's final accuracies, the fall after t_ICL."""

    level: float
    lasting: int
    counts: dict[str, oc.Count]  # per outcome class (analysis.outcome.CLASSES)
    by_class: dict[str, oc.ClassSummary]  # per class but diverged
    ended_below: int  # the falling class's count (report.json schema 1 keeps the key)
    fall_after_t_icl: sv.KaplanMeier | None  # None without an acquired seed


@dataclasses.dataclass(frozen=True)
class Bimodality(Record):
    log10_t_acquired: bm.Modality
    log10_t_censored_at_budget: bm.Modality
    final_icl_acc: bm.Modality
    near_threshold: bool


@dataclasses.dataclass(frozen=True)
class Regime(rg.Regime):
    """Is ICL acquired abruptly (`analysis.regime.summarize`), and the acquisition rule it was judged by."""

    start_level: float
    threshold: float
    effective_threshold: float
    looks: int
    confirm: int
    paper_rule: bool


@dataclasses.dataclass(frozen=True)
class Unfinished(Record):
    """A sweep's cell that the report skips: its directory name, its label where its config reads, and why."""

    cell: str
    label: str | None = dataclasses.field(default=None, metadata=OMIT_NONE)
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class Statistics(Record):
    """The statistics of a cell with seeds to analyse."""

    kaplan_meier: sv.KaplanMeier
    never_acquired: sv.Proportion
    acquired_fraction: float
    lognormal: sv.Lognormal | NotFitted | None  # None: not fitted (`hist` does without)
    tail: sv.Tail | NotFitted | None
    bimodality: Bimodality
    regime: Regime
    final_icl_acc: Above
    final_icl_ref_acc: Above | None


@dataclasses.dataclass(frozen=True)
class CellStats(Record):
    """A cell's counts, its `Statistics` or why there are none, and every seed's outcome; report.json writes
    the statistics in the cell's object after "ok" and "reason" (null where there are none)."""

    label: str
    cells: tuple[str, ...]
    variant: str
    K: int | None
    N: int
    eval_size: int
    n_seeds: int
    n_diverged: int
    n_duplicate_seeds_dropped: int
    budget: int
    steps_run: int
    censor_at: int
    acquired: int
    statistics: Statistics | NotFitted
    outcomes: OutcomeStats  # every cell's, even one without statistics
    ci_methods: dict[str, str] = dataclasses.field(default_factory=lambda: dict(CI_METHODS))  # per statistic

    def to_json(self) -> dict:
        st = self.statistics
        flat = (
            {"ok": True, "reason": None} | st.to_json()
            if isinstance(st, Statistics)
            else {"ok": False, "reason": st.reason} | dict.fromkeys(f.name for f in dataclasses.fields(Statistics))
        )
        return {
            k2: v2 for k, v in record_json(self).items() for k2, v2 in (flat if k == "statistics" else {k: v}).items()
        }


def analysed(c: CellStats) -> Statistics:
    """The statistics of a cell that a sweep's section reads (its groups hold analysed cells alone)."""
    if not isinstance(c.statistics, Statistics):
        raise ValueError(f"{c.label}: {c.statistics.reason}")
    return c.statistics


def dequantized(s: Sample) -> tuple[np.ndarray, np.ndarray]:
    """log10 t_ICL of the seeds that acquired and the final ICL accuracies, each spread over its grid
    cell (the evaluation period that t ended; 1 / eval_size) so that ties do not fake modes."""
    hit = s.t[s.t >= 0].astype(float)
    log_t = np.log10(bm.dequantize(hit, bm.grid_periods(hit, s.eval_steps))) if hit.size else hit
    return log_t, bm.dequantize(s.final_icl, 1.0 / s.cfg.train.eval_size, seed=1)


def _above(x: np.ndarray) -> Above:
    x = x[np.isfinite(x)]
    return Above(float(np.median(x)) if x.size else None, int(np.sum(x > PAPER.balanced_metric_threshold)), int(x.size))


def outcome_stats(s: Sample) -> OutcomeStats:
    """What every seed did, with Wilson CIs, the Kaplan-Meier curve of the time from t_ICL to a lasting
    fall, and the final accuracies of each class."""
    o = s.outcomes
    return OutcomeStats(
        o.level,
        o.lasting,
        o.counts(),
        oc.class_summary(o),
        o.count("falling"),
        oc.fall_survival(o, s.t_icl, s.censor_at),
    )


SETTLED = "not measured: seeds settled by train.settle_iwl end at their retirement, not at the budget"


def _bimodality(s: Sample) -> Bimodality:
    log_t, final_dq = dequantized(s)
    with_cens = np.concatenate([log_t, np.full(int((s.t < 0).sum()), np.log10(float(s.censor_at)))])
    frac = float(np.mean(s.t >= 0))
    final = (
        bm.summarize(final_dq)
        if s.reads_final_accuracy
        else dataclasses.replace(bm.summarize(np.empty(0)), not_measured=SETTLED)
    )
    return Bimodality(bm.summarize(log_t), bm.summarize(with_cens), final, bool(0.1 <= frac <= 0.9))


def _regime(s: Sample, draws: Draws) -> Regime:
    tr = s.cfg.train
    # The report's --boot replicates from the root of its --seed, the same stream in every cell: a cell's
    # intervals do not depend on which other cells a sweep holds.
    boot = Bootstrap(draws.n_boot, generator(draws.seed))
    g = rg.summarize(s.t, s.t_start[s.kept], s.icl_acc[s.kept], s.eval_steps, tr.icl_threshold, boot)
    return Regime(
        **vars(g),
        start_level=s.start_level,
        threshold=tr.icl_threshold,
        effective_threshold=rg.effective_threshold(
            tr.icl_threshold, tr.eval_size, max(int(s.eval_steps.size), 1), tr.icl_confirm
        ),
        looks=int(s.eval_steps.size),
        confirm=tr.icl_confirm,
        paper_rule=s.paper_rule,
    )


def analyze(s: Sample, draws: Draws = Draws(0, BOOT_DEFAULT), tails: bool = True) -> CellStats:
    """Every per-cell statistic (the tail fits only with `tails`: `hist` does without them); the regime's
    intervals resampled with `draws` (`hist`, which takes no --boot, with report's defaults)."""
    t = s.t
    head: dict[str, Any] = dict(
        label=s.label,
        cells=s.cells,
        variant=s.variant,
        K=s.K,
        N=s.N,
        eval_size=s.cfg.train.eval_size,
        n_seeds=int(t.size),
        n_diverged=s.n_diverged,
        n_duplicate_seeds_dropped=s.n_duplicates,
        budget=s.budget,
        steps_run=s.steps_run,
        censor_at=s.censor_at,
        acquired=int(np.sum(t >= 0)),
    )
    if t.size == 0:
        return CellStats(**head, statistics=NotFitted("no seeds to analyse (all diverged)"), outcomes=outcome_stats(s))
    times, observed = sv.censored_times(t, s.censor_at)
    never = sv.never_acquired(observed)
    ref = s.final_icl_ref_acc
    statistics = Statistics(
        sv.kaplan_meier(times, observed),
        never,
        1 - never.fraction,
        sv.fit_lognormal(times, observed) if tails else None,
        sv.fit_tail(times, observed) if tails else None,
        _bimodality(s),
        _regime(s, draws),
        _above(s.final_icl),
        None if ref is None else _above(ref[s.kept]),
    )
    return CellStats(**head, statistics=statistics, outcomes=outcome_stats(s))
