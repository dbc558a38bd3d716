"""A `CellStats` as markdown: one short function per table, shared by the run and the sweep reports."""

from __future__ import annotations

from icl_race.analysis import bimodality as bm
from icl_race.analysis.bimodality import Modality
from icl_race.analysis.outcome import CLASSES, KEPT, Count, Spread
from icl_race.analysis.regime import RISE_BOUND
from icl_race.analysis.survival import KaplanMeier, Lognormal, Proportion, Tail
from icl_race.analysis.threshold import MedianCI
from icl_race.report.cell import CellStats, Statistics
from icl_race.report.format import ci_text, num, p_value, pct
from icl_race.report.summary import counts_text


def ci_cell(st: MedianCI, fmt: str = "{:.3f}") -> str:
    return "-" if st.median is None else f"{fmt.format(st.median)} {ci_text(st.ci, fmt)} (n = {st.n})"


def median_text(km: KaplanMeier, censor_at: int) -> str:
    if km.median is None:
        lo = km.median_ci[0]
        return f"not reached by {censor_at:,}" + (f" (CI from {lo:,.0f})" if lo is not None else "")
    return f"{num(km.median)} {ci_text(km.median_ci)}"


def never_text(na: Proportion) -> str:
    return f"{pct(na.fraction)} [{pct(na.ci[0])}, {pct(na.ci[1])}] ({na.k}/{na.n})"


def bimodal_verdict(st: Modality) -> str:
    """What the three bimodality statistics say together, and whether the sample is large enough."""
    if st.not_measured:
        return st.not_measured
    text = {
        None: "too few values",
        "bimodal": "bimodal (dip, BC and Delta BIC agree)",
        "unimodal": "not bimodal (dip, BC and Delta BIC agree)",
    }.get(st.agreement)
    if text is None:
        two = [f"BC {st.bc:.2f} {'>' if st.bc_above_5_9 else '<='} 0.555"] if st.bc is not None else []
        if st.delta_bic is not None:
            two.append(f"Delta BIC {st.delta_bic:.1f} {'>' if st.delta_bic > 0 else '<='} 0")
        text = (
            f"the tests disagree: the dip test {'rejects' if st.bimodal else 'keeps'} unimodality "
            f"(p {'<' if st.bimodal else '>='} 0.05), {' and '.join(two)}"
        )
    if st.underpowered and st.agreement is not None:
        text += f"; underpowered (n = {st.n} < {bm.MIN_N})"
    return text


def bimod_row(name: str, st: Modality) -> str:
    return (
        f"| {name} | {st.n} | {p_value(st.dip_p)} | {num(st.bc, '{:.2f}')} | "
        f"{num(st.delta_bic, '{:.1f}')} | {bimodal_verdict(st)} |"
    )


BIMODALITY_HEADER = [
    "| sample | n | dip test p | BC | Delta BIC (1 - 2 comp.) | verdict |",
    "|---|---|---|---|---|---|",
]


def survival_table(c: CellStats, st: Statistics) -> list[str]:
    lines = [
        "| statistic | estimate (95% CI) | interval |",
        "|---|---|---|",
        f"| seeds analysed | {c.n_seeds} ({c.n_diverged} diverged, excluded) | |",
        f"| acquired ICL within {c.censor_at:,} steps | {c.acquired} | |",
        f"| never acquired (right-censored at {c.censor_at:,}) | {never_text(st.never_acquired)} | Wilson score |",
        f"| Kaplan-Meier median t_ICL (steps) | {median_text(st.kaplan_meier, c.censor_at)} | Greenwood, log-log band "
        "inverted |",
    ]
    ln = st.lognormal
    if isinstance(ln, Lognormal):
        lines.append(
            f"| lognormal fit (censored MLE): mu, sigma of ln t_ICL | {ln.mu:.3f} {ci_text(ln.mu_ci, '{:.3f}')}, "
            f"{ln.sigma:.3f} {ci_text(ln.sigma_ci, '{:.3f}')} | Wald |"
        )
    tail = st.tail
    if isinstance(tail, Tail):
        pl, lr = tail.power_law, tail.likelihood_ratio
        lines.append(
            f"| power-law tail above xmin = {tail.xmin:,.0f} ({tail.n_tail} seeds): alpha | "
            f"{pl.alpha:.2f} {ci_text(pl.alpha_ci, '{:.2f}')} | Wald |"
        )
        lines.append(f"| tail comparison (Vuong): R, p | R = {lr.R:.2f}, p = {lr.p:.3g}: favours {lr.favours} | |")
    elif tail is not None:
        lines.append(f"| tail fits | not done: {tail.reason or ''} | |")
    return lines + [""]


def bimodality_table(st: Statistics) -> list[str]:
    b = st.bimodality
    return (
        [
            f"Bimodality (dip test p < 0.05 rejects unimodality; BC > 0.555 and Delta BIC > 0 favour two modes; "
            f"fewer than {bm.MIN_N} values are underpowered):",
            "",
        ]
        + BIMODALITY_HEADER
        + [
            bimod_row("log10 t_ICL, acquired seeds", b.log10_t_acquired),
            bimod_row("log10 t_ICL, censored seeds at the budget (as Fig 6C draws it)", b.log10_t_censored_at_budget),
            bimod_row("final ICL accuracy", b.final_icl_acc),
            "",
            f"This cell is {'near' if b.near_threshold else 'not near'} the threshold "
            f"(acquired fraction {pct(st.acquired_fraction)}; near = 10-90%).",
            "",
        ]
    )


