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
t_m(m+1) − t_m(m) (t_m0 = 0), over the seeds that reached both, and the loss on it is read at the
evaluation nearest the log-midpoint √(t_m(m) · t_m(m+1)) (t_m0 = the first evaluation). Times are reported
in units of τ (step × train.lr) and steps. Seeds flagged in `diverged` are excluded and counted.

For rank-1 attn_s runs (Fig 3) the report also follows, per transition M_m → M_(m+1) and seed, the head
that escapes (the one whose |v_i| grows most from t_m(m) to t_m(m+1)) against the scalar ODE of Eq. 21:
the ODE starts (t = 0, v0 = |v_i|) at the last evaluation before |v_i| first reaches START_FRAC · v*, and
the measured time from there to v*/2 is compared with the ODE's (`match_eq21`). Figure heads_eq21: (b)
|v_i(t)| of a few seeds with their ODE solutions, (c) the cosines of k_i and q_i with e_(m+1).
Reads files only; imports no jax.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from icl_race.analysis.survival import censored_times, kaplan_meier  # noqa: E402
from icl_race import rundir  # noqa: E402
from icl_race.config import ConfigError  # noqa: E402
from icl_race.theory.linear_attention import (  # noqa: E402
    plateau_losses,
    scalar_ode_solution,
    scalar_ode_time,
    spectrum,
    staircase,
)

CURVES = {"loss": ("training loss", "black"), "iw_loss": ("in-weight test", "tab:red"),
          "ic_loss": ("in-context test", "tab:blue")}
MAX_LINES = 40  # per-seed lines drawn per curve; the median is over every seed
HEAD_KEYS = ("v", "k_align", "q_align", "k_norm", "q_norm")
# Eq. 21 assumes the escaping head's key and query already lie along e_(m+1) (Eq. 20). From small init they
# do not at t_m(m); by the time |v| reaches 0.1 v* they mostly do (median cosines 0.98 on fig3.toml), so the
# ODE is started there rather than at the start of the plateau.
START_FRAC = 0.1
ALIGNED = 0.9  # cos(k, e) · cos(q, e) at the start above which a head counts as in Eq. 20's ansatz
N_SHOWN = 6  # seeds drawn in panels (b) and (c); the statistics are over every seed


# ---- loading ------------------------------------------------------------------------------------------

def lambdas(cfg: dict) -> np.ndarray:
    """λ_1 ≥ … ≥ λ_D of a run's config (config.json's dict)."""
    t = cfg["task"]
    return spectrum(t["spectrum"], int(t["D"]), alpha=float(t.get("alpha", 2.0)), values=t.get("lambdas") or None)


def levels(cfg: dict) -> np.ndarray:
    """[L(M_0), …, L(M_D)] (Eq. 19) for a run's config."""
    return plateau_losses(lambdas(cfg), int(cfg["task"]["N"]))


def load(d: Path) -> dict:
    """One run directory: config, results (diverged seeds dropped), the censoring time, levels and dt."""
    return run_dict(rundir.load_run(d))


def run_dict(run: rundir.Run) -> dict:
    cfg = run.config
    D = int(cfg["task"]["D"])
    events = [*(f"m{m}" for m in range(1, D + 1)), "converged"]
    missing = [f"t_{e}" for e in events if e not in run.times] + ([] if "loss" in run.curves else ["loss"])
    if missing:
        raise ConfigError(f"{run.dir}/results.npz: missing {', '.join(missing)}")
    return {"dir": run.dir, "config": cfg, "events": events, "t": {e: run.t(e) for e in events},
            "censor_at": run.censor_at(*events), "budget": run.budget,
            "steps_run": run.steps_run, "n_diverged": int(run.diverged.sum()),
            "eval_steps": run.eval_steps, "dt": float(cfg["train"]["lr"]), "levels": levels(cfg),
            "curves": {k: np.asarray(run.curve(k), float) for k in CURVES if k in run.curves},
            "heads": {k: np.asarray(run.curve(k), float) for k in HEAD_KEYS if k in run.curves}}


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


