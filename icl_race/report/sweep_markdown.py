"""A classification `SweepReport` rendered: report.md section by section (one short function each) and
its figures. Nothing here computes a statistic."""

from __future__ import annotations

from collections.abc import KeysView

from icl_race.analysis import regime as rg
from icl_race.analysis.median_n import Lines
from icl_race.analysis.outcome import KEPT
from icl_race.analysis.record import NotFitted
from icl_race.analysis.survival import proportion_ci
from icl_race.analysis.threshold import Logistic, Sigmoid, Slope
from icl_race.plots import cells as P
from icl_race.plots import classification as F
from icl_race.report import cell_text as T
from icl_race.report import levers
from icl_race.report import verdict as V
from icl_race.report.cell import Statistics
from icl_race.report.claims import comparison_markdown
from icl_race.report.classification_sweep import SweepReport
from icl_race.report.design import markdown as design_markdown
from icl_race.report.format import ci_text, num, p_value, pct, slug
from icl_race.report.paper import PAPER, methods_markdown
from icl_race.report.sweep_sections import BALANCED_METRICS, Balanced, Scaling, Threshold


def _header(rep: SweepReport) -> list[str]:
    md = [
        f"# icl-race sweep report: {rep.dir}",
        "",
        f"{rep.n_cells_finished} finished cells pooled into {len(rep.cells)} conditions; "
        f"{len(rep.unfinished)} unfinished (skipped). Varying fields: {', '.join(rep.varying_fields) or 'none'}.",
        "",
    ]
    if rep.differences_from_paper_settings:
        md += [
            "Every cell differs from the paper's settings in: "
            + ", ".join(rep.differences_from_paper_settings)
            + ". Absolute numbers are therefore not comparable with the paper's; shapes and scalings are.",
            "",
        ]
    return md


def _regime(rep: SweepReport) -> list[str]:
    if not rep.regime:
        return []
    md = [
        "## Regime per N",
        "",
        f"Abrupt = median rise fraction r <= {rg.RISE_BOUND} and the first rise reaching the threshold (median "
        "plateau above it), judged at K = infinity (else the largest K, a proxy). Verdicts beside the paper use "
        "only the N in the regime. Intervals: bootstrap percentile over seeds.",
        "",
        "| N | judged on | rise fraction r (95% CI) | plateau (95% CI) | plateau above threshold | abrupt |",
        "|---|---|---|---|---|---|",
    ]
    for r in rep.regime:
        reach = r.plateau_reaches_threshold
        md.append(
            f"| {r.N} | {r.cell} ({r.source}) | {T.ci_cell(r.rise_fraction)} | {T.ci_cell(r.plateau)} | "
            f"{'-' if reach is None else pct(reach)} | {({True: 'yes', False: 'no', None: '-'})[r.abrupt]} |"
        )
    return md + [""]


def _sigmoid_cells(s: Sigmoid | NotFitted) -> list[str]:
    return [num(s.kstar), ci_text(s.kstar_ci)] if isinstance(s, Sigmoid) else ["-", f"not fitted: {s.reason}"]


