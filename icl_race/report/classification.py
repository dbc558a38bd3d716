"""The classification race's report (the `report` of systems/classification_spec.py and minimal_spec.py):
a run's report and `hist` view from `classification_run`, a sweep's computed by `classification_sweep`
and rendered by `sweep_markdown`. Those are imported by the function that needs them (scipy and
matplotlib, seconds): `report` and `hist` find this module's parts and read their input first, then say
what they do."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from icl_race import rundir
    from icl_race.analysis.draws import Draws

# What `hist --json` gives of each cell of a sweep, beside its summary line.
HIST_FIELDS = (
    "label",
    "variant",
    "K",
    "N",
    "n_seeds",
    "n_diverged",
    "acquired",
    "censor_at",
    "kaplan_meier",
    "never_acquired",
    "outcomes",
)


def run_report(found: rundir.Run, draws: Draws) -> tuple[dict, str, dict]:
    from icl_race.report import classification_run

    return classification_run.run_report(found, draws)


def hist_text(found: rundir.Run, bins: int) -> str:
    from icl_race.report import classification_run

    return classification_run.hist_text(found, bins)


def hist_record(found: rundir.Run, bins: int) -> dict:
    from icl_race.report import classification_run

    return classification_run.hist_record(found, bins)


def sweep_report(sweep: rundir.SweepDir, draws: Draws) -> tuple[dict, str, dict]:
    from icl_race.report import classification_sweep, sweep_markdown

    rep = classification_sweep.compute(sweep, draws)
    figs = sweep_markdown.figures(rep)
    return rep.to_json(), sweep_markdown.markdown(rep, figs), figs


def sweep_hist_record(sweep: rundir.SweepDir) -> dict:
    """One summary per finished condition of a sweep."""
    from icl_race.report import cell_text, classification_sweep
    from icl_race.report.cell import analyze

    samples, unfinished = classification_sweep.discover(sweep)
    cells = sorted((analyze(s, tails=False) for s in samples), key=lambda c: (c.variant, c.N or 0, c.K or 0))
    return {
        "kind": "sweep_hist",
        "dir": str(sweep.dir),
        "n_cells_finished": len(samples),
        "unfinished": [u.to_json() for u in unfinished],
        "cells": [{"summary": cell_text.summary_line(c), **{k: c.to_json()[k] for k in HIST_FIELDS}} for c in cells],
    }


def sweep_hist_text(sweep: rundir.SweepDir) -> str:
    h = sweep_hist_record(sweep)
    return "\n".join(
        [f"sweep {sweep.dir}: {h['n_cells_finished']} finished cells, {len(h['unfinished'])} unfinished"]
        + [c["summary"] for c in h["cells"]]
    )
