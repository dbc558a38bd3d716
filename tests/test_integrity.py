"""What a run directory holds is what its config computed, and nothing icl-race writes leaves it: a resume
refuses another config's checkpoint, an edited config.json is refused beside its results, a symbolic link
among a run's or a sweep's paths is refused before any write, and a crafted or damaged results file is one
line naming the array (a damaged cell in a sweep's report), never a traceback or a wrong statistic."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import tiny

import icl_race
from icl_race import config, rundir
from icl_race.cli import main
from icl_race.run.runner import execute

RAW = tiny.small(
    task={"K": 200}, train={**tiny.RESUMABLE, "steps": 200, "evals_per_chunk": 1}, ensemble={"seeds": 2, "block": 4}
)
CFG = config.from_dict(RAW)


class Killed(BaseException):
    """Stands for a SIGKILL: nothing in the package catches a BaseException that is not an Exception."""


def _files(root: Path) -> list:
    """Every path under root with its size and mtime (the lock aside: a refused attempt may take it)."""
    return sorted(
        (str(p.relative_to(root)), p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in root.rglob("*")
        if p.name != rundir.LOCK
    )


def _with(raw: dict, section: str, **fields) -> dict:
    return {**raw, section: {**raw[section], **fields}}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    root = tmp_path_factory.mktemp("finished")
    execute(CFG, root / "run", progress=False)
    return root / "run"


def _copy(finished, tmp_path) -> Path:
    d = tmp_path / "run"
    shutil.copytree(finished, d)
    return d


# ---- provenance -------------------------------------------------------------------------------------


def _killed_after_100(out: Path, monkeypatch) -> None:
    """CFG run into `out` and killed (a SIGKILL) once its checkpoints at steps 50 and 100 exist."""
    import icl_race.run.checkpoint as ck

    save = ck.Checkpointer.save

    def stop_after_100(self, step, *a, **k):
        save(self, step, *a, **k)
        if step >= 100:
            self.wait()
            raise Killed(step)

    monkeypatch.setattr(ck.Checkpointer, "save", stop_after_100)
    with pytest.raises(Killed):
        execute(CFG, out, progress=False)
    monkeypatch.setattr(ck.Checkpointer, "save", save)


def _edit_config(d: Path, section: str, **fields) -> None:
    stored = json.loads((d / "config.json").read_text())
    stored[section].update(fields)
    (d / "config.json").write_text(json.dumps(stored))


def test_a_resume_refuses_a_checkpoint_written_for_another_config_and_changes_nothing(tmp_path, killed_after_100):
    out = _copy(killed_after_100, tmp_path)
    # The user edits config.json's lr and reruns with the same lr: config.json agrees, the checkpoint does not.
    other = _with(RAW, "train", lr=0.05)
    _edit_config(out, "train", lr=0.05)
    before = _files(out)
    with pytest.raises(rundir.RunDirError) as e:
        execute(config.from_dict(other), out, progress=False)
    msg = str(e.value)
    assert "\n" not in msg and "checkpoint at step 100" in msg and "another config" in msg, msg
    assert "train.lr" in msg, msg
    assert _files(out) == before


def test_a_resume_of_the_same_config_still_resumes(tmp_path, killed_after_100, finished):
    out = _copy(killed_after_100, tmp_path)
    logged = []
    resumed = execute(CFG, out, progress=False, log=logged.append)
    assert any("resuming from the checkpoint at step 100" in m for m in logged), logged
    plain = rundir.read_results(finished)  # trained on this machine in this session: bit equality holds
    for k in plain:
        np.testing.assert_array_equal(resumed[k], plain[k], err_msg=k)


@pytest.fixture(scope="module")
def killed_after_100(tmp_path_factory):
    """CFG killed once its checkpoints at steps 50 and 100 exist (copied per test: `_copy`)."""
    out = tmp_path_factory.mktemp("killed") / "run"
    with pytest.MonkeyPatch.context() as mp:
        _killed_after_100(out, mp)
    return out


def _edit_checkpoint_meta(ckpts: Path, at: int, **fields) -> None:
    path = ckpts / str(at) / "meta" / "metadata"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


@pytest.mark.parametrize("said", [900, 5000, -50, 75, 150])
def test_a_checkpoint_whose_step_was_edited_is_set_aside_and_the_run_resumes_from_the_previous_one(
    tmp_path, killed_after_100, finished, said
):
    # Issue 43: a run killed at step 100 whose checkpoint says step 900 resumed "from step 900" with 7
    # evaluations fewer; 5000, -50 and 75 were a ValueError traceback, on every rerun.
    d = _copy(killed_after_100, tmp_path)
    _edit_checkpoint_meta(d / "checkpoints", 100, step=said)
    logged = []
    resumed = execute(CFG, d, progress=False, log=logged.append)
    damaged = [m for m in logged if "checkpoint at step 100 is damaged" in m]
    assert len(damaged) == 1 and "\n" not in damaged[0] and "checkpoints.damaged/" in damaged[0], logged
    assert any("resuming from the checkpoint at step 50" in m for m in logged), logged
    assert [p.name for p in (d / "checkpoints.damaged").iterdir()] == ["100-0"]
    plain = rundir.read_results(finished)  # trained on this machine in this session: bit equality holds
    for k in plain:
        np.testing.assert_array_equal(resumed[k], plain[k], err_msg=k)


def test_a_checkpoint_with_a_resealed_wrong_step_is_caught_by_the_chunk_plan(tmp_path):
    # One made by hand with a matching digest (here: saved at the wrong step) fails the plan instead: its
    # step must be a boundary of the run's chunks, with the plan's evaluations before it.
    from icl_race.run.checkpoint import Checkpointer, planned_history
    from icl_race.run.records import chunks as plan

    chunks = plan(CFG)
    assert planned_history(chunks)[0] == [50, 100, 150]
    tree = {"carry": {"w": np.ones(2)}, "eval_steps": np.array([50, 100])}  # a history up to step 100
    for step, why in [(150, "evaluation steps are not this run's"), (75, "not a chunk boundary"), (100, None)]:
        ck = Checkpointer(tmp_path / f"ck{step}")
        ck.save(step, tree, {})
        ck.wait()
        reports: list = []
        restored = ck.restore_latest(report=reports.append, plan=chunks)
        ck.close()
        if why:
            assert restored is None and len(reports) == 1 and why in reports[0], reports
            assert "starting from step 0" in reports[0]
        else:
            assert restored is not None and restored[1]["step"] == 100 and not reports


def test_an_edited_config_of_a_finished_run_is_refused_by_every_reader(tmp_path, finished, capsys):
    d = _copy(finished, tmp_path)
    _edit_config(d, "task", K=1000)
    (tmp_path / "edited.toml").write_text(tiny.toml(_with(RAW, "task", K=1000)))
    before = _files(d)
    with pytest.raises(rundir.DamagedFileError, match=r"config.json: no longer .* differs in task.K\)"):
        icl_race.load(d)
    for argv in (["report", str(d)], ["hist", str(d)], ["run", str(tmp_path / "edited.toml"), "--out", str(d)]):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "differs in task.K" in err, (argv, err)
    assert _files(d) == before


def test_redo_sets_an_edited_finished_run_aside_and_trains_it_again(tmp_path, finished, capsys):
    d = _copy(finished, tmp_path)
    # K = 100 on the finished run's pool of 200 items (K is traced; the pool size is a shape): the run
    # trained again is the same program, which this process has compiled already.
    _edit_config(d, "task", K=100, K_max=200)
    (tmp_path / "edited.toml").write_text(tiny.toml(_with(RAW, "task", K=100, K_max=200)))
    assert main(["run", str(tmp_path / "edited.toml"), "--out", str(d), "--redo", "--quiet"]) == 0
    aside = list(d.glob("damaged-*"))
    assert len(aside) == 1 and (aside[0] / "results.npz").exists()
    run = icl_race.load(d)
    assert run.config["task"]["K"] == 100 and run.meta["config"]["task"]["K"] == 100


# ---- nothing leaves its directory -------------------------------------------------------------------


@pytest.fixture
def outside(tmp_path):
    """A file and a folder outside the run directory, with what they hold."""
    o = tmp_path / "outside"
    (o / "folder" / "7").mkdir(parents=True)
    (o / "file").write_text("precious\n")
    (o / "folder" / "7" / "data").write_text("not a run's\n")
    return o


@pytest.mark.parametrize(
    "name",
    [
        ".lock",
        "checkpoints",
        "checkpoints.damaged",
        "meta.json",
        "figures",
        "report.md",
        "t_icl_hist.png",
        ".results.npz.tmp1",
    ],
)
@pytest.mark.parametrize("target", ["file", "folder"])
def test_a_symbolic_link_in_a_run_directory_is_refused_and_its_target_untouched(
    tmp_path, finished, outside, name, target, capsys
):
    d = _copy(finished, tmp_path)
    (d / name).unlink(missing_ok=True)
    (d / name).symlink_to(outside / target)
    (tmp_path / "run.toml").write_text(tiny.toml(RAW))
    before_out, before_run = _files(outside), _files(d)
    for argv in (["run", str(tmp_path / "run.toml"), "--out", str(d), "--redo", "--quiet"], ["report", str(d)]):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"{name}: is a symbolic link" in err, (argv, err)
    assert _files(outside) == before_out and _files(d) == before_run
    assert (outside / "file").read_text() == "precious\n"


def test_a_fresh_run_refuses_a_planted_checkpoints_link_before_any_work(tmp_path, outside, capsys):
    d = tmp_path / "run"
    d.mkdir()
    (d / "checkpoints").symlink_to(outside / "folder")
    (tmp_path / "run.toml").write_text(tiny.toml(RAW))
    assert main(["run", str(tmp_path / "run.toml"), "--out", str(d), "--quiet"]) == 2
    assert "checkpoints: is a symbolic link" in capsys.readouterr().err
    assert sorted(p.name for p in (outside / "folder").iterdir()) == ["7"]
    assert not (d / "config.json").exists()


@pytest.mark.parametrize("name", ["checkpoints", "checkpoints.damaged"])
def test_a_checkpoints_path_that_is_a_file_is_refused_before_compilation(tmp_path, name, capsys):
    # checkpoints.damaged a file (issue 43): exit 1 once a damaged checkpoint was to be moved there, the
    # message naming the damaged step as the one to resume from.
    from icl_race.run import compile_stats

    d = tmp_path / "run"
    d.mkdir()
    (d / name).write_text("not a folder")
    (tmp_path / "run.toml").write_text(tiny.toml(RAW))
    compiles = compile_stats.snapshot()[0]
    assert main(["run", str(tmp_path / "run.toml"), "--out", str(d), "--quiet"]) == 2
    assert f"{name}: is not a directory" in capsys.readouterr().err
    assert compile_stats.snapshot()[0] == compiles and not (d / "config.json").exists()


SWEEP = """
base = "run.toml"
[grid]
"task.K" = [100, 200]
"""


@pytest.mark.parametrize("name", ["cells", "summary.csv", "sweep.toml", "figures", "CELL"])
def test_a_symbolic_link_in_a_sweep_directory_is_refused_and_its_target_untouched(tmp_path, outside, name, capsys):
    (tmp_path / "run.toml").write_text(tiny.toml(RAW))
    (tmp_path / "sweep.toml").write_text(SWEEP)
    out = tmp_path / "sweep"
    from icl_race.run import sweep

    spec = sweep.load(tmp_path / "sweep.toml", [])
    path = sweep.cell_dir(out, spec.cells[0]) if name == "CELL" else out / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(outside / "folder")
    before = _files(outside)
    assert main(["sweep", str(tmp_path / "sweep.toml"), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is a symbolic link" in err, err
    assert _files(outside) == before


# ---- results as data --------------------------------------------------------------------------------


def _craft(d: Path, **arrays) -> None:
    res = rundir.read_results(d)
    res.update({k: np.asarray(v) for k, v in arrays.items()})
    (d / "results.npz").write_bytes(rundir.npz_bytes(res))


CRAFTED = [  # (id, arrays, the array named)
    ("t_icl of 3 for 2 seeds", {"t_icl": [100, 150, 200]}, "t_icl"),
    ("t_icl 0-d", {"t_icl": 100}, "t_icl"),
    ("t_icl nan", {"t_icl": [np.nan, 100.0]}, "t_icl"),
    ("t_icl beyond the budget", {"t_icl": [100, 10**6]}, "t_icl"),
    ("budget of 3", {"budget": [1, 2, 3]}, "budget"),
    ("eval_steps empty", {"eval_steps": np.array([], np.int64)}, "eval_steps"),
    ("eval_steps decreasing", {"eval_steps": np.array([200, 150, 100, 50])}, "eval_steps"),
    ("diverged strings", {"diverged": ["x", "y"]}, "diverged"),
    ("diverged of 3", {"diverged": [False, False, True]}, "diverged"),
    ("a curve of 3 evaluations", {"icl_acc": np.zeros((2, 3), np.float32)}, "icl_acc"),
]


@pytest.mark.parametrize("arrays, name", [c[1:] for c in CRAFTED], ids=[c[0] for c in CRAFTED])
def test_crafted_results_are_one_line_naming_the_array_in_every_reader(tmp_path, finished, arrays, name, capsys):
    d = _copy(finished, tmp_path)
    _craft(d, **arrays)
    with pytest.raises(rundir.DamagedFileError, match=f"results.npz: array {name}: "):
        icl_race.load(d)
    (tmp_path / "run.toml").write_text(tiny.toml(RAW))
    for argv in (["report", str(d)], ["hist", str(d)], ["run", str(tmp_path / "run.toml"), "--out", str(d)]):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"array {name}" in err, (argv, err)


def test_redo_sets_crafted_results_aside_like_unparsable_ones(tmp_path, finished):
    d = _copy(finished, tmp_path)
    _craft(d, t_icl=[100, 150, 200])
    (tmp_path / "run.toml").write_text(tiny.toml(RAW))
    assert main(["run", str(tmp_path / "run.toml"), "--out", str(d), "--redo", "--quiet"]) == 0
    assert len(list(d.glob("damaged-*/results.npz"))) == 1
    np.testing.assert_array_equal(icl_race.load(d).times["icl"], rundir.read_results(finished)["t_icl"])


def test_a_crafted_cell_is_listed_as_damaged_and_the_other_cells_are_reported(tmp_path, finished, capsys):
    sweep_dir = tmp_path / "sweep"
    for name in ("a", "b"):
        shutil.copytree(finished, sweep_dir / "cells" / name)
    _edit_config(sweep_dir / "cells" / "b", "task", K=200)  # unchanged value: provenance still holds
    _craft(sweep_dir / "cells" / "a", t_icl=[100, 150, 200])
    found = icl_race.load(sweep_dir)
    status = {c.name: (c.status, c.reason) for c in found.cells}
    assert status["a"][0] == "unreadable" and "array t_icl" in status["a"][1] and status["b"][0] == "done"
    assert main(["hist", str(sweep_dir)]) == 0
    assert main(["report", str(sweep_dir)]) == 0
    md = (sweep_dir / "report.md").read_text()
    assert "unreadable" in md and "array t_icl" in md


def test_a_non_table_grid_in_a_stored_sweep_spec_falls_back_to_the_varying_fields(tmp_path, finished):
    sweep_dir = tmp_path / "sweep"
    shutil.copytree(finished, sweep_dir / "cells" / "a")
    (sweep_dir / "sweep.toml").write_text("grid = 5\n")
    assert icl_race.load(sweep_dir).fields == []
    assert main(["hist", str(sweep_dir)]) == 0
