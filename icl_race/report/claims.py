"""The paper's claims (arXiv 2412.00104) beside a classification run's or sweep's estimates, with verdicts.

    CLAIMS                                        every claim's text, in one table of `Claim` records
    run_comparisons(cell)                         ->  [Comparison] of one run (most need a sweep: said so)
    sweep_comparisons(thresholds, scalings, balanced, regime)  ->  [Comparison] of a sweep's typed sections
    comparison_markdown(rows, scale)              ->  the *Beside the paper* section

Each comparison reads our number from a typed record (`cell.CellStats`, `sweep_sections.Threshold`,
`Scaling`, `Balanced`, `RegimeRow`) and puts it beside the claim's text; nothing here computes a statistic."""

from __future__ import annotations

import dataclasses
import math

from icl_race.analysis.bimodality import MIN_N, Modality
from icl_race.analysis.median_n import Lines, MedianVsN
from icl_race.analysis.threshold import Logistic, Slope, interval_verdict, sign_verdict
from icl_race.report.cell import CellStats, Statistics
from icl_race.report.format import ci_text, num, p_eq, pct
from icl_race.report.paper import PAPER
from icl_race.report.sweep_sections import Balanced, NearKstar, RegimeRow, Scaling, Threshold


@dataclasses.dataclass(frozen=True)
class Claim:
    """One of the paper's claims: the table's claim and paper columns, and what a directory needs to measure
    it (our column when it cannot)."""

    claim: str
    paper: str
    needs: str = ""


NOT_MEASURED = "not measured in this directory"

