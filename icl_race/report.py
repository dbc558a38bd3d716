"""Statistics reports for a run directory or a sweep directory, and the `hist` terminal view.

    write_report(DIR)  ->  DIR/report.md, DIR/report.json, DIR/figures/<name>.png and .pdf
    hist_text(DIR)     ->  a text histogram of t_ICL on log bins with the censored count, and a summary line

A run directory holds config.json and results.npz (icl_race/runner.py). A sweep directory holds
cells/<digest>/, each a run directory; cells without results.npz are listed as unfinished and skipped.

Seeds: t_icl < 0 means "not acquired within the budget" and is right-censored at the budget (at
steps_run if a run stopped earlier while some seeds were still censored); seeds flagged in the optional
`diverged[S]` array are excluded from every statistic and counted. Reads files only; imports no jax.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
from pathlib import Path

import numpy as np

from icl_race import config
from icl_race.config import Config, ConfigError
from icl_race.runner import read_npz

# The papers' numbers this report puts its estimates beside (classification-task.md §9).
PAPER = {
    "kstar_slope_measured": 1.41,  # [secondary]: not found in the code or any available text
    "kstar_slope_predicted": 1 / 0.7,  # 1/nu with nu = 0.7 (the reference line of Fig 6A)
    "bimodal_cell": {"N": 100, "K": 9666},  # Fig 6C
    "kstar_N100_order": 1e4,  # [inferred] from the paper's grid choices
    "balanced_metric_threshold": 0.75,  # Fig 6E title: fraction of runs with ICL accuracy > 0.75
}
N_BOOT = 2000
N_BOOT_SIGMOID = 200
MIN_SEEDS_BIMODALITY = 20  # below this a dip test has too little power for a verdict
IGNORED_FIELDS = {"ensemble.seeds", "ensemble.first_seed", "ensemble.root_seed", "ensemble.block",
                  "train.evals_per_chunk", "task.K_max"}


# ----------------------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------------------

def read_config(d: Path) -> dict:
    try:
        cfg = json.loads((d / "config.json").read_text())
    except OSError:
        raise ConfigError(f"{d}: no config.json (not an icl-race run directory)") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise ConfigError(f"{d}/config.json: damaged, not valid JSON ({e})") from None
    if not isinstance(cfg, dict) or not all(isinstance(cfg.get(s), dict) for s in ("task", "train")):
        raise ConfigError(f"{d}/config.json: expected sections task and train")
    return with_defaults(cfg)


def with_defaults(cfg: dict) -> dict:
    """A stored config with the fields added since it was written at their defaults, so old and new
    cells pool; one written by a version with fields this one lacks is returned as it is."""
    try:
        return config.from_dict(cfg).to_dict()
    except ConfigError:
        return cfg


REQUIRED = ("t_icl", "eval_steps", "icl_acc", "iwl_acc", "budget")


def read_results(d: Path, required: tuple[str, ...]) -> dict[str, np.ndarray]:
    """results.npz of a finished run directory, with the arrays `required` present."""
    try:
        res = read_npz(d / "results.npz")  # a damaged file is a ConfigError naming it
    except FileNotFoundError:
        raise ConfigError(f"{d}: no results.npz (run not finished)") from None
    missing = [k for k in required if k not in res]
    if missing:
        raise ConfigError(f"{d}/results.npz: missing {', '.join(missing)}")
    return res


def diverged_mask(res: dict, S: int) -> np.ndarray:
    return np.asarray(res.get("diverged", np.zeros(S, bool)), bool)


def censor_time(budget: int, steps_run: int, any_unreached: bool) -> int:
    """Stopped early with some event still unreached: those seeds were observed only until steps_run."""
    return steps_run if steps_run < budget and any_unreached else budget


def load_run(d: Path) -> dict:
    """config + results of one run directory, with the seeds to analyse and the censoring time."""
    d = Path(d)
    cfg = read_config(d)
    res = read_results(d, REQUIRED)
    S = res["t_icl"].shape[0]
    diverged = diverged_mask(res, S)
    keep = ~diverged
    budget = int(res["budget"])
    steps_run = int(res.get("steps_run", budget))
    t = res["t_icl"][keep].astype(np.int64)
    censor_at = censor_time(budget, steps_run, bool(np.any(t < 0)))
    icl = np.asarray(res["icl_acc"], float)[keep]
    iwl = np.asarray(res["iwl_acc"], float)[keep]
    final = icl[:, -1] if icl.ndim == 2 and icl.shape[1] else np.full(t.size, np.nan)
    extra = {}
    if "icl_ref_acc" in res and np.asarray(res["icl_ref_acc"]).ndim == 2 and res["icl_ref_acc"].shape[1]:
        extra["final_icl_ref_acc"] = np.asarray(res["icl_ref_acc"], float)[keep][:, -1]
    return {"dir": d, "config": cfg, "t_icl": t, "censor_at": censor_at, "budget": budget, "steps_run": steps_run,
            "n_total": int(S), "n_diverged": int(diverged.sum()), "eval_steps": np.asarray(res["eval_steps"]),
            "icl_acc": icl, "iwl_acc": iwl, "final_icl_acc": final,
            "seed_ids": np.asarray(res.get("seed_ids", np.arange(S)))[keep],
            "root_seeds": np.full(int(keep.sum()), int((cfg.get("ensemble") or {}).get("root_seed", 0))), **extra}


def _flat(cfg: dict) -> dict:
    return {f"{s}.{k}": v for s, sec in cfg.items() if isinstance(sec, dict) for k, v in sec.items()}


def _paper_differences(cfg: dict) -> list[str]:
    """Config fields that differ from the paper's settings (the Config defaults)."""
    ref = _flat(Config().to_dict())
    ours = _flat(cfg)
    skip = IGNORED_FIELDS | {"train.early_stop", "train.stop_when_all_acquired"}
    return [f"{k}={ours[k]!r} (paper {ref[k]!r})" for k in sorted(ours)
            if k in ref and k not in skip and ours[k] != ref[k]]


def _k_label(cfg: dict) -> str:
    return "inf" if cfg["task"].get("variant") == "infinite" else f"{cfg['task'].get('K')}"


