"""Reports for linear-regression run and sweep directories (linear attention, arXiv 2501.16265; task.kind =
"linear_regression"), called by `icl_race.report.write_report`, which writes what this returns. The statistics are in
`icl_race.analysis.regression`, the figures in `icl_race.plots.regression`.

    run_report(run, draws)      -> (report dict, report.md text, {figure name: Figure}) for one run
    sweep_report(sweep, draws)  -> the same for a sweep directory (cells/<digest>/, each a run directory)

What a run reports: the theory plateau levels L(M_0) … L(M_D) of Eq. 19 for the run's spectrum and N
(`icl_race.theory.linear_attention.plateau_losses`; with rank-R heads the conspicuous ones are m a multiple
of R), the loss curves over seeds (median and every seed, log time axis, the levels dotted), and
the distribution over seeds of each transition time t_m1 … t_mD and t_converged from results.npz (steps;
-1 = not reached, right-censored at the budget, or at steps_run if the run stopped early, never dropped):
Kaplan-Meier median with its 95% CI and quantiles of the reached seeds. The dwell on level m is
t_m(m+1) − t_m(m) (t_m0 = 0), over the seeds that reached both, and the loss on it is read at the
evaluation nearest the log-midpoint √(t_m(m) · t_m(m+1)) (t_m0 = the first evaluation). Times are reported
in units of τ (step × train.lr) and steps. Seeds flagged in `diverged` are excluded and counted.

For rank-1 attn_s runs (Fig 3) the report also follows, per transition M_m → M_(m+1) and seed, the head
that escapes (the one whose |v_i| grows most from t_m(m) to t_m(m+1)) against the scalar ODE of Eq. 21:
the ODE starts (t = 0, v0 = |v_i|) at the last evaluation before |v_i| first reaches START_FRAC · v*, and
the measured time from there to v*/2 is compared with the ODE's (`match_eq21`). Figure heads_eq21: (b)
|v_i(t)| of a few seeds with their ODE solutions, (c) the cosines of k_i and q_i with e_(m+1).
Imports no jax.
"""

from __future__ import annotations

import numpy as np

from icl_race import rundir
from icl_race.analysis.regression import (
    ALIGNED,
    HEAD_KEYS,
    START_FRAC,
    conspicuous,
    dwell_stats,
    eq21_matches,
    eq21_stats,
    final_stats,
    has_heads,
    lambdas,
    levels,
    transition_stats,
)
from icl_race.config import ConfigError
from icl_race.plots.regression import (
    CURVES,
    heads_figure,
    loss_figure,
    medians_figure,
    panels_figure,
    transitions_figure,
)
from icl_race.theory.linear_attention import staircase


def run_dict(run: rundir.Run) -> dict:
    cfg = run.config
    D = int(cfg["task"]["D"])
    events = [*(f"m{m}" for m in range(1, D + 1)), "converged"]
    missing = [f"t_{e}" for e in events if e not in run.times] + ([] if "loss" in run.curves else ["loss"])
    if missing:
        raise ConfigError(f"{run.dir}/results.npz: missing {', '.join(missing)}")
    return {
        "dir": run.dir,
        "config": cfg,
        "events": events,
        "t": {e: run.t(e) for e in events},
        "censor_at": run.censor_at(*events),
        "budget": run.budget,
        "steps_run": run.steps_run,
        "n_diverged": int(run.diverged.sum()),
        "eval_steps": run.eval_steps,
        "dt": float(cfg["train"]["lr"]),
        "levels": levels(cfg),
        "curves": {k: np.asarray(run.curve(k), float) for k in CURVES if k in run.curves},
        "heads": {k: np.asarray(run.curve(k), float) for k in HEAD_KEYS if k in run.curves},
    }


def describe(cfg: dict) -> str:
    t, m = cfg["task"], cfg["model"]
    head = f"{m['kind']}{' softmax' if m.get('softmax') else ''}, H={m['heads']}"
    head += f", R={m['rank']}" if m["kind"] == "attn_s" else ""
    data = f"P={t['P'] or 'inf'}" + (f", c={t['icl_fraction']:g}" if t.get("icl_fraction", 1.0) < 1 else "")
    return f"{head}; D={t['D']}, N={t['N']}, {t['spectrum']} spectrum, {data}, dt={cfg['train']['lr']:g} tau/step"


