"""report/export.py (`icl-race export`) on two tiny real runs that differ in train.lr and a sweep directory
holding them as cells (conftest's `lr_runs`): the tables' columns, the censoring columns, and every format
read back (pandas, xarray) to results.npz's values exactly."""

import json
import sys

import numpy as np
import pytest
import tiny
from refusal import one_line_exit_2

from icl_race import rundir
from icl_race.analysis import outcome
from icl_race.cli import main
from icl_race.report import export
from icl_race.rundir import runset

pd = pytest.importorskip("pandas", reason="the [export] extra (part of [dev])")
xr = pytest.importorskip("xarray", reason="the [export] extra (part of [dev])")

LRS = tiny.LR_RUNS


def _read_seeds(path):
    if path.suffix == ".nc":
        return xr.open_dataset(path, engine="h5netcdf").to_dataframe().reset_index(drop=True)
    return pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)


@pytest.mark.parametrize("fmt, ext", [("csv", "csv"), ("parquet", "parquet"), ("netcdf", "nc")])
def test_exported_seed_table_is_results_npz_exactly(lr_runs, tmp_path, capsys, fmt, ext):
    out = tmp_path / "export"
    assert main(["export", str(lr_runs / "sweep"), "--format", fmt, "--out", str(out)]) == 0
    assert "2 runs, 8 seeds" in capsys.readouterr().out
    table = _read_seeds(out / f"seeds.{ext}")
    assert len(table) == 8
    for name, lr in LRS.items():
        cell = lr_runs / "sweep" / "cells" / name
        res = np.load(cell / "results.npz")
        run = rundir.load_run(cell)
        rows = table[table["run"] == str(cell)]
        np.testing.assert_array_equal(rows["seed"], res["seed_ids"])
        assert (rows["train.lr"] == lr).all()
        events = [k[2:] for k in res.files if k.startswith("t_")]
        assert len(events) > 1  # every event of the system, not only the headline
        for e in events:  # a time not reached is NaN, its censoring in the boolean columns
            np.testing.assert_array_equal(rows[f"t_{e}"], np.where(res[f"t_{e}"] >= 0, res[f"t_{e}"], np.nan))
            np.testing.assert_array_equal(rows[f"censored_{e}"], res[f"t_{e}"] < 0)
            assert (rows[f"censor_at_{e}"] == run.censor_at(e)).all()
        o = outcome.classify(res["t_icl"], res["diverged"], res["icl_acc"], res["iwl_acc"], res["eval_steps"])
        np.testing.assert_array_equal(rows["outcome"], o.classes_S)
        np.testing.assert_array_equal(rows["final_icl_acc"], res["icl_acc"][:, -1])  # float32 -> float64 is exact
        np.testing.assert_array_equal(rows["final_iwl_acc"], res["iwl_acc"][:, -1])


@pytest.mark.parametrize("fmt", ["netcdf", "parquet"])
def test_exported_curves_are_the_npz_curves_over_run_seed_step(lr_runs, tmp_path, fmt):
    out = tmp_path / "export"
    assert main(["export", str(lr_runs / "a"), str(lr_runs / "b"), "--format", fmt, "--out", str(out)]) == 0
    if fmt == "netcdf":
        ds = xr.open_dataset(out / "curves.nc", engine="h5netcdf")
    else:  # the Dataset's long table, one row per (run, seed, step): back to the Dataset
        long = pd.read_parquet(out / "curves.parquet").set_index(["run", "seed", "step"])
        ds = xr.Dataset.from_dataframe(long.drop(columns="train.lr"))
        ds = ds.assign_coords({"train.lr": ("run", long["train.lr"].groupby("run", sort=False).first()[ds.run.values])})
    assert set(ds.dims) == {"run", "seed", "step"}
    for name, lr in LRS.items():
        res = np.load(lr_runs / name / "results.npz")
        one = ds.sel(run=str(lr_runs / name))
        np.testing.assert_array_equal(one["seed"], res["seed_ids"])
        np.testing.assert_array_equal(one["step"], res["eval_steps"])
        assert float(one["train.lr"]) == lr
        curves = [k for k in res.files if res[k].ndim == 2 and not k.startswith("t_") and k not in export.PER_SEED]
        assert "icl_acc" in curves and "beta0" not in ds  # beta0 is a seed-table column
        for k in curves:
            np.testing.assert_array_equal(one[k].values, res[k])