def _cell_label(cfg: dict) -> str:
    t = cfg["task"]
    return f"{t.get('variant', 'standard')} K={_k_label(cfg)} N={t.get('N')}"


# ----------------------------------------------------------------------------------------------
# One cell
# ----------------------------------------------------------------------------------------------

def _dequantized(run: dict) -> tuple[np.ndarray, np.ndarray]:
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
    out = {"label": _cell_label(cfg), "K": None if cfg["task"].get("variant") == "infinite" else cfg["task"].get("K"),
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
    log_t, final_dq = _dequantized(run)
    with_cens = np.concatenate([log_t, np.full(int((t < 0).sum()), np.log10(float(run["censor_at"])))])
    final = run["final_icl_acc"]
    frac = out["acquired_fraction"]
    out["bimodality"] = {
        "log10_t_acquired": bm.summarize(log_t),
        "log10_t_censored_at_budget": bm.summarize(with_cens),
        "final_icl_acc": bm.summarize(final_dq),
        "near_threshold": bool(0.1 <= frac <= 0.9),
    }
    out["final_icl_acc"] = {"median": float(np.nanmedian(final)) if final.size else None,
                            "above_0.75": int(np.sum(final > PAPER["balanced_metric_threshold"])),
                            "n": int(final.size)}
    if "final_icl_ref_acc" in run:
        ref = run["final_icl_ref_acc"]
        out["final_icl_ref_acc"] = {"median": float(np.median(ref)),
                                    "above_0.75": int(np.sum(ref > PAPER["balanced_metric_threshold"])), "n": int(ref.size)}
    out["ok"] = True
    return out


# ----------------------------------------------------------------------------------------------
# Formatting helpers
# ----------------------------------------------------------------------------------------------

def _num(v, fmt="{:,.0f}") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "n/a"
    return fmt.format(v)


def _ci(ci, fmt="{:,.0f}", open_hi="beyond the budget") -> str:
    if not ci or ci[0] is None and ci[1] is None:
        return "n/a"
    lo = _num(ci[0], fmt) if ci[0] is not None else "n/a"
    hi = _num(ci[1], fmt) if ci[1] is not None else open_hi
    return f"[{lo}, {hi}]"


def _p(v) -> str:
    """A p-value: 3 significant digits, '< 0.001' below that (the dip test's table gives 0 there)."""
    if v is None:
        return "n/a"
    return "< 0.001" if v < 0.001 else f"{v:.3g}"


def _pe(v) -> str:
    """'= p' or '< 0.001', to follow 'p'."""
    t = _p(v)
    return t if t.startswith("<") else f"= {t}"


def _pct(v) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{100 * v:.1f}%"


def _median_text(cell: dict) -> str:
    km = cell["kaplan_meier"]
    if km["median"] is None:
        lo = km["median_ci"][0]
        return f"not reached by {cell['censor_at']:,}" + (f" (CI from {lo:,.0f})" if lo is not None else "")
    return f"{_num(km['median'])} {_ci(km['median_ci'])}"


def _never_text(cell: dict) -> str:
    na = cell["never_acquired"]
    return f"{_pct(na['fraction'])} [{_pct(na['ci'][0])}, {_pct(na['ci'][1])}] ({na['k']}/{na['n']})"


def _bimod_row(name: str, st: dict) -> str:
    mix = st.get("mixture") or {}
    verdict = {True: "bimodal", False: "not bimodal", None: "too few values"}[st.get("bimodal")]
    return (f"| {name} | {st['n']} | {_p(st.get('dip_p'))} | {_num(st.get('bc'), '{:.2f}')} | "
            f"{_num(mix.get('delta_bic'), '{:.1f}')} | {verdict} |")


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items() if not str(k).startswith("boot_")}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, (np.bool_, bool)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _save_figure(fig, figdir: Path, name: str) -> list[str]:
    import matplotlib.pyplot as plt

    figdir.mkdir(parents=True, exist_ok=True)
    written = []
    for ext in ("png", "pdf"):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=150)
        _atomic_write(figdir / f"{name}.{ext}", buf.getvalue())
        written.append(f"figures/{name}.{ext}")
    plt.close(fig)
    return written


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text.replace("=", "-")).strip("_") or "all"


# ----------------------------------------------------------------------------------------------
# Run report
# ----------------------------------------------------------------------------------------------

def _cell_markdown(cell: dict) -> list[str]:
    lines = []
    km = cell["kaplan_meier"]
    lines += [
        "| statistic | estimate (95% CI) |", "|---|---|",
        f"| seeds analysed | {cell['n_seeds']} ({cell['n_diverged']} diverged, excluded) |",
        f"| acquired ICL within {cell['censor_at']:,} steps | {cell['acquired']} |",
        f"| never acquired (right-censored at {cell['censor_at']:,}) | {_never_text(cell)} |",
        f"| Kaplan-Meier median t_ICL (steps) | {_median_text(cell)} |",
    ]
    ln = cell.get("lognormal") or {}
    if ln.get("ok"):
        lines.append(f"| lognormal fit (censored MLE): mu, sigma of ln t_ICL | {ln['mu']:.3f} {_ci(ln['mu_ci'], '{:.3f}')}, "
                     f"{ln['sigma']:.3f} {_ci(ln['sigma_ci'], '{:.3f}')} |")
    tail = cell.get("tail") or {}
    if tail.get("ok"):
        pl, lr = tail["power_law"], tail["likelihood_ratio"]
        lines.append(f"| power-law tail above xmin = {tail['xmin']:,.0f} ({tail['n_tail']} seeds): alpha | "
                     f"{pl['alpha']:.2f} {_ci(pl['alpha_ci'], '{:.2f}')} |")
        lines.append(f"| tail comparison (Vuong): R, p | R = {lr['R']:.2f}, p = {lr['p']:.3g}: favours {lr['favours']} |")
    elif tail:
        lines.append(f"| tail fits | not done: {tail.get('reason', '')} |")
    lines.append("")
    b = cell["bimodality"]
    lines += ["Bimodality (dip test p < 0.05 = bimodal; BC > 0.555 and Delta BIC > 0 are supporting evidence):", "",
              "| sample | n | dip test p | BC | Delta BIC (1 - 2 comp.) | verdict |", "|---|---|---|---|---|---|",
              _bimod_row("log10 t_ICL, acquired seeds", b["log10_t_acquired"]),
              _bimod_row("log10 t_ICL, censored seeds at the budget (as Fig 6C draws it)", b["log10_t_censored_at_budget"]),
              _bimod_row("final ICL accuracy", b["final_icl_acc"]), "",
              f"This cell is {'near' if b['near_threshold'] else 'not near'} the threshold "
              f"(acquired fraction {_pct(cell['acquired_fraction'])}; near = 10-90%).", ""]
    return lines


