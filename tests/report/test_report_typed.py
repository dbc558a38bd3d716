"""The typed records from results to text: each writes report.json's keys in today's order (a JSON name
where the key is not a Python name, fields left out while None where the key is optional), and each of the
paper's claims renders from hand-made records, its text from the one table `claims.CLAIMS`."""

import dataclasses
import json

import numpy as np
import pytest

from icl_race.report import classification_run as run_report
from icl_race.report import regression_run
from icl_race.report.cell import Above, Bimodality, CellStats, MedianCI, Modality, OutcomeStats, Record
from icl_race.report.claims import CLAIMS, Comparison, comparison_markdown, run_comparisons, sweep_comparisons
from icl_race.report.draws import Draws
from icl_race.report.format import OMIT_NONE, jsonable, key
from icl_race.report.sweep_sections import (
    Acquisition,
    Balanced,
    CellDifference,
    Counts,
    Difference,
    Heatmap,
    MedianVsN,
    NearKstar,
    RegimeRow,
    Scaling,
    ScalingInRegime,
    Sigmoid,
    Slope,
    Threshold,
    ThresholdInRegime,
)
from icl_race.rundir import load_run

from .test_report_golden import classification_run


@dataclasses.dataclass(frozen=True)
class _Inner(Record):
    x: int
    above: int = dataclasses.field(metadata=key("above_0.75"))


@dataclasses.dataclass(frozen=True)
class _Outer(Record):
    inner: _Inner
    by_class: dict
    optional: str | None = dataclasses.field(default=None, metadata=OMIT_NONE)
    kept: str | None = None


def test_a_record_writes_its_fields_in_order_under_their_json_names():
    rec = _Outer(_Inner(1, 2), {"b": _Inner(3, 4), "a": None})
    assert json.dumps(rec.to_json()) == (
        '{"inner": {"x": 1, "above_0.75": 2}, "by_class": {"b": {"x": 3, "above_0.75": 4}, "a": null}, "kept": null}'
    )
    assert list(dataclasses.replace(rec, optional="yes").to_json()) == ["inner", "by_class", "optional", "kept"]
    assert jsonable(rec) == json.loads(json.dumps(rec.to_json()))  # jsonable goes through to_json


def test_a_run_reports_cell_is_its_records_in_the_field_order(tmp_path):
    classification_run(tmp_path / "run")
    rep = run_report.compute(load_run(tmp_path / "run"), Draws(0, 20))
    cell = rep.cell.to_json()
    assert list(cell) == [f.name for f in dataclasses.fields(CellStats)]
    assert list(cell["final_icl_acc"]) == ["median", "above_0.75", "n"]
    assert list(cell["regime"])[:6] == [
        "rise_fraction",
        "plateau",
        "plateau_reaches_threshold",
        "final_icl_acc_acquired",
        "acquired",
        "seeds",
    ]
    assert "not_measured" not in cell["bimodality"]["final_icl_acc"]  # optional: absent while None
    assert list(cell["outcomes"]["counts"]) == [
        "persistent",
        "recovered",
        "falling",
        "transient",
        "censored",
        "diverged",
    ]
    c = rep.cell
    assert c.final_icl_acc.above == cell["final_icl_acc"]["above_0.75"] and c.never_acquired.k == 5
    assert json.loads(json.dumps(jsonable(rep.to_json()), allow_nan=False))["cell"]["label"] == c.label


def _modality(agreement="bimodal", n=40, dip_p=0.01, bc=0.7):
    mixture = {"bic1": 1.0, "bic2": 0.0, "delta_bic": 1.0, "prefers": 2, "one": {}, "two": {}}
    return Modality(n, 0.1, dip_p, bc, bc > 0.555, mixture, dip_p < 0.05, agreement, n < 30)


def _bimodality(near=True, agreement="bimodal"):
    m = _modality(agreement)
    return Bimodality(m, m, m, near)


