"""The comparison's figure: data in, matplotlib Figure out."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt

from icl_race.plots.censored import km_step
from icl_race.plots.common import label_panel

# Qualitative colours: the groups are unordered, unlike the viridis ramp of a swept value.
_COLORS = matplotlib.color_sequences["tab10"]


def km_overlay(
    kms: list[dict], labels: list[str], censor_at: list[float], event: str, start: float = 1.0
) -> plt.Figure:
    """The groups' Kaplan-Meier curves of `event`'s time, each with its pointwise band and a dotted line
    where its observation ended, on one log-time axis; each curve is drawn from `start` (the first
    evaluation step) to its end of observation, a group that never reached the event a flat line at 1."""
    fig, ax = plt.subplots(figsize=(7.0, 4.2), layout="constrained")
    for i, (km, label, end) in enumerate(zip(kms, labels, censor_at)):
        color = _COLORS[i % len(_COLORS)]
        km_step(ax, km, color, f"{label} (n={km['n']})", band_label=False, span=(max(start, 1.0), end))
        ax.axvline(end, color=color, ls=":", lw=1)
    ax.axhline(0.5, color="black", lw=0.5, alpha=0.5)
    ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    label_panel(
        ax,
        "SGD steps (log scale); dotted: end of observation",
        f"P(t_{event} > t)",
        f"Kaplan-Meier survival of t_{event} (shaded: {kms[0]['confidence']:.0%} pointwise bands)",
    )
    return fig
