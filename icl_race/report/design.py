"""A design sweep's section of the report (issue 54): what the design asked, why it stopped, what it spent,
and its answer from the design's own posterior beside the estimator a grid would use on the same cells
(K*: the logistic fit of `analysis.threshold`; the median: the Kaplan-Meier median of t_ICL or, for a design
on the fall, of the lasting fall's step). The posterior is
recomputed from the cells' outcomes (`analysis.design`), not read from design.json, which gives only the
rounds, the stop and the seed-steps.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from icl_race.analysis import design as dz
from icl_race.analysis.survival import censor_time, censored_times
from icl_race.analysis.threshold import Logistic
from icl_race.config import ConfigError
from icl_race.report.sample import Sample
from icl_race.report.sweep_sections import Threshold

DOCS = "docs/designs.md"
NOT_UNBIASED = (
    "A design chose how many seeds each K received from the outcomes so far: a cell's acquired fraction here "
    "is not an unbiased estimate of anything, and t_ICL pooled over its K is a sample of nothing "
    f"({DOCS}). The posterior and the logistic fit use every outcome as a Bernoulli draw at its K."
)


@dataclasses.dataclass(frozen=True)
class DesignSection:
    kind: str  # kstar | median
    params: dict  # the design's parameters (design.json's "design")
    rounds: int  # rounds with outcomes
    seeds: int  # seeds trained
    seed_steps: int
    budgets: float  # seed_steps over the budget
    stop: str | None  # precise | max_seeds | None (not stopped yet: a design still running or killed)
    answer: dict  # K*: the posterior's summary; median: the rule's check, both from the cells
    fit: dict | None  # K*: the logistic fit over the same cells (log10 K*, its CI), None when it failed
    seeds_in_cells: int  # kept seeds the answer rests on
    distinct_K: int

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def _times(s: Sample, event: str) -> tuple[np.ndarray, np.ndarray]:
    """A median design's (times, observed) of one sample: t_ICL, or the lasting fall's step (the outcome
    classes' fall_S: the t_fell the run recorded, since a fallen seed's curve holds its LASTING evaluations
    below LEVEL before it retires), a seed that did not fall censored where its run stopped (Run.censor_at's rule)."""
    if event == "t_icl":
        return censored_times(s.t, s.censor_at)
    fall = s.outcomes.fall_S[s.kept]
    return censored_times(fall, censor_time(s.budget, s.steps_run, bool(np.any(fall < 0))))


def section(doc: dict | None, samples: list[Sample], thresholds: list[Threshold]) -> DesignSection | None:
    """The section of a design's folder (doc: its design.json, rundir.read_design); None for a grid."""
    if doc is None:
        return None
    kind, rounds = doc["kind"], [r for r in doc["rounds"] if "after" in r]
    spent = (int(doc.get("seeds") or 0), int(doc.get("seed_steps") or 0), float(doc.get("budgets") or 0.0))
    try:
        params = (dz.KStarDesign if kind == "kstar" else dz.MedianDesign)(**doc["design"])
    except (TypeError, ConfigError):
        return None
    if isinstance(params, dz.KStarDesign):
        K = np.concatenate([np.full(s.t.size, s.K) for s in samples]) if samples else np.zeros(0)
        acquired = np.concatenate([s.t >= 0 for s in samples]) if samples else np.zeros(0, bool)
        post = dz.posterior(params, K, acquired)
        answer = dataclasses.asdict(post.summary())
        curve = next((c for t in thresholds for c in t.acquisition.values()), None)
        fit = (
            {"log10_kstar": curve.fit.log10_kstar, "ci": curve.fit.log10_kstar_ci, "ci_method": curve.ci_method}
            if curve is not None and isinstance(curve.fit, Logistic)
            else None
        )
        n, distinct = int(K.size), len({s.K for s in samples})
    else:
        assert isinstance(params, dz.MedianDesign)
        pairs = [_times(s, params.event) for s in samples]
        times = np.concatenate([t for t, _ in pairs]) if pairs else np.zeros(0)
        observed = np.concatenate([o for _, o in pairs]) if pairs else np.zeros(0, bool)
        answer, fit = dataclasses.asdict(dz.median_check(params, times, observed)), None
        n, distinct = int(times.size), 0
    return DesignSection(
        kind, doc["design"], len(rounds), *spent[:2], spent[2], doc.get("stop"), answer, fit, n, distinct
    )


def _k(log10: float | None) -> str:
    return "-" if log10 is None else f"{10**log10:,.0f}"


def markdown(d: DesignSection) -> list[str]:
    p = d.params
    stop = {
        None: "not stopped yet (running, or killed: rerun the same command)",
        "precise": "the target precision held",
        "max_seeds": "the seed maximum was reached",
    }[d.stop]
    spent = f"{d.rounds} rounds, {d.seeds:,} seeds, {d.seed_steps:,} seed-steps ({d.budgets:,.1f} budgets)"
    if d.kind == "kstar":
        a = d.answer
        rule = (
            f"stop when the {p['confidence']:.0%} credible interval of log10 K* is at most +-{p['half_width']:g} decades "
            f"or {p['max_seeds']:,} seeds are used; K from the prior {p['k_lo']:,.0f}-{p['k_hi']:,.0f}, {p['seeds_per_round']} seeds a round, Psi-marginal placement"
        )
        rows = [
            f"| design posterior (grid posterior, slope a nuisance) | {_k(a['log10_kstar'])} | [{_k(a['ci'][0])}, {_k(a['ci'][1])}] credible | {a['log10_kstar']:.3f} +- {a['half_width']:.3f} |",
        ]
        f = d.fit
        rows.append(
            f"| logistic fit over the cells (analysis/threshold) | {_k(f['log10_kstar'])} | [{_k(f['ci'][0])}, {_k(f['ci'][1])}] {f['ci_method'] or 'bootstrap'} | {f['log10_kstar']:.3f} |"
            if f is not None and f["ci"] and None not in f["ci"]
            else "| logistic fit over the cells (analysis/threshold) | - | - | failed or not bracketed |"
        )
        return [
            "## Design: K* by a sequential design",
            "",
            f"Rule: {rule}. Stopped: {stop}, after {spent}.",
            "",
            f"| estimator | K* | {p['confidence']:.0%} interval | log10 K* |",
            "|---|---|---|---|",
            *rows,
            "",
            f"Both rest on the same {d.seeds_in_cells:,} kept seeds at {d.distinct_K} distinct K. {NOT_UNBIASED}",
            "",
        ]
    a = d.answer
    med = "not reached" if a["median"] is None else f"{a['median']:,.0f}"
    ci = ", ".join("-" if v is None else f"{v:,.0f}" for v in a["ci"])
    width = "unknown (an end beyond the budget)" if a["rel_width"] is None else f"{a['rel_width']:.3f}"
    fall = p.get("event", "t_icl") == "fall"  # a t_ICL design's record names no event (dz.record)
    what = "fall step" if fall else "t_ICL"
    read = (
        " The rule read each seed's lasting fall after acquiring ICL (t_fell, recorded by train.retire_at_fall); "
        "a seed that did not fall, acquired or not, is censored where it stopped."
        if fall
        else ""
    )
    return [
        f"## Design: the median {what}, seeds until precise",
        "",
        f"Rule: blocks of {p['block']} seeds until the Kaplan-Meier median's {p['confidence']:.0%} CI has (hi - lo) / median <= "
        f"{p['rel_width']:g}, at most {p['max_seeds']:,} seeds. Stopped: {stop}, after {spent}.{read}",
        "",
        f"Median {what} {med} [{ci}], relative width {width}, over {d.seeds_in_cells:,} kept seeds. "
        f"Stopping when the interval first looks narrow biases the median and its interval slightly ({DOCS}).",
        "",
    ]