CLAIMS = {
    # a run measures none of the slopes: one row for both
    "kstar_slope_run": Claim(
        "log K* vs log N slope (Fig 6A)",
        "1.41 measured [secondary]; 1/nu = 1.43 predicted",
        "needs a sweep over K and N",
    ),
    "kstar_slope_measured": Claim("log K* vs log N slope, measured (Fig 6A)", "1.41 [secondary, unverified]"),
    "kstar_slope_predicted": Claim("log K* vs log N slope, predicted 1/nu (Fig 6A)", "1/0.7 = 1.43"),
    # a sweep without K* at two N: the slopes' rows say so
    "kstar_slope_measured_missing": Claim(
        "log K* vs log N slope, measured (Fig 6A)", "1.41 [secondary]", "needs K* at >= 2 values of N"
    ),
    "kstar_slope_predicted_missing": Claim(
        "log K* vs log N slope, predicted (Fig 6A)", "1/nu = 1.43", "needs K* at >= 2 values of N"
    ),
    "kstar_N100": Claim("K*(N = 100) of order 1e4", "about 1e4 [inferred from the paper's grids]"),
    "t_icl_linear_run": Claim(
        "median t_ICL linear in N at K = infinity (Fig 6B)",
        "linear fit of medians (no CI)",
        "needs a sweep over N at K = infinity",
    ),
    "t_icl_linear": Claim(
        "median t_ICL linear in N at K = infinity (Fig 6B)",
        "linear fit of medians (no CI)",
        "needs K = infinity cells at >= 2 values of N",
    ),
    "t_icl_proportional": Claim("t_ICL proportional to N (theory t_ICL ~ N sqrt(2 pi) e^-beta0)", "log-log exponent 1"),
    "bimodal": Claim(
        "bimodal outcomes near K* (Fig 6C, N = 100, K = 9666)",
        "bimodal histogram, no statistic",
        "needs a K* estimate at an N in the abrupt regime",
    ),
    "balanced": Claim(
        "balanced contexts reduce ICL (Fig 6E)",
        "fewer runs with ICL accuracy > 0.75",
        "needs balanced and standard cells at the same K",
    ),
}


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One row of *Beside the paper*: the claim, the paper's value, ours, the verdict (with the slope rows,
    the estimate and its CI as numbers)."""

    claim: str
    paper: str
    icl_race: str
    verdict: str
    numbers: bool = False  # a slope row: report.json also carries estimate and ci
    estimate: float | None = None
    ci: list | None = None

    @classmethod
    def of(cls, claim: Claim, icl_race: str, verdict: str, **numbers) -> Comparison:
        return cls(claim.claim, claim.paper, icl_race, verdict, bool(numbers), **numbers)

    @classmethod
    def missing(cls, claim: Claim, verdict: str = NOT_MEASURED) -> Comparison:
        return cls.of(claim, claim.needs, verdict)

    def to_json(self) -> dict:
        out: dict[str, object] = {"claim": self.claim, "paper": self.paper, "icl_race": self.icl_race}
        if self.numbers:
            out |= {"estimate": self.estimate, "ci": self.ci}
        return out | {"verdict": self.verdict}


def bimodality_verdict(samples: list[Modality]) -> str:
    """The paper's bimodality claim against final-accuracy samples: agrees or disagrees only where the dip
    test, BC and Delta BIC agree on enough seeds; a split between them is said, not voted away."""
    known = [st for st in samples if st.agreement is not None and st.n >= MIN_N]
    if not known:
        settled = next((st.not_measured for st in samples if st.not_measured), None)
        return (
            f"{settled} (final accuracy)"
            if settled
            else f"not measured in this directory (fewer than {MIN_N} seeds: underpowered)"
        )
    split = sum(st.agreement == "disagree" for st in known)
    if split:
        return (
            f"inconclusive (in {split} of {len(known)} cells the dip test and BC / Delta BIC disagree)"
            if len(known) > 1
            else "inconclusive (the dip test and BC / Delta BIC disagree)"
        )
    two = sum(st.agreement == "bimodal" for st in known)
    return (
        "agrees"
        if two == len(known)
        else "disagrees (no bimodality detected)"
        if not two
        else f"mixed ({two} of {len(known)} cells bimodal)"
    )


# ---- one run ---------------------------------------------------------------------------------------------


def _run_bimodality(cell: CellStats) -> Comparison:
    claim = CLAIMS["bimodal"]
    stats = cell.statistics
    if not isinstance(stats, Statistics) or cell.variant == "infinite":
        return Comparison.of(claim, "not a finite-K cell", NOT_MEASURED)
    b = stats.bimodality
    st = b.final_icl_acc
    txt = (
        f"final ICL accuracy: dip p {p_eq(st.dip_p)}, BC = {num(st.bc, '{:.2f}')}, Delta BIC = "
        f"{num(st.delta_bic, '{:.1f}')}; log10 t_ICL of acquired seeds: dip p "
        f"{p_eq(b.log10_t_acquired.dip_p)}; acquired {pct(stats.acquired_fraction)}"
    )
    verdict = (
        f"{NOT_MEASURED} (this cell is not near the threshold)" if not b.near_threshold else bimodality_verdict([st])
    )
    return Comparison.of(claim, txt, verdict)


def run_comparisons(cell: CellStats) -> list[Comparison]:
    """One run measures the bimodality of its own cell; the other claims need a sweep."""
    return [
        Comparison.missing(CLAIMS["kstar_slope_run"]),
        Comparison.missing(CLAIMS["t_icl_linear_run"]),
        _run_bimodality(cell),
        Comparison.missing(CLAIMS["balanced"]),
    ]


# ---- a sweep ---------------------------------------------------------------------------------------------


def _regime_Ns(regime: list[RegimeRow]) -> str:
    return ", ".join(str(r.N) for r in regime if r.abrupt) or "none"


def _rule_verdict(regime: list[RegimeRow]) -> str | None:
    """A verdict that replaces the comparison when the cells do not use the paper's acquisition rule."""
    if all(r.paper_rule for r in regime):
        return None
    return "not comparable (acquisition rule differs from the paper's: the first evaluation above 0.95)"