def _run_report(run: dict, n_boot: int, rng) -> tuple[dict, str, dict]:
    from icl_race.analysis import figures as F

    cell = analyze_cell(run)
    cfg = run["config"]
    figs = {}
    if cell.get("ok"):
        km = cell["kaplan_meier"]
        figs["t_icl_hist"] = F.t_icl_histogram(run["t_icl"], run["censor_at"], km["median"], km["median_ci"],
                                               title=f"t_ICL, {cell['label']}, {cell['n_seeds']} seeds")
        figs["survival"] = F.survival_curve(km, cell.get("lognormal"), cell.get("tail"),
                                            title=f"Kaplan-Meier, {cell['label']}")
        log_t, final_dq = _dequantized(run)
        figs["bimodality"] = F.bimodality(log_t, cell["bimodality"]["log10_t_acquired"], final_dq,
                                          cell["bimodality"]["final_icl_acc"], title=cell["label"])
    figs["trajectories"] = F.trajectories(run["eval_steps"], run["icl_acc"], run["iwl_acc"],
                                          cfg["train"].get("icl_threshold"), title=cell["label"])
    comparisons = _run_comparisons(cell)
    report = {"kind": "run", "dir": str(run["dir"]), "config": cfg, "cell": cell, "paper_comparisons": comparisons,
              "differences_from_paper_settings": _paper_differences(cfg)}
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
        md += ["## t_ICL", ""] + _cell_markdown(cell)
        md += ["![t_ICL histogram](figures/t_icl_hist.png)", "", "![Kaplan-Meier](figures/survival.png)", "",
               "![bimodality](figures/bimodality.png)", ""]
    md += ["## Trajectories", "", "![ICL and IWL accuracy](figures/trajectories.png)", ""]
    md += _comparison_markdown(comparisons) + _methods_markdown()
    return report, "\n".join(md) + "\n", figs


def _run_comparisons(cell: dict) -> list[dict]:
    rows = [
        {"claim": "log K* vs log N slope (Fig 6A)", "paper": "1.41 measured [secondary]; 1/nu = 1.43 predicted",
         "icl_race": "needs a sweep over K and N", "verdict": "not measured in this directory"},
        {"claim": "median t_ICL linear in N at K = infinity (Fig 6B)", "paper": "linear fit of medians (no CI)",
         "icl_race": "needs a sweep over N at K = infinity", "verdict": "not measured in this directory"},
        {"claim": "balanced contexts reduce ICL (Fig 6E)", "paper": "fewer runs with ICL accuracy > 0.75",
         "icl_race": "needs balanced and standard cells at the same K", "verdict": "not measured in this directory"},
    ]
    bim = {"claim": "bimodal outcomes near K* (Fig 6C, N = 100, K = 9666)", "paper": "bimodal histogram, no statistic"}
    if not cell.get("ok") or cell.get("variant") == "infinite":
        bim |= {"icl_race": "not a finite-K cell", "verdict": "not measured in this directory"}
    else:
        b = cell["bimodality"]
        st = b["final_icl_acc"]
        txt = (f"final ICL accuracy: dip p {_pe(st['dip_p'])}, BC = {_num(st['bc'], '{:.2f}')}; "
               f"log10 t_ICL of acquired seeds: dip p {_pe(b['log10_t_acquired']['dip_p'])}; "
               f"acquired {_pct(cell['acquired_fraction'])}")
        if not b["near_threshold"]:
            verdict = "not measured in this directory (this cell is not near the threshold)"
        elif st["bimodal"] is None or st["n"] < MIN_SEEDS_BIMODALITY:
            verdict = f"not measured in this directory (fewer than {MIN_SEEDS_BIMODALITY} seeds)"
        else:
            verdict = "agrees" if st["bimodal"] else "disagrees (no bimodality detected)"
        bim |= {"icl_race": txt, "verdict": verdict}
    rows.insert(2, bim)
    return rows


def _comparison_markdown(rows: list[dict]) -> list[str]:
    md = ["## Beside the paper", "",
          "| claim | paper | icl-race (95% CI) | verdict |", "|---|---|---|---|"]
    md += [f"| {r['claim']} | {r['paper']} | {r['icl_race']} | {r['verdict']} |" for r in rows]
    md += ["", "Verdicts: a number agrees when it lies inside our 95% CI; a directional claim agrees when the CI "
           "excludes zero on the paper's side and is inconclusive when it includes zero.", ""]
    return md


def _methods_markdown() -> list[str]:
    return ["## Methods", "",
            "- Seeds that never acquired ICL are right-censored at the budget (Kaplan-Meier, censored likelihoods), "
            "never dropped; diverged seeds (results.npz `diverged`) are excluded and counted.",
            "- Kaplan-Meier: scipy.stats.ecdf, Greenwood variance with a log-log band; the median's CI inverts the "
            "band. Never-acquired fraction: Wilson interval.",
            "- Lognormal: censored maximum likelihood on all seeds, Wald CIs. Power law: Pareto above xmin (Clauset's KS "
            "choice of xmin), censored MLE; compared with a lognormal truncated at xmin by Vuong's likelihood ratio.",
            "- Bimodality: values are first spread uniformly over their grid cell (t_ICL over its evaluation period, "
            "accuracy over 1/eval_size) so that ties do not fake modes; Hartigan's dip test (diptest package), "
            "bimodality coefficient, 1- vs 2-Gaussian mixture BIC (sds floored at 10% of the sample's).",
            "- Sweeps: logistic fit of the acquired fraction vs log10 K (K* = midpoint), the paper's 4-parameter "
            "sigmoid on final ICL accuracy, bootstrap CIs resampling seeds within cells.", ""]