def dwell_stats(t: dict, D: int, dt: float, level_L: np.ndarray, loss_SxT: np.ndarray,
                eval_steps_T: np.ndarray) -> list[dict]:
    """Per level m = 0 … D−1: dwell t_m(m+1) − t_m(m) in τ (t_m0 = 0), for m ≥ 1 log10 t_m(m+1)/t_m(m)
    (the plateau's width on the log time axis), and the loss at the log-midpoint (median, 10% and 90%),
    over the seeds that reached both."""
    rows = []
    for m in range(D):
        after = t[f"m{m + 1}"]
        before = t[f"m{m}"] if m else np.zeros_like(after)
        both = (after >= 0) & (before >= 0)
        dwell = (after - before)[both] * dt
        ratio = np.log10(after[both] / before[both]) if m and both.any() else np.array([])
        mid = np.sqrt(np.maximum(before[both], eval_steps_T[0]) * after[both])
        mid_loss = loss_SxT[both, np.searchsorted(eval_steps_T, mid)]
        rows.append({"m": m, "level": float(level_L[m]), "n": int(both.sum()),
                     "median_tau": float(np.median(dwell)) if dwell.size else None,
                     "median_log10_ratio": float(np.median(ratio)) if ratio.size else None,
                     "mid_loss": [float(np.quantile(mid_loss, q)) for q in (0.5, 0.1, 0.9)] if mid.size else None})
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


def escaping_head(v_TxH: np.ndarray, i0: int, i1: int) -> int:
    """The head whose |v| grows most from evaluation i0 to evaluation i1 (a transition's start and end)."""
    return int(np.argmax(np.abs(v_TxH[i1]) - np.abs(v_TxH[i0])))


def match_eq21(tau_T: np.ndarray, absv_T: np.ndarray, i0: int, lam: float, c: float,
               start_frac: float = START_FRAC) -> dict | None:
    """One head's escape against Eq. 21 (λ = λ_(m+1), c = c_(m+1), v* = (λc)^(−1/3)), from evaluation i0 on.

    Start: the last evaluation a ≥ i0 before |v| first reaches start_frac · v*; the ODE's t = 0 is there and
    v0 = |v(t_a)|. Measured: the time from t_a until |v| reaches v*/2, interpolated between the evaluations
    around the crossing linearly in the ODE's own clock s(v) = scalar_ode_time(v, v0), along which an exact
    solution is a straight line in t, so the grid adds no error when Eq. 21 holds. Predicted: s(v*/2).
    None when |v| never reaches v*/2, or had already at i0. grown_before: |v| was above start_frac · v* at i0
    already (the head grew partly in an earlier transition), so the start is i0 itself."""
    vstar = (lam * c) ** (-1.0 / 3.0)
    above = np.nonzero(absv_T[i0:] >= start_frac * vstar)[0]
    half = np.nonzero(absv_T[i0:] >= vstar / 2)[0]
    if not half.size or half[0] == 0:
        return None
    a, h = i0 + max(above[0] - 1, 0), i0 + half[0]
    v0 = float(absv_T[a])
    # v just above v* (grid noise) would fall on the other branch of the clock: hold it just below
    s_prev, s_next, s_half = scalar_ode_time(np.minimum([absv_T[h - 1], absv_T[h], vstar / 2], vstar * (1 - 1e-9)),
                                             v0, lam, c)
    t_half = tau_T[h - 1] + (tau_T[h] - tau_T[h - 1]) * (s_half - s_prev) / (s_next - s_prev)
    measured = float(t_half - tau_T[a])
    return {"start": int(a), "grown_before": bool(above[0] == 0), "t0_tau": float(tau_T[a]), "v0": v0,
            "u0": v0 / vstar, "measured_tau": measured,
            "predicted_tau": float(s_half), "rel_err": measured / float(s_half) - 1.0}