def _slope_text(s: Slope, t: Threshold) -> tuple[str, Slope | None]:
    """Our K* slope `s` of one group `t` as text (in the regime first, where it is measured), and the
    in-regime slope its verdict reads (None: not measured there)."""
    s1, ss = t.kstar_slope_N_minus_1, t.kstar_slope_paper_sigmoid
    extra = f"; against log(N-1): {s1.slope:.2f} {ci_text(s1.slope_ci, '{:.2f}')}" if isinstance(s1, Slope) else ""
    if isinstance(ss, Slope):
        extra += f"; paper's sigmoid estimator: {ss.slope:.2f} {ci_text(ss.slope_ci, '{:.2f}')}"
    txt = f"{s.slope:.2f} {ci_text(s.slope_ci, '{:.2f}')} from {s.n_points} values of N{extra} ({t.label})"
    reg = t.in_regime
    rs = reg.kstar_slope if reg is not None and isinstance(reg.kstar_slope, Slope) else None
    if reg is not None and rs is not None:
        local = "; ".join(
            f"N = {ls.N[0]}-{ls.N[1]}: {ls.fit.slope:.2f} {ci_text(ls.fit.slope_ci, '{:.2f}')}"
            for ls in reg.local_slopes
            if isinstance(ls.fit, Slope) and isinstance(ls.N, list)
        )
        txt = (
            f"in the regime (N = {', '.join(map(str, reg.N))}): {rs.slope:.2f} "
            f"{ci_text(rs.slope_ci, '{:.2f}')}" + (f" (local: {local})" if len(reg.N) > 2 else "") + f"; all N: {txt}"
        )
    return txt, rs


def _kstar_slopes(standard: list[Threshold], regime: list[RegimeRow]) -> list[Comparison]:
    slopes = [(s, t) for t in standard if isinstance(s := t.kstar_slope, Slope)]
    if not slopes:
        return [
            Comparison.missing(CLAIMS["kstar_slope_measured_missing"]),
            Comparison.missing(CLAIMS["kstar_slope_predicted_missing"]),
        ]
    rows = []
    for s, t in slopes:
        txt, rs = _slope_text(s, t)
        for name, ref in (
            ("kstar_slope_measured", PAPER.kstar_slope_measured),
            ("kstar_slope_predicted", PAPER.kstar_slope_predicted),
        ):
            verdict = (
                _rule_verdict(regime) or interval_verdict(rs.slope_ci, ref)
                if rs is not None
                else f"not measured in the regime (N in the abrupt regime: {_regime_Ns(regime)})"
            )
            estimate, ci = (rs.slope, rs.slope_ci) if rs is not None else (None, None)
            rows.append(Comparison.of(CLAIMS[name], txt, verdict, estimate=estimate, ci=ci))
    return rows


def _kstar_N100(standard: list[Threshold]) -> list[Comparison]:
    rows = []
    order = math.log10(PAPER.kstar_N100_order)
    for t in standard:
        a = t.acquisition[100].fit if 100 in t.acquisition else None
        if not isinstance(a, Logistic):
            continue
        ci = a.log10_kstar_ci
        v = (
            "not measured (no CI)"
            if ci[0] is None
            else ("agrees" if ci[0] <= order + 0.5 and ci[1] >= order - 0.5 else "disagrees")
        )
        rows.append(
            Comparison.of(
                CLAIMS["kstar_N100"],
                f"{a.kstar:,.0f} {ci_text(a.kstar_ci)} ({t.label})",
                v + " (order of magnitude: CI overlaps 10^3.5-10^4.5)",
            )
        )
    return rows


def _t_icl_vs_N(scalings: list[Scaling], regime: list[RegimeRow]) -> list[Comparison]:
    meds = [(s, lines) for s in scalings if isinstance(lines := s.median_vs_N.fit, Lines)]
    if not meds:
        return [Comparison.missing(CLAIMS["t_icl_linear"])]
    rows = []
    no_regime = f"not measured in the regime (N in the abrupt regime: {_regime_Ns(regime)})"
    for s, every_N in meds:
        reg = s.in_regime
        in_regime = reg.median_vs_N if reg is not None else None
        used = in_regime.fit if isinstance(in_regime, MedianVsN) and isinstance(in_regime.fit, Lines) else None
        where = (
            f"in the regime (N = {', '.join(map(str, reg.N))})"
            if used is not None and reg is not None
            else f"all N: {', '.join(str(p.N) for p in s.median_vs_N.per_N)}"
        )
        fit = used or every_N
        lin, ll = fit.linear, fit.loglog
        if not (isinstance(lin, Slope) and isinstance(ll, Slope)):  # >= 2 N with a median: both are fitted
            continue
        txt = (
            f"{where}: slope {lin.slope:,.1f} {ci_text(lin.slope_ci, '{:,.1f}')} steps per token, intercept "
            f"{lin.intercept:,.0f} {ci_text(lin.intercept_ci, '{:,.0f}')}"
        )
        sv = sign_verdict(lin.slope_ci, +1)
        if fit.quadratic is not None:
            q = fit.quadratic
            txt += f"; quadratic term {q.c2:,.0f} {ci_text(q.c2_ci)}"
            curved = q.c2_ci[0] is not None and (q.c2_ci[0] > 0 or q.c2_ci[1] < 0)
            verdict = "disagrees (curved: quadratic term's CI excludes 0)" if curved else sv
        else:
            verdict = "inconclusive (2 values of N: linearity untestable)" if sv == "agrees" else sv
        rows.append(
            Comparison.of(
                CLAIMS["t_icl_linear"], txt + f" ({s.label})", (_rule_verdict(regime) or verdict) if used else no_regime
            )
        )
        rows.append(
            Comparison.of(
                CLAIMS["t_icl_proportional"],
                f"{where}: {ll.slope:.2f} {ci_text(ll.slope_ci, '{:.2f}')} ({s.label})",
                (_rule_verdict(regime) or interval_verdict(ll.slope_ci, 1.0)) if used else no_regime,
            )
        )
    return rows