def regime_table(c: CellStats, st: Statistics) -> list[str]:
    g = st.regime
    lv = f"{g.start_level:g}"
    reach = g.plateau_reaches_threshold
    return [
        f"Regime (is ICL acquired abruptly? `icl_race/analysis/regime.py`): rise fraction r = (t_ICL - t_{lv}) / t_ICL "
        f"over acquired seeds, t_{lv} the first passage over {lv}; plateau = ICL accuracy held right after the first "
        f"rise (median over [1.25, 1.5] t_{lv}). Intervals: bootstrap percentile over seeds.",
        "",
        "| statistic | median (95% CI) |",
        "|---|---|",
        f"| rise fraction r | {ci_cell(g.rise_fraction)} |",
        f"| plateau after the first rise | {ci_cell(g.plateau)} |",
        f"| plateau above the threshold | {'-' if reach is None else pct(reach)} of the seeds that rose |",
        f"| median final ICL accuracy, acquired seeds (each class's range: *Outcomes*) | "
        f"{ci_cell(g.final_icl_acc_acquired)} |",
        f"| effective threshold of first passage | {g.effective_threshold:.3f}: a seed holding this accuracy "
        f"passes {g.threshold:g} within {g.looks} evaluations of {c.eval_size} sequences "
        f"with probability 1/2 ({g.confirm} consecutive required) |",
        "",
    ]


def outcome_rule(level: float, lasting: int, budget: str = "the budget") -> str:
    """The classes' rules in one sentence (analysis/outcome.py; docs/outcomes.md)."""
    return (
        f"persistent = acquired ICL and held it (no lasting fall, ICL accuracy >= {level:g} at the end); "
        f"falling = acquired, then below {level:g} at the end for fewer than {lasting} evaluations (a fall too "
        f"recent to call lasting); transient = acquired, then a lasting fall (>= {lasting} consecutive evaluations "
        f"below {level:g}) and still below at the end; recovered = a lasting fall, then back at or above "
        f"{level:g} at the end; censored = never acquired within {budget}; diverged = a non-finite loss."
    )


def outcomes_by_cell(cells: list[CellStats]) -> list[str]:
    """The outcome table of every cell in one: counts with Wilson CIs, each class's final ICL accuracy and
    the median time from t_ICL to a lasting fall."""
    lines = [
        "| cell | " + " | ".join(f"{n} (95% CI, Wilson)" for n in KEPT) + " | final ICL accuracy, median "
        "(range): " + " / ".join(KEPT) + " | t_ICL to a lasting fall: KM median (95% CI) |",
        "|---|" + "---|" * len(KEPT) + "---|---|",
    ]
    for c in cells:
        o = c.outcomes
        fall = o.fall_after_t_icl
        fell = (
            "-"
            if fall is None or not fall.acquired
            else _fall_median(fall)
            if fall.median is not None
            else f"not reached ({fall.acquired} of {fall.n} fell)"
        )
        lines.append(
            f"| {c.label} | "
            + " | ".join(_count(o.counts[n]) for n in KEPT)
            + " | "
            + " / ".join(_range(o.by_class[n].final_icl_acc) for n in KEPT)
            + f" | {fell} |"
        )
    return lines + [""]


def _count(k: Count) -> str:
    return f"{k.k}/{k.n} = {pct(k.fraction)} [{pct(k.ci[0])}, {pct(k.ci[1])}]"


def _fall_median(fall: KaplanMeier) -> str:
    return f"{num(fall.median)} {ci_text(fall.median_ci)}"


def _range(st: Spread | None) -> str:
    return "-" if st is None else f"{st.median:.2f} ({st.min:.2f}-{st.max:.2f})"


def outcome_table(c: CellStats) -> list[str]:
    o = c.outcomes
    counts, by = o.counts, o.by_class
    lines = [
        f"What each seed did: {outcome_rule(o.level, o.lasting, f'{c.censor_at:,} steps')}",
        "",
        "| outcome | seeds (95% CI, Wilson score) | final ICL accuracy, median (range) | final IWL accuracy, median (range) |",
        "|---|---|---|---|",
    ]
    for name in CLASSES:
        k = counts[name]
        if name == "diverged" and not k.k:
            continue
        row = by.get(name)
        lines.append(
            f"| {name} | {_count(k)} | {_range(row.final_icl_acc if row else None)} | "
            f"{_range(row.final_iwl_acc if row else None)} |"
        )
    fall = o.fall_after_t_icl
    if fall is not None and fall.acquired:
        median = (
            f"median {_fall_median(fall)} steps (Greenwood, log-log band inverted)"
            if fall.median is not None
            else "median not reached (fewer than half fell)"
        )
        lines += [
            "",
            f"Time from t_ICL to the lasting fall (Kaplan-Meier over the {fall.n} acquired seeds, persistent "
            f"and falling ones censored at the end of the run): {fall.acquired} fell; {median}.",
        ]
    return lines + [""]


def outcome_counts_text(c: CellStats) -> str:
    return counts_text({n: k.k for n, k in c.outcomes.counts.items()})


def summary_line(c: CellStats, verdict: bool = True) -> str:
    """One line of a cell's numbers; with `verdict`, the regime's when it is outside the abrupt one (not of
    an unfinished run's results so far: report/warnings.py's `of_run`)."""
    st = c.statistics
    if not isinstance(st, Statistics):
        return f"{c.label}: {st.reason}"
    rise = st.regime.rise_fraction.median if verdict else None
    outside = (
        f"; outside the abrupt regime (median rise fraction {rise:.2f} > {RISE_BOUND:.2f})"
        if rise is not None and rise > RISE_BOUND
        else ""
    )
    return (
        f"{c.label}: n={c.n_seeds} seeds ({c.n_diverged} diverged excluded), acquired "
        f"{c.acquired}, KM median t_ICL {median_text(st.kaplan_meier, c.censor_at)} steps, never acquired "
        f"{never_text(st.never_acquired)}; "
        f"{outcome_counts_text(c)}{outside}"
    )
