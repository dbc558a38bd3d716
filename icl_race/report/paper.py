"""The paper's claims (arXiv 2412.00104) beside a classification run's or sweep's estimates, with verdicts,
and the methods paragraph every classification report ends with."""

from __future__ import annotations

import math

from icl_race import config
from icl_race.analysis.bimodality import MIN_N
from icl_race.report.format import ci_text, num, p_eq, pct

PAPER = {
    "kstar_slope_measured": 1.41,  # [secondary]: not found in the code or any available text
    "kstar_slope_predicted": 1 / 0.7,  # 1/nu with nu = 0.7 (the reference line of Fig 6A)
    "bimodal_cell": {"N": 100, "K": 9666},  # Fig 6C
    "kstar_N100_order": 1e4,  # [inferred] from the paper's grid choices
    "balanced_metric_threshold": 0.75,  # Fig 6E title: fraction of runs with ICL accuracy > 0.75
}
# Fields that do not change what a cell measures: cells that differ only in them are pooled.
IGNORED_FIELDS = {
    "ensemble.seeds",
    "ensemble.first_seed",
    "ensemble.root_seed",
    "ensemble.block",
    "train.evals_per_chunk",
    "task.K_max",
    "train.eval_batch",
}


def flat(cfg: dict) -> dict:
    return {f"{s}.{k}": v for s, sec in cfg.items() if isinstance(sec, dict) for k, v in sec.items()}


SCALE_FIELDS = {"model.width": "MLP width", "train.lr": "lr"}


def scale_text(configs: list[dict]) -> str:
    """The MLP width(s) and learning rate(s) of the runs a comparison reads, beside the paper's: a verdict
    at a reduced scale is the miniature's (experiments/README.md, *Miniature to paper*, per width)."""
    ref = flat(config.from_dict({}).to_dict())
    ours = [flat(c) for c in configs]
    seen = {k: sorted({c.get(k, ref[k]) for c in ours}) for k in SCALE_FIELDS}
    text = ", ".join(f"{name} {', '.join(f'{v:g}' for v in seen[k])}" for k, name in SCALE_FIELDS.items())
    return text + " (the paper: " + ", ".join(f"{name} {ref[k]:g}" for k, name in SCALE_FIELDS.items()) + ")"


def paper_differences(cfg: dict) -> list[str]:
    """Config fields that differ from the paper's settings (the defaults of the classification race)."""
    ref = flat(config.from_dict({}).to_dict())
    ours = flat(cfg)
    skip = IGNORED_FIELDS | {"train.early_stop", "train.stop_when_all_acquired"}
    return [
        f"{k}={ours[k]!r} (paper {ref[k]!r})" for k in sorted(ours) if k in ref and k not in skip and ours[k] != ref[k]
    ]


def bimodality_verdict(samples: list[dict]) -> str:
    """The paper's bimodality claim against final-accuracy samples: agrees or disagrees only where the dip
    test, BC and Delta BIC agree on enough seeds; a split between them is said, not voted away."""
    known = [st for st in samples if st["agreement"] is not None and st["n"] >= MIN_N]
    if not known:
        settled = next((st["not_measured"] for st in samples if st.get("not_measured")), None)
        return (
            f"{settled} (final accuracy)"
            if settled
            else f"not measured in this directory (fewer than {MIN_N} seeds: underpowered)"
        )
    split = sum(st["agreement"] == "disagree" for st in known)
    if split:
        return (
            f"inconclusive (in {split} of {len(known)} cells the dip test and BC / Delta BIC disagree)"
            if len(known) > 1
            else "inconclusive (the dip test and BC / Delta BIC disagree)"
        )
    two = sum(st["agreement"] == "bimodal" for st in known)
    return (
        "agrees"
        if two == len(known)
        else "disagrees (no bimodality detected)"
        if not two
        else f"mixed ({two} of {len(known)} cells bimodal)"
    )


