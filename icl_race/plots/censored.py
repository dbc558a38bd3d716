"""Censored first passages drawn: the histogram of the times reached on log bins with the seeds that never
reached the event as a bar of their own (one, used by the run's histogram, the reports and their panels),
and one Kaplan-Meier step with its band."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from icl_race.plots.common import CENSORED


def log_edges(values: np.ndarray, bins: int | None = None) -> np.ndarray:
    lo, hi = float(values.min()), float(values.max())
    if hi <= lo:
        lo, hi = lo / 1.5, hi * 1.5
    nb = bins or int(np.clip(round(2 * values.size ** (1 / 3)), 5, 30))
    return np.geomspace(lo / 1.08, hi * 1.08, nb + 1)


def censored_histogram(ax, never_ax, t: np.ndarray, censor_at: float, bins: int | None = None) -> None:
    """First-passage times on log-spaced bins in `ax`, with the censoring time (the budget, or where the
    run stopped) as a dotted line in the legend; seeds that never reached the event (t < 0) as one bar in
    `never_ax`, a narrow panel of its own beside it (sharing the count axis), so that the bar is not read
    as a time on the numeric axis."""
    t = np.asarray(t)
    hit = t[t >= 0].astype(float)
    n_cens = int(np.sum(t < 0))
    ax.set_xscale("log")
    if hit.size:
        ax.hist(hit, bins=log_edges(hit, bins), color="tab:blue", edgecolor="white", label=f"reached ({hit.size})")
    ax.axvline(censor_at, color=CENSORED, ls=":", lw=1, label=f"censored at {int(censor_at):,} steps")
    never_ax.bar([0], [n_cens], width=0.6, color=CENSORED, label=f"never ({n_cens})")
    never_ax.set_xticks([0], [f"never\n(> {int(censor_at):,})"], fontsize=7)
    never_ax.set_xlim(-0.6, 0.6)
    never_ax.tick_params(axis="y", labelleft=False)


def histogram_axes(fig, spec=None):
    """(ax, never_ax): a wide panel for the times and a narrow one for the never-reached bar, sharing y."""
    grid = (
        spec.subgridspec(1, 2, width_ratios=[7, 1], wspace=0.03)
        if spec is not None
        else fig.add_gridspec(1, 2, width_ratios=[7, 1], wspace=0.03)
    )
    ax = fig.add_subplot(grid[0])
    return ax, fig.add_subplot(grid[1], sharey=ax)


def histogram(
    t: np.ndarray,
    censor_at: float,
    median: float | None = None,
    median_ci: list | None = None,
    title: str = "",
    xlabel: str = "t_ICL (SGD steps, log scale)",
) -> plt.Figure:
    """`censored_histogram` as a figure, with the Kaplan-Meier median and its CI as a line and a band."""
    fig = plt.figure(figsize=(6.8, 4.0), layout="constrained")
    ax, never_ax = histogram_axes(fig)
    censored_histogram(ax, never_ax, t, censor_at)
    if median is not None:
        ax.axvline(median, color="black", lw=1.5, label=f"KM median {median:,.0f}")
        if median_ci and median_ci[0] is not None:
            hi = median_ci[1] if median_ci[1] is not None else censor_at
            ax.axvspan(median_ci[0], hi, color="black", alpha=0.1, label="95% CI of the median")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("seeds")
    fig.suptitle(title or f"over {np.asarray(t).size} seeds")
    ax.legend(frameon=False, fontsize=8)
    return fig


def km_step(
    ax, km: dict, color, label: str, band_label: bool = True, span: tuple[float, float] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """A Kaplan-Meier curve (`analysis.survival.kaplan_meier`'s dict) as a step from S = 1 with its
    band (labelled in the legend unless several curves share one axis); returns the drawn (x, S).
    With `span` (first step, end of observation) the curve starts at 1 from the first step and holds its
    last value to the end, so that a group that never reached the event is a flat line at 1 over its
    whole budget, not a stub at its last time."""
    t = np.asarray(km["t"], float)
    start = t[0] * 0.8 if span is None else min(span[0], t[0])
    x = np.concatenate([[start], t])
    s = np.concatenate([[1.0], km["survival"]])
    lo = np.concatenate([[1.0], km["low"]])
    hi = np.concatenate([[1.0], km["high"]])
    if span is not None and span[1] > x[-1]:
        x = np.append(x, span[1])
        s, lo, hi = (np.append(v, v[-1]) for v in (s, lo, hi))
    ax.step(x, s, where="post", color=color, lw=2, label=label)
    ax.fill_between(
        x, lo, hi, step="post", color=color, alpha=0.2, label=f"{km['confidence']:.0%} band" if band_label else None
    )
    return x, s
