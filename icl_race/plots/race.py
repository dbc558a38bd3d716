"""The race analyses' figures (analysis/race_summary.py records in): transience, loss relation, independence."""

from __future__ import annotations

import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np

from icl_race.analysis.race import KmMedian, LossFit
from icl_race.analysis.race_summary import Independence, Transience
from icl_race.plots.common import colors, label_panel, slope_ci_text


def _median_with_ci(ax, x, km: KmMedian, censor_at, color, marker, label):
    """A KM median with its CI bar; unreached medians as an open marker at the censoring time."""
    med, (lo, hi) = km.median, km.median_ci
    if med is None:
        ax.plot([x], [censor_at], marker, mfc="none", color=color, label=label)
        return
    err = [[med - lo], [hi - med]] if lo is not None and hi is not None else None
    ax.errorbar([x], [med], yerr=err, fmt=marker, color=color, capsize=3, label=label)


def transience(summary: Transience, title: str = "") -> plt.Figure:
    """summarize_transience's result: rise/fall KM medians vs weight decay; ICL accuracy, the MLP path's
    c3 = <exp(-phi+)> and L_IWL against steps per weight decay, with the median fall times marked."""
    cells = summary.cells
    fig, axes = plt.subplots(1, 3, figsize=(15, 4), layout="constrained")
    for i, c in enumerate(cells):
        first = i == 0
        fall = f"fall: ICL acc < {summary.level} (open: not reached)"
        for km, color, marker, label in ((c.rise, "tab:blue", "o", "rise: t_ICL"), (c.fall, "tab:red", "v", fall)):
            _median_with_ci(axes[0], c.weight_decay_attn, km, c.budget, color, marker, label if first else None)
    axes[0].set(xscale="log", yscale="log", xlabel="weight decay on the attention path", ylabel="SGD steps (KM median)")
    axes[0].xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # minor labels collide on a short range
    axes[0].set_xticks([c.weight_decay_attn for c in cells], [f"{c.weight_decay_attn:g}" for c in cells])
    axes[0].legend(frameon=False, fontsize=8)
    for c, color in zip(cells, colors(len(cells))):
        label = f"wd {c.weight_decay_attn:g}"
        axes[1].plot(c.eval_steps, c.icl_acc_mean, color=color, label=label)
        if c.c3_seed_median is not None:
            axes[2].plot(c.eval_steps, c.c3_seed_median, color=color, label=label)
        axes[2].plot(c.eval_steps, c.iwl_loss_seed_median, color=color, ls="--")
        if c.fall.median:
            for ax in axes[1:]:
                ax.axvline(c.fall.median, color=color, ls=":", lw=1)
    label_panel(axes[1], "SGD steps", "ICL accuracy (seed mean)", "dotted: median fall")
    axes[2].set(xlabel="SGD steps", ylabel="seed median", yscale="log")
    axes[2].set_title("solid: the MLP path's c3 = <exp(-phi+)>\ndashed: L_IWL", fontsize=9)
    fig.suptitle(title or "Transient ICL under L2 on the attention path")
    return fig


def loss_relation(fit: LossFit, title: str = "") -> plt.Figure:
    """L_ICL against -1/2 log L_IWL after acquisition: the fit's points, its line and the theory line."""
    fig, ax = plt.subplots(figsize=(5.2, 4.2), layout="constrained")
    x, y = np.asarray(fit.x, float), np.asarray(fit.y, float)
    assert fit.slope is not None and fit.intercept is not None  # a fit with points has its line
    ax.scatter(x, y, s=3, alpha=0.3, color="tab:blue", label=f"{fit.points} evaluations, {fit.seeds_used} seeds")
    grid = np.linspace(x.min(), x.max(), 50)
    ax.plot(
        grid,
        fit.intercept + fit.slope * grid,
        color="black",
        label=f"fit: slope {fit.slope:.2f}{slope_ci_text(fit.to_json(), '.2f')}",
    )
    ax.plot(grid, grid, color="tab:red", ls="--", label="theory: L_ICL = -1/2 log L_IWL")
    label_panel(ax, "-1/2 log L_IWL", "L_ICL", title or "Loss relation after acquisition")
    return fig


def independence(summary: Independence, title: str = "") -> plt.Figure:
    """summarize_independence's result: IWL accuracy curves (seed mean, 10-90% band) of the memorization
    conditions; Kaplan-Meier curves of t_ICL with the MLP frozen or trained."""
    from icl_race.analysis.survival import censored_times, km_steps

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    mem = summary.memorization.conditions
    for (name, c), color in zip(mem.items(), colors(len(mem))):
        axes[0].plot(c.eval_steps, c.iwl_acc_mean, color=color, label=name)
        axes[0].fill_between(c.eval_steps, *c.iwl_acc_q, color=color, alpha=0.2)
    label_panel(axes[0], "SGD steps", "IWL accuracy", "memorization")
    conds = summary.t_icl.conditions
    for (name, c), color in zip(conds.items(), colors(len(conds))):
        t, s = km_steps(*censored_times(np.asarray(c.t_icl_seeds), c.budget))
        axes[1].step(np.concatenate([[0], t]), np.concatenate([[1], s]), where="post", color=color, label=name)
    label_panel(axes[1], "SGD steps", "fraction without ICL (Kaplan-Meier)", "t_ICL")
    fig.suptitle(title or "Independence ablation: one sub-circuit frozen at init")
    return fig