def run_comparisons(cell) -> list[dict]:
    rows = [
        {
            "claim": "log K* vs log N slope (Fig 6A)",
            "paper": "1.41 measured [secondary]; 1/nu = 1.43 predicted",
            "icl_race": "needs a sweep over K and N",
            "verdict": "not measured in this directory",
        },
        {
            "claim": "median t_ICL linear in N at K = infinity (Fig 6B)",
            "paper": "linear fit of medians (no CI)",
            "icl_race": "needs a sweep over N at K = infinity",
            "verdict": "not measured in this directory",
        },
        {
            "claim": "balanced contexts reduce ICL (Fig 6E)",
            "paper": "fewer runs with ICL accuracy > 0.75",
            "icl_race": "needs balanced and standard cells at the same K",
            "verdict": "not measured in this directory",
        },
    ]
    bim = {"claim": "bimodal outcomes near K* (Fig 6C, N = 100, K = 9666)", "paper": "bimodal histogram, no statistic"}
    if not cell.ok or cell.variant == "infinite":
        bim |= {"icl_race": "not a finite-K cell", "verdict": "not measured in this directory"}
    else:
        b = cell.bimodality
        st = b["final_icl_acc"]
        txt = (
            f"final ICL accuracy: dip p {p_eq(st['dip_p'])}, BC = {num(st['bc'], '{:.2f}')}, Delta BIC = "
            f"{num((st['mixture'] or {}).get('delta_bic'), '{:.1f}')}; log10 t_ICL of acquired seeds: dip p "
            f"{p_eq(b['log10_t_acquired']['dip_p'])}; acquired {pct(cell.acquired_fraction)}"
        )
        verdict = (
            "not measured in this directory (this cell is not near the threshold)"
            if not b["near_threshold"]
            else bimodality_verdict([st])
        )
        bim |= {"icl_race": txt, "verdict": verdict}
    rows.insert(2, bim)
    return rows


