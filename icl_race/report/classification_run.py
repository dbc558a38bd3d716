"""Classification reports of one run (task.kind = "classification"): the t_ICL distribution with censored
seeds (Kaplan-Meier, never-acquired fraction, tail fits), bimodality, trajectories, beside the paper; and
the `hist` text view.

Seeds: t_icl < 0 means "not acquired within what the run observed" and is right-censored there
(`rundir.Run.censor_at`); diverged seeds are excluded from every statistic and counted."""

from __future__ import annotations

import numpy as np

from icl_race import rundir
from icl_race.analysis import regime as rg
from icl_race.analysis.race import first_passage
from icl_race.config import ConfigError
from icl_race.plots import classification as F
from icl_race.report.format import ci_text, num, p_value, pct
from icl_race.report.paper import (PAPER, comparison_markdown, methods_markdown, paper_differences,
                                   run_comparisons)

REQUIRED = ("icl_acc", "iwl_acc")


def run_dict(run: rundir.Run) -> dict:
    missing = [k for k in REQUIRED if k not in run.curves] + ([] if "icl" in run.times else ["t_icl"])
    if missing:
        raise ConfigError(f"{run.dir}/results.npz: missing {', '.join(missing)}")
    cfg, keep = run.config, run.kept
    t = run.t("icl")
    icl, iwl = np.asarray(run.curve("icl_acc"), float), np.asarray(run.curve("iwl_acc"), float)
    final = icl[:, -1] if icl.ndim == 2 and icl.shape[1] else np.full(t.size, np.nan)
    levels = (cfg.get("train") or {}).get("icl_levels") or [0.6]
    start = rg.level_event(min(levels))
    # Runs written before the levels were recorded: the same first passage read off the stored curve
    # (equal to the device's, tests/test_regime.py).
    t_start = run.t(start) if start in run.times else first_passage(icl, run.eval_steps, min(levels))
    extra = {}
    ref = run.curves.get("icl_ref_acc")
    if ref is not None and ref.ndim == 2 and ref.shape[1]:
        extra["final_icl_ref_acc"] = np.asarray(ref, float)[keep][:, -1]
    return {"dir": run.dir, "config": cfg, "t_icl": t, "censor_at": run.censor_at("icl"), "budget": run.budget,
            "steps_run": run.steps_run, "n_total": int(keep.size), "n_diverged": int(run.diverged.sum()),
            "eval_steps": run.eval_steps, "icl_acc": icl, "iwl_acc": iwl, "final_icl_acc": final,
            "t_start": np.asarray(t_start, np.int64), "start_level": float(min(levels)),
            "seed_ids": run.seed_ids[keep],
            "root_seeds": np.full(int(keep.sum()), int((cfg.get("ensemble") or {}).get("root_seed", 0))), **extra}


def k_label(cfg: dict) -> str:
    return "inf" if cfg["task"].get("variant") == "infinite" else f"{cfg['task'].get('K')}"


def cell_label(cfg: dict) -> str:
    t = cfg["task"]
    return f"{t.get('variant', 'standard')} K={k_label(cfg)} N={t.get('N')}"


def dequantized(run: dict) -> tuple[np.ndarray, np.ndarray]:
    """log10 t_ICL of the seeds that acquired and the final ICL accuracies, each spread over its grid
    cell (the evaluation period that t ended; 1 / eval_size) so that ties do not fake modes."""
    from icl_race.analysis import bimodality as bm

    hit = run["t_icl"][run["t_icl"] >= 0].astype(float)
    log_t = np.log10(bm.dequantize(hit, bm.grid_periods(hit, run["eval_steps"]))) if hit.size else hit
    final_dq = bm.dequantize(run["final_icl_acc"], 1.0 / float(run["config"]["train"].get("eval_size", 1) or 1), seed=1)
    return log_t, final_dq


