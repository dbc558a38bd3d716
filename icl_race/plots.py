"""Pure plotting: data in, matplotlib Figure out (Agg backend, no display needed)."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def t_icl_histogram(t_icl: np.ndarray, budget: int, title: str = "", xlabel: str = "t_ICL (SGD steps)") -> plt.Figure:
    """Histogram of t_ICL on log-spaced bins; seeds that never acquired ICL (t_icl < 0) are a
    separate bar at the right, labelled with the budget at which they were censored."""
    hit = t_icl[t_icl >= 0].astype(float)
    n_cens = int(np.sum(t_icl < 0))
    fig, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
    if hit.size:
        lo, hi = hit.min(), hit.max()
        edges = np.geomspace(lo / 1.15, hi * 1.15, min(20, max(4, hit.size // 3)) + 1)
        ax.hist(hit, bins=edges, color="tab:blue", edgecolor="white", label=f"acquired ({hit.size})")
        right = edges[-1] * 1.6
        ax.set_xscale("log")
    else:
        right = float(budget)
        ax.set_xscale("log")
    ax.bar(right, n_cens, width=right * 0.35, color="tab:gray",
           label=f"not reached by {budget:,} steps ({n_cens})")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("seeds")
    ax.set_title(title or f"t_ICL over {t_icl.size} seeds")
    ax.legend(frameon=False)
    return fig


def png_bytes(fig: plt.Figure, dpi: int = 120) -> bytes:
    """The figure as PNG, then closed: pyplot keeps every figure alive until closed, so a sweep would
    otherwise hold one per cell."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()
