"""`icl-race export` and `icl-race compare` on two tiny real runs that differ in train.lr (and a sweep
directory holding them as cells): the exported tables are results.npz's values exactly, the comparison
of a run with itself is no difference, and every refusal is one line, exit 2, nothing written."""

import json
import shutil
import sys

import numpy as np
import pytest

from icl_race import config, rundir
from icl_race.analysis import outcome
from icl_race.analysis.compare import compare_to_reference, median_ratio, open_ended_ci
from icl_race.analysis.survival import km_median, logrank
from icl_race.cli import main

pd = pytest.importorskip("pandas", reason="the [export] extra (part of [dev])")
xr = pytest.importorskip("xarray", reason="the [export] extra (part of [dev])")

LRS = {"a": 0.1, "b": 0.05}
EVENT = "icl60"  # reached by most seeds of these 400-step runs (ICL itself is not yet)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two 400-step runs of 4 seeds (~25 s each on 2 cores), and a sweep directory over train.lr of both."""
    from icl_race.run.runner import execute

    root = tmp_path_factory.mktemp("across")
    for name, lr in LRS.items():
        cfg = config.from_dict(
            {
                "task": {"K": 1000, "N": 8},
                "model": {"width": 32},
                "train": {"lr": lr, "batch_size": 64, "steps": 400, "eval_every": 50, "eval_size": 100},
                "ensemble": {"seeds": 4, "block": 4},
            }
        )
        execute(cfg, root / name, progress=False)
    sweep = root / "sweep"
    for name in LRS:
        shutil.copytree(root / name, sweep / "cells" / name)
    (sweep / "sweep.toml").write_text('[grid]\n"train.lr" = [0.1, 0.05]\n')
    return root


def _read_seeds(path):
    if path.suffix == ".nc":
        return xr.open_dataset(path, engine="h5netcdf").to_dataframe().reset_index(drop=True)
    return pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)


@pytest.mark.parametrize("fmt, ext", [("csv", "csv"), ("parquet", "parquet"), ("netcdf", "nc")])
def test_exported_seed_table_is_results_npz_exactly(runs, tmp_path, capsys, fmt, ext):
    out = tmp_path / "export"
    assert main(["export", str(runs / "sweep"), "--format", fmt, "--out", str(out)]) == 0
    assert "2 runs, 8 seeds" in capsys.readouterr().out
    table = _read_seeds(out / f"seeds.{ext}")
    assert len(table) == 8
    for name, lr in LRS.items():
        cell = runs / "sweep" / "cells" / name
        res = np.load(cell / "results.npz")
        run = rundir.load_run(cell)
        rows = table[table["run"] == str(cell)]
        np.testing.assert_array_equal(rows["seed"], res["seed_ids"])
        assert (rows["train.lr"] == lr).all()
        events = [k[2:] for k in res.files if k.startswith("t_")]
        assert len(events) > 1  # every event of the system, not only the headline
        for e in events:
            np.testing.assert_array_equal(rows[f"t_{e}"], res[f"t_{e}"])
            np.testing.assert_array_equal(rows[f"censored_{e}"], res[f"t_{e}"] < 0)
            assert (rows[f"censor_at_{e}"] == run.censor_at(e)).all()
        o = outcome.classify(res["t_icl"], res["diverged"], res["icl_acc"], res["iwl_acc"], res["eval_steps"])
        np.testing.assert_array_equal(rows["outcome"], o.classes_S)
        np.testing.assert_array_equal(rows["final_icl_acc"], res["icl_acc"][:, -1])  # float32 -> float64 is exact
        np.testing.assert_array_equal(rows["final_iwl_acc"], res["iwl_acc"][:, -1])


@pytest.mark.parametrize("fmt", ["netcdf", "parquet"])
def test_exported_curves_are_the_npz_curves_over_run_seed_step(runs, tmp_path, fmt):
    out = tmp_path / "export"
    assert main(["export", str(runs / "a"), str(runs / "b"), "--format", fmt, "--out", str(out)]) == 0
    if fmt == "netcdf":
        ds = xr.open_dataset(out / "curves.nc", engine="h5netcdf")
    else:  # the Dataset's long table, one row per (run, seed, step): back to the Dataset
        long = pd.read_parquet(out / "curves.parquet").set_index(["run", "seed", "step"])
        ds = xr.Dataset.from_dataframe(long.drop(columns="train.lr"))
        ds = ds.assign_coords({"train.lr": ("run", long["train.lr"].groupby("run", sort=False).first()[ds.run.values])})
    assert set(ds.dims) == {"run", "seed", "step"}
    for name, lr in LRS.items():
        res = np.load(runs / name / "results.npz")
        one = ds.sel(run=str(runs / name))
        np.testing.assert_array_equal(one["seed"], res["seed_ids"])
        np.testing.assert_array_equal(one["step"], res["eval_steps"])
        assert float(one["train.lr"]) == lr
        curves = [k for k in res.files if res[k].ndim == 2 and not k.startswith("t_")]
        assert "icl_acc" in curves
        for k in curves:
            np.testing.assert_array_equal(one[k].values, res[k])