def analyze_cell(run: dict, tails: bool = True) -> dict:
    """Every per-cell statistic: survival, never-acquired fraction, tail fits, bimodality."""
    from icl_race.analysis import bimodality as bm
    from icl_race.analysis import survival as sv

    cfg, t = run["config"], run["t_icl"]
    out = {"label": cell_label(cfg), "eval_size": cfg["train"].get("eval_size"), "K": None if cfg["task"].get("variant") == "infinite" else cfg["task"].get("K"),
           "N": cfg["task"].get("N"), "variant": cfg["task"].get("variant", "standard"),
           "n_seeds": int(t.size), "n_diverged": run["n_diverged"], "budget": run["budget"],
           "steps_run": run["steps_run"], "censor_at": run["censor_at"], "acquired": int(np.sum(t >= 0))}
    if t.size == 0:
        return out | {"ok": False, "reason": "no seeds to analyse (all diverged)"}
    times, observed = sv.censored_times(t, run["censor_at"])
    out["kaplan_meier"] = sv.kaplan_meier(times, observed)
    out["never_acquired"] = sv.never_acquired(observed)
    out["acquired_fraction"] = 1 - out["never_acquired"]["fraction"]
    if tails:
        out["lognormal"] = sv.fit_lognormal(times, observed)
        out["tail"] = sv.fit_tail(times, observed)
    log_t, final_dq = dequantized(run)
    with_cens = np.concatenate([log_t, np.full(int((t < 0).sum()), np.log10(float(run["censor_at"])))])
    final = run["final_icl_acc"]
    frac = out["acquired_fraction"]
    out["bimodality"] = {
        "log10_t_acquired": bm.summarize(log_t),
        "log10_t_censored_at_budget": bm.summarize(with_cens),
        "final_icl_acc": bm.summarize(final_dq),
        "near_threshold": bool(0.1 <= frac <= 0.9),
    }
    tr = cfg["train"]
    threshold = float(tr.get("icl_threshold", 0.95))
    out["regime"] = rg.summarize(t, run["t_start"], run["icl_acc"], run["eval_steps"], threshold)
    out["regime"] |= {"start_level": run["start_level"], "threshold": threshold,
                      "effective_threshold": rg.effective_threshold(
                          threshold, int(tr.get("eval_size", 2000)), max(int(run["eval_steps"].size), 1),
                          int(tr.get("icl_confirm", 1))),
                      "looks": int(run["eval_steps"].size), "confirm": int(tr.get("icl_confirm", 1)),
                      "paper_rule": paper_rule(cfg)}
    out["final_icl_acc"] = {"median": float(np.nanmedian(final)) if final.size else None,
                            "above_0.75": int(np.sum(final > PAPER["balanced_metric_threshold"])),
                            "n": int(final.size)}
    if "final_icl_ref_acc" in run:
        ref = run["final_icl_ref_acc"]
        out["final_icl_ref_acc"] = {"median": float(np.median(ref)),
                                    "above_0.75": int(np.sum(ref > PAPER["balanced_metric_threshold"])), "n": int(ref.size)}
    out["ok"] = True
    return out


def paper_rule(cfg: dict) -> bool:
    """The paper's acquisition rule: t_ICL = the first evaluation above 0.95 (a single look). Its early
    stop at 0.99 does not move that first passage; it matters for final accuracies only."""
    tr = cfg["train"]
    return float(tr.get("icl_threshold", 0.95)) == 0.95 and int(tr.get("icl_confirm", 1)) == 1


def ci_cell(st: dict, fmt: str = "{:.3f}") -> str:
    return "-" if st["median"] is None else f"{fmt.format(st['median'])} {ci_text(st['ci'], fmt)} (n = {st['n']})"


def regime_markdown(cell: dict) -> list[str]:
    g = cell["regime"]
    lv = f"{g['start_level']:g}"
    reach = g["plateau_reaches_threshold"]
    return [f"Regime (is ICL acquired abruptly? `icl_race/analysis/regime.py`): rise fraction r = (t_ICL - t_{lv}) / t_ICL "
            f"over acquired seeds, t_{lv} the first passage over {lv}; plateau = ICL accuracy held right after the first "
            f"rise (median over [1.25, 1.5] t_{lv}).", "",
            "| statistic | median (95% CI) |", "|---|---|",
            f"| rise fraction r | {ci_cell(g['rise_fraction'])} |",
            f"| plateau after the first rise | {ci_cell(g['plateau'])} |",
            f"| plateau above the threshold | {'-' if reach is None else pct(reach)} of the seeds that rose |",
            f"| final ICL accuracy, acquired seeds | {ci_cell(g['final_icl_acc_acquired'])} |",
            f"| effective threshold of first passage | {g['effective_threshold']:.3f}: a seed holding this accuracy "
            f"passes {g['threshold']:g} within {g['looks']} evaluations of {cell.get('eval_size', '?')} sequences "
            f"with probability 1/2 ({g['confirm']} consecutive required) |", ""]


