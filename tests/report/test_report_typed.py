"""The typed records from results to text: each writes report.json's keys in today's order (a JSON name
where the key is not a Python name, fields left out while None where the key is optional), and each of the
paper's claims renders from hand-made records, its text from the one table `claims.CLAIMS`."""

import copy
import dataclasses
import json

import numpy as np
import pytest

from icl_race.analysis import median_n as mn
from icl_race.analysis import regression
from icl_race.analysis import survival as sv
from icl_race.analysis import threshold as th
from icl_race.analysis.bimodality import Mixture, Modality
from icl_race.analysis.compare import CellDifference
from icl_race.analysis.draws import Draws
from icl_race.analysis.record import INLINE, NOT_JSON, OMIT_NONE, NotFitted, Record, key
from icl_race.analysis.threshold import MedianCI
from icl_race.report import classification_run as run_report
from icl_race.report.cell import Above, Bimodality, CellStats, OutcomeStats, Statistics
from icl_race.report.claims import CLAIMS, Comparison, comparison_markdown, run_comparisons, sweep_comparisons
from icl_race.report.format import jsonable
from icl_race.report.sweep_sections import (
    Balanced,
    Counts,
    Difference,
    Heatmap,
    NearKstar,
    RegimeRow,
    Scaling,
    ScalingInRegime,
    Threshold,
    ThresholdInRegime,
    WithN,
)
from icl_race.rundir import load_run

from .test_levers import acquisition, logistic
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


@dataclasses.dataclass(frozen=True)
class _Flat(Record):
    name: str
    inner: _Inner = dataclasses.field(metadata=INLINE)
    fits: dict = dataclasses.field(metadata=INLINE)
    boot: list = dataclasses.field(default_factory=list, metadata=NOT_JSON)


def test_a_record_writes_inline_fields_in_its_place_and_never_the_not_json_ones():
    rec = _Flat("a", _Inner(1, 2), {"x > 0": _Inner(3, 4)}, [1.0, 2.0])
    assert json.dumps(rec.to_json()) == '{"name": "a", "x": 1, "above_0.75": 2, "x > 0": {"x": 3, "above_0.75": 4}}'


def test_a_run_reports_cell_is_its_records_in_the_field_order(tmp_path):
    classification_run(tmp_path / "run")
    rep = run_report.compute(load_run(tmp_path / "run"), Draws(0, 20))
    cell = rep.cell.to_json()
    head = [f.name for f in dataclasses.fields(CellStats)]
    stats = ["ok", "reason", *(f.name for f in dataclasses.fields(Statistics))]
    assert list(cell) == head[: head.index("statistics")] + stats + ["outcomes", "ci_methods"]
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
    c = rep.cell.statistics
    assert isinstance(c, Statistics) and cell["ok"] is True and cell["reason"] is None
    assert c.final_icl_acc.above == cell["final_icl_acc"]["above_0.75"] and c.never_acquired.k == 5
    assert json.loads(json.dumps(jsonable(rep.to_json()), allow_nan=False))["cell"]["label"] == rep.cell.label


def _modality(agreement="bimodal", n=40, dip_p=0.01, bc=0.7):
    return Modality(n, 0.1, dip_p, bc, bc > 0.555, Mixture(1.0, 0.0, 1.0, 2, {}, {}), dip_p < 0.05, agreement, n < 30)


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
        outcomes=OutcomeStats(0.9, 10, {}, {}, 0, None),
    )
    if not ok:
        return CellStats(**head, statistics=NotFitted("no seeds"))
    observed = np.arange(40) < 20
    km, never = sv.kaplan_meier(np.where(observed, 100.0, 2000.0), observed), sv.never_acquired(observed)
    stats = Statistics(km, never, 0.5, None, None, _bimodality(near, agreement), None, Above(0.9, 20, 40), None)
    return CellStats(**head, statistics=stats)


def _texts(rows: list[Comparison]) -> set[tuple[str, str]]:
    return {(r.claim, r.paper) for r in rows}