def _cell(ok=True, variant="standard", near=True, agreement="bimodal"):
    head = dict(
        label="standard K=1000 N=8",
        cells=("c",),
        variant=variant,
        K=1000,
        N=8,
        eval_size=200,
        n_seeds=40,
        n_diverged=0,
        n_duplicate_seeds_dropped=0,
        budget=2000,
        steps_run=2000,
        censor_at=2000,
        acquired=20,
        ok=ok,
        outcomes=OutcomeStats(0.9, 10, {}, {}, 0, None),
    )
    if not ok:
        return CellStats(**head, reason="no seeds")
    return CellStats(
        **head, acquired_fraction=0.5, bimodality=_bimodality(near, agreement), final_icl_acc=Above(0.9, 20, 40)
    )


def _texts(rows: list[Comparison]) -> set[tuple[str, str]]:
    return {(r.claim, r.paper) for r in rows}


TABLE = {(c.claim, c.paper) for c in CLAIMS.values()}


@pytest.mark.parametrize(
    "cell, verdict",
    [
        (_cell(), "agrees"),
        (_cell(agreement="unimodal"), "disagrees (no bimodality detected)"),
        (_cell(agreement="disagree"), "inconclusive (the dip test and BC / Delta BIC disagree)"),
        (_cell(near=False), "not measured in this directory (this cell is not near the threshold)"),
        (_cell(variant="infinite"), "not measured in this directory"),
        (_cell(ok=False), "not measured in this directory"),
    ],
)
def test_a_runs_claims_render_from_its_cell(cell, verdict):
    rows = run_comparisons(cell)
    assert _texts(rows) <= TABLE and len(rows) == 4
    assert rows[2].claim == CLAIMS["bimodal"].claim and rows[2].verdict == verdict
    assert rows[0].icl_race == CLAIMS["kstar_slope_run"].needs
    assert all(set(r.to_json()) == {"claim", "paper", "icl_race", "verdict"} for r in rows)


def _slope(v, ci):
    return Slope.of({"ok": True, "slope": v, "slope_ci": ci, "n_points": 3})


def _threshold(slope_ci=(1.2, 1.6)):
    near = NearKstar(100, 9000, "standard K=9000 N=100", _bimodality(), 0.5, 0)
    acq = {
        N: Acquisition.of({"ok": True, "kstar": 1e4, "kstar_ci": [8e3, 1.2e4], "log10_kstar_ci": [3.9, 4.1]})
        for N in (50, 100)
    }
    return Threshold(
        {},
        "finite K",
        "standard",
        [50, 100],
        acq,
        {N: Sigmoid.of({"ok": False, "reason": "-"}) for N in (50, 100)},
        _slope(1.4, list(slope_ci)),
        Slope.of({"ok": False}),
        Slope.of({"ok": False}),
        [near],
        Heatmap([9000], [50, 100], np.zeros((2, 1))),
        ThresholdInRegime([50, 100], _slope(1.4, list(slope_ci)), [], [near]),
    )


def _scaling():
    at = {"median": 1.0, "median_ci": [0.5, 2.0], "n": 10, "acquired": 10}
    fit = MedianVsN.of(
        {
            "per_N": [{"N": 50, **at}, {"N": 100, **at}],
            "ok": True,
            "linear": {"slope": 10.0, "slope_ci": [5.0, 15.0], "intercept": 100.0, "intercept_ci": [50.0, 150.0]},
            "loglog": {"slope": 1.0, "slope_ci": [0.8, 1.2]},
        }
    )
    return Scaling({}, "K = infinity", fit, [], [0, 1], ScalingInRegime([50, 100], fit))


def _balanced():
    counts = Counts(np.array([10]), np.array([20]))
    diff = Difference([CellDifference(0.6, 0.4, 0.2, [0.1, 0.3])], 0.2, [0.1, 0.3], 0.95, 10, counts, counts)
    return Balanced({}, "all", [50], [1000], "-", [], diff, diff)


def _regime(paper_rule=True):
    m = MedianCI(0.1, [0.0, 0.2], 10)
    return [RegimeRow(N, "K = infinity", "x", m, m, 1.0, True, paper_rule) for N in (50, 100)]


