"""Classification reports of a sweep directory: cells pooled by condition, K* per N with the slope of
log K* on log N, median t_ICL vs N at K = infinity, balanced vs standard contexts, beside the paper."""

from __future__ import annotations

import json

import numpy as np

from icl_race import rundir
from icl_race.analysis import regime as rg
from icl_race.analysis import threshold as th
from icl_race.analysis.survival import censored_times, proportion_ci
from icl_race.config import ConfigError
from icl_race.report.classification_run import (analyze_cell, bimod_row, cell_label, ci_cell, median_text,
                                                never_text, run_dict, summary_line)
from icl_race.plots import classification as F
from icl_race.report import levers
from icl_race.report.format import ci_text, num, p_value, pct, slug
from icl_race.report.paper import (IGNORED_FIELDS, PAPER, comparison_markdown, flat, methods_markdown,
                                   paper_differences, sweep_comparisons)

N_BOOT_SIGMOID = 200
# How a cell is observed, not what it measures: a budget and an evaluation period that scale with N (a
# sweep's [zip]) do not split the cells of a K*(N) or t_ICL(N) analysis into groups.
MEASUREMENT_FIELDS = {"train.steps", "train.eval_every"}
# A cell that trained the same model on the same task for the same budget, but let the race run on past
# the early stop or looked at it more often, sees the same outcome at least as well: the bimodality
# nearest K* is read from the one of those cells with the most seeds (e.g. a 64-seed early-stop-off rerun
# of the K* grid's nearest cell, linked into the same directory).
OBSERVATION_FIELDS = MEASUREMENT_FIELDS - {"train.steps"} | {"train.early_stop", "train.stop_when_all_acquired"}


def discover_cells(sweep: rundir.SweepDir) -> tuple[list[dict], list[dict]]:
    finished, unfinished = [], []
    for c in sweep.cells:
        label = {"label": cell_label(c.config)} if c.config else {}
        if c.run is None:
            unfinished.append({"cell": c.name, **label, "reason": c.reason})
            continue
        try:
            finished.append(run_dict(c.run))
        except ConfigError as e:
            unfinished.append({"cell": c.name, **label, "reason": str(e)})
    return finished, unfinished


def condition(cfg: dict) -> dict:
    f = {k: v for k, v in flat(cfg).items() if k not in IGNORED_FIELDS}
    if f.get("task.variant") == "infinite":
        f.pop("task.K", None)
    return f


def merge_cells(runs: list[dict]) -> list[dict]:
    """Cells with the same condition (differing only in seeds/blocking) are pooled."""
    merged: dict[str, dict] = {}
    for r in runs:
        key = json.dumps(condition(r["config"]), sort_keys=True, default=str)
        if key not in merged:
            merged[key] = dict(r, cells=[r["dir"].name])
            continue
        m = merged[key]
        if m["censor_at"] != r["censor_at"] or m["eval_steps"].shape != r["eval_steps"].shape:
            merged[key + r["dir"].name] = dict(r, cells=[r["dir"].name])  # not poolable: keep apart
            continue
        # The same seed (root_seed, seed id) run twice, e.g. K = infinity cells that differ only in the
        # unused task.K, is one sample, not two: keep its first copy.
        seen = set(zip(m["root_seeds"].tolist(), m["seed_ids"].tolist()))
        new = np.array([(a, b) not in seen for a, b in zip(r["root_seeds"].tolist(), r["seed_ids"].tolist())], bool)
        for k in ("t_icl", "t_start", "final_icl_acc", "icl_acc", "iwl_acc", "seed_ids", "root_seeds", "final_icl_ref_acc"):
            if k in m and k in r:
                m[k] = np.concatenate([m[k], r[k][new]])
        m["n_total"] += int(new.sum())
        m["n_duplicates"] = m.get("n_duplicates", 0) + int((~new).sum())
        m["n_diverged"] += r["n_diverged"]
        m["cells"].append(r["dir"].name)
    return list(merged.values())


