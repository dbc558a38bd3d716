"""Classification report of one run (task.kind = "classification"): the t_ICL distribution with censored
seeds (Kaplan-Meier, never-acquired fraction, tail fits), every seed's outcome, bimodality, the regime,
trajectories and the recorded losses, beside the paper; and the `hist` view.

    compute(run, draws)  ->  RunReport (typed: the sample and its CellStats, built once from the `Run`)
    markdown(rep)        ->  report.md, section by section
    figures(rep, run)    ->  {name: Figure}
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from icl_race import rundir
from icl_race.analysis.draws import Draws
from icl_race.plots import classification as F
from icl_race.report import cell_text as T
from icl_race.report.cell import CellStats, Statistics, analyze, dequantized
from icl_race.report.claims import Comparison, comparison_markdown, run_comparisons
from icl_race.report.paper import methods_markdown, paper_differences, scale_text
from icl_race.report.sample import Sample
from icl_race.report.warnings import of_run


@dataclasses.dataclass(frozen=True)
class RunReport:
    dir: Path
    sample: Sample
    cell: CellStats
    paper_comparisons: list[Comparison]
    differences_from_paper_settings: list[str]
    warnings: list[str]  # one line each (report/warnings.py)

    @property
    def paper_scale(self) -> str:
        return scale_text([self.sample.config])

    def to_json(self) -> dict:
        return {
            "kind": "run",
            "dir": str(self.dir),
            "config": self.sample.config,
            "cell": self.cell.to_json(),
            "paper_comparisons": [c.to_json() for c in self.paper_comparisons],
            "paper_scale": self.paper_scale,
            "differences_from_paper_settings": self.differences_from_paper_settings,
            "warnings": self.warnings,
        }


def compute(run: rundir.Run, draws: Draws) -> RunReport:
    """Every statistic of the run (the regime's intervals resampled with the report's draws)."""
    s = Sample.of(run)
    cell = analyze(s, draws)
    rise = cell.statistics.regime.rise_fraction.median if isinstance(cell.statistics, Statistics) else None
    return RunReport(run.dir, s, cell, run_comparisons(cell), paper_differences(s.config), of_run(run, rise))


# ---- markdown, one section a function ----------------------------------------------------------------


def _header(rep: RunReport) -> list[str]:
    s, c, tr = rep.sample, rep.cell, rep.sample.cfg.train
    md = [
        f"# icl-race report: {rep.dir}",
        "",
        f"Run: {c.label}, {s.seed_ids.size} seeds, budget {s.budget:,} steps (ran {s.steps_run:,}), evaluation "
        f"every {tr.eval_every} steps on {tr.eval_size} sequences, ICL threshold {tr.icl_threshold}.",
        "",
    ]
    if isinstance(c.statistics, Statistics):
        md += [f"Outcome: {T.outcome_counts_text(c)} of {s.seed_ids.size} seeds (table *Outcomes*).", ""]
    if rep.warnings:
        md += [f"- **{w.replace('warning: ', 'Warning: ', 1)}**" for w in rep.warnings] + [""]
    if rep.differences_from_paper_settings:
        md += [
            "Differs from the paper's settings in: " + ", ".join(rep.differences_from_paper_settings) + ". Absolute "
            "numbers are therefore not comparable with the paper's; shapes and scalings are.",
            "",
        ]
    return md


def _t_icl(rep: RunReport) -> list[str]:
    st = rep.cell.statistics
    if not isinstance(st, Statistics):
        return [f"No statistics: {st.reason}.", ""]
    return (
        ["## t_ICL", ""]
        + T.survival_table(rep.cell, st)
        + ["![t_ICL histogram](figures/t_icl_hist.png)", "", "![Kaplan-Meier](figures/survival.png)", ""]
    )


def _outcomes(rep: RunReport) -> list[str]:
    if not isinstance(rep.cell.statistics, Statistics):
        return []
    fall = rep.cell.outcomes.fall_after_t_icl
    return (
        ["## Outcomes", ""]
        + T.outcome_table(rep.cell)
        + ["![trajectories by outcome](figures/trajectories.png)", ""]
        + (["![time from t_ICL to the fall](figures/fall.png)", ""] if fall is not None and fall.acquired else [])
    )


def _bimodality(rep: RunReport) -> list[str]:
    st = rep.cell.statistics
    if not isinstance(st, Statistics):
        return []
    return (
        ["## Bimodality and regime", ""]
        + T.bimodality_table(st)
        + T.regime_table(rep.cell, st)
        + ["![bimodality](figures/bimodality.png)", ""]
    )


def _curves(rep: RunReport, names: list[str]) -> list[str]:
    if not names:
        return []
    return [
        "## Recorded curves",
        "",
        f"Median and interquartile band over seeds of {', '.join(names)}.",
        "",
        "![losses and c-statistics](figures/curves.png)",
        "",
    ]


def markdown(rep: RunReport) -> str:
    md = (
        _header(rep)
        + _t_icl(rep)
        + _outcomes(rep)
        + _bimodality(rep)
        + _curves(rep, list(rep.sample.curves))
        + comparison_markdown(rep.paper_comparisons, rep.paper_scale)
        + methods_markdown()
    )
    return "\n".join(md) + "\n"


# ---- figures ---------------------------------------------------------------------------------------------


def figures(rep: RunReport) -> dict:
    s, c = rep.sample, rep.cell
    curves = s.curves
    figs = {}
    if isinstance(st := c.statistics, Statistics):
        km = st.kaplan_meier
        figs["t_icl_hist"] = F.t_icl_histogram(
            s.t, s.censor_at, km.median, km.median_ci, title=f"t_ICL, {c.label}, {c.n_seeds} seeds"
        )
        figs["survival"] = F.survival_curve(
            km.to_json(),
            st.lognormal.to_json() if st.lognormal else None,
            st.tail.to_json() if st.tail else None,
            title=f"Kaplan-Meier, {c.label}",
        )
        fall = c.outcomes.fall_after_t_icl
        if fall is not None and fall.acquired:
            figs["fall"] = F.survival_curve(
                fall.to_json(),
                title=f"Time from t_ICL to a lasting fall, {c.label}",
                xlabel="SGD steps after t_ICL (log scale)",
                ylabel="P(ICL not yet lost)",
            )
        log_t, final_dq = dequantized(s)
        b = st.bimodality
        figs["bimodality"] = F.bimodality(
            log_t,
            b.log10_t_acquired.to_json(),
            final_dq,
            b.final_icl_acc.to_json(),
            title=c.label,
        )
    figs["trajectories"] = F.trajectories(
        s.eval_steps,
        s.icl_acc[s.kept],
        s.iwl_acc[s.kept],
        s.cfg.train.icl_threshold,
        title=c.label,
        classes=s.outcomes.classes_S[s.kept],
    )
    if curves:
        figs["curves"] = F.recorded_curves(s.eval_steps, curves, title=c.label)
    return figs


def run_report(run: rundir.Run, draws: Draws) -> tuple[dict, str, dict]:
    rep = compute(run, draws)
    return rep.to_json(), markdown(rep), figures(rep)


# ---- hist --------------------------------------------------------------------------------------------


def histogram_bins(t: np.ndarray, bins: int = 12) -> list[dict]:
    """The acquired seeds' t_ICL per log-spaced bin [lo, hi) (one bin per distinct value, lo = hi, when
    there are at most `bins` of them, as on a coarse evaluation grid)."""
    hit = t[t >= 0].astype(float)
    values = np.unique(hit)
    if 0 < values.size <= bins:
        return [{"lo": float(v), "hi": float(v), "count": int(np.sum(hit == v))} for v in values]
    if not hit.size:
        return []
    edges = np.geomspace(hit.min(), hit.max() * 1.0001, bins + 1)
    counts, _ = np.histogram(hit, edges)
    return [{"lo": float(edges[i]), "hi": float(edges[i + 1]), "count": int(c)} for i, c in enumerate(counts)]


def hist_record(run: rundir.Run, bins: int = 12) -> dict:
    """The `hist` view as data: the bins, the never-acquired count and the cell's statistics."""
    s = Sample.of(run)
    c = analyze(s, tails=False)
    return {
        "kind": "hist",
        "dir": str(run.dir),
        "label": c.label,
        "censor_at": s.censor_at,
        "bins": histogram_bins(s.t, bins),
        "never_acquired": int((s.t < 0).sum()),
        "summary": T.summary_line(c, verdict=not run.partial),
        "cell": c.to_json(),
    }


def hist_text(run: rundir.Run, bins: int = 12, width: int = 40) -> str:
    """A text histogram of t_ICL and the summary line of one run."""
    h = hist_record(run, bins)
    rows = [
        (f"{b['lo']:>23,.0f}" if b["lo"] == b["hi"] else f"{b['lo']:>10,.0f} - {b['hi']:>10,.0f}", b["count"])
        for b in h["bins"]
    ]
    if h["cell"]["n_seeds"]:
        never = f"never (> {h['censor_at']:,})"
        rows.append((f"{never:>23}", h["never_acquired"]))
    top = max((n for _, n in rows), default=1) or 1
    lines = [f"t_ICL of {run.dir} ({h['label']}), log-spaced bins, steps:"]
    lines += [f"{lab} | {'#' * int(round(width * n / top)):<{width}} {n}" for lab, n in rows] or ["(no seeds)"]
    return "\n".join(lines + [h["summary"]])