def eq21_matches(run: dict) -> list[list[dict]]:
    """Per transition M_m → M_(m+1) (m = 0 … D−1), over the seeds that reached t_m(m) and t_m(m+1): the
    escaping head, its `match_eq21`, and the cosines of its key and query with e_(m+1) at the ODE's start."""
    cfg, heads, ev_T = run["config"], run["heads"], run["eval_steps"]
    ref = staircase(lambdas(cfg), int(cfg["task"]["N"]))
    out = []
    for m in range(len(ref["lam"])):
        rows = []
        for s in range(heads["v"].shape[0]):
            start, end = (run["t"][f"m{m}"][s] if m else 0), run["t"][f"m{m + 1}"][s]
            if start < 0 or end < 0:
                continue
            i0, i1 = np.searchsorted(ev_T, [start, end])  # events fire at evaluations
            j = escaping_head(heads["v"][s], i0, i1)
            match = match_eq21(ev_T * run["dt"], np.abs(heads["v"][s, :, j]), i0, ref["lam"][m], ref["c"][m])
            if match is None:
                continue
            a = match["start"]
            rows.append({"seed": s, "head": j, **match,
                         "cos_k": float(abs(heads["k_align"][s, a, j, 0, m]) / heads["k_norm"][s, a, j]),
                         "cos_q": float(abs(heads["q_align"][s, a, j, 0, m]) / heads["q_norm"][s, a, j])})
        out.append(rows)
    return out


def eq21_stats(matches: list[list[dict]], lam_D: np.ndarray, vstar_D: np.ndarray) -> list[dict]:
    """Per transition: seeds matched (and how many of them grown_before), medians of u0 = v0/v* and of the
    start cosines, the relative error measured/predicted − 1 of the time to v*/2 (median, 10%, 90%, median of
    its absolute value), and the largest |error| over the seeds in Eq. 20's ansatz at the start (not
    grown_before, cos_k · cos_q ≥ ALIGNED) with their number."""
    out = []
    for m, rows in enumerate(matches):
        col = {k: np.array([r[k] for r in rows]) for k in ("u0", "cos_k", "cos_q", "rel_err", "grown_before")}
        ansatz = ~col["grown_before"].astype(bool) & (col["cos_k"] * col["cos_q"] >= ALIGNED)
        out.append({"m": m, "lam": float(lam_D[m]), "vstar": float(vstar_D[m]), "n": len(rows),
                    "n_grown_before": int(np.sum(col["grown_before"])), "n_ansatz": int(ansatz.sum()),
                    "ansatz_abs_err_max": float(np.abs(col["rel_err"][ansatz]).max()) if ansatz.any() else None}
                   | ({"u0_median": float(np.median(col["u0"])), "cos_k_median": float(np.median(col["cos_k"])),
                       "cos_q_median": float(np.median(col["cos_q"])),
                       "rel_err": [float(np.quantile(col["rel_err"], q)) for q in (0.5, 0.1, 0.9)],
                       "abs_rel_err_median": float(np.median(np.abs(col["rel_err"])))} if rows else {}))
    return out


def has_heads(run: dict) -> bool:
    """Rank-1 attn_s with the per-head probes recorded: Eq. 21 applies."""
    m = run["config"]["model"]
    return m["kind"] == "attn_s" and int(m["rank"]) == 1 and set(HEAD_KEYS) <= set(run["heads"])


def analyze(run: dict) -> dict:
    cfg, dt = run["config"], run["dt"]
    out = {"dir": str(run["dir"]), "setup": describe(cfg), "dt": dt, "n_seeds": int(run["t"]["converged"].size),
           "n_diverged": run["n_diverged"], "budget": run["budget"], "steps_run": run["steps_run"],
           "censor_at": run["censor_at"], "levels": run["levels"].tolist(), "conspicuous_m": conspicuous(cfg),
           "transitions": {e: transition_stats(run["t"][e], run["censor_at"], dt) for e in run["events"]},
           "dwell": dwell_stats(run["t"], int(cfg["task"]["D"]), dt, run["levels"], run["curves"]["loss"],
                                run["eval_steps"]),
           "final": final_stats(run)}
    if has_heads(run):
        ref = staircase(lambdas(cfg), int(cfg["task"]["N"]))
        matches = eq21_matches(run)
        out["eq21"] = {"start_frac": START_FRAC, "transitions": eq21_stats(matches, ref["lam"], ref["vstar"]),
                       "matches": matches}
    return out


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