def group_label(fields: dict) -> str:
    return ", ".join(f"{k.split('.', 1)[1]}={v}" for k, v in sorted(fields.items())) or "all cells"


def sweep_report(sweep: rundir.SweepDir, n_boot: int, rng) -> tuple[dict, str, dict]:
    runs, unfinished = discover_cells(sweep)
    cells = merge_cells(runs)
    conds = [condition(c["config"]) for c in cells]
    keys = sorted({k for c in conds for k in c})
    varying = [k for k in keys if len({json.dumps(c.get(k), default=str) for c in conds}) > 1]
    stats = [analyze_cell(c) for c in cells]
    # A cell's label names its variant, K and N; other varying fields (a lever's value) are added so
    # that the cells of a sweep over, say, train.lr can be told apart in every table.
    extra = [k for k in varying if k not in {"task.K", "task.N", "task.variant"} | MEASUREMENT_FIELDS]
    for s, c, cond in zip(stats, cells, conds):
        s["cells"] = c["cells"]
        s["n_duplicate_seeds_dropped"] = c.get("n_duplicates", 0)
        if extra:
            s["label"] += f" ({group_label({k: cond.get(k) for k in extra})})"
    figs: dict = {}
    report: dict = {"kind": "sweep", "dir": str(sweep.dir), "n_cells_finished": len(runs), "n_conditions": len(cells),
                    "unfinished": unfinished, "varying_fields": varying, "cells": stats}
    if cells:
        common = set(paper_differences(cells[0]["config"]))
        for c in cells[1:]:
            common &= set(paper_differences(c["config"]))
        report["differences_from_paper_settings"] = sorted(common)
    if sweep.spec is not None:
        report["sweep_toml"] = sweep.spec

    def groups(variants, drop):
        """The analysable cells of these variants, grouped by their varying fields other than `drop`:
        [(group fields, cell indices)], in a fixed order."""
        out: dict[str, list[int]] = {}
        for i, (c, s) in enumerate(zip(conds, stats)):
            if c.get("task.variant") in variants and s.get("ok"):
                g = {k: c.get(k) for k in varying if k not in drop | MEASUREMENT_FIELDS}
                out.setdefault(json.dumps(g, sort_keys=True, default=str), []).append(i)
        return [(json.loads(k), idx) for k, idx in sorted(out.items())]

    # The order of the sections fixes the order the bootstraps draw from rng.
    report["thresholds"] = [_threshold(g, idx, cells, stats, n_boot, rng, figs)
                            for g, idx in groups(("standard", "balanced"), {"task.K", "task.N"})]
    report["t_icl_vs_N"] = [_scaling(g, idx, cells, stats, n_boot, rng, figs)
                            for g, idx in groups(("infinite",), {"task.K", "task.N"})]
    balanced = [_balanced(g, idx, conds, stats, n_boot, rng, figs)
                for g, idx in groups(("standard", "balanced"), {"task.K", "task.N", "task.variant"})]
    report["balanced_vs_standard"] = [b for b in balanced if b is not None]
    # Drawn last, so that the sections above keep their bootstrap draws.
    report["regime"] = _regime_by_N(conds, stats)
    abrupt = {r["N"] for r in report["regime"] if r["abrupt"]}
    for t in report["thresholds"]:
        t["in_regime"] = _in_regime_threshold(t, abrupt, cells, stats)
    for sc, (g, idx) in zip(report["t_icl_vs_N"], groups(("infinite",), {"task.K", "task.N"})):
        sc["in_regime"] = _in_regime_scaling(sc, idx, cells, abrupt, n_boot, rng)
    report["by_lever"] = levers.by_lever(report["thresholds"], report["t_icl_vs_N"])
    report["paper_comparisons"] = sweep_comparisons(report)
    return report, sweep_markdown(report, figs), figs