def _threshold(t: Threshold, figures: KeysView[str]) -> list[str]:
    tag = slug(t.label)
    md = [
        f"## Threshold K*: {t.label}",
        "",
        "| N | K* (logistic midpoint) | 95% CI (bootstrap percentile) | paper's sigmoid K* | 95% CI (bootstrap "
        "percentile) | cells | bracketed |",
        "|---|---|---|---|---|---|---|",
    ]
    for N in t.N:
        a = t.acquisition[N]
        f = a.fit if isinstance(a.fit, Logistic) else None
        md.append(
            f"| {N} | {num(f and f.kstar)} | {ci_text(f and f.kstar_ci)} | "
            f"{' | '.join(_sigmoid_cells(t.paper_sigmoid[N]))} | {len(a.cells)} | "
            f"{f.bracketed if f else 'n/a'} |"
        )
    sl, m1 = t.kstar_slope, t.kstar_slope_N_minus_1
    if isinstance(sl, Slope) and isinstance(m1, Slope):
        md += [
            "",
            f"Slope of log10 K* on log10 N: **{sl.slope:.3f}** {ci_text(sl.slope_ci, '{:.3f}')} "
            f"(bootstrap percentile, {sl.boot_used or 0} replicates used); against log10(N - 1): "
            f"{m1.slope:.3f} {ci_text(m1.slope_ci, '{:.3f}')}.",
        ]
    md += ["", f"![acquisition vs K](figures/acquisition_vs_K__{tag}.png)", ""]
    md += [
        f"![{name}](figures/{name}.png)\n"
        for name in (f"kstar_vs_N__{tag}", f"heatmap__{tag}", f"near_kstar__{tag}")
        if name in figures
    ]
    if t.near_kstar:
        md += [
            (
                "Bimodality in the cell nearest K* for each N (or, of the cells that differ from it only in "
                "the early stop, the evaluation period or how seeds retire, the one with the most seeds that reads "
                "final accuracy at the budget):"
            ),
            "",
        ] + T.BIMODALITY_HEADER
        for n in t.near_kstar:
            md.append(T.bimod_row(f"N={n.N} K={n.K:,}: final ICL accuracy", n.bimodality.final_icl_acc))
            md.append(T.bimod_row(f"N={n.N} K={n.K:,}: log10 t_ICL (acquired)", n.bimodality.log10_t_acquired))
        md.append("")
    return md


def _scaling(s: Scaling) -> list[str]:
    m = s.median_vs_N
    md = [
        f"## t_ICL vs N at K = infinity: {s.label}",
        "",
        "| N | seeds | acquired | KM median t_ICL | 95% CI (bootstrap percentile) |",
        "|---|---|---|---|---|",
    ]
    md += [f"| {p.N} | {p.n} | {p.acquired} | {num(p.median)} | {ci_text(p.median_ci)} |" for p in m.per_N]
    lin, ll = (m.fit.linear, m.fit.loglog) if isinstance(m.fit, Lines) else (None, None)
    if isinstance(lin, Slope) and isinstance(ll, Slope):
        md += [
            "",
            f"Linear fit: median = {lin.intercept:,.0f} {ci_text(lin.intercept_ci)} + "
            f"{lin.slope:,.1f} {ci_text(lin.slope_ci, '{:,.1f}')} N; log-log exponent "
            f"{ll.slope:.3f} {ci_text(ll.slope_ci, '{:.3f}')} (bootstrap percentile).",
        ]
    return md + ["", f"![t_ICL vs N](figures/t_icl_vs_N__{slug(s.label)}.png)", ""]


