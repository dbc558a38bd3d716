"""Numbers and confidence intervals as text: the one formatter that the reports (icl_race.report), the
studies' text of their results (icl_race.studies) and the comparisons use."""

from __future__ import annotations

import math


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