def _threshold(gfields: dict, idx: list[int], cells, stats, n_boot, rng, figs) -> dict:
    """K* per N of one group of finite-K cells, the slope of log K* on log N, the heatmap, the cells nearest K*."""
    label = group_label(gfields) if gfields else "finite K"
    task = [cells[i]["config"]["task"] for i in range(len(cells))]
    Ns = sorted({task[i]["N"] for i in idx})
    curves, sigmoids, near = {}, {}, []
    for N in Ns:
        sub = sorted((i for i in idx if task[i]["N"] == N), key=lambda i: task[i]["K"])
        x = np.log10([task[i]["K"] for i in sub])
        curves[N] = th.acquisition_curve(x, [cells[i]["t_icl"] >= 0 for i in sub], n_boot=n_boot, rng=rng)
        sigmoids[N] = th.paper_sigmoid(x, [cells[i]["final_icl_acc"] for i in sub],
                                       n_boot=min(n_boot, N_BOOT_SIGMOID), rng=rng)
        if curves[N].get("ok"):
            j = _best_observed(sub[int(np.argmin(np.abs(x - curves[N]["b"])))], cells)
            near.append({"N": N, "K": task[j]["K"], "cell": stats[j]["label"],
                         "bimodality": stats[j]["bimodality"], "acquired_fraction": stats[j]["acquired_fraction"],
                         "t_icl": cells[j]["t_icl"], "censor_at": cells[j]["censor_at"]})

    def slope(fits, log_N):
        ok = [N for N in Ns if fits[N].get("ok")]
        return th.power_law_slope(log_N(np.array(ok, float)), np.array([fits[N]["b"] for N in ok]),
                                  np.stack([fits[N]["boot_log10_kstar"] for N in ok]) if ok else None)

    ok_N = [N for N in Ns if curves[N].get("ok")]
    kstar_slope = slope(curves, np.log10)
    variants = {task[i].get("variant", "standard") for i in idx}
    entry = {"group": gfields, "label": label, "variant": variants.pop() if len(variants) == 1 else "mixed",
             "N": Ns, "acquisition": curves, "paper_sigmoid": sigmoids, "kstar_slope": kstar_slope,
             "kstar_slope_N_minus_1": slope(curves, lambda n: np.log10(n - 1)),
             "kstar_slope_paper_sigmoid": slope(sigmoids, np.log10),
             "near_kstar": [{k: v for k, v in n.items() if k not in ("t_icl", "censor_at")} for n in near]}
    tag = slug(label)
    figs[f"acquisition_vs_K__{tag}"] = F.acquisition_vs_K(curves, title=f"Acquisition vs K ({label})")
    if len(ok_N) >= 2:
        figs[f"kstar_vs_N__{tag}"] = F.kstar_vs_N(ok_N, [curves[N]["b"] for N in ok_N],
                                                  [curves[N]["log10_kstar_ci"] for N in ok_N], kstar_slope,
                                                  ref_slope=PAPER["kstar_slope_predicted"], title=f"K*(N) ({label})")
    Ks = sorted({task[i]["K"] for i in idx})
    grid = np.full((len(Ns), len(Ks)), np.nan)
    for i in idx:
        grid[Ns.index(task[i]["N"]), Ks.index(task[i]["K"])] = stats[i]["acquired_fraction"]
    entry["heatmap"] = {"K": Ks, "N": Ns, "fraction": grid}
    figs[f"heatmap__{tag}"] = F.acquisition_heatmap(Ks, Ns, grid, title=f"Acquisition fraction ({label})")
    if near:
        figs[f"near_kstar__{tag}"] = F.small_histograms(
            [(f"N={n['N']}, K={n['K']:,}", n["t_icl"], n["censor_at"]) for n in near],
            title=f"t_ICL in the cell nearest K* ({label})")
    return entry


