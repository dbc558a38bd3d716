"""The report of a run or sweep directory, by the report module its system names (`icl_race.systems`):
`write_report` writes report.md, report.json and the figures as one (rundir/owner.py's rule), `hist_text`
and `hist_json` give the `hist` view. A directory that is neither kind, or whose system has no such part,
is a one-line ConfigError before any work. Imports no jax."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from icl_race import rundir, systems
from icl_race.analysis.draws import Draws
from icl_race.config import BOOT_DEFAULT, ConfigError
from icl_race.configbase import System, resolve
from icl_race.report.format import figure_files, jsonable
from icl_race.rundir import owner


def _check_dir(d: Path) -> str:
    if not d.is_dir():
        raise ConfigError(f"{d}: no such directory")
    if rundir.is_sweep(d):
        return "sweep"
    if (d / rundir.CONFIG).exists() or (d / rundir.RESULTS).exists():
        return "run"
    raise ConfigError(f"{d}: neither a run directory (config.json, results.npz) nor a sweep directory (cells/)")


def _system(d: Path) -> System:
    """The system of a run directory, or of a sweep's first cell that has a config (the default system
    when none has one yet: the report then lists the unfinished cells)."""
    configs = [d / "config.json"] if (d / "config.json").exists() else sorted((d / "cells").glob("*/config.json"))
    return systems.of(rundir.read_config(configs[0].parent)) if configs else systems.SYSTEMS[0]


def _part(d: Path, kind: str, name: str, what: str):
    """The system's report function `name` and the directory as a `rundir.Run` or `rundir.SweepDir`,
    after the one-line refusals."""
    system = _system(d)
    if system.report is None:
        raise ConfigError(f"{d}: {system.no_report or f'task.kind = {system.task_kind!r} has no report'}")
    fn = getattr(resolve(system.report), name, None)
    if fn is None:
        raise ConfigError(f"{d}: task.kind = {system.task_kind!r} has no {what} of a {kind} directory")
    # an unfinished run (training or stopped) is read as its results so far (`Run.state`), which the outputs say
    return fn, (rundir.load(d) if kind == "run" else rundir.load_sweep(d))


FINISHED_MEANWHILE = {"run": "finished", "sweep": "had a cell finish"}
REREADS = 2  # how often a report reads a directory again that committed while it was read
SCHEMA = "icl-race/report/1"  # docs/report-json.md; raised when a key changes meaning or goes away


def write_report(
    d: str | Path,
    n_boot: int = BOOT_DEFAULT,
    seed: int = 0,
    force: bool = False,
    say: Callable[[str], None] = lambda line: None,
    warn: Callable[[str], None] = lambda line: None,
) -> list[str]:
    """Write DIR/report.md, DIR/report.json and DIR/figures/*.png|pdf, as one (rundir/owner.py: no file
    the report did not write is replaced unless `force`); returns the written paths relative to DIR. `say`
    hears what it does once the input is checked (a report takes seconds to minutes), `warn` the
    directory's warnings once the files are written. The directory is read once: the files and the
    warnings are of one snapshot (an unfinished run's live.npz, read once). An unfinished run's report is
    marked "partial, as of step X of Y" in every table and figure, that of a sweep whose cells are not all
    finished "partial: F of N cells finished" (report/partial.py)."""
    d = Path(d)
    kind = _check_dir(d)
    rundir.refuse_links(d, rundir.SWEEP_NAMES if kind == "sweep" else rundir.RUN_NAMES)
    owner.check(d, "report", ["report.md", "report.json"], force=force, what="report")  # before any work
    # An unfinished run or sweep can commit while it is read, which retires reports of its results so far:
    # read it again, and check again once written (a commit between the check and the write retired
    # nothing). A live sweep's cells may keep committing: after REREADS the last snapshot stands, marked
    # partial as of when it was read.
    for again in range(REREADS + 1):
        found, files = _snapshot(d, kind, n_boot, seed, say)  # says what it read before the slow imports
        from icl_race.report import partial
        from icl_race.report.summary import warnings_of

        last = again == REREADS
        if last or not partial.finished_since(found):
            owner.write_files(d, "report", files, force=force, what="report")
            if last or not partial.finished_since(found):
                break
        say(f"the {kind} in {d} {FINISHED_MEANWHILE[kind]} while its results so far were read; reading them again")
    for w in warnings_of(found):
        warn(w)
    return list(files)


def _snapshot(d: Path, kind: str, n_boot: int, seed: int, say: Callable[[str], None]):
    """The directory read once, and the report's files of that snapshot: report.md, report.json, figures."""
    from icl_race.report import partial
    from icl_race.rundir.provenance import icl_race_version

    fn, found = _part(d, kind, f"{kind}_report", "report")  # read and checked: a damaged file is one line, said first
    say(f"read the {kind} in {d}; its statistics ({n_boot:,} bootstrap replicates) and figures next")
    report, md, figs = fn(found, Draws(seed, n_boot))
    note = found.partial_note()  # an unfinished run's, or a sweep's with cells not finished
    as_of = found.state.as_of() if note else None
    if note and as_of:
        md = partial.markdown(md, note, as_of)
        partial.figures(figs, as_of)
    figures = {path: data for name, fig in figs.items() for path, data in figure_files(fig, name, as_of).items()}
    report = jsonable(
        {
            "schema": SCHEMA,
            # an unfinished run: the line, and where it stands as data (rundir/state.py)
            **({"partial": note, **found.state.record()} if note else {}),
            **report,
            "icl_race_version": icl_race_version(),
            "n_boot": n_boot,
            "seed": seed,
            "figures": list(figures),
        }
    )
    report_json = (json.dumps(report, indent=1, allow_nan=False) + "\n").encode()
    return found, {"report.md": md.encode(), "report.json": report_json, **figures}


def _hist(d: str | Path, name: str, bins: int, say: Callable[[str], None]):
    """The system's `hist` function `name` (a sweep's: sweep_`name`, which takes no bins) of a run or sweep
    directory, after the one-line refusals, and the directory as read; `say` hears what it does once the
    input is read and checked."""
    d = Path(d)
    kind = _check_dir(d)
    fn, found = _part(d, kind, name if kind == "run" else f"sweep_{name}", "hist view")
    say(f"read the {kind} in {d}; its histogram and statistics next")
    return (fn(found, bins) if kind == "run" else fn(found)), found


def hist_text(d: str | Path, bins: int = 12, say: Callable[[str], None] = lambda line: None) -> str:
    """The `hist` view of a run or sweep directory (the classification systems have one), with the
    partial line of an unfinished one (`_hist`)."""
    text, found = _hist(d, "hist_text", bins, say)
    note = found.partial_note()
    return text + (f"\n{note}" if note else "")


def hist_json(d: str | Path, bins: int = 12, say: Callable[[str], None] = lambda line: None) -> dict:
    """The `hist` view of a run or sweep directory as data (docs/report-json.md); `say` as in hist_text."""
    record, found = _hist(d, "hist_record", bins, say)
    partial = found.partial_note()
    unfinished = {"partial": partial, **found.state.record()} if partial else {}
    return jsonable({"schema": SCHEMA, **unfinished, **record})