# ----------------------------------------------------------------------------------------------
# Sweep report
# ----------------------------------------------------------------------------------------------

def _discover_cells(d: Path) -> tuple[list[dict], list[dict]]:
    finished, unfinished = [], []
    for c in sorted(p for p in (d / "cells").iterdir() if p.is_dir()):
        try:
            cfg = read_config(c)
        except ConfigError as e:
            unfinished.append({"cell": c.name, "reason": str(e)})
            continue
        if not (c / "results.npz").exists():
            unfinished.append({"cell": c.name, "label": _cell_label(cfg), "reason": "no results.npz (not finished)"})
            continue
        try:
            finished.append(load_run(c))
        except ConfigError as e:
            unfinished.append({"cell": c.name, "label": _cell_label(cfg), "reason": str(e)})
    return finished, unfinished


def _condition(cfg: dict) -> dict:
    f = {k: v for k, v in _flat(cfg).items() if k not in IGNORED_FIELDS}
    if f.get("task.variant") == "infinite":
        f.pop("task.K", None)
    return f


def _merge_cells(runs: list[dict]) -> list[dict]:
    """Cells with the same condition (differing only in seeds/blocking) are pooled."""
    merged: dict[str, dict] = {}
    for r in runs:
        key = json.dumps(_condition(r["config"]), sort_keys=True, default=str)
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
        for k in ("t_icl", "final_icl_acc", "icl_acc", "iwl_acc", "seed_ids", "root_seeds", "final_icl_ref_acc"):
            if k in m and k in r:
                m[k] = np.concatenate([m[k], r[k][new]])
        m["n_total"] += int(new.sum())
        m["n_duplicates"] = m.get("n_duplicates", 0) + int((~new).sum())
        m["n_diverged"] += r["n_diverged"]
        m["cells"].append(r["dir"].name)
    return list(merged.values())


def _group_label(fields: dict) -> str:
    return ", ".join(f"{k.split('.', 1)[1]}={v}" for k, v in sorted(fields.items())) or "all cells"