def _near_kstar(standard: list[Threshold], regime: list[RegimeRow]) -> Comparison:
    claim = CLAIMS["bimodal"]
    nears: list[NearKstar] = [n for t in standard if t.in_regime is not None for n in t.in_regime.near_kstar]
    if not nears:
        return Comparison.missing(claim, f"not measured in the regime (N in the abrupt regime: {_regime_Ns(regime)})")
    pick = [n for n in nears if n.N == 100] or nears
    parts = [
        f"N={n.N}, K={n.K:,}: final-accuracy dip p {p_eq(n.bimodality.final_icl_acc.dip_p)}, BC = "
        f"{num(n.bimodality.final_icl_acc.bc, '{:.2f}')}, acquired {pct(n.acquired_fraction)}"
        for n in pick
    ]
    verdict = _rule_verdict(regime) or bimodality_verdict([n.bimodality.final_icl_acc for n in pick])
    return Comparison.of(claim, "; ".join(parts), verdict)


def _balanced(balanced: list[Balanced]) -> list[Comparison]:
    if not balanced:
        return [Comparison.missing(CLAIMS["balanced"])]
    rows = []
    for b in balanced:
        a, q = b.acc_above, b.acquired
        txt = (
            f"standard - balanced, mean over {len(b.K)} (N, K) cells: {a.mean_diff:+.2f} "
            f"{ci_text(a.mean_diff_ci, '{:+.2f}')} (accuracy > 0.75); {q.mean_diff:+.2f} "
            f"{ci_text(q.mean_diff_ci, '{:+.2f}')} (acquired) ({b.label})"
        )
        rows.append(Comparison.of(CLAIMS["balanced"], txt, sign_verdict(a.mean_diff_ci, +1)))
    return rows


def sweep_comparisons(
    thresholds: list[Threshold], scalings: list[Scaling], balanced: list[Balanced], regime: list[RegimeRow]
) -> list[Comparison]:
    """Every claim against a sweep's typed sections; sweep verdicts read only the N in the abrupt regime."""
    # The paper's K*, bimodality and slope numbers are for standard contexts: compare those groups only.
    standard = [t for t in thresholds if t.variant == "standard"]
    return (
        _kstar_slopes(standard, regime)
        + _kstar_N100(standard)
        + _t_icl_vs_N(scalings, regime)
        + [_near_kstar(standard, regime)]
        + _balanced(balanced)
    )


def comparison_markdown(rows: list[Comparison], scale: str) -> list[str]:
    md = [
        "## Beside the paper",
        "",
        f"Verdicts from runs at {scale}.",
        "",
        "| claim | paper | icl-race (95% CI) | verdict |",
        "|---|---|---|---|",
    ]
    md += [f"| {r.claim} | {r.paper} | {r.icl_race} | {r.verdict} |" for r in rows]
    md += [
        "",
        "Verdicts: a number agrees when it lies inside our 95% CI; a directional claim agrees when the CI "
        "excludes zero on the paper's side and is inconclusive when it includes zero. Sweep verdicts use only the "
        "N in the abrupt regime (table *Regime per N*), where the paper's mechanism is present.",
        "",
    ]
    return md