def median_text(cell: dict) -> str:
    km = cell["kaplan_meier"]
    if km["median"] is None:
        lo = km["median_ci"][0]
        return f"not reached by {cell['censor_at']:,}" + (f" (CI from {lo:,.0f})" if lo is not None else "")
    return f"{num(km['median'])} {ci_text(km['median_ci'])}"


def never_text(cell: dict) -> str:
    na = cell["never_acquired"]
    return f"{pct(na['fraction'])} [{pct(na['ci'][0])}, {pct(na['ci'][1])}] ({na['k']}/{na['n']})"


def bimod_row(name: str, st: dict) -> str:
    mix = st.get("mixture") or {}
    verdict = {True: "bimodal", False: "not bimodal", None: "too few values"}[st.get("bimodal")]
    return (f"| {name} | {st['n']} | {p_value(st.get('dip_p'))} | {num(st.get('bc'), '{:.2f}')} | "
            f"{num(mix.get('delta_bic'), '{:.1f}')} | {verdict} |")


def cell_markdown(cell: dict) -> list[str]:
    lines = []
    km = cell["kaplan_meier"]
    lines += [
        "| statistic | estimate (95% CI) |", "|---|---|",
        f"| seeds analysed | {cell['n_seeds']} ({cell['n_diverged']} diverged, excluded) |",
        f"| acquired ICL within {cell['censor_at']:,} steps | {cell['acquired']} |",
        f"| never acquired (right-censored at {cell['censor_at']:,}) | {never_text(cell)} |",
        f"| Kaplan-Meier median t_ICL (steps) | {median_text(cell)} |",
    ]
    ln = cell.get("lognormal") or {}
    if ln.get("ok"):
        lines.append(f"| lognormal fit (censored MLE): mu, sigma of ln t_ICL | {ln['mu']:.3f} {ci_text(ln['mu_ci'], '{:.3f}')}, "
                     f"{ln['sigma']:.3f} {ci_text(ln['sigma_ci'], '{:.3f}')} |")
    tail = cell.get("tail") or {}
    if tail.get("ok"):
        pl, lr = tail["power_law"], tail["likelihood_ratio"]
        lines.append(f"| power-law tail above xmin = {tail['xmin']:,.0f} ({tail['n_tail']} seeds): alpha | "
                     f"{pl['alpha']:.2f} {ci_text(pl['alpha_ci'], '{:.2f}')} |")
        lines.append(f"| tail comparison (Vuong): R, p | R = {lr['R']:.2f}, p = {lr['p']:.3g}: favours {lr['favours']} |")
    elif tail:
        lines.append(f"| tail fits | not done: {tail.get('reason', '')} |")
    lines.append("")
    b = cell["bimodality"]
    lines += ["Bimodality (dip test p < 0.05 = bimodal; BC > 0.555 and Delta BIC > 0 are supporting evidence):", "",
              "| sample | n | dip test p | BC | Delta BIC (1 - 2 comp.) | verdict |", "|---|---|---|---|---|---|",
              bimod_row("log10 t_ICL, acquired seeds", b["log10_t_acquired"]),
              bimod_row("log10 t_ICL, censored seeds at the budget (as Fig 6C draws it)", b["log10_t_censored_at_budget"]),
              bimod_row("final ICL accuracy", b["final_icl_acc"]), "",
              f"This cell is {'near' if b['near_threshold'] else 'not near'} the threshold "
              f"(acquired fraction {pct(cell['acquired_fraction'])}; near = 10-90%).", ""]
    return lines + regime_markdown(cell)