def _sweep_report(d: Path, n_boot: int, rng) -> tuple[dict, str, dict]:
    from icl_race.analysis import figures as F
    from icl_race.analysis import threshold as th

    runs, unfinished = _discover_cells(d)
    cells = _merge_cells(runs)
    conds = [_condition(c["config"]) for c in cells]
    keys = sorted({k for c in conds for k in c})
    varying = [k for k in keys if len({json.dumps(c.get(k), default=str) for c in conds}) > 1]
    stats = [analyze_cell(c) for c in cells]
    for s, c in zip(stats, cells):
        s["cells"] = c["cells"]
        s["n_duplicate_seeds_dropped"] = c.get("n_duplicates", 0)
    figs: dict = {}
    report: dict = {"kind": "sweep", "dir": str(d), "n_cells_finished": len(runs), "n_conditions": len(cells),
                    "unfinished": unfinished, "varying_fields": varying, "cells": stats}
    if cells:
        common = set(_paper_differences(cells[0]["config"]))
        for c in cells[1:]:
            common &= set(_paper_differences(c["config"]))
        report["differences_from_paper_settings"] = sorted(common)
    if (d / "sweep.toml").exists():
        report["sweep_toml"] = (d / "sweep.toml").read_text()

    def group_of(cond, drop):
        return {k: cond.get(k) for k in varying if k not in drop}

    # ---- thresholds per group of finite-K cells -------------------------------------------------
    thresholds = []
    groups: dict[str, list[int]] = {}
    for i, (c, s) in enumerate(zip(conds, stats)):
        if c.get("task.variant") != "infinite" and s.get("ok"):
            g = group_of(c, {"task.K", "task.N"})
            groups.setdefault(json.dumps(g, sort_keys=True, default=str), []).append(i)
    for gkey, idx in sorted(groups.items()):
        gfields = json.loads(gkey)
        label = _group_label(gfields) if gfields else "finite K"
        Ns = sorted({cells[i]["config"]["task"]["N"] for i in idx})
        curves, sigmoids, near = {}, {}, []
        for N in Ns:
            sub = sorted((i for i in idx if cells[i]["config"]["task"]["N"] == N), key=lambda i: cells[i]["config"]["task"]["K"])
            x = np.log10([cells[i]["config"]["task"]["K"] for i in sub])
            curves[N] = th.acquisition_curve(x, [cells[i]["t_icl"] >= 0 for i in sub], n_boot=n_boot, rng=rng)
            sigmoids[N] = th.paper_sigmoid(x, [cells[i]["final_icl_acc"] for i in sub],
                                           n_boot=min(n_boot, N_BOOT_SIGMOID), rng=rng)
            if curves[N].get("ok"):
                j = sub[int(np.argmin(np.abs(x - curves[N]["b"])))]
                near.append({"N": N, "K": cells[j]["config"]["task"]["K"], "cell": stats[j]["label"],
                             "bimodality": stats[j]["bimodality"], "acquired_fraction": stats[j]["acquired_fraction"],
                             "t_icl": cells[j]["t_icl"], "censor_at": cells[j]["censor_at"]})
        ok_N = [N for N in Ns if curves[N].get("ok")]
        slope = th.power_law_slope(np.log10(ok_N), np.array([curves[N]["b"] for N in ok_N]),
                                   np.stack([curves[N]["boot_log10_kstar"] for N in ok_N]) if ok_N else None)
        slope_nm1 = th.power_law_slope(np.log10(np.array(ok_N, float) - 1), np.array([curves[N]["b"] for N in ok_N]),
                                       np.stack([curves[N]["boot_log10_kstar"] for N in ok_N]) if ok_N else None)
        ok_S = [N for N in Ns if sigmoids[N].get("ok")]
        slope_sig = th.power_law_slope(np.log10(ok_S), np.array([sigmoids[N]["b"] for N in ok_S]),
                                       np.stack([sigmoids[N]["boot_log10_kstar"] for N in ok_S]) if ok_S else None)
        variants = {cells[i]["config"]["task"].get("variant", "standard") for i in idx}
        entry = {"group": gfields, "label": label, "variant": variants.pop() if len(variants) == 1 else "mixed",
                 "N": Ns, "acquisition": curves, "paper_sigmoid": sigmoids,
                 "kstar_slope": slope, "kstar_slope_N_minus_1": slope_nm1, "kstar_slope_paper_sigmoid": slope_sig,
                 "near_kstar": [{k: v for k, v in n.items() if k not in ("t_icl", "censor_at")} for n in near]}
        thresholds.append(entry)
        slug = _slug(label)
        figs[f"acquisition_vs_K__{slug}"] = F.acquisition_vs_K(curves, title=f"Acquisition vs K ({label})")
        if len(ok_N) >= 2:
            figs[f"kstar_vs_N__{slug}"] = F.kstar_vs_N(ok_N, [curves[N]["b"] for N in ok_N],
                                                       [curves[N]["log10_kstar_ci"] for N in ok_N], slope,
                                                       ref_slope=PAPER["kstar_slope_predicted"],
                                                       title=f"K*(N) ({label})")
        Ks = sorted({cells[i]["config"]["task"]["K"] for i in idx})
        grid = np.full((len(Ns), len(Ks)), np.nan)
        for i in idx:
            grid[Ns.index(cells[i]["config"]["task"]["N"]), Ks.index(cells[i]["config"]["task"]["K"])] = stats[i]["acquired_fraction"]
        entry["heatmap"] = {"K": Ks, "N": Ns, "fraction": grid}
        figs[f"heatmap__{slug}"] = F.acquisition_heatmap(Ks, Ns, grid, title=f"Acquisition fraction ({label})")
        if near:
            figs[f"near_kstar__{slug}"] = F.small_histograms(
                [(f"N={n['N']}, K={n['K']:,}", n["t_icl"], n["censor_at"]) for n in near],
                title=f"t_ICL in the cell nearest K* ({label})")
    report["thresholds"] = thresholds

    # ---- t_ICL vs N at K = infinity -------------------------------------------------------------
    scaling = []
    igroups: dict[str, list[int]] = {}
    for i, (c, s) in enumerate(zip(conds, stats)):
        if c.get("task.variant") == "infinite" and s.get("ok"):
            g = group_of(c, {"task.K", "task.N"})
            igroups.setdefault(json.dumps(g, sort_keys=True, default=str), []).append(i)
    for gkey, idx in sorted(igroups.items()):
        gfields = json.loads(gkey)
        label = _group_label(gfields) if gfields else "K = infinity"
        idx = sorted(idx, key=lambda i: cells[i]["config"]["task"]["N"])
        from icl_race.analysis.survival import censored_times

        tt = [censored_times(cells[i]["t_icl"], cells[i]["censor_at"]) for i in idx]
        Ns = [cells[i]["config"]["task"]["N"] for i in idx]
        med = th.median_vs_N(np.array(Ns), [a for a, _ in tt], [b for _, b in tt], n_boot=n_boot, rng=rng)
        scaling.append({"group": gfields, "label": label, "median_vs_N": med,
                        "lognormal_per_N": [{"N": N, **(stats[i].get("lognormal") or {})} for N, i in zip(Ns, idx)]})
        if len(Ns) >= 1:
            figs[f"t_icl_vs_N__{_slug(label)}"] = F.t_icl_vs_N(Ns, [cells[i]["t_icl"] for i in idx],
                                                               [cells[i]["censor_at"] for i in idx], med,
                                                               title=f"t_ICL vs N at K = infinity ({label})")
    report["t_icl_vs_N"] = scaling

    # ---- balanced vs standard -------------------------------------------------------------------
    from icl_race.analysis.survival import proportion_ci

    balanced = []
    bgroups: dict[str, dict] = {}
    for i, (c, s) in enumerate(zip(conds, stats)):
        if c.get("task.variant") in ("standard", "balanced") and s.get("ok"):
            g = group_of(c, {"task.K", "task.N", "task.variant"})
            bgroups.setdefault(json.dumps(g, sort_keys=True, default=str), {}).setdefault(
                (c["task.N"], c["task.K"], c["task.variant"]), i)
    for gkey, table in sorted(bgroups.items()):
        pairs = sorted({(N, K) for N, K, _ in table if (N, K, "standard") in table and (N, K, "balanced") in table})
        if not pairs:
            continue
        gfields = json.loads(gkey)
        label = _group_label(gfields) if gfields else "all"
        si = [table[(N, K, "standard")] for N, K in pairs]
        bi = [table[(N, K, "balanced")] for N, K in pairs]

        def counts(ids, metric):
            if metric == "acquired":
                return np.array([stats[i]["acquired"] for i in ids]), np.array([stats[i]["n_seeds"] for i in ids])
            return (np.array([stats[i]["final_icl_acc"]["above_0.75"] for i in ids]),
                    np.array([stats[i]["final_icl_acc"]["n"] for i in ids]))

        def cond(k, n):
            cis = [proportion_ci(a, b) for a, b in zip(k, n)]
            return {"p": k / n, "lo": [c[0] for c in cis], "hi": [c[1] for c in cis]}

        entry = {"group": gfields, "label": label, "N": [N for N, _ in pairs], "K": [K for _, K in pairs]}
        metrics = (("acc_above_0.75", "fraction with final ICL accuracy > 0.75"),
                   ("acquired", "fraction acquiring ICL within the budget"))
        for metric, _ in metrics:
            ks, ns = counts(si, metric)
            kb, nb = counts(bi, metric)
            entry[metric] = th.fraction_difference(ks, ns, kb, nb, n_boot=n_boot, rng=rng) | {
                "standard": {"k": ks, "n": ns}, "balanced": {"k": kb, "n": nb}}
        ref = [stats[i].get("final_icl_ref_acc") for i in bi]
        if all(ref):
            entry["balanced_reference_icl_test_above_0.75"] = [r["above_0.75"] / r["n"] for r in ref]
        balanced.append(entry)
        rows = []
        for N in sorted(set(entry["N"])):
            sel = [j for j, (n_, _) in enumerate(pairs) if n_ == N]
            panels = []
            for metric, ylabel in metrics:
                st, bl = entry[metric]["standard"], entry[metric]["balanced"]
                panels.append((ylabel, cond(st["k"][sel], st["n"][sel]), cond(bl["k"][sel], bl["n"][sel])))
            rows.append((N, [pairs[j][1] for j in sel], panels))
        figs[f"balanced_vs_standard__{_slug(label)}"] = F.balanced_vs_standard(
            rows, title=f"Balanced vs standard contexts ({label})")
    report["balanced_vs_standard"] = balanced

    report["paper_comparisons"] = _sweep_comparisons(report)
    md = _sweep_markdown(report, figs)
    return report, md, figs