def analyze(run: dict) -> dict:
    cfg, dt = run["config"], run["dt"]
    out = {
        "dir": str(run["dir"]),
        "setup": describe(cfg),
        "dt": dt,
        "n_seeds": int(run["t"]["converged"].size),
        "n_diverged": run["n_diverged"],
        "budget": run["budget"],
        "steps_run": run["steps_run"],
        "censor_at": run["censor_at"],
        "levels": run["levels"].tolist(),
        "conspicuous_m": conspicuous(cfg),
        "transitions": {e: transition_stats(run["t"][e], run["censor_at"], dt) for e in run["events"]},
        "dwell": dwell_stats(
            run["t"], int(cfg["task"]["D"]), dt, run["levels"], run["curves"]["loss"], run["eval_steps"]
        ),
        "final": final_stats(run),
    }
    if has_heads(run):
        ref = staircase(lambdas(cfg), int(cfg["task"]["N"]))
        matches = eq21_matches(run)
        out["eq21"] = {
            "start_frac": START_FRAC,
            "transitions": eq21_stats(matches, ref["lam"], ref["vstar"]),
            "matches": matches,
        }
    return out


def _tau(v) -> str:
    return "–" if v is None else f"{v:,.4g}"


def _pct(v) -> str:
    return "–" if v is None else f"{v:.2%}"


def run_markdown(st: dict) -> list[str]:
    md = [
        f"Seeds: {st['n_seeds']} ({st['n_diverged']} diverged, excluded); budget {st['budget']:,} steps "
        f"({st['budget'] * st['dt']:,.4g} tau), run {st['steps_run']:,}; unreached seeds censored at "
        f"{st['censor_at'] * st['dt']:,.4g} tau.",
        "",
        "| level m | L(M_m) (Eq. 19) | loss at the log-midpoint, median [10%, 90%] | conspicuous | "
        "dwell median (tau) | median log10 t_(m+1)/t_m | seeds |",
        "|---|---|---|---|---|---|---|",
    ]
    dwell = {r["m"]: r for r in st["dwell"]}
    for m, level in enumerate(st["levels"]):
        r = dwell.get(m, {})
        ratio, mid = r.get("median_log10_ratio"), r.get("mid_loss")
        md.append(
            f"| {m} | {level:.6f} | {'–' if mid is None else f'{mid[0]:.6f} [{mid[1]:.6f}, {mid[2]:.6f}]'} | "
            f"{'yes' if m in st['conspicuous_m'] else 'no'} | "
            f"{_tau(r.get('median_tau'))} | {'–' if ratio is None else f'{ratio:.3f}'} | {r.get('n', '–')} |"
        )
    md += [
        "",
        "| event | reached | censored | KM median (tau) [95% CI] | 10% / 50% / 90% of reached (tau) |",
        "|---|---|---|---|---|",
    ]
    for e, t in st["transitions"].items():
        lo, hi = t["km_median_ci_tau"]
        q = t["quantiles_tau"]
        md.append(
            f"| t_{e} | {t['reached']} | {t['censored']} | {_tau(t['km_median_tau'])} [{_tau(lo)}, "
            f"{_tau(hi) if hi is not None else 'beyond'}] | {_tau(q[10])} / {_tau(q[50])} / {_tau(q[90])} |"
        )
    md += ["", f"Final losses (L(M_D) = {st['final']['L_MD']:.6f}):", ""]
    for name, f in st["final"].items():
        if name != "L_MD":
            md.append(
                f"- {CURVES[name][0]}: median {f['final_median']:.6f} (seeds {f['final_min']:.6f} – "
                f"{f['final_max']:.6f}); lowest median {f['median_min']:.6f} at t = "
                f"{f['median_argmin_tau']:,.4g} tau"
            )
    return md + (eq21_markdown(st["eq21"]) if "eq21" in st else [])


