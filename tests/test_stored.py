"""tests/stored.py, the one rule for numbers stored earlier: a last-bit difference passes, a real change
fails. The negative control takes every stored document the tolerant tests compare against and changes
each of its floats alone by one unit in its third significant digit: each change must be caught at the
tolerance its test uses."""

import math
from pathlib import Path

import pytest
import stored

ROOT = Path(__file__).parents[1]
# (stored document, the tolerance its test compares at), as tests/report/test_report_golden.py and
# tests/studies/test_studies.py use them.
DOCUMENTS = [
    *((f"tests/golden/{case}/report.json", stored.FITTED) for case in ("classification_run", "classification_sweep")),
    *((f"tests/golden/{case}/report.json", stored.FITTED) for case in ("regression_run", "regression_sweep")),
    ("tests/golden/studies/levers_legacy.json", stored.FITTED),
    ("experiments/levers/results/kstar_epsilon.json", stored.FITTED),
    ("experiments/levers/results/kstar_zipf.json", stored.FITTED),
    ("experiments/levers/results/ceiling.json", stored.SAME_ARITHMETIC),
]


def _paths(doc, path=()):
    """The path of every float in a JSON document."""
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in _paths(v, (*path, k))]
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc) for p in _paths(v, (*path, i))]
    return [path] if type(doc) is float else []


def _changed(doc, path, value):
    """`doc` with the float at `path` replaced: a new container along the path, every other part shared
    with `doc` (and so skipped by the comparison, which walks the path down to the change: a change
    alone in each of a sweep report's 4,436 floats, each against the whole document, took 28 s)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        return {k: _changed(v, rest, value) if k == head else v for k, v in doc.items()}
    return [_changed(v, rest, value) if i == head else v for i, v in enumerate(doc)]


def _get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def _third_digit(x: float) -> float:
    """x with one unit added in its third significant digit (3.0996 -> 3.1096)."""
    return x + 10.0 ** (math.floor(math.log10(abs(x))) - 2)


@pytest.mark.parametrize(("name", "rel"), DOCUMENTS)
def test_one_ulp_passes_and_a_third_digit_change_fails_for_every_stored_float(name, rel, monkeypatch):
    monkeypatch.delenv(stored.PERTURB_ENV, raising=False)
    doc = stored.load(ROOT / name)
    stored.assert_matches(stored.one_ulp(doc), doc, rel)
    # Below stored.ZERO a value is zero up to rounding (levers_legacy's flat-fit slopes, ~1e-15, take
    # either sign on another CPU), so no third digit is asserted there.
    paths = [p for p in _paths(doc) if math.isfinite(x := _get(doc, p)) and abs(x) >= stored.ZERO]
    assert len(paths) >= 10, name  # the document has numbers to test
    missed = [p for p in paths if not stored.mismatches(_changed(doc, p, _third_digit(_get(doc, p))), doc, rel)]
    assert not missed, f"{name}: third-digit changes not caught at {missed[:5]}"


def test_one_ulp_moves_every_finite_float_and_nothing_else():
    doc = {"a": [1.0, -2.5, 0.0, 3, True, "x", None, math.nan], "b": {"c": 1e300}}
    moved = stored.one_ulp(doc)
    assert moved["a"][0] == math.nextafter(1.0, 2.0) and moved["a"][1] == math.nextafter(-2.5, -3.0)
    assert moved["a"][2] == 5e-324 and moved["a"][3:7] == [3, True, "x", None] and math.isnan(moved["a"][7])
    assert moved["b"]["c"] > 1e300


def test_everything_but_floats_compares_exactly():
    assert stored.mismatches({"n": 3, "nan": math.nan}, {"n": 3, "nan": math.nan}, 1e-6) == []
    assert stored.mismatches({"n": 3}, {"n": 4}, 0.5)  # integers: counts, never tolerated
    assert stored.mismatches({"n": 3}, {"n": 3.0}, 0.5)  # a float where an int was stored is a new type
    assert stored.mismatches({"b": True}, {"b": 1}, 0.5)
    assert stored.mismatches({"s": "0.10"}, {"s": "0.1"}, 0.5)
    assert stored.mismatches({"a": 1.0}, {"a": 1.0, "b": 2.0}, 0.5)
    assert stored.mismatches([1.0, 2.0], [1.0], 0.5)
    assert stored.mismatches({"x": math.nan}, {"x": 1.0}, 0.5)


def test_load_perturbs_only_when_asked(tmp_path, monkeypatch):
    f = tmp_path / "doc.json"
    f.write_text('{"x": 0.1}')
    monkeypatch.delenv(stored.PERTURB_ENV, raising=False)
    assert stored.load(f) == {"x": 0.1}
    monkeypatch.setenv(stored.PERTURB_ENV, "1")
    assert stored.load(f)["x"] == math.nextafter(0.1, 1.0)