def _best_observed(j: int, cells) -> int:
    """Of the cells that differ from cell j only in OBSERVATION_FIELDS, the one with the most seeds (j on ties)."""
    def physics(i):
        return {k: v for k, v in condition(cells[i]["config"]).items() if k not in OBSERVATION_FIELDS}
    target = physics(j)
    same = [i for i in range(len(cells)) if physics(i) == target]
    return max(same, key=lambda i: (len(cells[i]["t_icl"]), i == j))


def _regime_by_N(conds, stats) -> list[dict]:
    """Each N's regime, judged where the attention path runs alone: its K = infinity cells (standard
    contexts), else, as a proxy, its largest-K cell (near K* the t_ICL at the threshold times a second
    phase, not the jump, so finite K near K* says little about the jump)."""
    out = []
    for N in sorted({c.get("task.N") for c, s in zip(conds, stats) if s.get("ok")}):
        ok = [i for i, (c, s) in enumerate(zip(conds, stats)) if s.get("ok") and c.get("task.N") == N]
        kinf = [i for i in ok if conds[i].get("task.variant") == "infinite"]
        std = sorted((i for i in ok if conds[i].get("task.variant") == "standard"), key=lambda i: conds[i]["task.K"])
        src = kinf or std[-1:]
        if not src:
            continue
        g = stats[src[0]]["regime"]
        out.append({"N": N, "source": "K = infinity" if kinf else f"largest K = {conds[src[0]]['task.K']:,} (proxy)",
                    "cell": stats[src[0]]["label"], "rise_fraction": g["rise_fraction"], "plateau": g["plateau"],
                    "plateau_reaches_threshold": g["plateau_reaches_threshold"], "abrupt": rg.is_abrupt(g),
                    "paper_rule": all(stats[i]["regime"]["paper_rule"] for i in ok)})
    return out


def _in_regime_threshold(t: dict, abrupt: set, cells, stats) -> dict:
    """The K* slope over the N of this group that are in the abrupt regime (no new bootstrap draws:
    the per-N replicates are reused)."""
    Ns = [N for N in t["N"] if N in abrupt and t["acquisition"][N].get("ok")]
    fit = th.power_law_slope(np.log10(np.array(Ns, float)), np.array([t["acquisition"][N]["b"] for N in Ns]),
                             np.stack([t["acquisition"][N]["boot_log10_kstar"] for N in Ns]) if Ns else None)
    local = [{"N": [a, b], **th.power_law_slope(np.log10([a, b]), np.array([t["acquisition"][a]["b"], t["acquisition"][b]["b"]]),
                                                  np.stack([t["acquisition"][a]["boot_log10_kstar"],
                                                            t["acquisition"][b]["boot_log10_kstar"]]))}
             for a, b in zip(Ns, Ns[1:])]
    return {"N": Ns, "kstar_slope": fit, "local_slopes": local,
            "near_kstar": [n for n in t["near_kstar"] if n["N"] in abrupt]}


def _in_regime_scaling(scaling: dict, idx, cells, abrupt: set, n_boot, rng) -> dict:
    """Median t_ICL vs N over the N of this group in the abrupt regime (the group's own fit when that is
    every N)."""
    sub = sorted((i for i in idx if cells[i]["config"]["task"]["N"] in abrupt), key=lambda i: cells[i]["config"]["task"]["N"])
    Ns = [cells[i]["config"]["task"]["N"] for i in sub]
    if len(sub) == len(idx):
        return {"N": Ns, "median_vs_N": scaling["median_vs_N"]}
    tt = [censored_times(cells[i]["t_icl"], cells[i]["censor_at"]) for i in sub]
    return {"N": Ns, "median_vs_N": th.median_vs_N(np.array(Ns), [a for a, _ in tt], [b for _, b in tt],
                                                   n_boot=n_boot, rng=rng) if len(Ns) >= 2 else {"ok": False}}