def eq21_markdown(eq21: dict) -> list[str]:
    md = [
        "",
        f"Escaping heads against Eq. 21 (the head whose |v| grows most across the transition; ODE started "
        f"at the last evaluation before |v| reaches {eq21['start_frac']:g} v*; error = measured / predicted − 1 "
        "of the time from there to v*/2; grown before: |v| was past the start already when the transition began; "
        f"in the ansatz (Eq. 20): not grown before and cos k · cos q ≥ {ALIGNED:g} at the start):",
        "",
        "| transition | lambda | v* | seeds (grown before) | v0/v* (median) | cos k, cos q at start (median) | "
        "error median [10%, 90%] | median abs error | max abs error in the ansatz (seeds) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in eq21["transitions"]:
        seeds = f"{r['n']} ({r['n_grown_before']})"
        head = f"| {r['m']}→{r['m'] + 1} | {r['lam']:.4g} | {r['vstar']:.4f} | {seeds} | "
        if not r["n"]:
            md.append(head + "– | – | – | – | – |")
            continue
        e = r["rel_err"]
        md.append(
            head + f"{r['u0_median']:.3f} | "
            f"{r['cos_k_median']:.3f}, {r['cos_q_median']:.3f} | {e[0]:+.2%} [{e[1]:+.2%}, {e[2]:+.2%}] | "
            f"{r['abs_rel_err_median']:.2%} | {_pct(r['ansatz_abs_err_max'])} ({r['n_ansatz']}) |"
        )
    return md


# ---- entry points -------------------------------------------------------------------------------------


def run_report(found: rundir.Run, draws) -> tuple[dict, str, dict]:
    """The report of one run (no resampled statistics here: the draws are not used)."""
    run = run_dict(found)
    d = found.dir
    st = analyze(run)
    md = [f"# Linear-regression report: {d}", "", st["setup"], ""] + run_markdown(st)
    md += ["", "![loss curves](figures/loss_curves.png)", "", "![transition times](figures/transition_times.png)"]
    figs = {"loss_curves": loss_figure(run, describe(run["config"])), "transition_times": transitions_figure(st)}
    if "eq21" in st:
        md += ["", "![escaping heads against Eq. 21](figures/heads_eq21.png)"]
        figs["heads_eq21"] = heads_figure(run, st["eq21"])
    return {"kind": "linear_regression_run", **st}, "\n".join(md) + "\n", figs


def _value(cfg: dict, field: str):
    sec, _, key = field.partition(".")
    return cfg.get(sec, {}).get(key)


def sweep_report(sweep: rundir.SweepDir, draws) -> tuple[dict, str, dict]:
    """Every finished cell as in run_report, a table of the cells side by side, one panel of loss
    curves per cell and the cells' median losses overlaid. Cells are labelled by the grid's fields
    (sweep.toml) and ordered by their values."""
    d = sweep.dir
    fields = sweep.fields
    runs, unfinished = [], []
    for cell in sweep.cells:
        try:
            if cell.run is None:
                raise ConfigError(f"{cell.dir}: {cell.reason}" if cell.config else cell.reason)
            runs.append(run_dict(cell.run))
        except ConfigError as e:
            unfinished.append({"cell": cell.name, "reason": str(e)})
    if not runs:
        raise ConfigError(f"{d}: no finished cells")
    numeric = lambda v: (0, float(v), "") if isinstance(v, (int, float)) else (1, 0.0, str(v))
    runs.sort(key=lambda r: [numeric(_value(r["config"], f)) for f in fields])
    labels = [
        ", ".join(f"{f.partition('.')[2]}={_value(r['config'], f)}" for f in fields) or r["dir"].name for r in runs
    ]
    cells = [
        {"cell": r["dir"].name, "label": lab, "values": {f: _value(r["config"], f) for f in fields}, **analyze(r)}
        for r, lab in zip(runs, labels)
    ]
    D = max(len(c["levels"]) - 1 for c in cells)
    md = [
        f"# Linear-regression sweep report: {d}",
        "",
        f"{len(cells)} finished cells, {len(unfinished)} unfinished.",
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
        tr = c["transitions"]
        t = [
            f"{_tau(tr[f'm{m}']['km_median_tau'])} ({tr[f'm{m}']['reached']}/{c['n_seeds']})" if f"m{m}" in tr else ""
            for m in range(1, D + 1)
        ]
        w = [_tau(r["median_tau"]) for r in c["dwell"]] + [""] * (D - len(c["dwell"]))
        md.append(
            f"| {c['label']} | {c['setup']} | {c['final']['loss']['final_median']:.6f} | " + " | ".join(t + w) + " |"
        )
    for c in cells:
        md += ["", f"## {c['label']}", "", c["setup"], ""] + run_markdown(c)
    if unfinished:
        md += ["", "Unfinished or unreadable cells (skipped):", ""]
        md += [f"- `{u['cell']}`: {u['reason']}" for u in unfinished]
    md += [
        "",
        "![loss curves per cell](figures/loss_curves.png)",
        "",
        "![median training loss of every cell](figures/loss_medians.png)",
    ]
    figs = {"loss_curves": panels_figure(runs, labels), "loss_medians": medians_figure(runs, labels)}
    return (
        {"kind": "linear_regression_sweep", "fields": fields, "cells": cells, "unfinished": unfinished},
        "\n".join(md) + "\n",
        figs,
    )
