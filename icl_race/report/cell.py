"""Every statistic of one classification sample (a run, or a sweep's pooled cell) as one typed record.

    analyze(sample)  ->  CellStats: survival and never-acquired fraction, tail fits, bimodality, the regime,
                         final accuracies and every seed's outcome (analysis.outcome.CLASSES:
                         diverged, `analysis.outcome`)

Pure computing: no text, no figures. Seeds with t_icl < 0 are right-censored at `sample.censor_at`;
diverged seeds are excluded from every statistic but the outcome counts."""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any, Self

import numpy as np

from icl_race.analysis import bimodality as bm
from icl_race.analysis import outcome as oc
from icl_race.analysis import record
from icl_race.analysis import regime as rg
from icl_race.analysis import survival as sv
from icl_race.analysis.record import NotFitted
from icl_race.report.format import OMIT_NONE, key, plain
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


class Record(record.Record):
    @classmethod
    def of(cls, d: dict) -> Self:
        """The record of an analysis function's result, whose keys are its field names (`read_fields`: a
        nested result becomes the record its field declares)."""
        return cls(**read_fields(cls, d))


def present[T](statistic: T | None) -> T:
    """A statistic that its record's `ok` says is there (an ok CellStats carries every statistic, an ok fit
    each of its results): how a reader says so to the type checker, and fails loudly where it is not."""
    if statistic is None:
        raise ValueError("a statistic read from a record without it: read its `ok` first")
    return statistic


@functools.cache
def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _record_type(tp: Any) -> type[Record] | None:
    return tp if isinstance(tp, type) and issubclass(tp, Record) else None


def _read(tp: Any, v: Any) -> Any:
    """`v` as a field of declared type `tp` holds it: a dict as the record `tp` names (its `of`), a list or
    dict of such results item by item (a list of lists too); anything else, a record included, as it is."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) is types.UnionType:  # `R | None`: a None stays None
        kinds = [a for a in args if a is not type(None)]
        return _read(kinds[0], v) if v is not None and len(kinds) == 1 else v
    if (record := _record_type(tp)) is not None:
        return record.of(v) if isinstance(v, dict) else v
    if typing.get_origin(tp) is list and isinstance(v, list):
        return [_read(args[0], x) for x in v]
    if typing.get_origin(tp) is dict and isinstance(v, dict) and _record_type(args[1]) is not None:
        return {k: _read(args[1], x) for k, x in v.items()}
    return v


def read_fields(cls: type, d: dict) -> dict:
    """An analysis function's result (keys: `cls`'s field names) with each value read as its field declares
    it (`_read`): the one rule by which results that nest results become records that nest records."""
    declared = _field_types(cls)
    return {k: _read(declared.get(k), v) for k, v in d.items()}


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
class Fit(Record):
    """A fit's result as a typed record (`analysis.survival`'s lognormal and tail fits, `analysis.threshold`'s).
    Its keys vary with the outcome (a fit that failed has ok = False and a reason; an optional statistic may be
    absent): a field the result lacks is None, and `keys` keeps the result's keys in its order, which is the
    order report.json writes."""

    keys: tuple[str, ...] = dataclasses.field(default=(), repr=False, compare=False)
    ok: bool = False
    reason: str | None = None  # why it failed, where ok is False
    confidence: float | None = None  # of its CIs

    @classmethod
    def of(cls, d: dict) -> Self:
        return cls(keys=tuple(d), **read_fields(cls, d))

    def to_json(self) -> dict:
        return {k: plain(getattr(self, k)) for k in self.keys}


@dataclasses.dataclass(frozen=True)
class Unfinished(Record):
    """A sweep's cell that the report skips: its directory name, its label where its config reads, and why."""

    cell: str
    label: str | None = dataclasses.field(default=None, metadata=OMIT_NONE)
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class CellStats(Record):
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
    ok: bool
    reason: str | None = None
    kaplan_meier: sv.KaplanMeier | None = None
    never_acquired: sv.Proportion | None = None
    acquired_fraction: float | None = None
    lognormal: sv.Lognormal | NotFitted | None = None  # None: not fitted (`hist` does without)
    tail: sv.Tail | NotFitted | None = None
    bimodality: Bimodality | None = None
    regime: Regime | None = None
    final_icl_acc: Above | None = None
    final_icl_ref_acc: Above | None = None
    outcomes: OutcomeStats = dataclasses.field(kw_only=True)  # every cell's, even one without statistics
    ci_methods: dict[str, str] = dataclasses.field(default_factory=lambda: dict(CI_METHODS))  # per statistic


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


def _regime(s: Sample) -> Regime:
    tr = s.cfg.train
    g = rg.summarize(s.t, s.t_start[s.kept], s.icl_acc[s.kept], s.eval_steps, tr.icl_threshold)
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


def analyze(s: Sample, tails: bool = True) -> CellStats:
    """Every per-cell statistic (the tail fits only with `tails`: `hist` does without them)."""
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
        return CellStats(**head, ok=False, reason="no seeds to analyse (all diverged)", outcomes=outcome_stats(s))
    times, observed = sv.censored_times(t, s.censor_at)
    never = sv.never_acquired(observed)
    ref = s.final_icl_ref_acc
    return CellStats(
        **head,
        ok=True,
        kaplan_meier=sv.kaplan_meier(times, observed),
        never_acquired=never,
        acquired_fraction=1 - never.fraction,
        lognormal=sv.fit_lognormal(times, observed) if tails else None,
        tail=sv.fit_tail(times, observed) if tails else None,
        bimodality=_bimodality(s),
        regime=_regime(s),
        final_icl_acc=_above(s.final_icl),
        final_icl_ref_acc=None if ref is None else _above(ref[s.kept]),
        outcomes=outcome_stats(s),
    )
