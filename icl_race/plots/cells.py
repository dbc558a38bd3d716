"""A sweep's per-cell figures as small multiples: one panel per cell in one figure, so that a 30-cell sweep
adds a handful of figures, not a hundred. Each panel is drawn by the run report's own panel function
(`classification.km_panel`, `accuracy_panel`, `quartile_panel`; the histograms nearest K* by the one
censored histogram of `plots`)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from icl_race.plots.censored import censored_histogram, histogram_axes
from icl_race.plots.classification import accuracy_panel, km_panel, panel_grid, quartile_panel

COLS = 5
PANEL = (3.2, 2.5)  # inches


def _grid(n: int):
    # Fixed margins, not matplotlib's constrained layout: its solver takes seconds per save at 30+ panels.
    return panel_grid(n, COLS, PANEL, layout=None)


def _finish(fig, axes, title: str, legend: bool = True) -> plt.Figure:
    """Small tick labels, the first panel's legend (the others' say the same), the title, margins in inches."""
    for ax in axes.flat:
        ax.tick_params(labelsize=6)
    h = fig.get_figheight()
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.45 / h, top=1 - 0.75 / h, wspace=0.35, hspace=0.7)
    if legend and axes.flat[0].get_legend_handles_labels()[0]:
        axes.flat[0].legend(frameon=False, fontsize=6)
    fig.suptitle(title, y=1 - 0.15 / h)
    return fig


def fall_survival(items: list[tuple[str, dict]], title: str) -> plt.Figure:
    """Per (label, Kaplan-Meier of the time from t_ICL to a lasting fall): the curve with its band and
    censoring ticks, the number that fell of the acquired seeds in the panel's title."""
    fig, axes = _grid(len(items))
    for ax, (label, km) in zip(axes.flat, items):
        km_panel(ax, km, ms=5)
        ax.axhline(0.5, color="black", lw=0.5, alpha=0.5)
        ax.set_xscale("log")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"{label}\n{km['acquired']} of {km['n']} acquired fell", fontsize=7)
        ax.set_xlabel("steps after t_ICL (log)", fontsize=7)
        ax.set_ylabel("P(ICL not yet lost)", fontsize=7)
    return _finish(fig, axes, title)


def accuracies(
    items: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, float | None]],
    ylabel: str,
    title: str,
    max_lines: int = 25,
) -> plt.Figure:
    """Per (label, eval steps, [seeds, T] accuracy, outcome per seed, threshold or None): each seed's curve
    coloured by its outcome (at most max_lines per outcome: the panels are small) and each outcome's median,
    with the ICL threshold when given."""
    fig, axes = _grid(len(items))
    for ax, (label, steps, acc, classes, threshold) in zip(axes.flat, items):
        accuracy_panel(ax, steps, acc, classes, max_lines, lw=1.2)
        if threshold is not None:
            ax.axhline(threshold, color="black", ls=":", lw=0.8)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(label, fontsize=7)
        ax.set_xlabel("SGD steps", fontsize=7)
        ax.set_ylabel(ylabel, fontsize=7)
    return _finish(fig, axes, title, legend=False)  # the title names the outcomes' colours


def curves(items: list[tuple[str, np.ndarray, np.ndarray]], name: str, title: str) -> plt.Figure:
    """Per (label, eval steps, [seeds, T] recorded curve): its median over seeds and interquartile band."""
    fig, axes = _grid(len(items))
    for ax, (label, steps, v) in zip(axes.flat, items):
        quartile_panel(ax, steps, v)
        ax.set_title(label, fontsize=7)
        ax.set_xlabel("SGD steps", fontsize=7)
        ax.set_ylabel(name, fontsize=7)
    return _finish(fig, axes, title)


def small_histograms(items: list[tuple[str, np.ndarray, float]], title: str = "") -> plt.Figure:
    """One small censored histogram per (label, t_icl, censor_at), each with its never-acquired bar apart."""
    n = max(len(items), 1)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig = plt.figure(figsize=(3.8 * cols, 2.9 * rows), layout="constrained")
    specs = fig.add_gridspec(rows, cols)
    for k, (label, t, c) in enumerate(items):
        ax, never_ax = histogram_axes(fig, specs[k // cols, k % cols])
        t = np.asarray(t)
        censored_histogram(ax, never_ax, t, c, bins=12)
        ax.set_title(f"{label}\n{int(np.sum(t >= 0))} acquired, {int(np.sum(t < 0))} censored", fontsize=8)
        ax.set_xlabel("t_ICL (steps, log scale)", fontsize=8)
        ax.set_ylabel("seeds", fontsize=8)
        ax.tick_params(labelsize=7)
    if title:
        fig.suptitle(title)
    return fig
