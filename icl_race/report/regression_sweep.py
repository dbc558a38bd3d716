"""A linear-regression sweep directory's report, computed and rendered: every finished cell's sample read once
and analysed as one run's (report/regression_run.py), ordered by the grid's values (`compute_sweep` ->
`RegressionSweepReport` of `RegressionCell`s), a table of the cells side by side with each cell's tables
after it (`sweep_markdown`), one panel of loss curves per cell and the cells' median losses overlaid
(`sweep_figures`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from icl_race import rundir
from icl_race.analysis.record import Record
from icl_race.config import ConfigError
from icl_race.plots.regression import medians_figure, panels_figure
from icl_race.report.cell import Unfinished
from icl_race.report.format import order
from icl_race.report.regression_run import RegressionSample, RegressionStats, analyze, fmt_tau, run_markdown
from icl_race.rundir.runset import value


@dataclasses.dataclass(frozen=True)
class RegressionCell(Record):
    """A sweep's cell: its directory name, label and grid values, and its statistics."""

    cell: str
    label: str
    values: dict[str, object]  # grid field -> this cell's value
    stats: RegressionStats

    def to_json(self) -> dict:
        return {"cell": self.cell, "label": self.label, "values": self.values} | self.stats.to_json()


@dataclasses.dataclass(frozen=True)
class RegressionSweepReport:
    """A sweep's finished cells in the grid's order, and the unfinished ones (skipped)."""

    dir: Path
    fields: list[str]  # the grid's fields (sweep.toml)
    samples: list[RegressionSample]
    cells: list[RegressionCell]
    unfinished: list[Unfinished]

    def to_json(self) -> dict:
        return {
            "kind": "linear_regression_sweep",
            "fields": self.fields,
            "cells": [c.to_json() for c in self.cells],
            "unfinished": [u.to_json() for u in self.unfinished],
        }


def compute_sweep(sweep: rundir.SweepDir) -> RegressionSweepReport:
    """Every finished cell's sample, read once, ordered by the grid's values, and its statistics."""
    fields = sweep.fields
    samples, unfinished = [], []
    for cell in sweep.cells:
        try:
            if cell.run is None:
                raise ConfigError(f"{cell.dir}: {cell.reason}" if cell.config else cell.reason)
            samples.append(RegressionSample.of(cell.run))
        except ConfigError as e:
            unfinished.append(Unfinished(cell.name, reason=str(e)))
    if not samples:
        raise ConfigError(f"{sweep.dir}: no finished cells")
    samples.sort(key=lambda s: [order(value(s.config, f)) for f in fields])
    cells = [
        RegressionCell(
            s.dir.name,
            ", ".join(f"{f.partition('.')[2]}={value(s.config, f)}" for f in fields) or s.dir.name,
            {f: value(s.config, f) for f in fields},
            analyze(s),
        )
        for s in samples
    ]
    return RegressionSweepReport(sweep.dir, fields, samples, cells, unfinished)


def sweep_markdown(rep: RegressionSweepReport) -> str:
    cells = rep.cells
    D = max(len(c.stats.levels) - 1 for c in cells)
    md = [
        f"# Linear-regression sweep report: {rep.dir}",
        "",
        f"{len(cells)} finished cells, {len(rep.unfinished)} unfinished.",
        "",
        "Median over seeds of each transition time t_m (tau; reached/seeds) and of the dwell on each level "
        "(tau); the level values and per-cell details follow.",
        "",
        "| cell | setup | final loss (median) | "
        + " | ".join(f"t_m{m}" for m in range(1, D + 1))
        + " | "
        + " | ".join(f"dwell {m}" for m in range(D))
        + " |",
        "|---|---|---|" + "---|" * (2 * D),
    ]
    for c in cells:
        st, tr = c.stats, c.stats.transitions
        t = [
            f"{fmt_tau(tr[f'm{m}'].km_median_tau)} ({tr[f'm{m}'].reached}/{st.n_seeds})" if f"m{m}" in tr else ""
            for m in range(1, D + 1)
        ]
        w = [fmt_tau(r.median_tau) for r in st.dwell] + [""] * (D - len(st.dwell))
        md.append(
            f"| {c.label} | {st.setup} | {st.final.curves['loss'].final_median:.6f} | " + " | ".join(t + w) + " |"
        )
    for c in cells:
        md += ["", f"## {c.label}", "", c.stats.setup, ""] + run_markdown(c.stats)
    if rep.unfinished:
        md += ["", "Unfinished or unreadable cells (skipped):", ""]
        md += [f"- `{u.cell}`: {u.reason}" for u in rep.unfinished]
    md += [
        "",
        "![loss curves per cell](figures/loss_curves.png)",
        "",
        "![median training loss of every cell](figures/loss_medians.png)",
    ]
    return "\n".join(md) + "\n"


def sweep_figures(rep: RegressionSweepReport) -> dict:
    runs, labels = [s.plot_view() for s in rep.samples], [c.label for c in rep.cells]
    return {"loss_curves": panels_figure(runs, labels), "loss_medians": medians_figure(runs, labels)}
