"""rundir/runset.py: several run directories read together (conftest's `lr_runs`: two runs that differ in
train.lr and a sweep of both), the config fields that tell them apart, a sweep's unfinished cells, and the
directories that are neither (one line, exit 2, in every command that reads a run set)."""

import shutil

import pytest
import tiny
from refusal import one_line_exit_2

from icl_race.config import ConfigError
from icl_race.rundir import runset


def test_two_runs_are_told_apart_by_the_one_field_they_differ_in(lr_runs):
    rs = runset.load([lr_runs / "a", lr_runs / "b"])
    assert [r.dir for r in rs.runs] == [lr_runs / "a", lr_runs / "b"]
    assert rs.fields == ["train.lr"] and rs.skipped == []
    assert [runset.value(r.config, "train.lr") for r in rs.runs] == list(tiny.LR_RUNS.values())


def test_a_run_beside_itself_differs_in_nothing(lr_runs):
    rs = runset.load([lr_runs / "b", lr_runs / "a", lr_runs / "b"])
    assert len(rs.runs) == 3 and rs.fields == ["train.lr"]
    assert runset.load([lr_runs / "a", lr_runs / "a"]).fields == []


def test_a_sweep_gives_its_finished_cells_and_names_the_unfinished_ones(lr_runs, tmp_path):
    rs = runset.load([lr_runs / "sweep"])
    assert [r.dir.name for r in rs.runs] == ["a", "b"] and rs.fields == ["train.lr"]
    sweep = shutil.copytree(lr_runs / "sweep", tmp_path / "sweep")
    (sweep / "cells" / "b" / "results.npz").unlink()  # b is now a cell that has not finished
    rs = runset.load([sweep, lr_runs / "b"])
    assert [r.dir for r in rs.runs] == [sweep / "cells" / "a", lr_runs / "b"]
    assert rs.skipped == [f"{sweep / 'cells' / 'b'}: not started (no chunk written yet)"]  # its rundir.state
    with pytest.raises(ConfigError, match="a sweep directory; give its cells one by one"):
        runset.load([lr_runs / "a", lr_runs / "sweep"], sweeps=False)
    (sweep / "cells" / "a" / "results.npz").unlink()
    with pytest.raises(ConfigError, match="no finished run"):
        runset.load([sweep])


def test_a_field_differs_when_any_run_differs_from_the_first_in_it():
    base = tiny.raw()
    lr, seeds = tiny.raw(train={"lr": 0.05}), tiny.raw(ensemble={"seeds": 8})
    assert runset.differing([base, base]) == []
    assert runset.differing([base, lr, seeds]) == ["ensemble.seeds", "train.lr"]
    assert runset.differing([base, base, lr]) == ["train.lr"]
    only_one = {**base, "train": {**base["train"], "momentum": 0.5}}  # a field absent from one config differs
    assert runset.differing([base, only_one]) == ["train.momentum"]
    assert runset.value(base, "train.lr") == 0.1
    assert runset.value(base, "train.nope") is None and runset.value(base, "nope.lr") is None


@pytest.mark.parametrize("command", ["export", "compare"])
def test_bad_directories_are_one_line_exit_2_nothing_written(lr_runs, tmp_path, capsys, command):
    out = tmp_path / "out"
    (tmp_path / "plain").mkdir()
    a = str(lr_runs / "a")
    one_line_exit_2([command, a, str(tmp_path / "nope"), "--out", str(out)], out, capsys, "nope", "no such directory")
    one_line_exit_2([command, a, str(tmp_path / "plain"), "--out", str(out)], out, capsys, "plain", "neither a run")
