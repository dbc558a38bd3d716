"""The scale bridge's figures (experiments/scale/): data in, matplotlib Figure out."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from icl_race.plots.common import colors, label_panel


def exponent_vs_width(width_W, lr_W, exponent_W, lo_W, hi_W, extra: dict | None = None) -> plt.Figure:
    """The log-log exponent of t_ICL(N) at K = infinity against the MLP width, with its 95% CIs, beside
    the theory's 1 (t_ICL ~ N); `extra`: {label: (width, exponent, lo, hi)} for stored values drawn apart."""
    fig, ax = plt.subplots(figsize=(6.0, 4.0), layout="constrained")
    lrs = sorted(set(lr_W), reverse=True)
    for lr, color in zip(lrs, colors(len(lrs))):
        i = [k for k, v in enumerate(lr_W) if v == lr]
        w, e = np.asarray(width_W, float)[i], np.asarray(exponent_W, float)[i]
        lo, hi = np.asarray(lo_W, float)[i], np.asarray(hi_W, float)[i]
        ax.errorbar(w, e, yerr=[e - lo, hi - e], fmt="o", color=color, capsize=3, label=f"lr {lr:g}")
    for label, (w, e, lo, hi) in (extra or {}).items():
        ax.errorbar([w], [e], yerr=[[e - lo], [hi - e]], fmt="s", mfc="none", color="gray", capsize=3, label=label)
    ax.axhline(1.0, color="black", lw=0.8, ls="--", label="theory: t_ICL ~ N")
    ax.set_xscale("log", base=2)
    label_panel(
        ax,
        "MLP width (log scale)",
        "exponent of t_ICL ~ N^p at K = infinity",
        "t_ICL(N) along the width axis (95% CIs; abrupt N only)",
    )
    return fig