def heads_figure(run: dict, eq21: dict) -> plt.Figure:
    """Fig 3 (b) and (c), one column per transition M_m → M_(m+1), the first N_SHOWN seeds, one colour each.
    (b) |v(t)| of the escaping head against its Eq. 21 solution (black dashed) from the matched start, time
    from that start in τ, v* dotted. (c) cos(k, e_(m+1)) (solid) and cos(q, e_(m+1)) (dashed) of the same
    head over the whole run (log τ), the matched start marked."""
    cfg, heads, tau_T = run["config"], run["heads"], run["eval_steps"] * run["dt"]
    ref = staircase(lambdas(cfg), int(cfg["task"]["N"]))
    D = len(ref["lam"])
    fig, axes = plt.subplots(2, D, figsize=(3.3 * D, 6.0), layout="constrained", squeeze=False)
    colors = plt.get_cmap("tab10").colors
    for m, (rows, st) in enumerate(zip(eq21["matches"], eq21["transitions"])):
        ax_b, ax_c = axes[0, m], axes[1, m]
        lam, c, vstar = ref["lam"][m], ref["c"][m], ref["vstar"][m]
        shown = [r for r in rows if r["seed"] < N_SHOWN]
        span = 3 * np.median([r["predicted_tau"] for r in rows]) if rows else 1.0
        x_ode = np.linspace(0, span, 200)
        for r in shown:
            s, j, color = r["seed"], r["head"], colors[r["seed"] % len(colors)]
            x_T = tau_T - r["t0_tau"]
            ax_b.plot(x_T, np.abs(heads["v"][s, :, j]), color=color, lw=1.2, marker=".", ms=3)
            ax_b.plot(x_ode, scalar_ode_solution(x_ode, r["v0"], lam, c), color="black", ls="--", lw=0.8)
            ax_c.plot(tau_T, np.abs(heads["k_align"][s, :, j, 0, m]) / heads["k_norm"][s, :, j], color=color, lw=1)
            ax_c.plot(tau_T, np.abs(heads["q_align"][s, :, j, 0, m]) / heads["q_norm"][s, :, j], color=color,
                      lw=1, ls="--")
            ax_c.plot(r["t0_tau"], r["cos_k"], "o", color=color, ms=4)
        ax_b.axhline(vstar, color="gray", ls=":", lw=1)
        ax_b.set_xlim(-span / 2, span)
        ax_b.set_ylim(0, 1.1 * vstar)
        if st["n"]:
            ax_b.text(0.03, 0.85, f"time to v*/2 vs Eq. 21:\n{st['rel_err'][0]:+.1%} (median of {st['n']})",
                      transform=ax_b.transAxes, fontsize=7, va="top")
        ax_b.set_title(f"(b) M{m}→M{m + 1}: λ={lam:.3g}, v*={vstar:.3g}", fontsize=9)
        ax_b.set_xlabel("t − start of the ODE (tau)")
        ax_c.set_xscale("log")
        ax_c.set_ylim(0, 1.05)
        ax_c.set_title(f"(c) cos(k, e{m + 1}) solid, cos(q, e{m + 1}) dashed", fontsize=9)
        ax_c.set_xlabel("t (tau, log scale); dot: ODE start")
    axes[0, 0].set_ylabel("|v| (Eq. 21 dashed)")
    axes[1, 0].set_ylabel("cosine")
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


def _pct(v) -> str:
    return "–" if v is None else f"{v:.2%}"