def sweep_comparisons(rep) -> list[dict]:
    from icl_race.analysis.threshold import interval_verdict, sign_verdict

    rows = []
    # The paper's K*, bimodality and slope numbers are for standard contexts: compare those groups only.
    standard = [t for t in rep.thresholds if t.variant == "standard"]
    slopes = [t for t in standard if t.kstar_slope.get("ok")]
    if not slopes:
        for name, val in (("measured", "1.41 [secondary]"), ("predicted", "1/nu = 1.43")):
            rows.append(
                {
                    "claim": f"log K* vs log N slope, {name} (Fig 6A)",
                    "paper": val,
                    "icl_race": "needs K* at >= 2 values of N",
                    "verdict": "not measured in this directory",
                }
            )
    for t in slopes:
        s, s1, ss = t.kstar_slope, t.kstar_slope_N_minus_1, t.kstar_slope_paper_sigmoid
        extra = f"; against log(N-1): {s1['slope']:.2f} {ci_text(s1.get('slope_ci'), '{:.2f}')}" if s1.get("ok") else ""
        extra += (
            f"; paper's sigmoid estimator: {ss['slope']:.2f} {ci_text(ss.get('slope_ci'), '{:.2f}')}"
            if ss.get("ok")
            else ""
        )
        txt = f"{s['slope']:.2f} {ci_text(s.get('slope_ci'), '{:.2f}')} from {s['n_points']} values of N{extra} ({t.label})"
        reg = t.in_regime or {"N": [], "kstar_slope": {"ok": False}}
        rs = reg["kstar_slope"]
        if rs.get("ok"):
            est, ci = rs["slope"], rs.get("slope_ci")
            local = "; ".join(
                f"N = {a}-{b}: {ls['slope']:.2f} {ci_text(ls.get('slope_ci'), '{:.2f}')}"
                for (a, b), ls in ((x["N"], x) for x in reg["local_slopes"])
                if ls.get("ok")
            )
            txt = (
                f"in the regime (N = {', '.join(map(str, reg['N']))}): {est:.2f} {ci_text(ci, '{:.2f}')}"
                + (f" (local: {local})" if len(reg["N"]) > 2 else "")
                + f"; all N: {txt}"
            )
        for name, paper, ref in (
            ("measured", "1.41 [secondary, unverified]", PAPER["kstar_slope_measured"]),
            ("predicted 1/nu", "1/0.7 = 1.43", PAPER["kstar_slope_predicted"]),
        ):
            verdict = (
                _rule_verdict(rep) or interval_verdict(rs.get("slope_ci"), ref)
                if rs.get("ok")
                else f"not measured in the regime (N in the abrupt regime: {_regime_Ns(rep)})"
            )
            rows.append(
                {
                    "claim": f"log K* vs log N slope, {name} (Fig 6A)",
                    "paper": paper,
                    "icl_race": txt,
                    "estimate": rs.get("slope"),
                    "ci": rs.get("slope_ci"),
                    "verdict": verdict,
                }
            )
    # K*(N = 100)
    k100 = [(t, t.acquisition[100]) for t in standard if 100 in t.acquisition and t.acquisition[100].get("ok")]
    for t, a in k100:
        ci = a["log10_kstar_ci"]
        lo, hi = math.log10(PAPER["kstar_N100_order"]) - 0.5, math.log10(PAPER["kstar_N100_order"]) + 0.5
        v = "not measured (no CI)" if ci[0] is None else ("agrees" if ci[0] <= hi and ci[1] >= lo else "disagrees")
        rows.append(
            {
                "claim": "K*(N = 100) of order 1e4",
                "paper": "about 1e4 [inferred from the paper's grids]",
                "icl_race": f"{a['kstar']:,.0f} {ci_text(a['kstar_ci'])} ({t.label})",
                "verdict": v + " (order of magnitude: CI overlaps 10^3.5-10^4.5)",
            }
        )
    # t_ICL vs N
    meds = [s for s in rep.t_icl_vs_N if s.median_vs_N.get("ok")]
    if not meds:
        rows.append(
            {
                "claim": "median t_ICL linear in N at K = infinity (Fig 6B)",
                "paper": "linear fit of medians (no CI)",
                "icl_race": "needs K = infinity cells at >= 2 values of N",
                "verdict": "not measured in this directory",
            }
        )
    for s in meds:
        m = s.median_vs_N
        reg = (s.in_regime or {}).get("median_vs_N") or {"ok": False}
        used = reg if reg.get("ok") else None
        where = (
            f"in the regime (N = {', '.join(map(str, s.in_regime['N']))})"
            if used
            else f"all N: {', '.join(str(p['N']) for p in m['per_N'])}"
        )
        lin = (used or m)["linear"]
        txt = (
            f"{where}: slope {lin['slope']:,.1f} {ci_text(lin.get('slope_ci'), '{:,.1f}')} steps per token, intercept "
            f"{lin['intercept']:,.0f} {ci_text(lin.get('intercept_ci'), '{:,.0f}')}"
        )
        sv = sign_verdict(lin.get("slope_ci"), +1)
        if "quadratic" in (used or m):
            q = (used or m)["quadratic"]
            txt += f"; quadratic term {q['c2']:,.0f} {ci_text(q['c2_ci'])}"
            curved = q["c2_ci"][0] is not None and (q["c2_ci"][0] > 0 or q["c2_ci"][1] < 0)
            verdict = "disagrees (curved: quadratic term's CI excludes 0)" if curved else sv
        else:
            verdict = "inconclusive (2 values of N: linearity untestable)" if sv == "agrees" else sv
        no_regime = f"not measured in the regime (N in the abrupt regime: {_regime_Ns(rep)})"
        rows.append(
            {
                "claim": "median t_ICL linear in N at K = infinity (Fig 6B)",
                "paper": "linear fit of medians (no CI)",
                "icl_race": txt + f" ({s.label})",
                "verdict": (_rule_verdict(rep) or verdict) if used else no_regime,
            }
        )
        ll = (used or m)["loglog"]
        rows.append(
            {
                "claim": "t_ICL proportional to N (theory t_ICL ~ N sqrt(2 pi) e^-beta0)",
                "paper": "log-log exponent 1",
                "icl_race": f"{where}: {ll['slope']:.2f} {ci_text(ll.get('slope_ci'), '{:.2f}')} ({s.label})",
                "verdict": (_rule_verdict(rep) or interval_verdict(ll.get("slope_ci"), 1.0)) if used else no_regime,
            }
        )
    # bimodality near K*
    nears = [(t, n) for t in standard for n in (t.in_regime or {}).get("near_kstar", [])]
    if not nears:
        rows.append(
            {
                "claim": "bimodal outcomes near K* (Fig 6C, N = 100, K = 9666)",
                "paper": "bimodal histogram, no statistic",
                "icl_race": "needs a K* estimate at an N in the abrupt regime",
                "verdict": f"not measured in the regime (N in the abrupt regime: {_regime_Ns(rep)})",
            }
        )
    else:
        pick = [p for p in nears if p[1]["N"] == 100] or nears
        parts = [
            f"N={n['N']}, K={n['K']:,}: final-accuracy dip p {p_eq(st['dip_p'])}, BC = {num(st['bc'], '{:.2f}')}, "
            f"acquired {pct(n['acquired_fraction'])}"
            for st, n in ((n["bimodality"]["final_icl_acc"], n) for _, n in pick)
        ]
        rows.append(
            {
                "claim": "bimodal outcomes near K* (Fig 6C, N = 100, K = 9666)",
                "paper": "bimodal histogram, no statistic",
                "icl_race": "; ".join(parts),
                "verdict": _rule_verdict(rep)
                or bimodality_verdict([n["bimodality"]["final_icl_acc"] for _, n in pick]),
            }
        )
    # balanced
    if not rep.balanced_vs_standard:
        rows.append(
            {
                "claim": "balanced contexts reduce ICL (Fig 6E)",
                "paper": "fewer runs with ICL accuracy > 0.75",
                "icl_race": "needs balanced and standard cells at the same K",
                "verdict": "not measured in this directory",
            }
        )
    for b in rep.balanced_vs_standard:
        a = b["acc_above_0.75"]
        q = b["acquired"]
        rows.append(
            {
                "claim": "balanced contexts reduce ICL (Fig 6E)",
                "paper": "fewer runs with ICL accuracy > 0.75",
                "icl_race": (
                    f"standard - balanced, mean over {len(b['K'])} (N, K) cells: {a['mean_diff']:+.2f} "
                    f"{ci_text(a['mean_diff_ci'], '{:+.2f}')} (accuracy > 0.75); {q['mean_diff']:+.2f} "
                    f"{ci_text(q['mean_diff_ci'], '{:+.2f}')} (acquired) ({b['label']})"
                ),
                "verdict": sign_verdict(a["mean_diff_ci"], +1),
            }
        )
    return rows