def run_report(run: dict, n_boot: int, rng) -> tuple[dict, str, dict]:

    cell = analyze_cell(run)
    cfg = run["config"]
    figs = {}
    if cell.get("ok"):
        km = cell["kaplan_meier"]
        figs["t_icl_hist"] = F.t_icl_histogram(run["t_icl"], run["censor_at"], km["median"], km["median_ci"],
                                               title=f"t_ICL, {cell['label']}, {cell['n_seeds']} seeds")
        figs["survival"] = F.survival_curve(km, cell.get("lognormal"), cell.get("tail"),
                                            title=f"Kaplan-Meier, {cell['label']}")
        log_t, final_dq = dequantized(run)
        figs["bimodality"] = F.bimodality(log_t, cell["bimodality"]["log10_t_acquired"], final_dq,
                                          cell["bimodality"]["final_icl_acc"], title=cell["label"])
    figs["trajectories"] = F.trajectories(run["eval_steps"], run["icl_acc"], run["iwl_acc"],
                                          cfg["train"].get("icl_threshold"), title=cell["label"])
    comparisons = run_comparisons(cell)
    report = {"kind": "run", "dir": str(run["dir"]), "config": cfg, "cell": cell, "paper_comparisons": comparisons,
              "differences_from_paper_settings": paper_differences(cfg)}
    md = [f"# icl-race report: {run['dir']}", "",
          f"Run: {cell['label']}, {run['n_total']} seeds, budget {run['budget']:,} steps "
          f"(ran {run['steps_run']:,}), evaluation every {cfg['train'].get('eval_every')} steps on "
          f"{cfg['train'].get('eval_size')} sequences, ICL threshold {cfg['train'].get('icl_threshold')}.", ""]
    diffs = report["differences_from_paper_settings"]
    if diffs:
        md += ["Differs from the paper's settings in: " + ", ".join(diffs) + ". Absolute numbers are therefore "
               "not comparable with the paper's; shapes and scalings are.", ""]
    if not cell.get("ok"):
        md += [f"No statistics: {cell['reason']}.", ""]
    else:
        md += ["## t_ICL", ""] + cell_markdown(cell)
        md += ["![t_ICL histogram](figures/t_icl_hist.png)", "", "![Kaplan-Meier](figures/survival.png)", "",
               "![bimodality](figures/bimodality.png)", ""]
    md += ["## Trajectories", "", "![ICL and IWL accuracy](figures/trajectories.png)", ""]
    md += comparison_markdown(comparisons) + methods_markdown()
    return report, "\n".join(md) + "\n", figs


def text_histogram(t: np.ndarray, censor_at: int, bins: int = 12, width: int = 40) -> list[str]:
    """One row per log-spaced bin (one per distinct value when there are at most `bins` of them, as
    on a coarse evaluation grid), then the never-acquired seeds."""
    hit = t[t >= 0].astype(float)
    n_c = int((t < 0).sum())
    rows = []
    values = np.unique(hit)
    if 0 < values.size <= bins:
        rows = [(f"{v:>23,.0f}", int(np.sum(hit == v))) for v in values]
    elif hit.size:
        edges = np.geomspace(hit.min(), hit.max() * 1.0001, bins + 1)
        counts, _ = np.histogram(hit, edges)
        rows = [(f"{edges[i]:>10,.0f} - {edges[i + 1]:>10,.0f}", int(c)) for i, c in enumerate(counts)]
    rows.append((f"{'never (> ' + f'{censor_at:,}' + ')':>23}", n_c))
    top = max((c for _, c in rows), default=1) or 1
    return [f"{lab} | {'#' * int(round(width * c / top)):<{width}} {c}" for lab, c in rows]


def summary_line(cell: dict) -> str:
    if not cell.get("ok"):
        return f"{cell['label']}: {cell.get('reason')}"
    return (f"{cell['label']}: n={cell['n_seeds']} seeds ({cell['n_diverged']} diverged excluded), acquired "
            f"{cell['acquired']}, KM median t_ICL {median_text(cell)} steps, never acquired {never_text(cell)}")


def hist_text(run: rundir.Run, bins: int = 12) -> str:
    """A text histogram of t_ICL and the summary line of one run."""
    r = run_dict(run)
    cell = analyze_cell(r, tails=False)
    lines = [f"t_ICL of {run.dir} ({cell['label']}), log-spaced bins, steps:"]
    lines += text_histogram(r["t_icl"], r["censor_at"], bins) if r["t_icl"].size else ["(no seeds)"]
    return "\n".join(lines + [summary_line(cell)])
