"""A sweep's cells as the sweep finds them (issue 43 items 3 and 9): identified by their recorded config,
never by their folder's name; damaged ones named, not skipped; --out only a sweep's; and the packed sweep
(issue 42 item 4) writing each cell as the unpacked one does."""

import csv
import io
import shutil

import numpy as np
import pytest
import tiny

from icl_race import rundir
from icl_race.cli import main
from icl_race.config import ConfigError
from icl_race.run import sweep
from icl_race.run.sweep import execute

BASE = tiny.small(ensemble={"seeds": 2, "block": 2})
SPEC = tiny.toml(BASE) + '[grid]\n"task.K" = [200, 800]\n'


def _rows(out):
    return list(csv.DictReader(io.StringIO((out / "summary.csv").read_text())))


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    """The 2-cell K sweep, finished: packed (the default) in packed/, one cell after another in apart/."""
    root = tmp_path_factory.mktemp("sweeps")
    (root / "sweep.toml").write_text(SPEC)
    (root / "apart.toml").write_text("[sweep]\npack = false\n" + SPEC)
    assert main(["sweep", str(root / "sweep.toml"), "--out", str(root / "packed"), "--quiet"]) == 0
    assert main(["sweep", str(root / "apart.toml"), "--out", str(root / "apart"), "--quiet"]) == 0
    return root


def test_a_packed_sweep_writes_each_cell_as_the_unpacked_one(done):
    cells = sweep.load(done / "sweep.toml").cells
    for cell in cells:
        a, b = (rundir.load_run_results(sweep.cell_dir(done / d, cell))[1] for d in ("packed", "apart"))
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert rundir.read_meta(sweep.cell_dir(done / "packed", cells[0]))["packed_with"] == 1
    assert "packed_with" not in rundir.read_meta(sweep.cell_dir(done / "apart", cells[0]))


def test_the_dry_run_shows_which_cells_pack_into_which_program(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.replace('"task.K" = [200, 800]', '"task.K" = [200, 800]\n"model.width" = [8, 16]'))
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--dry-run", "--no-measure"]) == 0
    text = capsys.readouterr().out
    # K is traced, the width a shape: two programs of two cells each, 4 seeds in 2 vmaps of 2
    assert text.count("pack 1") == 3 and text.count("pack 2") == 3, text
    assert "2 cells of one program as one ensemble of 4 seeds, 2 vmaps of block 2" in text
    assert not (tmp_path / "out").exists()


def test_swapped_cells_are_foreign_never_counted_nor_run(done, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(done / "packed", out)
    a, b = sorted((out / "cells").iterdir())
    a.rename(tmp_path / "x")
    b.rename(a)
    (tmp_path / "x").rename(b)
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("results.npz")}
    capsys.readouterr()
    assert main(["sweep", str(done / "sweep.toml"), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("foreign, not counted") == 2 and "2 of 2 cells not counted" in err
    rows = _rows(out)
    assert [r["status"] for r in rows] == ["foreign", "foreign"] and all(r["median_t_icl"] == "" for r in rows)
    assert {p: p.stat().st_mtime_ns for p in out.rglob("results.npz")} == stamps
    # analyze says which cells its runs leave out, rather than skipping them silently (issue 43 item 9)
    [line] = rundir.skipped_cells([out])
    assert line.startswith(f"{out}: 2 cells left out: ") and line.count("(foreign)") == 2


def test_a_damaged_cell_is_named_with_redo_not_skipped(done, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(done / "packed", out)
    cell = sweep.load(done / "sweep.toml").cells[0]
    (sweep.cell_dir(out, cell) / "results.npz").write_bytes(b"not an npz")
    capsys.readouterr()
    assert main(["sweep", str(done / "sweep.toml"), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "damaged" in err and "--redo" in err and "done, skipped" in err  # the other cell
    assert [r["status"] for r in _rows(out)] == ["damaged", "done"]


@pytest.mark.parametrize("what", ["user files", "a run"])
def test_sweep_out_refuses_a_folder_that_is_not_a_sweep(done, tmp_path, what, capsys):
    out = tmp_path / "out"
    if what == "a run":
        shutil.copytree(next((done / "packed" / "cells").iterdir()), out)
    else:
        out.mkdir()
        (out / "summary.csv").write_text("mine\n")
    before = sorted(p.name for p in out.iterdir())
    assert main(["sweep", str(done / "sweep.toml"), "--out", str(out), "--quiet"]) == 2
    # rundir/owner.check, every writer's gate: a run directory named as such, a folder of the user's files as such
    said = (
        "holds an icl-race run, not icl-race sweep's files" if what == "a run" else "files icl-race sweep did not write"
    )
    assert said in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == before
    if what == "user files":
        assert (out / "summary.csv").read_text() == "mine\n"


def test_two_spec_changes_within_a_second_keep_both_backups(tmp_path):
    s = [sweep.expand(BASE, {"task.K": ks}) for ks in ([200], [400], [800])]
    for spec in s:
        sweep.store_spec(tmp_path, spec, log=lambda m: None)
    backups = sorted(tmp_path.glob("sweep.previous-*.toml"))
    assert len(backups) == 2  # named to the second before: two changes within it kept one
    assert {b.read_text() for b in backups} == {sweep.spec_toml(x) for x in s[:2]}


def test_summary_is_written_when_a_pack_fails(tmp_path, monkeypatch):
    from icl_race.run import runner

    def fail(*args, **kwargs):
        raise runner.RunError("cannot write: disk full")

    monkeypatch.setattr(runner, "execute_pack", fail)
    s = sweep.expand(BASE, {"task.K": [200, 800]})
    (tmp_path / "out").mkdir()
    with pytest.raises(runner.RunError):
        execute.run_local(tmp_path / "out", s, log=lambda m: None, progress=False)
    assert [r["status"] for r in _rows(tmp_path / "out")] == ["pending", "pending"]


def test_reports_read_only_the_grids_cells_and_name_the_others(done, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(done / "packed", out)
    cells = sweep.load(done / "sweep.toml").cells
    # the grid edited down to K = 200: the K = 800 cell is no longer one of it
    (out / "sweep.toml").write_text(sweep.spec_toml(sweep.expand(BASE, {"task.K": [200]})))
    found = rundir.load(out)
    assert [r.cfg.task.K for r in found.runs] == [200]
    other = next(c for c in found.cells if c.name == cells[1].name)
    assert other.status == "outside" and "task.K = 800" in other.reason
    # a cell's folder renamed to another cell's digest: foreign, whatever its grid values
    (out / "sweep.toml").write_text((done / "packed" / "sweep.toml").read_text())
    sweep.cell_dir(out, cells[0]).rename(out / "cells" / ("0" * 16))
    assert [c.status for c in rundir.load(out).cells if c.name == "0" * 16] == ["foreign"]


@pytest.mark.parametrize("options", [{"pack": "yes"}, {"packing": True}, "pack"])
def test_sweep_options_are_checked(options):
    with pytest.raises(ConfigError, match=r"not a sweep option|must be true or false|\[sweep\]: expected a table"):
        sweep.expand({**BASE, "sweep": options}, {"task.K": [200]})