def run_markdown(st: dict) -> list[str]:
    md = [f"Seeds: {st['n_seeds']} ({st['n_diverged']} diverged, excluded); budget {st['budget']:,} steps "
          f"({st['budget'] * st['dt']:,.4g} tau), run {st['steps_run']:,}; unreached seeds censored at "
          f"{st['censor_at'] * st['dt']:,.4g} tau.", "",
          "| level m | L(M_m) (Eq. 19) | loss at the log-midpoint, median [10%, 90%] | conspicuous | "
          "dwell median (tau) | median log10 t_(m+1)/t_m | seeds |",
          "|---|---|---|---|---|---|---|"]
    dwell = {r["m"]: r for r in st["dwell"]}
    for m, level in enumerate(st["levels"]):
        r = dwell.get(m, {})
        ratio, mid = r.get("median_log10_ratio"), r.get("mid_loss")
        md.append(f"| {m} | {level:.6f} | {'–' if mid is None else f'{mid[0]:.6f} [{mid[1]:.6f}, {mid[2]:.6f}]'} | "
                  f"{'yes' if m in st['conspicuous_m'] else 'no'} | "
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
    return md + (eq21_markdown(st["eq21"]) if "eq21" in st else [])


def eq21_markdown(eq21: dict) -> list[str]:
    md = ["", f"Escaping heads against Eq. 21 (the head whose |v| grows most across the transition; ODE started "
          f"at the last evaluation before |v| reaches {eq21['start_frac']:g} v*; error = measured / predicted − 1 "
          "of the time from there to v*/2; grown before: |v| was past the start already when the transition began; "
          f"in the ansatz (Eq. 20): not grown before and cos k · cos q ≥ {ALIGNED:g} at the start):", "",
          "| transition | lambda | v* | seeds (grown before) | v0/v* (median) | cos k, cos q at start (median) | "
          "error median [10%, 90%] | median abs error | max abs error in the ansatz (seeds) |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in eq21["transitions"]:
        seeds = f"{r['n']} ({r['n_grown_before']})"
        head = f"| {r['m']}→{r['m'] + 1} | {r['lam']:.4g} | {r['vstar']:.4f} | {seeds} | "
        if not r["n"]:
            md.append(head + "– | – | – | – | – |")
            continue
        e = r["rel_err"]
        md.append(head + f"{r['u0_median']:.3f} | "
                  f"{r['cos_k_median']:.3f}, {r['cos_q_median']:.3f} | {e[0]:+.2%} [{e[1]:+.2%}, {e[2]:+.2%}] | "
                  f"{r['abs_rel_err_median']:.2%} | {_pct(r['ansatz_abs_err_max'])} ({r['n_ansatz']}) |")
    return md


# ---- entry points -------------------------------------------------------------------------------------

def run_report(d: Path) -> tuple[dict, str, dict]:
    run = load(d)
    st = analyze(run)
    md = [f"# Linear-regression report: {d}", "", st["setup"], ""] + run_markdown(st)
    md += ["", "![loss curves](figures/loss_curves.png)", "", "![transition times](figures/transition_times.png)"]
    figs = {"loss_curves": loss_figure(run), "transition_times": transitions_figure(st)}
    if "eq21" in st:
        md += ["", "![escaping heads against Eq. 21](figures/heads_eq21.png)"]
        figs["heads_eq21"] = heads_figure(run, st["eq21"])
    return {"kind": "linear_regression_run", **st}, "\n".join(md) + "\n", figs


def _value(cfg: dict, field: str):
    sec, _, key = field.partition(".")
    return cfg.get(sec, {}).get(key)


def sweep_report(d: Path) -> tuple[dict, str, dict]:
    """Every finished cell as in run_report, a table of the cells side by side, one panel of loss
    curves per cell and the cells' median losses overlaid. Cells are labelled by the grid's fields
    (sweep.toml) and ordered by their values."""
    d = Path(d)
    sweep = rundir.load_sweep(d)
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
