"""Every statistic of one classification sample (a run, or a sweep's pooled cell) as one typed record.

    analyze(sample)  ->  CellStats: survival and never-acquired fraction, tail fits, bimodality, the regime,
                         final accuracies and every seed's outcome (persistent / transient / censored /
                         diverged, `analysis.outcome`)

Pure computing: no text, no figures. Seeds with t_icl < 0 are right-censored at `sample.censor_at`;
diverged seeds are excluded from every statistic but the outcome counts."""

from __future__ import annotations

import dataclasses

import numpy as np

from icl_race.analysis import bimodality as bm
from icl_race.analysis import outcome as oc
from icl_race.analysis import regime as rg
from icl_race.analysis import survival as sv
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
class CellStats:
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
    kaplan_meier: dict | None = None
    never_acquired: dict | None = None
    acquired_fraction: float | None = None
    lognormal: dict | None = None
    tail: dict | None = None
    bimodality: dict | None = None
    regime: dict | None = None
    final_icl_acc: dict | None = None
    final_icl_ref_acc: dict | None = None
    outcomes: dict | None = None
    ci_methods: dict = dataclasses.field(default_factory=lambda: dict(CI_METHODS))


def dequantized(s: Sample) -> tuple[np.ndarray, np.ndarray]:
    """log10 t_ICL of the seeds that acquired and the final ICL accuracies, each spread over its grid
    cell (the evaluation period that t ended; 1 / eval_size) so that ties do not fake modes."""
    hit = s.t[s.t >= 0].astype(float)
    log_t = np.log10(bm.dequantize(hit, bm.grid_periods(hit, s.eval_steps))) if hit.size else hit
    return log_t, bm.dequantize(s.final_icl, 1.0 / s.cfg.train.eval_size, seed=1)


def _above(x: np.ndarray) -> dict:
    x = x[np.isfinite(x)]
    return {
        "median": float(np.median(x)) if x.size else None,
        "above_0.75": int(np.sum(x > PAPER["balanced_metric_threshold"])),
        "n": int(x.size),
    }


def outcome_stats(s: Sample) -> dict:
    """What every seed did, with Wilson CIs, the Kaplan-Meier curve of the time from t_ICL to a lasting
    fall, and the final accuracies of each class."""
    o = s.outcomes
    return {
        "level": o.level,
        "lasting": o.lasting,
        "counts": o.counts(),
        "by_class": oc.class_summary(o),
        "ended_below": o.ended_below,
        "fall_after_t_icl": oc.fall_survival(o, s.t_icl, s.censor_at),
    }


SETTLED = "not measured: seeds settled by train.settle_iwl end at their retirement, not at the budget"


def _bimodality(s: Sample) -> dict:
    log_t, final_dq = dequantized(s)
    with_cens = np.concatenate([log_t, np.full(int((s.t < 0).sum()), np.log10(float(s.censor_at)))])
    frac = float(np.mean(s.t >= 0))
    final = bm.summarize(final_dq) if s.reads_final_accuracy else bm.summarize(np.empty(0)) | {"not_measured": SETTLED}
    return {
        "log10_t_acquired": bm.summarize(log_t),
        "log10_t_censored_at_budget": bm.summarize(with_cens),
        "final_icl_acc": final,
        "near_threshold": bool(0.1 <= frac <= 0.9),
    }


def _regime(s: Sample) -> dict:
    tr = s.cfg.train
    g = rg.summarize(s.t, s.t_start[s.kept], s.icl_acc[s.kept], s.eval_steps, tr.icl_threshold)
    return g | {
        "start_level": s.start_level,
        "threshold": tr.icl_threshold,
        "effective_threshold": rg.effective_threshold(
            tr.icl_threshold, tr.eval_size, max(int(s.eval_steps.size), 1), tr.icl_confirm
        ),
        "looks": int(s.eval_steps.size),
        "confirm": tr.icl_confirm,
        "paper_rule": s.paper_rule,
    }


def analyze(s: Sample, tails: bool = True) -> CellStats:
    """Every per-cell statistic (the tail fits only with `tails`: `hist` does without them)."""
    t = s.t
    head = dict(
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
        acquired_fraction=1 - never["fraction"],
        lognormal=sv.fit_lognormal(times, observed) if tails else None,
        tail=sv.fit_tail(times, observed) if tails else None,
        bimodality=_bimodality(s),
        regime=_regime(s),
        final_icl_acc=_above(s.final_icl),
        final_icl_ref_acc=None if ref is None else _above(ref[s.kept]),
        outcomes=outcome_stats(s),
    )
