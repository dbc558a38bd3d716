"""What every figure shares: the colour of censored seeds, a colour ramp, a panel's labels and legend, a
fit's slope CI in a legend, a partial report's mark in a title, and the figure as PNG bytes."""

from __future__ import annotations

import io

import matplotlib.pyplot as plt
import numpy as np

from icl_race.report.format import ci_text

CENSORED = "tab:gray"


def label_panel(ax, xlabel: str, ylabel: str, title: str) -> None:
    """A panel's axis labels, its title and its legend (frameless, fontsize 8), so that the panels look alike."""
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.legend(frameon=False, fontsize=8)


def colors(n):
    cmap = plt.get_cmap("viridis")
    return [cmap(v) for v in np.linspace(0.0, 0.85, max(n, 1))]


def slope_ci_text(fit: dict, fmt: str) -> str:
    """ " [lo, hi]" for a fit's slope CI in a legend, or "" when there is none."""
    ci = fit.get("slope_ci") or (None, None)
    return "" if ci[0] is None else " " + ci_text(ci, "{:" + fmt + "}")


def mark_partial(fig: plt.Figure, mark: str) -> None:
    """A partial report's figure says so in its title: `mark` ("partial, as of step 150 of 200") as the
    last line of the figure's title, or as its title when it has none (constrained layout makes room)."""
    title = fig.get_suptitle()
    if not title:
        fig.suptitle(mark)
        return
    # suptitle is one of the figure's texts: changed in place, it keeps its place and font
    next(t for t in fig.texts if t.get_text() == title).set_text(f"{title}\n{mark}")


def png_bytes(fig: plt.Figure, dpi: int = 120) -> bytes:
    """The figure as PNG, then closed: pyplot keeps every figure alive until closed, so a sweep would
    otherwise hold one per cell."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()
