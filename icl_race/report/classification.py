"""The classification race's report (the `report` of systems/classification_spec.py and minimal_spec.py):
a run's report and `hist` view from `classification_run`, a sweep's from `classification_sweep`."""

from __future__ import annotations

from icl_race import rundir
from icl_race.report import classification_run, classification_sweep


def run_report(run: rundir.Run, n_boot: int, rng) -> tuple[dict, str, dict]:
    return classification_run.run_report(classification_run.run_dict(run), n_boot, rng)


def sweep_report(sweep: rundir.SweepDir, n_boot: int, rng) -> tuple[dict, str, dict]:
    return classification_sweep.sweep_report(sweep, n_boot, rng)


def hist_text(run: rundir.Run, bins: int) -> str:
    return classification_run.hist_text(run, bins)


def sweep_hist_text(sweep: rundir.SweepDir) -> str:
    return classification_sweep.hist_text(sweep)