def _balanced(b: Balanced) -> list[str]:
    md = [
        f"## Balanced vs standard contexts: {b.label}",
        "",
        "| N | K | standard: acc > 0.75 | balanced: acc > 0.75 | difference (95% CI, bootstrap percentile) | "
        "standard: acquired | balanced: acquired | median t_ICL balanced / standard (95% CI) | t_ICL log-rank p "
        "| t_ICL verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    a, q = b.acc_above, b.acquired
    for j, (N, K) in enumerate(zip(b.N, b.K)):
        pc, qc, t = a.per_cell[j], q.per_cell[j], b.t_icl[j]
        ratio = "not defined" if t.ratio.ratio is None else f"{num(t.ratio.ratio, '{:.3g}')} {V.ci(t.ratio)}"
        md.append(
            f"| {N} | {K:,} | {pc.p1:.2f} | {pc.p2:.2f} | {pc.diff:+.2f} {ci_text(pc.diff_ci, '{:+.2f}')} | "
            f"{qc.p1:.2f} | {qc.p2:.2f} | {ratio} | {p_value(t.logrank.p)} | {V.cell(t.verdict, 'balanced', 'standard')} |"
        )
    md += ["", V.RULE]
    if b.reference_above is not None:
        md += [
            "",
            "Balanced cells on the reference's ICL test (novel items labelled by the training map), fraction "
            "> 0.75: " + ", ".join(f"{v:.2f}" for v in b.reference_above) + ".",
        ]
    return md + ["", f"![balanced vs standard](figures/balanced_vs_standard__{slug(b.label)}.png)", ""]


def _cells(rep: SweepReport) -> list[str]:
    md = [
        "## Cells",
        "",
        "| cell | seeds | diverged | acquired | never acquired (95% CI, Wilson) | KM median t_ICL (95% CI) | "
        + " | ".join(KEPT)
        + " | dip p, final acc | dip p, log t_ICL | rise fraction r | plateau |",
        "|---|---|---|---|---|---|" + "---|" * len(KEPT) + "---|---|---|---|",
    ]
    for c in sorted(rep.cells, key=lambda c: (c.variant, c.N or 0, c.K or 0)):
        counts = " | ".join(str(c.outcomes.counts[k].k) for k in KEPT)
        st = c.statistics
        if not isinstance(st, Statistics):
            md.append(f"| {c.label} | {c.n_seeds} | {c.n_diverged} | - | - | - | {counts} | - | - | - | - |")
            continue
        b, g = st.bimodality, st.regime
        md.append(
            f"| {c.label} | {c.n_seeds} | {c.n_diverged} | {c.acquired} | {T.never_text(st.never_acquired)} | "
            f"{T.median_text(st.kaplan_meier, c.censor_at)} | "
            f"{counts} | {p_value(b.final_icl_acc.dip_p)} | {p_value(b.log10_t_acquired.dip_p)} | "
            f"{num(g.rise_fraction.median, '{:.2f}')} | {num(g.plateau.median, '{:.2f}')} |"
        )
    if rep.unfinished:
        md += ["", "Unfinished or unreadable cells (skipped):", ""]
        md += [f"- `{u.cell}` {u.label or ''}: {u.reason}" for u in rep.unfinished]
    return md + [""]


def _ordered(rep: SweepReport) -> list[int]:
    """The analysable cells' indices in the order of the cell tables (variant, N, K)."""
    return sorted(
        (i for i, c in enumerate(rep.cells) if isinstance(c.statistics, Statistics)),
        key=lambda i: (rep.cells[i].variant, rep.cells[i].N, rep.cells[i].K or 0),
    )


def _per_cell(rep: SweepReport, figures: KeysView[str]) -> list[str]:
    """Each cell's outcomes, the Kaplan-Meier curves of its fall times, its trajectories and recorded curves,
    as one table and small-multiples figures (one panel per cell)."""
    order = _ordered(rep)
    if not order:
        return []
    c0 = rep.cells[order[0]].outcomes
    md = [
        "## Outcomes per cell",
        "",
        T.outcome_rule(c0.level, c0.lasting, "the cell's budget") + " The fall time's median: Kaplan-Meier over "
        "the acquired seeds, those without a lasting fall censored at the end of the run (Greenwood, log-log band "
        "inverted).",
        "",
    ] + T.outcomes_by_cell([rep.cells[i] for i in order])
    if "fall_by_cell" in figures:
        md += [
            "![time from t_ICL to a lasting fall, per cell](figures/fall_by_cell.png)",
            "",
            "Cells where no acquired seed fell are left out of the figure (their curve is 1 throughout).",
            "",
        ]
    md += [
        "![ICL accuracy per cell, by outcome](figures/trajectories_by_cell__icl.png)",
        "",
        "![IWL accuracy per cell, by outcome](figures/trajectories_by_cell__iwl.png)",
        "",
    ]
    names = [n for n in figures if n.startswith("curves_by_cell__")]
    if names:
        md += ["## Recorded curves per cell", "", "Median and interquartile band over each cell's seeds.", ""]
        md += [f"![{n.split('__')[1]} per cell](figures/{n}.png)\n" for n in names]
    return md


def markdown(rep: SweepReport, figs: dict) -> str:
    md = _header(rep) + (design_markdown(rep.design) if rep.design is not None else [])
    md += comparison_markdown(rep.paper_comparisons, rep.paper_scale) + _regime(rep)
    for t in rep.thresholds:
        md += _threshold(t, figs.keys())
    md += levers.markdown(rep.by_lever)
    for s in rep.t_icl_vs_N:
        md += _scaling(s)
    for b in rep.balanced_vs_standard:
        md += _balanced(b)
    return "\n".join(md + _cells(rep) + _per_cell(rep, figs.keys()) + methods_markdown()) + "\n"


def _wilson(k, n) -> dict:
    cis = [proportion_ci(a, b) for a, b in zip(k, n)]
    return {"p": k / n, "lo": [c[0] for c in cis], "hi": [c[1] for c in cis]}


def figures(rep: SweepReport) -> dict:
    figs, samples = {}, rep.samples
    for t in rep.thresholds:
        tag, label = slug(t.label), t.label
        figs[f"acquisition_vs_K__{tag}"] = F.acquisition_vs_K(
            {N: a.to_json() for N, a in t.acquisition.items()}, title=f"Acquisition vs K ({label})"
        )
        fits = {N: f for N in t.N if isinstance(f := t.acquisition[N].fit, Logistic)}
        if len(fits) >= 2:
            figs[f"kstar_vs_N__{tag}"] = F.kstar_vs_N(
                list(fits),
                [f.b for f in fits.values()],
                [f.log10_kstar_ci for f in fits.values()],
                t.kstar_slope.to_json(),
                ref_slope=PAPER.kstar_slope_predicted,
                title=f"K*(N) ({label})",
            )
        h = t.heatmap
        figs[f"heatmap__{tag}"] = F.acquisition_heatmap(h.K, h.N, h.fraction, title=f"Acquisition fraction ({label})")
        if t.near_kstar:
            figs[f"near_kstar__{tag}"] = P.small_histograms(
                [
                    (f"N={n.N}, K={n.K:,}", samples[n.cell_index].t, samples[n.cell_index].censor_at)
                    for n in t.near_kstar
                ],
                title=f"t_ICL in the cell nearest K* ({label})",
            )
    for s in rep.t_icl_vs_N:
        idx = s.cell_index
        figs[f"t_icl_vs_N__{slug(s.label)}"] = F.t_icl_vs_N(
            [samples[i].N for i in idx],
            [samples[i].t for i in idx],
            [samples[i].censor_at for i in idx],
            s.median_vs_N.to_json(),
            title=f"t_ICL vs N at K = infinity ({s.label})",
        )
    for b in rep.balanced_vs_standard:
        rows = []
        for N in sorted(set(b.N)):
            sel = [j for j, n_ in enumerate(b.N) if n_ == N]
            panels = [
                (
                    ylabel,
                    _wilson(b.metric(m).standard.k[sel], b.metric(m).standard.n[sel]),
                    _wilson(b.metric(m).balanced.k[sel], b.metric(m).balanced.n[sel]),
                )
                for m, ylabel in BALANCED_METRICS
            ]
            rows.append((N, [b.K[j] for j in sel], panels))
        figs[f"balanced_vs_standard__{slug(b.label)}"] = F.balanced_vs_standard(
            rows, title=f"Balanced vs standard contexts ({b.label})"
        )
    return figs | _cell_figures(rep)


def _cell_figures(rep: SweepReport) -> dict:
    """The run report's per-cell figures as small multiples, one panel per analysable cell."""
    order, figs = _ordered(rep), dict[str, object]()
    if not order:
        return figs
    cells, samples = rep.cells, rep.samples
    falls = [
        (cells[i].label, f.to_json())
        for i in order
        if (f := cells[i].outcomes.fall_after_t_icl) is not None and f.acquired
    ]
    if falls:
        figs["fall_by_cell"] = P.fall_survival(falls, "Time from t_ICL to a lasting fall (Kaplan-Meier), per cell")
    for name, acc, ylabel in (("icl", "icl_acc", "ICL accuracy"), ("iwl", "iwl_acc", "IWL accuracy")):
        items = [
            (
                cells[i].label,
                samples[i].eval_steps,
                getattr(samples[i], acc)[samples[i].kept],
                samples[i].outcomes.classes_S[samples[i].kept],
                samples[i].cfg.train.icl_threshold if name == "icl" else None,
            )
            for i in order
        ]
        figs[f"trajectories_by_cell__{name}"] = P.accuracies(
            items,
            ylabel,
            f"{ylabel} per cell, coloured by outcome (blue persistent, green recovered, orange falling, red transient, grey censored)",
        )
    recorded = dict.fromkeys(k for i in order for k in samples[i].curves)
    for k in recorded:
        panels = [
            (cells[i].label, samples[i].eval_steps, samples[i].curves[k]) for i in order if k in samples[i].curves
        ]
        figs[f"curves_by_cell__{k}"] = P.curves(panels, k, f"{k} per cell: median and interquartile band over seeds")
    return figs
