"""Reports for linear-regression run and sweep directories (linear attention, arXiv 2501.16265; task.kind =
"linear_regression"), called by `icl_race.report.write_report`, which writes what this returns.

    run_report(DIR)    -> (report dict, report.md text, {figure name: Figure}) for one run directory
    sweep_report(DIR)  -> the same for a sweep directory (cells/<digest>/, each a run directory)

What a run reports: the theory plateau levels L(M_0) … L(M_D) of Eq. 19 for the run's spectrum and N
(`icl_race.theory.linear_attention.plateau_losses`; with rank-R heads the conspicuous ones are m a multiple
of R, spec §4.4), the loss curves over seeds (median and every seed, log time axis, the levels dotted), and
the distribution over seeds of each transition time t_m1 … t_mD and t_converged from results.npz (steps;
-1 = not reached, right-censored at the budget, or at steps_run if the run stopped early, never dropped):
Kaplan-Meier median with its 95% CI and quantiles of the reached seeds. The dwell on level m is
t_m(m+1) − t_m(m) (t_m0 = 0), over the seeds that reached both. Times are reported in units of τ
(step × train.lr) and steps. Seeds flagged in `diverged` are excluded and counted. Reads files only;
imports no jax.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from icl_race.analysis.survival import censored_times, kaplan_meier  # noqa: E402
from icl_race.config import ConfigError  # noqa: E402
from icl_race.theory.linear_attention import plateau_losses, spectrum  # noqa: E402

CURVES = {"loss": ("training loss", "black"), "iw_loss": ("in-weight test", "tab:red"),
          "ic_loss": ("in-context test", "tab:blue")}
MAX_LINES = 40  # per-seed lines drawn per curve; the median is over every seed


def is_regression(d: Path) -> bool:
    """Whether a run or sweep directory holds linear-regression runs (judged by one config.json)."""
    d = Path(d)
    configs = [d / "config.json"] if (d / "config.json").exists() else sorted((d / "cells").glob("*/config.json"))
    if not configs:
        return False
    try:
        return json.loads(configs[0].read_text()).get("task", {}).get("kind") == "linear_regression"
    except (OSError, json.JSONDecodeError, AttributeError):
        return False


# ---- loading ------------------------------------------------------------------------------------------

def levels(cfg: dict) -> np.ndarray:
    """[L(M_0), …, L(M_D)] (Eq. 19) for a run's config (config.json's dict)."""
    t = cfg["task"]
    lam_D = spectrum(t["spectrum"], int(t["D"]), alpha=float(t.get("alpha", 2.0)), values=t.get("lambdas") or None)
    return plateau_losses(lam_D, int(t["N"]))


def load(d: Path) -> dict:
    """One run directory: config, results (diverged seeds dropped), the censoring time, levels and dt."""
    d = Path(d)
    try:
        cfg = json.loads((d / "config.json").read_text())
        with np.load(d / "results.npz") as z:
            res = {k: z[k] for k in z.files}
    except FileNotFoundError as e:
        raise ConfigError(f"{d}: no {Path(e.filename).name} (run not finished)") from None
    except (OSError, ValueError) as e:
        raise ConfigError(f"{d}: unreadable run ({e})") from None
    D = int(cfg["task"]["D"])
    events = [*(f"m{m}" for m in range(1, D + 1)), "converged"]
    missing = [k for k in ("loss", "eval_steps", "budget", *(f"t_{e}" for e in events)) if k not in res]
    if missing:
        raise ConfigError(f"{d}/results.npz: missing {', '.join(missing)}")
    S = res["loss"].shape[0]
    keep = ~np.asarray(res.get("diverged", np.zeros(S, bool)), bool)
    budget = int(res["budget"])
    steps_run = int(res.get("steps_run", budget))
    t = {e: res[f"t_{e}"][keep].astype(np.int64) for e in events}
    # Stopped early with some event still unreached: those seeds were observed only until steps_run.
    censor_at = steps_run if steps_run < budget and any(np.any(v < 0) for v in t.values()) else budget
    return {"dir": d, "config": cfg, "events": events, "t": t, "censor_at": censor_at, "budget": budget,
            "steps_run": steps_run, "n_total": int(S), "n_diverged": int((~keep).sum()),
            "eval_steps": np.asarray(res["eval_steps"]), "dt": float(cfg["train"]["lr"]), "levels": levels(cfg),
            "curves": {k: np.asarray(res[k], float)[keep] for k in CURVES if k in res}}


def describe(cfg: dict) -> str:
    t, m = cfg["task"], cfg["model"]
    head = f"{m['kind']}{' softmax' if m.get('softmax') else ''}, H={m['heads']}"
    head += f", R={m['rank']}" if m["kind"] == "attn_s" else ""
    data = f"P={t['P'] or 'inf'}" + (f", c={t['icl_fraction']:g}" if t.get("icl_fraction", 1.0) < 1 else "")
    return f"{head}; D={t['D']}, N={t['N']}, {t['spectrum']} spectrum, {data}, dt={cfg['train']['lr']:g} tau/step"


def conspicuous(cfg: dict) -> list[int]:
    """The levels m the theory expects the loss to rest on: multiples of R for attn_s (rank-R heads, spec
    §4.4), only the start and the end for attn_m and the MLP (one drop, Eq. 10)."""
    D, m = int(cfg["task"]["D"]), cfg["model"]
    return list(range(0, D + 1, int(m["rank"]))) if m["kind"] == "attn_s" else [0, D]


# ---- statistics ---------------------------------------------------------------------------------------

def transition_stats(t_S: np.ndarray, censor_at: int, dt: float) -> dict:
    """One event over seeds: reached/censored counts, KM median and 95% CI, and quantiles of the reached
    seeds, in τ; the per-seed steps as recorded."""
    reached = t_S[t_S >= 0] * dt
    out = {"t_steps": t_S.tolist(), "reached": int(reached.size), "censored": int(np.sum(t_S < 0)),
           "censored_at_tau": censor_at * dt, "km_median_tau": None, "km_median_ci_tau": [None, None],
           "quantiles_tau": {q: (float(np.quantile(reached, q / 100)) if reached.size else None) for q in (10, 50, 90)}}
    if t_S.size:
        km = kaplan_meier(*censored_times(t_S, censor_at))
        scale = lambda v: None if v is None else v * dt
        out |= {"km_median_tau": scale(km["median"]), "km_median_ci_tau": [scale(v) for v in km["median_ci"]]}
    return out


def dwell_stats(t: dict, D: int, dt: float, level_L: np.ndarray) -> list[dict]:
    """Per level m = 0 … D−1: dwell t_m(m+1) − t_m(m) in τ (t_m0 = 0) and, for m ≥ 1, log10 t_m(m+1)/t_m(m)
    (the plateau's width on the log time axis), over the seeds that reached both."""
    rows = []
    for m in range(D):
        after = t[f"m{m + 1}"]
        before = t[f"m{m}"] if m else np.zeros_like(after)
        both = (after >= 0) & (before >= 0)
        dwell = (after - before)[both] * dt
        ratio = np.log10(after[both] / before[both]) if m and both.any() else np.array([])
        rows.append({"m": m, "level": float(level_L[m]), "n": int(both.sum()),
                     "median_tau": float(np.median(dwell)) if dwell.size else None,
                     "median_log10_ratio": float(np.median(ratio)) if ratio.size else None})
    return rows


def final_stats(run: dict) -> dict:
    out = {"L_MD": float(run["levels"][-1])}
    tau_T = run["eval_steps"] * run["dt"]
    for name, curve_SxT in run["curves"].items():
        if not curve_SxT.size:
            continue
        med_T = np.median(curve_SxT, axis=0)
        out[name] = {"final_median": float(med_T[-1]), "final_min": float(curve_SxT[:, -1].min()),
                     "final_max": float(curve_SxT[:, -1].max()), "median_min": float(med_T.min()),
                     "median_argmin_tau": float(tau_T[np.argmin(med_T)])}
    return out


def analyze(run: dict) -> dict:
    cfg, dt = run["config"], run["dt"]
    return {"dir": str(run["dir"]), "setup": describe(cfg), "dt": dt, "n_seeds": int(run["t"]["converged"].size),
            "n_diverged": run["n_diverged"], "budget": run["budget"], "steps_run": run["steps_run"],
            "censor_at": run["censor_at"], "levels": run["levels"].tolist(), "conspicuous_m": conspicuous(cfg),
            "transitions": {e: transition_stats(run["t"][e], run["censor_at"], dt) for e in run["events"]},
            "dwell": dwell_stats(run["t"], int(cfg["task"]["D"]), dt, run["levels"]), "final": final_stats(run)}


# ---- figures ------------------------------------------------------------------------------------------

def draw_curves(ax, run: dict, title: str = "") -> None:
    """Every curve of one run on one axes: each seed thin, the median thick, theory levels dotted."""
    tau_T = run["eval_steps"] * run["dt"]
    bold = set(conspicuous(run["config"]))
    for m, level in enumerate(run["levels"]):
        ax.axhline(level, color="gray", ls=":", lw=1.2 if m in bold else 0.6)
        ax.text(tau_T[0], level, f"L(M{m})", fontsize=6, color="gray", va="bottom")
    for name, curve_SxT in run["curves"].items():
        label, color = CURVES[name]
        for row_T in curve_SxT[:MAX_LINES]:
            ax.plot(tau_T, row_T, color=color, lw=0.4, alpha=0.25)
        if curve_SxT.size:
            ax.plot(tau_T, np.median(curve_SxT, axis=0), color=color, lw=1.8,
                    label=f"{label}, median of {curve_SxT.shape[0]}")
    ax.set_xscale("log")
    ax.set_xlabel("t (units of tau, log scale)")
    ax.set_ylabel("loss")
    ax.set_title(title, fontsize=9)
    ax.legend(frameon=False, fontsize=7, loc="upper right")


def loss_figure(run: dict) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(7.0, 4.4), layout="constrained")
    draw_curves(ax, run, describe(run["config"]))
    return fig


