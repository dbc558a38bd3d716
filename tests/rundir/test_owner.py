"""rundir/owner.py's one rule, writer by writer (run, sweep, report, export, compare, analyze; hist and the
figures ride along): a command writes only into a folder it created or one whose own marker says it owns
it, only the files it names, and replaces no file it did not write unless --force. Every refusal is one
line, exit 2, and the decoy folder (the user's files, another writer's marker) survives byte for byte,
`.`, `..` and `''` included."""

import errno
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tiny
from refusal import refused

from icl_race import config, rundir
from icl_race.cli import main
from icl_race.rundir import owner, runset

# What a user's folder holds: files under every name a writer writes, one it never names, and the
# marker of another writer kind (which gives no other kind any right).
DECOY = {
    "summary.csv": b"my summary\n",
    "sweep.toml": b"# my notes\n",
    "seeds.csv": b"my seeds\n",
    "curves.csv": b"my curves\n",
    "provenance.json": b"{}\n",
    "compare.md": b"my comparison\n",
    "compare.json": b"{}\n",
    "figures/km.png": b"my figure\n",
    "report.md": b"my report\n",
    "notes.json": b"{}\n",
    "notes.png": b"my png\n",
    "thesis.tex": b"a month of work\n",
    ".icl-race-compare": b'{"kind": "compare", "files": {}}\n',
}


