"""Shared by reports, studies and figures: numbers, CIs and p-values as text, JSON-safe values, figure files."""

from __future__ import annotations

import dataclasses
import io
import math
import re
from pathlib import Path

import numpy as np


def num(v, fmt="{:,.0f}") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "n/a"
    return fmt.format(v)


def ci_text(ci, fmt="{:,.0f}", open_hi="beyond the budget") -> str:
    if not ci or ci[0] is None and ci[1] is None:
        return "n/a"
    lo = num(ci[0], fmt) if ci[0] is not None else "n/a"
    hi = num(ci[1], fmt) if ci[1] is not None else open_hi
    return f"[{lo}, {hi}]"


def value_ci(v, ci=None, fmt="{:,.0f}", missing="not reached") -> str:
    """'v [lo, hi]' (the CI left out where there is none), or `missing` where there is no value."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return missing
    return num(v, fmt) if not ci or ci[0] is None and ci[1] is None else f"{num(v, fmt)} {ci_text(ci, fmt)}"


def p_value(v) -> str:
    """A p-value: 3 significant digits, '< 0.001' below that (the dip test's table gives 0 there)."""
    if v is None:
        return "n/a"
    return "< 0.001" if v < 0.001 else f"{v:.3g}"


def p_eq(v) -> str:
    """'= p' or '< 0.001', to follow 'p'."""
    t = p_value(v)
    return t if t.startswith("<") else f"= {t}"


def order(value) -> tuple:
    """A sort key for a swept field's values: numbers in numeric order, before anything else (in text order)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return (0, value, "") if number else (1, 0, str(value))


def pct(v) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{100 * v:.1f}%"


def jsonable(obj):
    if hasattr(obj, "to_json") and not isinstance(obj, type):
        return jsonable(obj.to_json())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return jsonable(dataclasses.asdict(obj))
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items() if not str(k).startswith("boot_")}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [jsonable(v) for v in obj.tolist()]
    if isinstance(obj, (np.bool_, bool)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def figure_files(fig, name: str, partial: str | None = None) -> dict[str, bytes]:
    """{"figures/<name>.png": ..., "figures/<name>.pdf": ...}: a figure as the files a writer names
    (rundir/owner.py writes them with its other files, as one). `partial` (a partial report's "partial, as
    of step X of Y") goes into each file's metadata too, the PNG's Description and the PDF's Subject."""
    import matplotlib.pyplot as plt

    files = {}
    for ext, field in (("png", "Description"), ("pdf", "Subject")):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=150, metadata={field: partial} if partial else None)
        files[f"figures/{name}.{ext}"] = buf.getvalue()
    plt.close(fig)
    return files


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text.replace("=", "-")).strip("_") or "all"
