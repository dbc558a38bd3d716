"""The swept lever as a report axis: groups of a sweep that differ in one field give one table of K*
(and of the K = infinity median t_ICL) per value of that field."""

import numpy as np

from icl_race.analysis import median_n as mn
from icl_race.analysis import threshold as th
from icl_race.analysis.record import NotFitted
from icl_race.report import levers, write_report
from icl_race.report.sweep_sections import Heatmap, Scaling, Threshold

from .test_report_golden import _cell, _config, _on_grid


def logistic(k: float, ci: list, bracketed: bool = True) -> th.Logistic:
    """A hand-made logistic K* (what the report's readers use of one)."""
    b, log_ci = np.log10(k), [None if v is None else float(np.log10(v)) for v in ci]
    return th.Logistic(1.0, b, k, b, log_ci, False, ci, 0, bracketed, np.empty(0))


def sigmoid(k: float) -> th.Sigmoid:
    b = np.log10(k)
    return th.Sigmoid(1.0, b, 0.5, 0.5, k, b, [None, None], [None, None], [2, 5], False, 0, 0.95, 5, 0, np.empty(0))


def acquisition(fit: th.Logistic | NotFitted) -> th.Acquisition:
    return th.Acquisition([], 0.95, 0, fit)


def _threshold(group, kstars):  # what by_lever reads of a Threshold; the rest left empty
    return Threshold(
        group,
        "",
        "standard",
        sorted(kstars),
        # A K* past the grid (here > 10,000) is an extrapolation: not bracketed by the cells.
        {N: acquisition(logistic(k, [k / 2, k * 2], k < 10000)) for N, k in kstars.items()},
        {N: sigmoid(k + 1) for N, k in kstars.items()},
        NotFitted(),
        NotFitted(),
        NotFitted(),
        [],
        Heatmap([], [], np.empty((0, 0))),
    )


def _scaling(group, medians):  # what by_lever reads of a Scaling (no top-level N)
    per_N = [mn.MedianAtN(N, m, [m - 1, m + 1], 16, 16) for N, m in medians.items()]
    return Scaling(group, "", mn.MedianVsN(per_N, 0.95, 0, [], NotFitted()), [], [])


def test_kstar_per_lever_value_in_numeric_order_per_N():
    ts = [
        _threshold({"task.zipf_alpha": a, "train.lr": 0.1}, {32: 1000 * (1 + a), 16: 500 * (1 + a)})
        for a in (1.5, 0.0, 10.0, 0.5)
    ]
    out = levers.by_lever(ts, [])
    k = out["kstar"]
    assert k["fields"] == ["task.zipf_alpha"]  # train.lr is the same in every group: not a lever
    assert [(r["N"], r["lever"]["task.zipf_alpha"]) for r in k["rows"]] == [
        (16, 0.0),
        (16, 0.5),
        (16, 1.5),
        (16, 10.0),
        (32, 0.0),
        (32, 0.5),
        (32, 1.5),
        (32, 10.0),
    ]
    assert [r["kstar"] for r in k["rows"][4:]] == [1000, 1500, 2500, 11000]
    assert k["rows"][0]["paper_sigmoid_kstar"] == 501 and k["rows"][0]["kstar_ci"] == [250, 1000]
    assert "t_icl_kinf" not in out
    md = "\n".join(levers.markdown(out))
    assert "## K* per task.zipf_alpha" in md and "| 32 | 10.0 | 11,000 |" in md
    rows = {line.split(" | ")[1]: line for line in md.splitlines() if line.startswith("| 32 |")}
    assert rows["10.0"].endswith("| False |") and rows["1.5"].endswith("| True |")  # the unbracketed one is marked


def test_t_icl_per_optimizer_and_nothing_for_a_single_group():
    sc = [_scaling({"train.optimizer": o}, {32: m}) for o, m in (("sgd", 2480), ("adam", 900))]
    out = levers.by_lever([_threshold({}, {32: 2000})], sc)
    assert "kstar" not in out  # one group of finite-K cells: no lever axis
    rows = out["t_icl_kinf"]["rows"]
    assert [(r["lever"]["train.optimizer"], r["median_t_icl"]) for r in rows] == [("adam", 900), ("sgd", 2480)]
    assert levers.by_lever([_threshold({}, {32: 2000})], sc[:1]) == {}


def test_a_real_sweep_report_puts_the_swept_lever_in_one_table(tmp_path):
    # Two K = infinity groups that differ only in model.qk_init_scale, written as run directories.
    d = tmp_path / "sweep"
    (d / "cells").mkdir(parents=True)
    for scale, t0 in ((1.0, 300), (2.0, 900)):
        for N in (8, 16):
            t = _on_grid(np.full(20, t0 * N / 8.0))
            cfg = {"task": {"variant": "infinite", "N": N}, "model": {"qk_init_scale": scale}}
            _cell(d / "cells" / _config(cfg).digest(), cfg, t, np.full(20, 0.99, np.float32))
    write_report(d, n_boot=20)
    md = (d / "report.md").read_text()
    assert "## t_ICL at K = infinity per model.qk_init_scale" in md
    for row in ("| 8 | 1.0 | 20 | 20 | 300 |", "| 8 | 2.0 | 20 | 20 | 900 |", "| 16 | 2.0 | 20 | 20 | 1,800 |"):
        assert row in md, row
    # Each row against the first of its N by the one verdict rule: 3x slower in every resample, p tiny.
    row = next(line for line in md.splitlines() if line.startswith("| 8 | 2.0 | 20 | 20 | 900 |"))
    assert row.endswith("| 3 [3, 3] | < 0.001 | the first row sooner |"), row
    assert "alpha = 0.05" in md
    # Every table names the lever's value beside the cell, so the cells table tells the groups apart.
    assert (
        "| infinite K=inf N=8 (qk_init_scale=2.0) | 20 |" in md
        and "| infinite K=inf N=8 (qk_init_scale=1.0) | 20 |" in md
    )