def _scaling(gfields: dict, idx: list[int], cells, stats, n_boot, rng, figs) -> dict:
    """Median t_ICL vs N of one group of K = infinity cells."""
    label = group_label(gfields) if gfields else "K = infinity"
    idx = sorted(idx, key=lambda i: cells[i]["config"]["task"]["N"])
    tt = [censored_times(cells[i]["t_icl"], cells[i]["censor_at"]) for i in idx]
    Ns = [cells[i]["config"]["task"]["N"] for i in idx]
    med = th.median_vs_N(np.array(Ns), [a for a, _ in tt], [b for _, b in tt], n_boot=n_boot, rng=rng)
    figs[f"t_icl_vs_N__{slug(label)}"] = F.t_icl_vs_N(Ns, [cells[i]["t_icl"] for i in idx],
                                                      [cells[i]["censor_at"] for i in idx], med,
                                                      title=f"t_ICL vs N at K = infinity ({label})")
    return {"group": gfields, "label": label, "median_vs_N": med,
            "lognormal_per_N": [{"N": N, **(stats[i].get("lognormal") or {})} for N, i in zip(Ns, idx)]}


BALANCED_METRICS = (("acc_above_0.75", "fraction with final ICL accuracy > 0.75"),
                    ("acquired", "fraction acquiring ICL within the budget"))


def _balanced(gfields: dict, idx: list[int], conds, stats, n_boot, rng, figs) -> dict | None:
    """Balanced minus standard contexts over the (N, K) cells of a group that have both; None without such a pair."""
    table: dict[tuple, int] = {}
    for i in idx:
        table.setdefault((conds[i]["task.N"], conds[i]["task.K"], conds[i]["task.variant"]), i)
    pairs = sorted({(N, K) for N, K, _ in table if (N, K, "standard") in table and (N, K, "balanced") in table})
    if not pairs:
        return None
    label = group_label(gfields) if gfields else "all"
    si = [table[(N, K, "standard")] for N, K in pairs]
    bi = [table[(N, K, "balanced")] for N, K in pairs]

    def counts(ids, metric):
        if metric == "acquired":
            return np.array([stats[i]["acquired"] for i in ids]), np.array([stats[i]["n_seeds"] for i in ids])
        return (np.array([stats[i]["final_icl_acc"]["above_0.75"] for i in ids]),
                np.array([stats[i]["final_icl_acc"]["n"] for i in ids]))

    def with_ci(k, n):
        cis = [proportion_ci(a, b) for a, b in zip(k, n)]
        return {"p": k / n, "lo": [c[0] for c in cis], "hi": [c[1] for c in cis]}

    entry = {"group": gfields, "label": label, "N": [N for N, _ in pairs], "K": [K for _, K in pairs]}
    for metric, _ in BALANCED_METRICS:
        ks, ns = counts(si, metric)
        kb, nb = counts(bi, metric)
        entry[metric] = th.fraction_difference(ks, ns, kb, nb, n_boot=n_boot, rng=rng) | {
            "standard": {"k": ks, "n": ns}, "balanced": {"k": kb, "n": nb}}
    ref = [stats[i].get("final_icl_ref_acc") for i in bi]
    if all(ref):
        entry["balanced_reference_icl_test_above_0.75"] = [r["above_0.75"] / r["n"] for r in ref]
    rows = []
    for N in sorted(set(entry["N"])):
        sel = [j for j, (n_, _) in enumerate(pairs) if n_ == N]
        panels = []
        for metric, ylabel in BALANCED_METRICS:
            st, bl = entry[metric]["standard"], entry[metric]["balanced"]
            panels.append((ylabel, with_ci(st["k"][sel], st["n"][sel]), with_ci(bl["k"][sel], bl["n"][sel])))
        rows.append((N, [pairs[j][1] for j in sel], panels))
    figs[f"balanced_vs_standard__{slug(label)}"] = F.balanced_vs_standard(
        rows, title=f"Balanced vs standard contexts ({label})")
    return entry


