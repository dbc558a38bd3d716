"""A report of an unfinished run (rundir/state.py: training, or stopped) or of a sweep whose cells are not all
finished (rundir/sweepstate.py) says so everywhere a reader looks, and never outlives the results it is of:
every system's report is marked here, after it is rendered.

    markdown(md, note, as_of)   report.md: the partial line under the title, `as_of` ("partial, as of step
                                150 of 200"; a sweep's "partial: 2 of 3 cells finished") above every table
                                and under every figure
    figures(figs, as_of)        every figure's title ends with `as_of` (plots/common.py's `mark_partial`);
                                format.py's `figure_files` puts it in each file's metadata too
    retire(d)                   a run's commit removes its partial report and its sweep's (run/commit.py,
                                `reports_of`): report.md is then the final report once `report` is run
                                again, never a stale partial one
    finished_since(found)       whether a run or cell read unfinished has committed since (`report` then
                                reads it again: that commit retired the reports of its results so far)
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from icl_race import rundir
from icl_race.config import ConfigError
from icl_race.rundir import owner

NAMES = ("report.md", "report.json")


def markdown(md: str, note: str, as_of: str) -> str:
    """`md` with `note` in bold under its title, `*as_of*` as the caption above each table (a blank line
    between: a table must start a block) and under each figure."""
    title, _, rest = md.partition("\n")
    out = [title, "", f"**{note}.**"]
    for line in rest.split("\n"):
        if line.startswith("|") and not out[-1].startswith("|"):  # a table's first row
            out += [*([""] if out[-1] else []), f"*{as_of}*", ""]
        out.append(line)
        if line.startswith("!["):
            out.append(f"*{as_of}*")
    return "\n".join(out)


def figures(figs: dict, as_of: str) -> None:
    """Mark every figure of a partial report in its title."""
    from icl_race.plots.common import mark_partial

    for fig in figs.values():
        mark_partial(fig, as_of)


def _partial_figures(d: Path) -> list[str] | None:
    """The figures DIR/report.json lists when it is a report of the run's results so far (its `state` is
    training or stopped); None when it is not one (a final report, none, or not icl-race's)."""
    with contextlib.suppress(OSError, ValueError):
        rep = json.loads((d / "report.json").read_text())
        if isinstance(rep, dict) and rep.get("state") not in (None, "finished"):
            names = rep.get("figures")
            # only the report's own folder: a name elsewhere is no figure of a report
            ok = lambda f: isinstance(f, str) and f.startswith("figures/") and ".." not in f
            return [f for f in names if ok(f)] if isinstance(names, list) else []
    return None


def retire(d: str | Path) -> list[str]:
    """Remove DIR's report when it is of the run's results so far: report.md, report.json and the figures
    it lists, each only when the report wrote it (rundir/owner.py's record: a file edited since is the
    user's, and stays). Returns the names removed. The commit calls it: a finished run's report.md is
    never a partial one."""
    d = Path(d)
    names = _partial_figures(d)
    if names is None:
        return []
    removed = []
    for name in [*names, *NAMES]:  # report.json last: a kill in between leaves it to name the rest
        try:
            owner.check(d, "report", [name])
        except ConfigError:  # not the report's (or its record is damaged): left as it is
            continue
        if (d / name).is_file():
            (d / name).unlink()
            removed.append(name)
    with contextlib.suppress(OSError):  # the figures folder, when nothing else is in it
        (d / "figures").rmdir()
    return removed


def reports_of(d: str | Path) -> list[Path]:
    """The folders whose report reads run DIR's results: DIR, and the sweep DIR is a cell of
    (SWEEP/cells/DIR), whose partial report a cell's commit leaves stale (its count of finished cells)."""
    d = Path(d)
    return [d, *([d.parent.parent] if d.parent.name == "cells" and rundir.is_sweep(d.parent.parent) else [])]


def finished_since(found: rundir.Run | rundir.SweepDir) -> bool:
    """Whether the run that `found` read unfinished, or a cell of the sweep that it read unfinished or
    did not see (a grid point that started meanwhile), has committed since."""
    if isinstance(found, rundir.Run):
        return found.partial and (found.dir / rundir.RESULTS).exists()
    if not found.partial:
        return False
    seen = {c.dir.name: c.status for c in found.cells}
    cells = found.dir / "cells"
    now = [c for c in cells.iterdir() if rundir.is_done(c)] if cells.is_dir() else []
    return any(seen.get(c.name, "pending") in ("partial", "pending") for c in now)