TABLE = {(c.claim, c.paper) for c in CLAIMS.values()}


def test_the_regimes_intervals_are_resampled_with_the_reports_draws(tmp_path, monkeypatch):
    """--boot and --seed reach the regime's bootstrap (it drew a fixed 2,000 from root 0 whatever was asked):
    its replicates are the report's count, drawn from the stream of the report's root."""
    from icl_race.analysis.draws import generator
    from icl_race.report import cell

    classification_run(tmp_path / "run")
    seen, summarize = [], cell.rg.summarize
    monkeypatch.setattr(cell.rg, "summarize", lambda *a: seen.append(copy.deepcopy(a[-1])) or summarize(*a))
    run_report.compute(load_run(tmp_path / "run"), Draws(7, 300))
    (boot,) = seen
    assert boot.n == 300 and boot.rng.integers(0, 2**62) == generator(7).integers(0, 2**62)


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


def _slope(v, ci, intercept=0.0, intercept_ci=None):
    return th.Slope(v, intercept, 3, 0.95, slope_ci=ci, intercept_ci=intercept_ci)


def _threshold(slope_ci=(1.2, 1.6)):
    near = NearKstar(100, 9000, "standard K=9000 N=100", _bimodality(), 0.5, 0)
    acq = {N: acquisition(logistic(1e4, [8e3, 1.2e4])) for N in (50, 100)}
    return Threshold(
        {},
        "finite K",
        "standard",
        [50, 100],
        acq,
        {N: NotFitted("-") for N in (50, 100)},
        _slope(1.4, list(slope_ci)),
        NotFitted(),
        NotFitted(),
        [near],
        Heatmap([9000], [50, 100], np.zeros((2, 1))),
        ThresholdInRegime([50, 100], _slope(1.4, list(slope_ci)), [], [near]),
    )


def _scaling():
    lines = mn.Lines(_slope(10.0, [5.0, 15.0], 100.0, [50.0, 150.0]), _slope(1.0, [0.8, 1.2]))
    fit = mn.MedianVsN([mn.MedianAtN(N, 1.0, [0.5, 2.0], 10, 10) for N in (50, 100)], 0.95, 0, [], lines)
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
    final = regression.Final(0.1, {"loss": regression.FinalLoss(1.0, 1.0, 1.0, 1.0, 1.0)})
    assert list(final.to_json()) == ["L_MD", "loss"]
    assert list(final.to_json()["loss"]) == [
        "final_median",
        "final_min",
        "final_max",
        "median_min",
        "median_argmin_tau",
    ]
    empty = regression.Eq21Transition(0, 1.0, 2.0, 0, 0, 0, None)
    assert list(empty.to_json()) == ["m", "lam", "vstar", "n", "n_grown_before", "n_ansatz", "ansatz_abs_err_max"]
    full = dataclasses.replace(
        empty, n=1, u0_median=0.1, cos_k_median=1.0, cos_q_median=1.0, rel_err=[0.0] * 3, abs_rel_err_median=0.0
    )
    assert list(full.to_json())[-5:] == ["u0_median", "cos_k_median", "cos_q_median", "rel_err", "abs_rel_err_median"]


def test_a_fit_writes_the_keys_of_its_variant_in_their_order():
    failed = th.power_law_slope(np.array([1.0]), np.array([2.0]))
    assert failed.to_json() == {"ok": False, "reason": "needs >= 2 values"}
    local = WithN([8, 16], th.power_law_slope(np.array([1.0, 2.0]), np.array([0.0, 1.0])))
    assert list(local.to_json()) == ["N", "ok", "slope", "intercept", "n_points", "confidence"]
    three = th.power_law_slope(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 2.0]), np.zeros((3, 20)))
    assert list(three.to_json())[5:] == ["r2", "slope_ci", "intercept_ci", "boot_used", "boot_dropped"]
    med = mn.MedianVsN([], 0.95, 10, [], NotFitted("-"))
    assert list(med.to_json()) == ["per_N", "confidence", "n_boot", "excluded_N", "ok", "reason"]
