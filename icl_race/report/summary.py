"""The summary a finished run prints (`icl-race run`, `demo`): what every seed did, as a typed record
with its text and its JSON (`run --json`, docs/report-json.md), and its warnings (report/warnings.py).
Made from a `rundir.Run`: the one the runner has just committed (`runner.execute_run`, nothing read back)
or one loaded from a directory. `warnings_of` gives a run's or sweep's warnings, `dir_warnings` a directory's."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from icl_race import rundir
from icl_race.analysis.events import level_event
from icl_race.analysis.outcome import CLASSES, Outcomes, classify
from icl_race.analysis.regime import rise_fraction
from icl_race.report import warnings

SCHEMA = "icl-race/run-summary/1"

SHOWN = ("persistent", "transient", "censored")  # outcome classes named in a count line even when empty


def counts_text(counts: dict[str, int]) -> str:
    """'27 persistent, 2 falling, 2 transient, 1 censored': persistent, transient and censored always, the
    other classes (analysis.outcome.CLASSES) when they have seeds."""
    return ", ".join(f"{counts[c]} {c}" for c in CLASSES if counts[c] or c in SHOWN)


def outcome_sentence(o: Outcomes) -> str:
    """One line: what the seeds did, and the rule's parameters."""
    return (
        f"{counts_text({c: o.count(c) for c in CLASSES})} of {o.classes_S.size} seeds (ICL accuracy at the end >= "
        f"{o.level:g}: persistent, or recovered after a fall of >= {o.lasting} evaluations; below: falling for < "
        f"{o.lasting}, transient for >= {o.lasting}; docs/outcomes.md)"
    )


@dataclasses.dataclass(frozen=True)
class RunSummary:
    dir: str
    event: str  # the headline event: t_<event>
    seeds: int  # every seed, diverged ones included
    reached: int
    km_median: float | None  # Kaplan-Meier median over the kept seeds; None when not reached by half
    range: tuple[int, int] | None  # first and last first passage of the seeds that reached it
    censored: int
    censor_at: int
    # of the censored, the seeds settled by IWL (train.settle_iwl: frozen and retired once memorized before
    # ICL) and their median t_settled; None when the run does not settle
    settled: int | None
    settled_median: float | None
    rise_level: str | None  # the rise's lowest level event (icl60), when the run records one
    rise_fraction: float | None  # median (t_icl - t_<rise_level>) / t_icl over the acquired seeds
    outcomes: dict[str, int] | None  # per class of analysis.outcome.CLASSES (ICL runs)
    outcome_sentence: str | None
    histogram: str | None  # the run's t_<event>_hist.png; None when there is none (in memory, still training)
    warnings: list[str]  # one line each (report/warnings.py): nothing acquired, diverged, outside the regime
    schema: str = SCHEMA

    def text(self) -> str:
        what = "ICL acquired" if self.event == "icl" else f"{self.event} reached"
        line = f"{self.dir}: {what} in {self.reached}/{self.seeds} seeds"
        if self.range:
            med = "not reached" if self.km_median is None else f"{self.km_median:,.0f} steps"
            line += f"; t_{self.event} Kaplan-Meier median {med} (range {self.range[0]:,}-{self.range[1]:,})"
        if self.censored:
            line += f"; {self.censored} censored at {self.censor_at:,}"
        if self.settled:
            line += f" ({self.settled} of them settled by IWL, median step {self.settled_median:,.0f})"
        if self.rise_fraction is not None:
            line += f"; rise fraction (t_icl - t_{self.rise_level}) / t_icl median {self.rise_fraction:.2f}"
        if self.outcome_sentence:
            line += "\n" + self.outcome_sentence
        return "\n".join([line, *self.warnings, *([f"histogram: {self.histogram}"] if self.histogram else [])])


def run_summary(run: rundir.Run) -> RunSummary:
    """The summary of a run (as the runner committed it, or as `rundir.load` read it back)."""
    d = run.dir
    stop, t = run.headline, run.times[run.headline]
    hit = t[t >= 0]
    levels = run.cfg.train.icl_levels if stop == "icl" else ()
    start = level_event(min(levels)) if levels else None
    rise = None
    if start in run.times and hit.size:  # a run written before the levels existed has no t_icl60
        rise = float(np.nanmedian(rise_fraction(run.t(), run.t(start))))
    settled = run.times.get("settled")
    o: Outcomes | None = None
    if stop == "icl" and {"icl_acc", "iwl_acc"} <= run.curves.keys():
        o = classify(t, run.diverged, run.curves["icl_acc"], run.curves["iwl_acc"], run.eval_steps)
    return RunSummary(
        dir=str(d),
        event=stop,
        seeds=int(t.size),
        reached=int(hit.size),
        km_median=run.km_median() if hit.size else None,
        range=(int(hit.min()), int(hit.max())) if hit.size else None,
        censored=int(t.size - hit.size),
        censor_at=run.censor_at(),
        settled=None if settled is None else int(np.sum(settled >= 0)),
        settled_median=float(np.median(settled[settled >= 0]))
        if settled is not None and np.any(settled >= 0)
        else None,
        rise_level=start if rise is not None else None,
        rise_fraction=rise,
        outcomes={c: o.count(c) for c in CLASSES} if o else None,
        outcome_sentence=outcome_sentence(o) if o else None,
        histogram=str(h) if (h := d / f"t_{stop}_hist.png").is_file() else None,
        warnings=warnings.of_run(run, rise),
    )


def warnings_of(found: rundir.Run | rundir.SweepDir) -> list[str]:
    """The warnings of a run (its summary's; an unfinished run's: of its results so far, no advice that
    assumes it ended) or of a sweep's finished cells, as read once (`report`'s files and its stderr agree)."""
    return warnings.of_sweep(found) if isinstance(found, rundir.SweepDir) else run_summary(found).warnings


def dir_warnings(d: Path) -> list[str]:
    """The warnings of a run or sweep directory (`warnings_of`)."""
    return warnings_of(rundir.load(d))