def transitions_figure(stats: dict) -> plt.Figure:
    """Per event, every seed's time (log τ) as a dot, the KM median as a bar, censored seeds counted."""
    events = list(stats["transitions"])
    fig, ax = plt.subplots(figsize=(7.0, 0.35 * len(events) + 1.6), layout="constrained")
    rng = np.random.default_rng(0)  # vertical jitter only, so coincident times stay visible
    for i, e in enumerate(events):
        st = stats["transitions"][e]
        t = np.asarray(st["t_steps"])
        hit = t[t >= 0] * stats["dt"]
        ax.scatter(hit, i + rng.uniform(-0.2, 0.2, hit.size), s=6, color="tab:blue", alpha=0.6)
        if st["km_median_tau"] is not None:
            ax.plot([st["km_median_tau"]] * 2, [i - 0.35, i + 0.35], color="black", lw=2)
        if st["censored"]:
            ax.text(st["censored_at_tau"], i, f" {st['censored']} censored", va="center", fontsize=7, color="gray")
    ax.set_yticks(range(len(events)), [f"t_{e}" for e in events])
    ax.set_xscale("log")
    ax.set_xlabel("t (units of tau, log scale); bar: Kaplan-Meier median")
    ax.set_title(f"transition times over {stats['n_seeds']} seeds", fontsize=9)
    return fig