def test_every_claim_of_a_sweep_renders_from_hand_made_records():
    rows = sweep_comparisons([_threshold()], [_scaling()], [_balanced()], _regime())
    names = [
        "kstar_slope_measured",
        "kstar_slope_predicted",
        "kstar_N100",
        "t_icl_linear",
        "t_icl_proportional",
        "bimodal",
        "balanced",
    ]
    assert [(r.claim, r.paper) for r in rows] == [(CLAIMS[n].claim, CLAIMS[n].paper) for n in names]
    verdict = {n: r.verdict for n, r in zip(names, rows)}
    assert verdict["kstar_slope_measured"] == "agrees" and verdict["kstar_slope_predicted"] == "agrees"
    assert verdict["kstar_N100"].startswith("agrees") and verdict["bimodal"] == "agrees"
    assert verdict["t_icl_linear"].startswith("inconclusive") and verdict["t_icl_proportional"] == "agrees"
    assert verdict["balanced"] == "agrees"
    assert rows[0].to_json()["estimate"] == 1.4 and list(rows[0].to_json()) == [
        "claim",
        "paper",
        "icl_race",
        "estimate",
        "ci",
        "verdict",
    ]
    md = "\n".join(comparison_markdown(rows, "MLP width 512"))
    assert all(f"| {r.claim} | {r.paper} | {r.icl_race} | {r.verdict} |" in md for r in rows)


def test_a_sweep_without_the_sections_says_what_each_claim_needs():
    rows = sweep_comparisons([], [], [], [])
    assert [r.icl_race for r in rows] == [
        CLAIMS["kstar_slope_measured_missing"].needs,
        CLAIMS["kstar_slope_predicted_missing"].needs,
        CLAIMS["t_icl_linear"].needs,
        CLAIMS["bimodal"].needs,
        CLAIMS["balanced"].needs,
    ]
    assert _texts(rows) <= TABLE


def test_another_acquisition_rule_makes_the_regime_verdicts_not_comparable():
    rows = sweep_comparisons([_threshold()], [_scaling()], [], _regime(paper_rule=False))
    assert {r.verdict for r in rows if r.claim != CLAIMS["balanced"].claim and "K*(N = 100)" not in r.claim} == {
        "not comparable (acquisition rule differs from the paper's: the first evaluation above 0.95)"
    }


def test_regression_records_write_todays_keys():
    final = regression_run.Final.of(
        {
            "L_MD": 0.1,
            "loss": dict.fromkeys(["final_median", "final_min", "final_max", "median_min", "median_argmin_tau"], 1.0),
        }
    )
    assert list(final.to_json()) == ["L_MD", "loss"]
    empty = regression_run.Eq21Transition(0, 1.0, 2.0, 0, 0, 0, None)
    assert list(empty.to_json()) == ["m", "lam", "vstar", "n", "n_grown_before", "n_ansatz", "ansatz_abs_err_max"]
    full = dataclasses.replace(
        empty, n=1, u0_median=0.1, cos_k_median=1.0, cos_q_median=1.0, rel_err=[0.0] * 3, abs_rel_err_median=0.0
    )
    assert list(full.to_json())[-5:] == ["u0_median", "cos_k_median", "cos_q_median", "rel_err", "abs_rel_err_median"]


def test_a_fit_writes_the_keys_of_its_variant_in_their_order():
    failed = Slope.of({"ok": False, "reason": "needs >= 2 values"})
    assert failed.to_json() == {"ok": False, "reason": "needs >= 2 values"} and failed.slope is None
    local = Slope.of({"N": [8, 16], "ok": True, "slope": 1.0, "intercept": 0.0, "n_points": 2, "confidence": 0.95})
    assert list(local.to_json()) == ["N", "ok", "slope", "intercept", "n_points", "confidence"]
    med = MedianVsN.of({"per_N": [], "confidence": 0.95, "n_boot": 10, "excluded_N": [], "ok": False, "reason": "-"})
    assert list(med.to_json()) == ["per_N", "confidence", "n_boot", "excluded_N", "ok", "reason"] and med.linear is None