def snapshot(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def make_decoy(d):
    for name, data in DECOY.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_bytes(data)
    return d


@pytest.fixture
def decoys(tmp_path, monkeypatch):
    """tmp/home (a decoy) holding tmp/home/work (a decoy too, the working directory): `.`, `..` and `''`
    are both decoys."""
    home = make_decoy(tmp_path / "home")
    work = make_decoy(home / "work")
    monkeypatch.chdir(work)
    return home


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A config, a sweep file, and run directories to read (copies of conftest's lr_runs are made by the
    tests that need runs; this module's own are hand-made run directories, see `fake_run`)."""
    root = tmp_path_factory.mktemp("inputs")
    (root / "tiny.toml").write_text(tiny.toml(tiny.small()))
    (root / "sweep.toml").write_text(tiny.toml(tiny.small()) + '\n[grid]\n"train.lr" = [0.1, 0.05]\n')
    return root


def writers(inputs, lr_runs, out):
    """Each writer's command line writing into `out`."""
    a, b = str(lr_runs / "a"), str(lr_runs / "b")
    return {
        "run": ["run", str(inputs / "tiny.toml"), "--out", out, "--quiet"],
        "sweep": ["sweep", str(inputs / "sweep.toml"), "--out", out, "--quiet"],
        "export": ["export", a, "--out", out],
        "compare": ["compare", a, b, "--out", out, "--boot", "10"],
        "analyze": ["analyze", "levers", "ceiling", "--set", "epsilon=0", "--out", os.path.join(out, "notes.json")],
    }


def _rc(argv):
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


@pytest.mark.parametrize("target", ["home", ".", "..", ""])
def test_no_writer_touches_a_folder_it_does_not_own(decoys, inputs, lr_runs, capsys, target):
    out = str(decoys) if target == "home" else target
    before = snapshot(decoys)
    for name, argv in writers(inputs, lr_runs, out).items():
        assert _rc(argv) == 2, name
        err = "\n".join(refused(capsys.readouterr().err))
        assert "\n" not in err and err.startswith("icl-race: error:"), (name, err)
        assert snapshot(decoys) == before, f"{name} --out {out!r} changed the user's files"
    # report and hist read the folder they are given: a folder holding a cells/ of the user's is no sweep
    # to report into (report.md is the user's), and hist writes nothing at all.
    (decoys / "work" / "cells").mkdir()
    before = snapshot(decoys)
    for argv in (["report", out or "."], ["hist", out or "."]):
        _rc(argv)
        capsys.readouterr()
        assert snapshot(decoys) == before, argv


def test_report_replaces_only_its_own_files_and_marks_them(lr_runs, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(lr_runs / "a", run)
    (run / "report.md").write_text("my report\n")  # a file under the report's name that it did not write
    (run / "figures").mkdir()
    (run / "figures" / "mine.png").write_bytes(b"mine")
    assert _rc(["report", str(run), "--boot", "10"]) == 2
    assert "report.md: exists and was not written by icl-race report" in capsys.readouterr().err
    assert (run / "report.md").read_text() == "my report\n" and not (run / "report.json").exists()
    assert _rc(["report", str(run), "--boot", "10", "--force"]) == 0
    assert (run / "report.md").read_text() != "my report\n" and (run / "figures" / "mine.png").read_bytes() == b"mine"
    assert _rc(["report", str(run), "--boot", "10"]) == 0  # its own files now: replaced without --force
    (run / "report.json").write_text("{}")  # changed since: no longer the report's own
    assert _rc(["report", str(run), "--boot", "10"]) == 2
    assert "report.json" in capsys.readouterr().err and (run / "report.json").read_text() == "{}"


def test_a_report_written_before_markers_is_still_its_own(lr_runs, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(lr_runs / "a", run)
    assert _rc(["report", str(run), "--boot", "10"]) == 0
    (run / owner.marker("report")).unlink()  # as an earlier version left it: report.json says it is icl-race's
    assert _rc(["report", str(run), "--boot", "10"]) == 0


def test_export_and_compare_own_the_folder_they_create(lr_runs, tmp_path, capsys):
    for argv, mine in (
        (["export", str(lr_runs / "a")], "seeds.csv"),
        (["compare", str(lr_runs / "a"), str(lr_runs / "b"), "--boot", "10"], "compare.md"),
    ):
        out = tmp_path / argv[0]
        assert _rc([*argv, "--out", str(out)]) == 0
        (out / "notes.txt").write_text("mine")
        assert _rc([*argv, "--out", str(out)]) == 0  # again: its own folder, its own files
        (out / mine).write_text("edited")
        assert _rc([*argv, "--out", str(out)]) == 2
        assert f"{out / mine}: exists and was not written" in capsys.readouterr().err
        assert (out / mine).read_text() == "edited"
        assert _rc([*argv, "--out", str(out), "--force"]) == 0
        assert (out / mine).read_text() != "edited" and (out / "notes.txt").read_text() == "mine"


def test_force_writes_its_named_files_into_a_folder_of_others_and_nothing_else(decoys, lr_runs, capsys):
    assert _rc(["export", str(lr_runs / "a"), "--out", str(decoys), "--force"]) == 0
    after = snapshot(decoys)
    changed = {n for n in DECOY if after[n] != DECOY[n]}
    assert changed == {"seeds.csv", "curves.csv", "provenance.json"}
    # its marker, and the lock its record is written under (rundir/owner.py's `_exclusive`)
    assert set(after) - {*DECOY, *(f"work/{n}" for n in DECOY)} == {owner.marker("export"), owner.lock_name("export")}


def test_sweep_and_export_refuse_a_run_folder_and_sweep_keeps_a_sweep_of_an_earlier_version(
    lr_runs, inputs, tmp_path, capsys
):
    run = tmp_path / "run"
    shutil.copytree(lr_runs / "a", run)
    before = snapshot(run)
    assert _rc(["sweep", str(inputs / "sweep.toml"), "--out", str(run), "--quiet"]) == 2
    # every writer names a run directory as such (rundir/owner.check)
    assert "holds an icl-race run, not icl-race sweep's files" in capsys.readouterr().err and snapshot(run) == before
    assert _rc(["export", str(lr_runs / "a"), "--out", str(run)]) == 2
    assert "holds an icl-race run, not icl-race export's files" in capsys.readouterr().err and snapshot(run) == before
    # lr_runs' sweep/ has a sweep.toml beside cells/ and no marker: a sweep folder from before markers
    sweep = tmp_path / "sweep"
    shutil.copytree(lr_runs / "sweep", sweep)
    owned = owner.check(sweep, "sweep", ["sweep.toml", "summary.csv"])
    assert set(owned.ours) == {"sweep.toml"}


def test_files_named_like_a_sweeps_do_not_make_a_folder_a_sweeps(inputs, tmp_path, capsys):
    """A folder is a writer's by its marker, or by content only icl-race writes (a pre-marker sweep: a
    cells/ folder holding an icl-race run), never by file names: sweep.toml and summary.csv alone, or
    beside a cells/ of no run, are the user's."""
    mine = tmp_path / "mine"
    (mine / "cells" / "notes").mkdir(parents=True)
    (mine / "cells" / "notes" / "config.json").write_text('{"not": "a config"}')
    for files in ({"sweep.toml": b"# my grid\n", "summary.csv": b"my,table\n1,2\n"}, {"summary.csv": b"x\n"}):
        for name, data in files.items():
            (mine / name).write_bytes(data)
        before = snapshot(mine)
        assert _rc(["sweep", str(inputs / "sweep.toml"), "--out", str(mine), "--quiet"]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "files icl-race sweep did not write" in err, err
        assert snapshot(mine) == before


def test_analyze_writes_beside_its_one_input_or_refuses(lr_runs, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the working directory (the source tree, say) gets nothing
    assert _rc(["analyze", "levers", "ceiling", "--set", "epsilon=0"]) == 2
    assert "give --out" in capsys.readouterr().err and list(tmp_path.iterdir()) == []
    run = tmp_path / "runs" / "a"
    shutil.copytree(lr_runs / "a", run)
    assert _rc(["analyze", "levers", "transience", str(run), "--boot", "10"]) == 0
    assert (run / "analyze" / "levers-transience.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]


def test_analyze_never_writes_a_file_beside_its_json_that_it_did_not_write(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "c.png").write_bytes(b"my figure")  # main overwrote X/notes.png, never named, for --out X/notes.json
    argv = ["analyze", "levers", "ceiling", "--set", "epsilon=0", "--set", "sequences=200"]
    assert _rc([*argv, "--out", str(out / "c.json")]) == 2
    assert "did not write" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["c.png"] and (out / "c.png").read_bytes() == b"my figure"
    assert _rc([*argv, "--out", str(tmp_path / "empty" / "c.json")]) == 0  # a new folder is its own
    new = tmp_path / "new"
    assert _rc([*argv, "--out", str(new / "c.json")]) == 0 and (new / owner.marker("analyze")).is_file()
    assert _rc([*argv, "--out", str(new / "c.json")]) == 0


# --- export: bounded, as one, and what it says ------------------------------------------------------

REGRESSION = tiny.regression(
    task={"D": 5, **tiny.LINEAR_SPECTRUM}, model={"heads": 4}, train={"steps": 200, "eval_every": 10}
)
# results.npz of that run as the runner writes it (4 seeds, 20 evaluations): the probes' own axes
SHAPES = {"gamma_eig": (5,), "k_align": (4, 1, 5), "k_norm": (4,), "q_align": (4, 1, 5), "q_norm": (4,), "v": (4,)}


def fake_run(d, raw, first_step: int):
    """A linear-attention run directory with the runner's layout (rundir.check_results) and synthetic
    numbers: what export's memory depends on is the shapes alone, and training one costs a minute."""
    cfg = config.from_dict(raw)
    rng = np.random.default_rng(0)
    S, steps = 4, np.arange(first_step, first_step + 200, 10)
    res = {
        "seed_ids": np.arange(S),
        **{f"t_m{i}": np.full(S, -1) for i in range(1, 6)},
        "t_converged": np.array([50, 120, -1, 190]),
        "diverged": np.zeros(S, bool),
        "retired_at": np.full(S, -1),
        "eval_steps": steps,
        "steps_run": np.int64(raw["train"]["steps"]),
        "budget": np.int64(raw["train"]["steps"]),
        **{n: rng.random((S, steps.size)) for n in ("loss", "pop_loss", "train_loss")},
        **{n: rng.random((S, steps.size, *shape)) for n, shape in SHAPES.items()},
    }
    d.mkdir(parents=True)
    rundir.write_config(d, cfg)
    meta = {"config": cfg.to_dict(), "config_digest": cfg.digest(), "stop_event": "converged", "git_commit": "abc"}
    rundir.finish(d, res, meta | {"versions": {"jax": "0.0"}, "device": "1 x cpu:cpu"}, {})
    return d


@pytest.fixture(scope="module")
def regression_runs(tmp_path_factory):
    """Two runs whose evaluation steps interleave (35 steps in all): main's CSV export made one table
    of shape (2, 4, 35, 4, 5, 1, 4, 5, 5, 1, 4, 5, 5), 21.5 GB."""
    root = tmp_path_factory.mktemp("regression")
    other = {**REGRESSION, "train": {**REGRESSION["train"], "lr": 0.25}}
    return [fake_run(root / "a", REGRESSION, 0), fake_run(root / "b", other, 5)]


def test_export_of_a_regression_run_under_a_memory_cap(regression_runs, tmp_path):
    """In a child process limited to 1.5 GiB of address space (RLIMIT_AS), each format exports: the probes
    with axes of their own go to netCDF only, so the CSV/Parquet curves stay (run, seed, step) long."""
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 * 2**29, 3 * 2**29))\n"
        "from icl_race.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    for fmt in ("csv", "parquet", "netcdf"):
        out = tmp_path / fmt
        argv = ["export", *map(str, regression_runs), "--format", fmt, "--out", str(out)]
        r = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert "(2 runs, 8 seeds)" in r.stdout
        assert ("netCDF only" in r.stderr and "k_align (4 x 1 x 5)" in r.stderr) == (fmt != "netcdf")


def test_export_refuses_before_allocating_beyond_its_memory(regression_runs, tmp_path, capsys, monkeypatch):
    from icl_race.report import export

    need, _ = export.estimate(runset.load(regression_runs), "netcdf")
    monkeypatch.setattr(export, "memory_budget", lambda: need // 2)  # an injected limit below the estimate
    monkeypatch.setattr(export, "_tables", lambda *a, **k: pytest.fail("allocated past the estimate"))
    out = tmp_path / "out"
    assert _rc(["export", *map(str, regression_runs), "--format", "netcdf", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "GiB" in err and "this process may allocate" in err and not out.exists()


def test_a_failed_export_leaves_the_old_pair_and_names_the_path(lr_runs, tmp_path, capsys, monkeypatch):
    """The second of two netCDF exports into one folder fails on a full disk while writing curves.nc:
    seeds.nc and curves.nc are still the first export's pair, no temporary file is left, and the error
    names the file (exit 1)."""
    out = tmp_path / "out"
    assert _rc(["export", str(lr_runs / "a"), "--format", "netcdf", "--out", str(out)]) == 0
    before = snapshot(out)
    from icl_race.rundir import write

    original = write._write_synced

    def full_disk(path, data, final=None):
        if final is not None and final.name == "curves.nc":
            path.write_bytes(data[:10])  # a part written, then the disk is full
            e = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            try:
                raise e
            except OSError:
                path.unlink()
                raise OSError(e.errno, e.strerror, str(final)) from e
        return original(path, data, final)

    monkeypatch.setattr(owner, "_write_synced", full_disk)
    assert _rc(["export", str(lr_runs / "b"), "--format", "netcdf", "--out", str(out)]) == 1
    assert f"{out / 'curves.nc'}: No space left on device" in capsys.readouterr().err
    assert snapshot(out) == before  # both files the first export's: no mismatched pair, no temporary


def test_write_synced_names_the_file_a_write_error_is_for(tmp_path, monkeypatch):
    """write(2)'s ENOSPC carries no path: the one helper every writer stages through adds the file's."""
    from icl_race.rundir import write

    def no_space(*_):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(OSError) as e:
        write.atomic_write(tmp_path / "seeds.nc", b"x")
    assert e.value.filename == str(tmp_path / "seeds.nc") and list(tmp_path.iterdir()) == []


def test_export_a_a_exports_each_run_once(lr_runs, tmp_path, capsys):
    a = str(lr_runs / "a")
    assert _rc(["export", a, a, str(lr_runs / "sweep" / "cells" / "a"), "--out", str(tmp_path / "o")]) == 0
    io = capsys.readouterr()
    assert "(2 runs, 8 seeds)" in io.out  # a and the sweep's copy of a are two directories
    assert f"{a} given more than once; exported once" in io.err


def test_one_run_is_said_in_the_singular(lr_runs, tmp_path, capsys):
    assert _rc(["export", str(lr_runs / "a"), "--out", str(tmp_path / "o")]) == 0
    assert "(1 run, 4 seeds)" in capsys.readouterr().out


def test_each_format_reads_back_with_its_provenance(lr_runs, tmp_path):
    """One row per seed, the field that varies as a column, NaN for a time not reached beside `acquired`,
    beta0 per seed, and the provenance of every run as the format's metadata."""
    pd = pytest.importorskip("pandas")
    xr = pytest.importorskip("xarray")
    import json

    import pyarrow.parquet as pq

    dirs = [str(lr_runs / "a"), str(lr_runs / "b")]
    meta = rundir.read_meta(lr_runs / "a")
    for fmt, ext in (("csv", "csv"), ("parquet", "parquet"), ("netcdf", "nc")):
        out = tmp_path / fmt
        assert main(["export", *dirs, "--format", fmt, "--out", str(out)]) == 0
        path = out / f"seeds.{ext}"
        if fmt == "csv":
            seeds = pd.read_csv(path)
            prov = json.loads((out / "provenance.json").read_text())
        elif fmt == "parquet":
            seeds = pd.read_parquet(path)
            prov = json.loads(pq.read_schema(path).metadata[b"icl_race_provenance"])
            assert json.loads(pq.read_schema(out / "curves.parquet").metadata[b"icl_race_provenance"]) == prov
        else:
            ds = xr.open_dataset(path, engine="h5netcdf")
            seeds = ds.to_dataframe().reset_index(drop=True)
            prov = json.loads(ds.attrs["icl_race_provenance"])
            assert ds.attrs["commit"] == meta["git_commit"] and ds.attrs["device"] == meta["device"]
            assert xr.open_dataset(out / "curves.nc", engine="h5netcdf").attrs["jax_version"] == meta["versions"]["jax"]
        assert len(seeds) == 8 and sorted(set(seeds["train.lr"])) == [0.05, 0.1]
        assert prov["runs"][dirs[0]] == {
            "commit": meta["git_commit"],
            "device": meta["device"],
            "jax_version": meta["versions"]["jax"],
            "icl_race_version": meta["versions"]["icl-race"],
            "config_digest": meta["config_digest"],
            "state": "finished",
        }
        assert "partial" not in prov and not any(c.startswith("last_") for c in seeds.columns)
        t_icl = np.load(lr_runs / "a" / "results.npz")["t_icl"]
        rows = seeds[seeds["run"] == dirs[0]]
        assert rows["acquired"].astype(bool).tolist() == (t_icl >= 0).tolist()
        assert rows["t_icl"][~(t_icl >= 0)].isna().all()
        beta0 = np.load(lr_runs / "a" / "results.npz")["beta0"][:, 0]
        np.testing.assert_allclose(rows["beta0"], beta0, rtol=1e-6)


@pytest.mark.parametrize(
    ("writer", "folder"),
    [("sweep", "cells"), ("sweep", "figures"), ("report", "figures"), ("compare", "figures"), ("run", "checkpoints")],
)
@pytest.mark.parametrize("force", [False, True])
def test_no_writer_writes_through_a_linked_folder_below_its_out(
    inputs, lr_runs, tmp_path, capsys, writer, folder, force
):
    """A folder on the way to a file (not only the file's own name) that is a symbolic link is refused, with
    --force too: one line naming it, exit 2, the link's target byte for byte."""
    outside = make_decoy(tmp_path / "outside")
    before = snapshot(outside)
    if writer == "report":
        out = shutil.copytree(lr_runs / "a", tmp_path / "out")
        argv = ["report", str(out), "--boot", "10"]
    else:
        (out := tmp_path / "out").mkdir()
        argv = writers(inputs, lr_runs, str(out))[writer]
    (out / folder).symlink_to(outside, target_is_directory=True)
    if force:
        argv = [*argv, "--redo" if writer == "run" else "--force"]
    assert _rc(argv) == 2
    err = "\n".join(refused(capsys.readouterr().err))
    assert "\n" not in err and f"{out / folder}: is a symbolic link" in err, err
    assert snapshot(outside) == before and (out / folder).is_symlink()