def panels_figure(runs: list[dict], labels: list[str]) -> plt.Figure:
    n = len(runs)
    cols = min(3, n)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows), layout="constrained",
                             sharex=True, sharey=True, squeeze=False)
    for ax, run, label in zip(axes.flat, runs, labels):
        draw_curves(ax, run, label)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig


def medians_figure(runs: list[dict], labels: list[str]) -> plt.Figure:
    """The median training loss of every cell on one axes (e.g. Fig 1: ATTN_M and the MLP overlap)."""
    fig, ax = plt.subplots(figsize=(7.0, 4.4), layout="constrained")
    styles = ["-", "--", ":", "-."]
    for i, (run, label) in enumerate(zip(runs, labels)):
        loss_SxT = run["curves"]["loss"]
        ax.plot(run["eval_steps"] * run["dt"], np.median(loss_SxT, axis=0), ls=styles[i % 4], lw=1.6,
                label=f"{label} (median of {loss_SxT.shape[0]})")
    for level in np.unique(np.concatenate([r["levels"] for r in runs])):
        ax.axhline(level, color="gray", ls=":", lw=0.7)
    ax.set_xscale("log")
    ax.set_xlabel("t (units of tau, log scale)")
    ax.set_ylabel("training loss")
    ax.legend(frameon=False, fontsize=8)
    return fig


# ---- markdown -----------------------------------------------------------------------------------------

def _tau(v) -> str:
    return "–" if v is None else f"{v:,.4g}"


def run_markdown(st: dict) -> list[str]:
    md = [f"Seeds: {st['n_seeds']} ({st['n_diverged']} diverged, excluded); budget {st['budget']:,} steps "
          f"({st['budget'] * st['dt']:,.4g} tau), run {st['steps_run']:,}; unreached seeds censored at "
          f"{st['censor_at'] * st['dt']:,.4g} tau.", "",
          "| level m | L(M_m) (Eq. 19) | conspicuous | dwell median (tau) | median log10 t_(m+1)/t_m | seeds |",
          "|---|---|---|---|---|---|"]
    dwell = {r["m"]: r for r in st["dwell"]}
    for m, level in enumerate(st["levels"]):
        r = dwell.get(m, {})
        ratio = r.get("median_log10_ratio")
        md.append(f"| {m} | {level:.6f} | {'yes' if m in st['conspicuous_m'] else 'no'} | "
                  f"{_tau(r.get('median_tau'))} | {'–' if ratio is None else f'{ratio:.3f}'} | {r.get('n', '–')} |")
    md += ["", "| event | reached | censored | KM median (tau) [95% CI] | 10% / 50% / 90% of reached (tau) |",
           "|---|---|---|---|---|"]
    for e, t in st["transitions"].items():
        lo, hi = t["km_median_ci_tau"]
        q = t["quantiles_tau"]
        md.append(f"| t_{e} | {t['reached']} | {t['censored']} | {_tau(t['km_median_tau'])} [{_tau(lo)}, "
                  f"{_tau(hi) if hi is not None else 'beyond'}] | {_tau(q[10])} / {_tau(q[50])} / {_tau(q[90])} |")
    md += ["", f"Final losses (L(M_D) = {st['final']['L_MD']:.6f}):", ""]
    for name, f in st["final"].items():
        if name != "L_MD":
            md.append(f"- {CURVES[name][0]}: median {f['final_median']:.6f} (seeds {f['final_min']:.6f} – "
                      f"{f['final_max']:.6f}); lowest median {f['median_min']:.6f} at t = "
                      f"{f['median_argmin_tau']:,.4g} tau")
    return md


