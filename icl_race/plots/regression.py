"""The linear-regression reports' figures: loss staircases, transition times, escaping heads (Eq. 21)."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from icl_race.analysis.regression import conspicuous, lambdas
from icl_race.theory.linear_attention import scalar_ode_solution, staircase

CURVES = {
    "loss": ("training loss", "black"),
    "iw_loss": ("in-weight test", "tab:red"),
    "ic_loss": ("in-context test", "tab:blue"),
}
MAX_LINES = 40  # per-seed lines drawn per curve; the median is over every seed
N_SHOWN = 6  # seeds drawn in panels (b) and (c); the statistics are over every seed


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
            ax.plot(
                tau_T,
                np.median(curve_SxT, axis=0),
                color=color,
                lw=1.8,
                label=f"{label}, median of {curve_SxT.shape[0]}",
            )
    ax.set_xscale("log")
    ax.set_xlabel("t (units of tau, log scale)")
    ax.set_ylabel("loss")
    ax.set_title(title, fontsize=9)
    ax.legend(frameon=False, fontsize=7, loc="upper right")


def loss_figure(run: dict, title: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(7.0, 4.4), layout="constrained")
    draw_curves(ax, run, title)
    return fig


def transitions_figure(stats: dict) -> plt.Figure:
    """Per event, every seed's time (log τ) as a dot, the KM median as a bar, censored seeds counted."""
    events = list(stats["transitions"])
    fig, ax = plt.subplots(figsize=(7.0, 0.35 * len(events) + 1.6), layout="constrained")
    rng = np.random.default_rng(0)  # vertical jitter only, so coincident times stay visible
    reached, censored_at = 0, [1.0]
    for i, e in enumerate(events):
        st = stats["transitions"][e]
        t = np.asarray(st["t_steps"])
        hit = t[t >= 0] * stats["dt"]
        reached += hit.size
        ax.scatter(hit, i + rng.uniform(-0.2, 0.2, hit.size), s=6, color="tab:blue", alpha=0.6)
        if st["km_median_tau"] is not None:
            ax.plot([st["km_median_tau"]] * 2, [i - 0.35, i + 0.35], color="black", lw=2)
        if st["censored"]:
            ax.text(st["censored_at_tau"], i, f" {st['censored']} censored", va="center", fontsize=7, color="gray")
            censored_at.append(st["censored_at_tau"])
    ax.set_yticks(range(len(events)), [f"t_{e}" for e in events])
    ax.set_xscale("log")
    if not reached:  # no time to scale the log axis by (matplotlib would fail): the censoring decade
        ax.set_xlim(max(censored_at) / 10, max(censored_at) * 10)
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
    colors = matplotlib.color_sequences["tab10"]
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
            ax_c.plot(
                tau_T, np.abs(heads["q_align"][s, :, j, 0, m]) / heads["q_norm"][s, :, j], color=color, lw=1, ls="--"
            )
            ax_c.plot(r["t0_tau"], r["cos_k"], "o", color=color, ms=4)
        ax_b.axhline(vstar, color="gray", ls=":", lw=1)
        ax_b.set_xlim(-span / 2, span)
        ax_b.set_ylim(0, 1.1 * vstar)
        if st["n"]:
            ax_b.text(
                0.03,
                0.85,
                f"time to v*/2 vs Eq. 21:\n{st['rel_err'][0]:+.1%} (median of {st['n']})",
                transform=ax_b.transAxes,
                fontsize=7,
                va="top",
            )
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
    fig, axes = plt.subplots(
        rows, cols, figsize=(4.6 * cols, 3.4 * rows), layout="constrained", sharex=True, sharey=True, squeeze=False
    )
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
        ax.plot(
            run["eval_steps"] * run["dt"],
            np.median(loss_SxT, axis=0),
            ls=styles[i % 4],
            lw=1.6,
            label=f"{label} (median of {loss_SxT.shape[0]})",
        )
    for level in np.unique(np.concatenate([r["levels"] for r in runs])):
        ax.axhline(level, color="gray", ls=":", lw=0.7)
    ax.set_xscale("log")
    ax.set_xlabel("t (units of tau, log scale)")
    ax.set_ylabel("training loss")
    ax.legend(frameon=False, fontsize=8)
    return fig