def _regime_Ns(rep: dict) -> str:
    return ", ".join(str(r["N"]) for r in rep.regime if r["abrupt"]) or "none"


def _rule_verdict(rep: dict) -> str | None:
    """A verdict that replaces the comparison when the cells do not use the paper's acquisition rule."""
    if all(r["paper_rule"] for r in rep.regime):
        return None
    return "not comparable (acquisition rule differs from the paper's: the first evaluation above 0.95)"


def comparison_markdown(rows: list[dict], scale: str) -> list[str]:
    md = [
        "## Beside the paper",
        "",
        f"Verdicts from runs at {scale}.",
        "",
        "| claim | paper | icl-race (95% CI) | verdict |",
        "|---|---|---|---|",
    ]
    md += [f"| {r['claim']} | {r['paper']} | {r['icl_race']} | {r['verdict']} |" for r in rows]
    md += [
        "",
        "Verdicts: a number agrees when it lies inside our 95% CI; a directional claim agrees when the CI "
        "excludes zero on the paper's side and is inconclusive when it includes zero. Sweep verdicts use only the "
        "N in the abrupt regime (table *Regime per N*), where the paper's mechanism is present.",
        "",
    ]
    return md


def methods_markdown() -> list[str]:
    return [
        "## Methods",
        "",
        "- Seeds that never acquired ICL are right-censored at the budget (Kaplan-Meier, censored likelihoods), "
        "never dropped; diverged seeds (results.npz `diverged`) are excluded and counted.",
        "- Kaplan-Meier: scipy.stats.ecdf, Greenwood variance with a log-log band; the median's CI inverts the "
        "band. Never-acquired fraction: Wilson interval.",
        "- Lognormal: censored maximum likelihood on all seeds, Wald CIs. Power law: Pareto above xmin (Clauset's KS "
        "choice of xmin), censored MLE; compared with a lognormal truncated at xmin by Vuong's likelihood ratio.",
        "- Bimodality: values are first spread uniformly over their grid cell (t_ICL over its evaluation period, "
        "accuracy over 1/eval_size) so that ties do not fake modes; Hartigan's dip test (diptest package), "
        "bimodality coefficient, 1- vs 2-Gaussian mixture BIC (sds floored at 10% of the sample's). A verdict "
        "is given where the three agree; where they do not, the report says which points where. Fewer than "
        f"{MIN_N} values are underpowered for the dip test.",
        "- Outcomes (`analysis/outcome.py`): persistent, transient (ICL below 0.9 for >= 10 consecutive "
        "evaluations after t_ICL), censored, diverged; counts with Wilson intervals; the time from t_ICL to the "
        "fall by Kaplan-Meier, persistent seeds censored at the end. Final accuracy = a seed's last finite "
        "evaluation.",
        "- Sweeps: logistic fit of the acquired fraction vs log10 K (K* = midpoint), the paper's 4-parameter "
        "sigmoid on final ICL accuracy (only with >= 5 values of K spanning the transition), bootstrap "
        "percentile CIs resampling seeds within cells; cells that differ only in their budget, evaluation "
        "period or retirement (train.stop_threshold, train.settle_iwl) share one K*(N) or t_ICL(N) group, and a seed "
        "run in two of them at one K counts once, read from the one without train.settle_iwl; a run "
        "with train.settle_iwl does not measure final accuracy (a settled seed ends when it retired), so it "
        "gets no final-accuracy bimodality or paper's sigmoid; two "
        "t_ICL distributions are compared by a log-rank test "
        "(scipy.stats.logrank). Each bootstrap draws from its own child of one SeedSequence (`--seed`), named by "
        "its section and the cells it resamples, so adding or reordering a section changes no other number.",
        "",
    ]