def _sweep_comparisons(rep: dict) -> list[dict]:
    from icl_race.analysis.threshold import interval_verdict, sign_verdict

    rows = []
    # The paper's K*, bimodality and slope numbers are for standard contexts: compare those groups only.
    standard = [t for t in rep["thresholds"] if t.get("variant") == "standard"]
    slopes = [t for t in standard if t["kstar_slope"].get("ok")]
    if not slopes:
        for name, val in (("measured", "1.41 [secondary]"), ("predicted", "1/nu = 1.43")):
            rows.append({"claim": f"log K* vs log N slope, {name} (Fig 6A)", "paper": val,
                         "icl_race": "needs K* at >= 2 values of N", "verdict": "not measured in this directory"})
    for t in slopes:
        s = t["kstar_slope"]
        s1 = t["kstar_slope_N_minus_1"]
        ss = t["kstar_slope_paper_sigmoid"]
        extra = (f"; against log(N-1): {s1['slope']:.2f} {_ci(s1.get('slope_ci'), '{:.2f}')}" if s1.get("ok") else "")
        extra += (f"; paper's sigmoid estimator: {ss['slope']:.2f} {_ci(ss.get('slope_ci'), '{:.2f}')}" if ss.get("ok") else "")
        txt = f"{s['slope']:.2f} {_ci(s.get('slope_ci'), '{:.2f}')} from {s['n_points']} values of N{extra} ({t['label']})"
        rows.append({"claim": "log K* vs log N slope, measured (Fig 6A)", "paper": "1.41 [secondary, unverified]",
                     "icl_race": txt, "estimate": s["slope"], "ci": s.get("slope_ci"),
                     "verdict": interval_verdict(s.get("slope_ci"), PAPER["kstar_slope_measured"])})
        rows.append({"claim": "log K* vs log N slope, predicted 1/nu (Fig 6A)", "paper": "1/0.7 = 1.43",
                     "icl_race": txt, "estimate": s["slope"], "ci": s.get("slope_ci"),
                     "verdict": interval_verdict(s.get("slope_ci"), PAPER["kstar_slope_predicted"])})
    # K*(N = 100)
    k100 = [(t, t["acquisition"][100]) for t in standard if 100 in t["acquisition"] and t["acquisition"][100].get("ok")]
    for t, a in k100:
        ci = a["log10_kstar_ci"]
        lo, hi = math.log10(PAPER["kstar_N100_order"]) - 0.5, math.log10(PAPER["kstar_N100_order"]) + 0.5
        v = "not measured (no CI)" if ci[0] is None else ("agrees" if ci[0] <= hi and ci[1] >= lo else "disagrees")
        rows.append({"claim": "K*(N = 100) of order 1e4", "paper": "about 1e4 [inferred from the paper's grids]",
                     "icl_race": f"{a['kstar']:,.0f} {_ci(a['kstar_ci'])} ({t['label']})",
                     "verdict": v + " (order of magnitude: CI overlaps 10^3.5-10^4.5)"})
    # t_ICL vs N
    meds = [s for s in rep["t_icl_vs_N"] if s["median_vs_N"].get("ok")]
    if not meds:
        rows.append({"claim": "median t_ICL linear in N at K = infinity (Fig 6B)", "paper": "linear fit of medians (no CI)",
                     "icl_race": "needs K = infinity cells at >= 2 values of N", "verdict": "not measured in this directory"})
    for s in meds:
        m = s["median_vs_N"]
        lin = m["linear"]
        txt = (f"slope {lin['slope']:,.1f} {_ci(lin.get('slope_ci'), '{:,.1f}')} steps per token, intercept "
               f"{lin['intercept']:,.0f} {_ci(lin.get('intercept_ci'), '{:,.0f}')}")
        sv = sign_verdict(lin.get("slope_ci"), +1)
        if "quadratic" in m:
            q = m["quadratic"]
            txt += f"; quadratic term {q['c2']:,.0f} {_ci(q['c2_ci'])}"
            curved = q["c2_ci"][0] is not None and (q["c2_ci"][0] > 0 or q["c2_ci"][1] < 0)
            verdict = "disagrees (curved: quadratic term's CI excludes 0)" if curved else sv
        else:
            verdict = "inconclusive (2 values of N: linearity untestable)" if sv == "agrees" else sv
        rows.append({"claim": "median t_ICL linear in N at K = infinity (Fig 6B)", "paper": "linear fit of medians (no CI)",
                     "icl_race": txt + f" ({s['label']})", "verdict": verdict})
        ll = m["loglog"]
        rows.append({"claim": "t_ICL proportional to N (theory t_ICL ~ N sqrt(2 pi) e^-beta0)", "paper": "log-log exponent 1",
                     "icl_race": f"{ll['slope']:.2f} {_ci(ll.get('slope_ci'), '{:.2f}')} ({s['label']})",
                     "verdict": interval_verdict(ll.get("slope_ci"), 1.0)})
    # bimodality near K*
    nears = [(t, n) for t in standard for n in t["near_kstar"]]
    if not nears:
        rows.append({"claim": "bimodal outcomes near K* (Fig 6C, N = 100, K = 9666)", "paper": "bimodal histogram, no statistic",
                     "icl_race": "needs a K* estimate", "verdict": "not measured in this directory"})
    else:
        pick = [p for p in nears if p[1]["N"] == 100] or nears
        parts, flags = [], []
        for t, n in pick:
            st = n["bimodality"]["final_icl_acc"]
            parts.append(f"N={n['N']}, K={n['K']:,}: final-accuracy dip p {_pe(st['dip_p'])}, "
                         f"BC = {_num(st['bc'], '{:.2f}')}, acquired {_pct(n['acquired_fraction'])}")
            flags.append(st["bimodal"])
        known = [f for f, (t, n) in zip(flags, pick)
                 if f is not None and n["bimodality"]["final_icl_acc"]["n"] >= MIN_SEEDS_BIMODALITY]
        verdict = (f"not measured in this directory (fewer than {MIN_SEEDS_BIMODALITY} seeds)" if not known else
                   "agrees" if all(known) else "disagrees (no bimodality detected)" if not any(known) else
                   f"mixed ({sum(known)} of {len(known)} cells bimodal)")
        rows.append({"claim": "bimodal outcomes near K* (Fig 6C, N = 100, K = 9666)", "paper": "bimodal histogram, no statistic",
                     "icl_race": "; ".join(parts), "verdict": verdict})
    # balanced
    if not rep["balanced_vs_standard"]:
        rows.append({"claim": "balanced contexts reduce ICL (Fig 6E)", "paper": "fewer runs with ICL accuracy > 0.75",
                     "icl_race": "needs balanced and standard cells at the same K", "verdict": "not measured in this directory"})
    for b in rep["balanced_vs_standard"]:
        a = b["acc_above_0.75"]
        q = b["acquired"]
        rows.append({"claim": "balanced contexts reduce ICL (Fig 6E)", "paper": "fewer runs with ICL accuracy > 0.75",
                     "icl_race": (f"standard - balanced, mean over {len(b['K'])} (N, K) cells: {a['mean_diff']:+.2f} "
                                  f"{_ci(a['mean_diff_ci'], '{:+.2f}')} (accuracy > 0.75); {q['mean_diff']:+.2f} "
                                  f"{_ci(q['mean_diff_ci'], '{:+.2f}')} (acquired) ({b['label']})"),
                     "verdict": sign_verdict(a["mean_diff_ci"], +1)})
    return rows