def test_the_seed_table_has_one_column_set_per_event_and_probe(lr_runs):
    """The columns in memory (`export.tables`): run, the telling-apart field, the seed's identity and fate,
    per event its time and both censoring columns, and the last value of every scalar probe."""
    t = export.tables(lr_runs / "a", lr_runs / "b")
    run = rundir.load_run(lr_runs / "a")
    per_event = [f"{c}_{e}" for e in run.times for c in ("t", "censored", "censor_at")]
    finals = [f"final_{n}" for n, c in run.curves.items() if c.ndim == 2]
    finals = [f for f in finals if f != "final_beta0"]  # beta0 is a per-seed value, not a curve's last
    expected = ["run", "train.lr", "seed", "diverged", "retired_at", "outcome", "fall_step", "acquired", *per_event]
    expected += ["beta0", *finals]
    assert list(t.seeds.columns) == expected
    assert t.seeds["run"].tolist() == [str(lr_runs / n) for n in LRS for _ in range(4)]
    assert t.skipped == []
    # curves: a Dataset over (run, seed, step) whose coordinate along run is the field that tells them apart
    assert t.curves.sizes["run"] == 2 and t.curves.sizes["seed"] == 4
    assert t.curves["train.lr"].values.tolist() == list(LRS.values())


def test_censored_seeds_carry_their_censoring_time_and_reached_ones_their_time(lr_runs):
    t = export.tables(lr_runs / "a").seeds
    run = rundir.load_run(lr_runs / "a")
    minus_one = export.tables(lr_runs / "a", censored="-1").seeds
    assert (run.times["icl"] < 0).any()  # the runs stop before ICL: censored seeds to look at
    for e, t_S in run.times.items():
        reached = t_S >= 0
        np.testing.assert_array_equal(t[f"t_{e}"][reached], t_S[reached])
        assert t[f"t_{e}"][~reached].isna().all()  # NaN, not the censoring time nor -1
        assert (minus_one[f"t_{e}"][~reached] == -1).all()  # results.npz's value, under --censored=-1
        np.testing.assert_array_equal(minus_one[f"t_{e}"], t_S)
        assert (t[f"censor_at_{e}"] == run.censor_at(e)).all() and run.censor_at(e) <= run.budget
    np.testing.assert_array_equal(t["acquired"], run.times[run.headline] >= 0)


def test_a_field_that_is_not_a_scalar_is_one_json_text_column(lr_runs):
    rs = runset.load([lr_runs / "a", lr_runs / "b"])
    rs = runset.RunSet(rs.runs, [*rs.fields, "train.icl_levels", "train.lr"], rs.skipped)
    cells = export.cell_values(rs)
    levels = rundir.load_run(lr_runs / "a").config["train"]["icl_levels"]
    assert [c["train.icl_levels"] for c in cells] == [json.dumps(levels)] * 2
    assert [c["train.lr"] for c in cells] == list(LRS.values())  # numbers stay numbers


def test_the_csv_curves_are_the_long_table_of_the_dataset(lr_runs, tmp_path):
    done = export.export([lr_runs / "sweep"], "csv", tmp_path / "out")
    assert (done.runs, done.seeds, sorted(done.files)) == (2, 8, ["curves.csv", "provenance.json", "seeds.csv"])
    long = pd.read_csv(tmp_path / "out" / "curves.csv")
    assert list(long.columns[:3]) == ["run", "seed", "step"]
    for name in LRS:
        cell = lr_runs / "sweep" / "cells" / name
        res = np.load(cell / "results.npz")
        rows = long[long["run"] == str(cell)]
        icl_SxT = rows.pivot(index="seed", columns="step", values="icl_acc")
        np.testing.assert_array_equal(icl_SxT.index, res["seed_ids"])
        np.testing.assert_array_equal(icl_SxT.columns, res["eval_steps"])
        np.testing.assert_allclose(icl_SxT.values, res["icl_acc"], rtol=1e-6)  # through CSV's decimal text


def test_bad_export_input(lr_runs, tmp_path, capsys):
    out = tmp_path / "out"
    a = str(lr_runs / "a")
    one_line_exit_2(["export", a, "--format", "xlsx", "--out", str(out)], out, capsys, "xlsx", "--format")
    (tmp_path / "file").write_text("x")
    assert main(["export", a, "--out", str(tmp_path / "file")]) == 2
    assert "not a directory" in capsys.readouterr().err and (tmp_path / "file").read_text() == "x"


def test_a_missing_extra_is_one_line_naming_it(lr_runs, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` now raises ImportError
    out = tmp_path / "out"
    one_line_exit_2(
        ["export", str(lr_runs / "a"), "--format", "parquet", "--out", str(out)],
        out,
        capsys,
        "pyarrow",
        "icl-race[export]",
    )