def test_compare_a_run_with_itself_is_no_difference(runs, tmp_path, capsys):
    out = tmp_path / "cmp"
    a = str(runs / "a")
    assert main(["compare", a, a, "--event", EVENT, "--boot", "200", "--out", str(out)]) == 0
    assert "same config" in capsys.readouterr().out
    rec = json.loads((out / "compare.json").read_text())
    (pair,) = rec["versus_first"]
    assert pair["logrank"]["p"] == 1.0 and pair["ratio"]["ratio"] == 1.0
    assert rec["differences"] == {} and rec["event"] == EVENT
    assert sorted(p.name for p in (out / "figures").iterdir()) == ["km.pdf", "km.png"]
    assert (out / "figures" / "km.png").read_bytes()[:4] == b"\x89PNG"
    assert "identical" in (out / "compare.md").read_text()


def test_compare_two_runs_names_the_lr_and_matches_the_statistics(runs, tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", str(runs / "a"), str(runs / "b"), "--event", EVENT, "--out", str(out)]) == 0
    assert "differ in train.lr" in capsys.readouterr().out
    rec = json.loads((out / "compare.json").read_text())
    assert rec["differences"] == {"train.lr": [0.1, 0.05]}
    assert "`train.lr` | `0.1` | `0.05`" in (out / "compare.md").read_text()
    a, b = (rundir.load_run(runs / n) for n in LRS)
    (pair,) = rec["versus_first"]
    assert pair["logrank"]["p"] == pytest.approx(logrank(*a.censored(EVENT), *b.censored(EVENT)).p)
    ma, mb = km_median(*a.censored(EVENT)), km_median(*b.censored(EVENT))
    assert pair["ratio"]["ratio"] == (pytest.approx(mb / ma) if np.isfinite(ma * mb) else None)
    assert [g["n"] for g in rec["groups"]] == [4, 4]
    assert sum(rec["groups"][0]["outcomes"].values()) == 4


def _one_line_exit_2(argv, out, capsys, *words):
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's refusals (icl_race.cli._Parser.error: one line, exit 2)
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and all(w in err for w in words), err
    assert not out.exists(), "a refused command must write nothing"


@pytest.mark.parametrize("command", ["export", "compare"])
def test_bad_directories_are_one_line_exit_2_nothing_written(runs, tmp_path, capsys, command):
    out = tmp_path / "out"
    (tmp_path / "plain").mkdir()
    a = str(runs / "a")
    _one_line_exit_2([command, a, str(tmp_path / "nope"), "--out", str(out)], out, capsys, "nope", "no such directory")
    _one_line_exit_2([command, a, str(tmp_path / "plain"), "--out", str(out)], out, capsys, "plain", "neither a run")


def test_bad_compare_and_export_input(runs, tmp_path, capsys):
    out = tmp_path / "out"
    a, sweep = str(runs / "a"), str(runs / "sweep")
    _one_line_exit_2(["export", a, "--format", "xlsx", "--out", str(out)], out, capsys, "xlsx", "--format")
    _one_line_exit_2(["compare", a, "--out", str(out)], out, capsys, "at least two")
    _one_line_exit_2(["compare", a, sweep, "--out", str(out)], out, capsys, "sweep directory", "cells")
    _one_line_exit_2(["compare", a, a, "--event", "grokked", "--out", str(out)], out, capsys, "grokked", EVENT)
    (tmp_path / "file").write_text("x")
    assert main(["export", a, "--out", str(tmp_path / "file")]) == 2
    assert "not a directory" in capsys.readouterr().err and (tmp_path / "file").read_text() == "x"


def test_a_missing_extra_is_one_line_naming_it(runs, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` now raises ImportError
    out = tmp_path / "out"
    _one_line_exit_2(
        ["export", str(runs / "a"), "--format", "parquet", "--out", str(out)],
        out,
        capsys,
        "pyarrow",
        "icl-race[export]",
    )


def test_median_ratio_bootstrap_is_fixed_by_its_seed_and_independent_of_other_groups():
    rng = np.random.default_rng(7)
    samples = [(rng.integers(100, 1000, 30).astype(float), rng.random(30) < 0.8) for _ in range(3)]
    one = compare_to_reference(samples[:2], n_boot=300, seed=5)
    two = compare_to_reference(samples, n_boot=300, seed=5)
    assert one[0] == two[0]  # the reference's and B's streams do not depend on C being there
    assert compare_to_reference(samples[:2], n_boot=300, seed=6)[0].ratio.ci != one[0].ratio.ci
    lo, hi = one[0].ratio.ci
    assert lo <= one[0].ratio.ratio <= hi


def test_logrank_without_any_event_has_no_p():
    t = np.full(5, 400.0)
    never = np.zeros(5, bool)
    assert logrank(t, never, t, never).p is None


def test_unreached_bootstrap_medians_count_as_beyond_and_open_the_ci_end():
    """Replicates whose median is not reached rank past every ratio instead of being dropped: the ends are
    numpy's percentiles over all 1,000 replicates, open where they fall on an unreached one."""
    ref, other = np.ones(1000), np.arange(1.0, 1001.0)  # ratio = 1..1000 in rank order
    assert open_ended_ci(ref, other, 0.95) == (pytest.approx(25.975), pytest.approx(975.025))
    few = other.copy()
    few[-20:] = np.nan  # 2% of the other group's medians beyond: the upper end keeps its rank (dropping
    assert open_ended_ci(ref, few, 0.95)[1] == pytest.approx(975.025)  # them would give 955.525)
    many = other.copy()
    many[-30:] = np.nan  # 3% > 2.5%: the upper end is beyond
    assert open_ended_ci(ref, many, 0.95) == (pytest.approx(25.975), None)
    ref_beyond = ref.copy()
    ref_beyond[:20] = np.nan  # the reference's median beyond in the 20 smallest ratios' replicates: they
    assert open_ended_ci(ref_beyond, other, 0.95)[0] == pytest.approx(25.975)  # rank lowest, as before
    ref_beyond[:30] = np.nan
    assert open_ended_ci(ref_beyond, other, 0.95)[0] is None
    both = np.full(1000, np.nan)
    both[30:] = 1.0
    lo, hi = open_ended_ci(both, np.where(np.isnan(both), np.nan, other), 0.95)  # both beyond: open both ends
    assert lo is None and hi is None


def test_median_ratio_ci_is_open_when_the_other_median_is_often_unreached():
    """A known answer: A's seeds all reach at 100 (median 100 in every resample); B's 20 seeds, 10 at 200
    and 10 censored at 300, reach a median (200) only when a resample holds >= 10 observed seeds
    (probability 0.59). The ratio is 2 and the CI [2, beyond]: the old CI, dropping the ~41% unreached
    replicates, was [2, 2]."""
    a = (np.full(20, 100.0), np.ones(20, bool))
    b = (np.r_[np.full(10, 200.0), np.full(10, 300.0)], np.r_[np.ones(10, bool), np.zeros(10, bool)])
    rngs = (np.random.default_rng(1), np.random.default_rng(2))
    r = median_ratio(a, b, 400, rngs)
    assert r.ratio == 2.0 and r.ci == (2.0, None)
    assert 0.3 < r.unreached / 400 < 0.5 and "beyond the censoring time" in r.method
    swapped = median_ratio(b, a, 400, rngs[::-1])
    assert swapped.ratio == 0.5 and swapped.ci == (None, 0.5)


def test_one_median_ratio_rule_paired_or_stratified_by_its_generators_and_no_ci_without_a_ratio():
    """analysis.compare.median_ratio is the package's one median ratio (race's independence ratios use it
    through ratio_of_boots): the generators decide the resampling, the CI rule is the same."""
    from icl_race.analysis.compare import ratio_of_boots
    from icl_race.analysis.draws import generator

    t = np.arange(1.0, 13.0) * 50
    a, b = (t, np.ones(12, bool)), (2 * t, np.ones(12, bool))
    paired = median_ratio(a, b, 300, (generator(0), generator(0)))  # the same seed positions on both sides
    assert paired.ratio == 2 and paired.ci == (2.0, 2.0)
    stratified = median_ratio(a, b, 300, (generator(0, child=0), generator(0, child=1)))
    assert stratified.ratio == 2 and stratified.ci[0] < 2 < stratified.ci[1]
    # B's median not reached on all its seeds (1 of 8 observed): no ratio, so no interval around it,
    # though a few replicates (>= 4 copies of the observed seed) do reach a median
    never = (np.r_[100.0, np.full(7, 500.0)], np.r_[True, np.zeros(7, bool)])
    r = median_ratio(a, never, 1000, (generator(0), generator(0)))
    assert r.ratio is None and r.ci == (None, None) and r.unreached < 1000
    boots = np.full(1000, 100.0), np.r_[np.full(20, 150.0), np.full(980, np.nan)]
    assert ratio_of_boots(100.0, None, *boots).ci == (None, None)
    assert ratio_of_boots(100.0, 150.0, *boots).ci == (1.5, None)  # the same replicates with a ratio: open above