def _sweep_markdown(rep: dict, figs: dict) -> str:
    md = [f"# icl-race sweep report: {rep['dir']}", "",
          f"{rep['n_cells_finished']} finished cells pooled into {rep['n_conditions']} conditions; "
          f"{len(rep['unfinished'])} unfinished (skipped). Varying fields: {', '.join(rep['varying_fields']) or 'none'}.", ""]
    if rep.get("differences_from_paper_settings"):
        md += ["Every cell differs from the paper's settings in: " + ", ".join(rep["differences_from_paper_settings"])
               + ". Absolute numbers are therefore not comparable with the paper's; shapes and scalings are.", ""]
    md += _comparison_markdown(rep["paper_comparisons"])
    for t in rep["thresholds"]:
        slug = _slug(t["label"])
        md += [f"## Threshold K*: {t['label']}", "",
               "| N | K* (logistic midpoint) | 95% CI | paper's sigmoid K* | 95% CI | cells | bracketed |",
               "|---|---|---|---|---|---|---|"]
        for N in t["N"]:
            a, s = t["acquisition"][N], t["paper_sigmoid"][N]
            md.append(f"| {N} | {_num(a.get('kstar'))} | {_ci(a.get('kstar_ci'))} | {_num(s.get('kstar'))} | "
                      f"{_ci(s.get('kstar_ci'))} | {len(a['cells'])} | {a.get('bracketed', 'n/a')} |")
        sl = t["kstar_slope"]
        if sl.get("ok"):
            md += ["", f"Slope of log10 K* on log10 N: **{sl['slope']:.3f}** {_ci(sl.get('slope_ci'), '{:.3f}')} "
                       f"({sl.get('boot_used', 0)} bootstrap replicates used); against log10(N - 1): "
                       f"{t['kstar_slope_N_minus_1']['slope']:.3f} {_ci(t['kstar_slope_N_minus_1'].get('slope_ci'), '{:.3f}')}."]
        md += ["", f"![acquisition vs K](figures/acquisition_vs_K__{slug}.png)", ""]
        for name in (f"kstar_vs_N__{slug}", f"heatmap__{slug}", f"near_kstar__{slug}"):
            if name in figs:
                md += [f"![{name}](figures/{name}.png)", ""]
        if t["near_kstar"]:
            md += ["Bimodality in the cell nearest K* for each N:", "",
                   "| sample | n | dip test p | BC | Delta BIC (1 - 2 comp.) | verdict |", "|---|---|---|---|---|---|"]
            for n in t["near_kstar"]:
                md.append(_bimod_row(f"N={n['N']} K={n['K']:,}: final ICL accuracy", n["bimodality"]["final_icl_acc"]))
                md.append(_bimod_row(f"N={n['N']} K={n['K']:,}: log10 t_ICL (acquired)", n["bimodality"]["log10_t_acquired"]))
            md.append("")
    for s in rep["t_icl_vs_N"]:
        m = s["median_vs_N"]
        md += [f"## t_ICL vs N at K = infinity: {s['label']}", "",
               "| N | seeds | acquired | KM median t_ICL | 95% CI (bootstrap) |", "|---|---|---|---|---|"]
        md += [f"| {p['N']} | {p['n']} | {p['acquired']} | {_num(p['median'])} | {_ci(p['median_ci'])} |" for p in m["per_N"]]
        if m.get("ok"):
            lin, ll = m["linear"], m["loglog"]
            md += ["", f"Linear fit: median = {lin['intercept']:,.0f} {_ci(lin.get('intercept_ci'))} + "
                       f"{lin['slope']:,.1f} {_ci(lin.get('slope_ci'), '{:,.1f}')} N; log-log exponent "
                       f"{ll['slope']:.3f} {_ci(ll.get('slope_ci'), '{:.3f}')}."]
        name = f"t_icl_vs_N__{_slug(s['label'])}"
        md += ["", f"![t_ICL vs N](figures/{name}.png)", ""]
    for b in rep["balanced_vs_standard"]:
        md += [f"## Balanced vs standard contexts: {b['label']}", "",
               "| N | K | standard: acc > 0.75 | balanced: acc > 0.75 | difference (95% CI) | standard: acquired | "
               "balanced: acquired |", "|---|---|---|---|---|---|---|"]
        a, q = b["acc_above_0.75"], b["acquired"]
        for j, (N, K) in enumerate(zip(b["N"], b["K"])):
            pc = a["per_cell"][j]
            md.append(f"| {N} | {K:,} | {pc['p1']:.2f} | {pc['p2']:.2f} | {pc['diff']:+.2f} {_ci(pc['diff_ci'], '{:+.2f}')} | "
                      f"{q['per_cell'][j]['p1']:.2f} | {q['per_cell'][j]['p2']:.2f} |")
        if "balanced_reference_icl_test_above_0.75" in b:
            md += ["", "Balanced cells on the reference's ICL test (novel items labelled by the training map), fraction "
                       "> 0.75: " + ", ".join(f"{v:.2f}" for v in b["balanced_reference_icl_test_above_0.75"]) + "."]
        md += ["", f"![balanced vs standard](figures/balanced_vs_standard__{_slug(b['label'])}.png)", ""]
    md += ["## Cells", "",
           "| cell | seeds | diverged | acquired | never acquired (95% CI) | KM median t_ICL (95% CI) | dip p, final acc | dip p, log t_ICL |",
           "|---|---|---|---|---|---|---|---|"]
    for c in sorted(rep["cells"], key=lambda c: (c["variant"], c["N"] or 0, c["K"] or 0)):
        if not c.get("ok"):
            md.append(f"| {c['label']} | {c['n_seeds']} | {c['n_diverged']} | - | - | - | - | - |")
            continue
        b = c["bimodality"]
        md.append(f"| {c['label']} | {c['n_seeds']} | {c['n_diverged']} | {c['acquired']} | {_never_text(c)} | "
                  f"{_median_text(c)} | {_p(b['final_icl_acc']['dip_p'])} | "
                  f"{_p(b['log10_t_acquired']['dip_p'])} |")
    if rep["unfinished"]:
        md += ["", "Unfinished or unreadable cells (skipped):", ""]
        md += [f"- `{u['cell']}` {u.get('label', '')}: {u['reason']}" for u in rep["unfinished"]]
    md += [""] + _methods_markdown()
    return "\n".join(md) + "\n"


