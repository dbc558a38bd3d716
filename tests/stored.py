"""Numbers computed now against numbers stored earlier (golden reports, stored study results): one rule.

A stored number was computed on another machine. libm and numpy's SIMD paths differ between CPUs in the
last bits (log10(1600) differs by one ulp between an Intel Xeon and an AMD EPYC), and everything fitted
from such an input moves in its last digits. So floats agree within a relative tolerance that each caller
states; everything else (keys, strings, integers, booleans, None, lengths) agrees exactly.

`load` is how a test reads a stored JSON. With ICL_RACE_STORED_ULP=1 it moves every stored float by one
ulp away from zero: CI runs the tests that use it once more that way, so that no comparison can drift back
to bit equality unseen (tests/test_stored.py holds the negative control)."""

import json
import math
import os
from pathlib import Path
from typing import Any

# Arithmetic on the same integers and floats: CPUs differ in the last bits only (a few ulp, ~1e-15).
SAME_ARITHMETIC = 1e-9
# An optimizer or root finder (the logistic's MLE, the profile CI, the mixture's EM) stops at its own
# tolerance (~1e-8): a last-bit change in its input moves its answer by less than this.
FITTED = 1e-6
# Magnitudes below this are zero up to rounding (relative error means nothing at zero).
ZERO = 1e-12

PERTURB_ENV = "ICL_RACE_STORED_ULP"


def one_ulp(doc: Any) -> Any:
    """`doc` with every float moved by one ulp away from zero (zero moves to the smallest subnormal)."""
    if isinstance(doc, dict):
        return {k: one_ulp(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [one_ulp(v) for v in doc]
    if isinstance(doc, float) and math.isfinite(doc):
        return math.nextafter(doc, math.copysign(math.inf, doc))
    return doc


def load(path: Path) -> Any:
    """A stored JSON, perturbed by one ulp under ICL_RACE_STORED_ULP=1."""
    doc = json.loads(Path(path).read_text())
    return one_ulp(doc) if os.environ.get(PERTURB_ENV) == "1" else doc


def mismatches(now: Any, stored: Any, rel: float, where: str = "") -> list[str]:
    """Every place where `now` differs from `stored`: floats beyond `rel` (NaN equals NaN), anything else
    at all. An int stored where a float is computed (or back) is a difference of type."""
    if now is stored:  # one object equals itself: the negative control's documents share unchanged parts
        return []
    if isinstance(now, dict) and isinstance(stored, dict):
        if now.keys() != stored.keys():
            return [f"{where or '/'}: keys {sorted(now.keys() ^ stored.keys())} in one only"]
        return [m for k in stored for m in mismatches(now[k], stored[k], rel, f"{where}/{k}")]
    if isinstance(now, list) and isinstance(stored, list):
        if len(now) != len(stored):
            return [f"{where}: length {len(now)} now, {len(stored)} stored"]
        return [m for i, (a, b) in enumerate(zip(now, stored)) for m in mismatches(a, b, rel, f"{where}[{i}]")]
    if type(now) is float and type(stored) is float:
        if (math.isnan(now) and math.isnan(stored)) or math.isclose(now, stored, rel_tol=rel, abs_tol=ZERO):
            return []
        return [f"{where}: {now!r} now, {stored!r} stored (relative tolerance {rel:g})"]
    if type(now) is not type(stored) or now != stored:
        return [f"{where}: {now!r} now, {stored!r} stored"]
    return []


def assert_matches(now: Any, stored: Any, rel: float) -> None:
    """Fails with every difference listed (the first 20)."""
    found = mismatches(now, stored, rel)
    assert not found, f"{len(found)} differences from the stored numbers:\n" + "\n".join(found[:20])