def sweep_markdown(rep: dict, figs: dict) -> str:
    md = [f"# icl-race sweep report: {rep['dir']}", "",
          f"{rep['n_cells_finished']} finished cells pooled into {rep['n_conditions']} conditions; "
          f"{len(rep['unfinished'])} unfinished (skipped). Varying fields: {', '.join(rep['varying_fields']) or 'none'}.", ""]
    if rep.get("differences_from_paper_settings"):
        md += ["Every cell differs from the paper's settings in: " + ", ".join(rep["differences_from_paper_settings"])
               + ". Absolute numbers are therefore not comparable with the paper's; shapes and scalings are.", ""]
    md += comparison_markdown(rep["paper_comparisons"])
    if rep.get("regime"):
        md += ["## Regime per N", "",
               f"Abrupt = median rise fraction r <= {rg.RISE_BOUND} and the first rise reaching the threshold (median "
               "plateau above it), judged at K = infinity (else the largest K, a proxy). Verdicts beside the paper use "
               "only the N in the regime.", "",
               "| N | judged on | rise fraction r (95% CI) | plateau (95% CI) | plateau above threshold | abrupt |",
               "|---|---|---|---|---|---|"]
        for r in rep["regime"]:
            reach = r["plateau_reaches_threshold"]
            md.append(f"| {r['N']} | {r['cell']} ({r['source']}) | {ci_cell(r['rise_fraction'])} | {ci_cell(r['plateau'])} | "
                      f"{'-' if reach is None else pct(reach)} | {({True: 'yes', False: 'no', None: '-'})[r['abrupt']]} |")
        md.append("")
    for t in rep["thresholds"]:
        tag = slug(t["label"])
        md += [f"## Threshold K*: {t['label']}", "",
               "| N | K* (logistic midpoint) | 95% CI | paper's sigmoid K* | 95% CI | cells | bracketed |",
               "|---|---|---|---|---|---|---|"]
        for N in t["N"]:
            a, s = t["acquisition"][N], t["paper_sigmoid"][N]
            md.append(f"| {N} | {num(a.get('kstar'))} | {ci_text(a.get('kstar_ci'))} | {num(s.get('kstar'))} | "
                      f"{ci_text(s.get('kstar_ci'))} | {len(a['cells'])} | {a.get('bracketed', 'n/a')} |")
        sl = t["kstar_slope"]
        if sl.get("ok"):
            md += ["", f"Slope of log10 K* on log10 N: **{sl['slope']:.3f}** {ci_text(sl.get('slope_ci'), '{:.3f}')} "
                       f"({sl.get('boot_used', 0)} bootstrap replicates used); against log10(N - 1): "
                       f"{t['kstar_slope_N_minus_1']['slope']:.3f} {ci_text(t['kstar_slope_N_minus_1'].get('slope_ci'), '{:.3f}')}."]
        md += ["", f"![acquisition vs K](figures/acquisition_vs_K__{tag}.png)", ""]
        for name in (f"kstar_vs_N__{tag}", f"heatmap__{tag}", f"near_kstar__{tag}"):
            if name in figs:
                md += [f"![{name}](figures/{name}.png)", ""]
        if t["near_kstar"]:
            md += [("Bimodality in the cell nearest K* for each N (or, of the cells that differ from it only in "
                    "the early stop or the evaluation period, the one with the most seeds):"), "",
                   "| sample | n | dip test p | BC | Delta BIC (1 - 2 comp.) | verdict |", "|---|---|---|---|---|---|"]
            for n in t["near_kstar"]:
                md.append(bimod_row(f"N={n['N']} K={n['K']:,}: final ICL accuracy", n["bimodality"]["final_icl_acc"]))
                md.append(bimod_row(f"N={n['N']} K={n['K']:,}: log10 t_ICL (acquired)", n["bimodality"]["log10_t_acquired"]))
            md.append("")
    md += levers.markdown(rep.get("by_lever", {}))
    for s in rep["t_icl_vs_N"]:
        m = s["median_vs_N"]
        md += [f"## t_ICL vs N at K = infinity: {s['label']}", "",
               "| N | seeds | acquired | KM median t_ICL | 95% CI (bootstrap) |", "|---|---|---|---|---|"]
        md += [f"| {p['N']} | {p['n']} | {p['acquired']} | {num(p['median'])} | {ci_text(p['median_ci'])} |" for p in m["per_N"]]
        if m.get("ok"):
            lin, ll = m["linear"], m["loglog"]
            md += ["", f"Linear fit: median = {lin['intercept']:,.0f} {ci_text(lin.get('intercept_ci'))} + "
                       f"{lin['slope']:,.1f} {ci_text(lin.get('slope_ci'), '{:,.1f}')} N; log-log exponent "
                       f"{ll['slope']:.3f} {ci_text(ll.get('slope_ci'), '{:.3f}')}."]
        name = f"t_icl_vs_N__{slug(s['label'])}"
        md += ["", f"![t_ICL vs N](figures/{name}.png)", ""]
    for b in rep["balanced_vs_standard"]:
        md += [f"## Balanced vs standard contexts: {b['label']}", "",
               "| N | K | standard: acc > 0.75 | balanced: acc > 0.75 | difference (95% CI) | standard: acquired | "
               "balanced: acquired |", "|---|---|---|---|---|---|---|"]
        a, q = b["acc_above_0.75"], b["acquired"]
        for j, (N, K) in enumerate(zip(b["N"], b["K"])):
            pc = a["per_cell"][j]
            md.append(f"| {N} | {K:,} | {pc['p1']:.2f} | {pc['p2']:.2f} | {pc['diff']:+.2f} {ci_text(pc['diff_ci'], '{:+.2f}')} | "
                      f"{q['per_cell'][j]['p1']:.2f} | {q['per_cell'][j]['p2']:.2f} |")
        if "balanced_reference_icl_test_above_0.75" in b:
            md += ["", "Balanced cells on the reference's ICL test (novel items labelled by the training map), fraction "
                       "> 0.75: " + ", ".join(f"{v:.2f}" for v in b["balanced_reference_icl_test_above_0.75"]) + "."]
        md += ["", f"![balanced vs standard](figures/balanced_vs_standard__{slug(b['label'])}.png)", ""]
    md += ["## Cells", "",
           "| cell | seeds | diverged | acquired | never acquired (95% CI) | KM median t_ICL (95% CI) | dip p, final acc | "
           "dip p, log t_ICL | rise fraction r | plateau |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for c in sorted(rep["cells"], key=lambda c: (c["variant"], c["N"] or 0, c["K"] or 0)):
        if not c.get("ok"):
            md.append(f"| {c['label']} | {c['n_seeds']} | {c['n_diverged']} | - | - | - | - | - | - | - |")
            continue
        b = c["bimodality"]
        md.append(f"| {c['label']} | {c['n_seeds']} | {c['n_diverged']} | {c['acquired']} | {never_text(c)} | "
                  f"{median_text(c)} | {p_value(b['final_icl_acc']['dip_p'])} | "
                  f"{p_value(b['log10_t_acquired']['dip_p'])} | {num(c['regime']['rise_fraction']['median'], '{:.2f}')} | "
                  f"{num(c['regime']['plateau']['median'], '{:.2f}')} |")
    if rep["unfinished"]:
        md += ["", "Unfinished or unreadable cells (skipped):", ""]
        md += [f"- `{u['cell']}` {u.get('label', '')}: {u['reason']}" for u in rep["unfinished"]]
    md += [""] + methods_markdown()
    return "\n".join(md) + "\n"


def hist_text(sweep: rundir.SweepDir) -> str:
    """One summary line per finished cell of a sweep."""
    runs, unfinished = discover_cells(sweep)
    cells = sorted((analyze_cell(r, tails=False) for r in runs), key=lambda c: (c["variant"], c["N"] or 0, c["K"] or 0))
    return "\n".join([f"sweep {sweep.dir}: {len(runs)} finished cells, {len(unfinished)} unfinished"]
                     + [summary_line(c) for c in cells])