# ---- entry points -------------------------------------------------------------------------------------

def run_report(d: Path) -> tuple[dict, str, dict]:
    run = load(d)
    st = analyze(run)
    md = [f"# Linear-regression report: {d}", "", st["setup"], ""] + run_markdown(st)
    md += ["", "![loss curves](figures/loss_curves.png)", "", "![transition times](figures/transition_times.png)"]
    figs = {"loss_curves": loss_figure(run), "transition_times": transitions_figure(st)}
    return {"kind": "linear_regression_run", **st}, "\n".join(md) + "\n", figs


def _grid_fields(d: Path) -> list[str]:
    try:
        return list(tomllib.loads((d / "sweep.toml").read_text()).get("grid", {}))
    except (OSError, tomllib.TOMLDecodeError):
        return []


def _value(cfg: dict, field: str):
    sec, _, key = field.partition(".")
    return cfg.get(sec, {}).get(key)


def sweep_report(d: Path) -> tuple[dict, str, dict]:
    """Every finished cell as in run_report, a table of the cells side by side, one panel of loss
    curves per cell and the cells' median losses overlaid. Cells are labelled by the grid's fields
    (sweep.toml) and ordered by their values."""
    d = Path(d)
    fields = _grid_fields(d)
    runs, unfinished = [], []
    for cell in sorted(p for p in (d / "cells").iterdir() if p.is_dir()):
        try:
            runs.append(load(cell))
        except ConfigError as e:
            unfinished.append({"cell": cell.name, "reason": str(e)})
    if not runs:
        raise ConfigError(f"{d}: no finished cells")
    numeric = lambda v: (0, float(v), "") if isinstance(v, (int, float)) else (1, 0.0, str(v))
    runs.sort(key=lambda r: [numeric(_value(r["config"], f)) for f in fields])
    labels = [", ".join(f"{f.partition('.')[2]}={_value(r['config'], f)}" for f in fields) or r["dir"].name
              for r in runs]
    cells = [{"cell": r["dir"].name, "label": lab, "values": {f: _value(r["config"], f) for f in fields}, **analyze(r)}
             for r, lab in zip(runs, labels)]
    D = max(len(c["levels"]) - 1 for c in cells)
    md = [f"# Linear-regression sweep report: {d}", "", f"{len(cells)} finished cells, {len(unfinished)} unfinished.",
          "", "Median over seeds of each transition time t_m (tau; reached/seeds) and of the dwell on each level "
          "(tau); the level values and per-cell details follow.", "",
          "| cell | setup | final loss (median) | " + " | ".join(f"t_m{m}" for m in range(1, D + 1)) + " | "
          + " | ".join(f"dwell {m}" for m in range(D)) + " |",
          "|---|---|---|" + "---|" * (2 * D)]
    for c in cells:
        tr = c["transitions"]
        t = [f"{_tau(tr[f'm{m}']['km_median_tau'])} ({tr[f'm{m}']['reached']}/{c['n_seeds']})"
             if f"m{m}" in tr else "" for m in range(1, D + 1)]
        w = [_tau(r["median_tau"]) for r in c["dwell"]] + [""] * (D - len(c["dwell"]))
        md.append(f"| {c['label']} | {c['setup']} | {c['final']['loss']['final_median']:.6f} | "
                  + " | ".join(t + w) + " |")
    for c in cells:
        md += ["", f"## {c['label']}", "", c["setup"], ""] + run_markdown(c)
    if unfinished:
        md += ["", "Unfinished or unreadable cells (skipped):", ""]
        md += [f"- `{u['cell']}`: {u['reason']}" for u in unfinished]
    md += ["", "![loss curves per cell](figures/loss_curves.png)", "",
           "![median training loss of every cell](figures/loss_medians.png)"]
    figs = {"loss_curves": panels_figure(runs, labels), "loss_medians": medians_figure(runs, labels)}
    return {"kind": "linear_regression_sweep", "fields": fields, "cells": cells, "unfinished": unfinished}, \
        "\n".join(md) + "\n", figs