# ----------------------------------------------------------------------------------------------
# Entry points
# ----------------------------------------------------------------------------------------------

def _check_dir(d: Path) -> str:
    if not d.is_dir():
        raise ConfigError(f"{d}: no such directory")
    if (d / "cells").is_dir():
        return "sweep"
    if (d / "config.json").exists() or (d / "results.npz").exists():
        return "run"
    raise ConfigError(f"{d}: neither a run directory (config.json, results.npz) nor a sweep directory (cells/)")


def _task_kind(d: Path) -> str:
    """task.kind of a run directory, or of a sweep's first cell that has a config (classification when
    none has one yet: the report then lists the unfinished cells)."""
    configs = [d / "config.json"] if (d / "config.json").exists() else sorted((d / "cells").glob("*/config.json"))
    return read_config(configs[0].parent)["task"].get("kind", "classification") if configs else "classification"


def write_report(d: str | Path, n_boot: int = N_BOOT, seed: int = 0) -> list[str]:
    """Write DIR/report.md, DIR/report.json and DIR/figures/*.png|pdf; returns the written paths
    relative to DIR."""
    d = Path(d)
    kind = _check_dir(d)
    rng = np.random.default_rng(seed)
    task_kind = _task_kind(d)
    if task_kind == "memorization":
        raise ConfigError(f"{d}: memorization runs have no t_ICL report; summarise them with "
                          "`python experiments/memorization/analyze.py mlp DIR`")
    if task_kind == "linear_regression":  # losses and transition times, not t_ICL: a report of its own
        from icl_race.analysis import regression_report as regression

        report, md, figs = regression.run_report(d) if kind == "run" else regression.sweep_report(d)
    elif kind == "run":
        report, md, figs = _run_report(load_run(d), n_boot, rng)
    else:
        report, md, figs = _sweep_report(d, n_boot, rng)
    from icl_race import __version__

    written = []
    for name, fig in figs.items():
        written += _save_figure(fig, d / "figures", name)
    report |= {"icl_race_version": __version__, "n_boot": n_boot, "seed": seed, "figures": written}
    _atomic_write(d / "report.json", (json.dumps(_jsonable(report), indent=1, allow_nan=False) + "\n").encode())
    _atomic_write(d / "report.md", md.encode())
    return ["report.md", "report.json", *written]


def _text_histogram(t: np.ndarray, censor_at: int, bins: int = 12, width: int = 40) -> list[str]:
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


def _summary_line(cell: dict) -> str:
    if not cell.get("ok"):
        return f"{cell['label']}: {cell.get('reason')}"
    return (f"{cell['label']}: n={cell['n_seeds']} seeds ({cell['n_diverged']} diverged excluded), acquired "
            f"{cell['acquired']}, KM median t_ICL {_median_text(cell)} steps, never acquired {_never_text(cell)}")


def hist_text(d: str | Path, bins: int = 12) -> str:
    d = Path(d)
    kind = _check_dir(d)
    if kind == "run":
        run = load_run(d)
        cell = analyze_cell(run, tails=False)
        lines = [f"t_ICL of {d} ({cell['label']}), log-spaced bins, steps:"]
        lines += _text_histogram(run["t_icl"], run["censor_at"], bins) if run["t_icl"].size else ["(no seeds)"]
        return "\n".join(lines + [_summary_line(cell)])
    runs, unfinished = _discover_cells(d)
    cells = sorted((analyze_cell(r, tails=False) for r in runs),
                   key=lambda c: (c["variant"], c["N"] or 0, c["K"] or 0))
    lines = [f"sweep {d}: {len(runs)} finished cells, {len(unfinished)} unfinished"]
    lines += [_summary_line(c) for c in cells]
    return "\n".join(lines)
