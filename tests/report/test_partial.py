"""A report of a run between its chunks (report/partial.py): read from one snapshot of live.npz, every
table and figure marked "partial, as of step X of Y", no advice that assumes the run ended; the run's
commit removes it, and `report` then writes the final one. Known answers: this tiny run acquires ICL in
no seed within its 200 steps, so its final report advises raising train.steps and its partial one must
not."""

import dataclasses
import json
import shutil
import time

import numpy as np
import pytest
import runproc
import tiny
from PIL import Image

import icl_race
from icl_race import config, rundir
from icl_race.cli import main
from icl_race.report import directory, partial, warnings
from icl_race.rundir import read
from icl_race.rundir.state import FINISHED

RAW = tiny.small(
    train={"steps": 200, "evals_per_chunk": 1, "stop_when_all_acquired": False}, ensemble={"seeds": 2, "block": 2}
)
# the end-of-run advice of report/warnings.py (nothing acquired, outside the abrupt regime)
ADVICE = ("raise train.steps", "no seed acquired", "outside the abrupt regime")

# In the run's own process: live.npz written after every chunk, and the run held at step 100 (its lock
# held, live.npz as of step 100) until the test creates the file `go` beside the run's folder.
PAUSE_AT_100 = """
import pathlib, time
from icl_race.run import live
live.EVERY_S, live.SHARE = 0.0, 0
_write = live.LiveResults.__call__
def _paused(self, p):
    _write(self, p)
    if p.step == 100:
        beside = self.path.parent.parent
        (beside / "paused").touch()
        while not (beside / "go").exists():
            time.sleep(0.05)
live.LiveResults.__call__ = _paused
"""


def _wait_for(path, proc, limit_s=600):
    """Until `path` exists; the run's own error if its process ends first (a deadline, not a timing)."""
    end = time.monotonic() + limit_s
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"the run ended before {path.name}: {proc.stderr.read()[-2000:]}")
        assert time.monotonic() < end, f"no {path.name} within {limit_s} s"
        time.sleep(0.1)


def _count_live_reads(monkeypatch) -> list:
    """Every read of a live.npz's arrays (rundir/read.py's `load_live` reads it through `read_npz`)."""
    reads = []
    real = read.read_npz

    def counted(path, *args, **kwargs):
        if path.name == rundir.LIVE:
            reads.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(read, "read_npz", counted)
    return reads


def _titles(monkeypatch) -> dict:
    """Each figure's title as the report saves it (name -> the figure's suptitle)."""
    titles = {}
    real = directory.figure_files

    def seen(fig, name, *args):
        titles[name] = fig.get_suptitle()
        return real(fig, name, *args)

    monkeypatch.setattr(directory, "figure_files", seen)
    return titles


def assert_marked(d, as_of: str, titles: dict, at_least: int = 5) -> None:
    """report.md: `as_of` above every table and under every figure (`at_least` of each), nowhere else; each
    figure's title ends with it, and its PNG's and PDF's metadata hold it."""
    lines = (d / "report.md").read_text().splitlines()
    tables = [i for i, line in enumerate(lines) if line.startswith("|") and not lines[i - 1].startswith("|")]
    images = [i for i, line in enumerate(lines) if line.startswith("![")]
    assert len(tables) >= at_least and len(images) >= at_least, (len(tables), len(images))
    caption = f"*{as_of}*"
    for i in tables:
        assert lines[i - 2 : i] == [caption, ""], lines[i - 3 : i + 1]
    for i in images:
        assert lines[i + 1] == caption, lines[i : i + 2]
    assert lines.count(caption) == len(tables) + len(images)
    rep = json.loads((d / "report.json").read_text())
    pngs = [f for f in rep["figures"] if f.endswith(".png")]
    assert sorted(f"figures/{name}.png" for name in titles) == sorted(pngs)
    for title in titles.values():
        assert title.endswith(f"\n{as_of}") or title == as_of, title
    for f in rep["figures"]:
        if f.endswith(".png"):
            assert Image.open(d / f).info["Description"] == as_of
        else:
            assert f"/Subject ({as_of})".encode() in (d / f).read_bytes()


def _advice(d, err: str) -> list[str]:
    said = [(d / "report.md").read_text(), err, *json.loads((d / "report.json").read_text())["warnings"]]
    return [a for a in ADVICE if any(a in text for text in said)]


def test_a_run_reported_between_its_chunks_is_marked_partial_then_its_final_report_replaces_it(
    tmp_path, capsys, monkeypatch
):
    d = tmp_path / "run"
    proc = runproc.start_run(RAW, d, hook=PAUSE_AT_100)
    try:
        _wait_for(tmp_path / "paused", proc)
        reads, titles = _count_live_reads(monkeypatch), _titles(monkeypatch)
        assert main(["report", str(d), "--boot", "20"]) == 0
        _, err = capsys.readouterr()
        assert len(reads) == 1  # one snapshot: the files and the warnings on stderr are of one reading
        rep = json.loads((d / "report.json").read_text())
        assert (rep["state"], rep["as_of_step"], rep["budget"]) == ("training", 100, 200)
        assert f"still training (pid {proc.pid}) as of step 100 of 200" in rep["partial"]
        assert_marked(d, "partial, as of step 100 of 200", titles)
        assert _advice(d, err) == []
        (d / "figures" / "notes.txt").write_text("mine")  # not the report's: its commit leaves it
        (tmp_path / "go").touch()
        assert proc.wait(timeout=600) == 0, proc.stderr.read()[-2000:]
    finally:
        (tmp_path / "go").touch()
        proc.kill()
        proc.wait()
    # the commit removed the partial report (and only its files): no report outlives the results it is of
    assert rundir.state(d).finished and not (d / "report.md").exists() and not (d / "report.json").exists()
    assert sorted(p.name for p in (d / "figures").iterdir()) == ["notes.txt"]
    reads.clear()
    assert main(["report", str(d), "--boot", "20"]) == 0
    _, err = capsys.readouterr()
    md, rep = (d / "report.md").read_text(), json.loads((d / "report.json").read_text())
    assert reads == [] and "partial" not in md and "state" not in rep and "partial" not in rep
    assert _advice(d, err) == ["raise train.steps", "no seed acquired"]  # what the partial report held back
    assert all("partial" not in title for title in titles.values())
    assert all("Description" not in Image.open(d / f).info for f in rep["figures"] if f.endswith(".png"))


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """A run stopped after its chunk at step 150 (killed before its commit)."""
    d = tmp_path_factory.mktemp("partial_report") / "run"
    runproc.killed_before_commit(config.from_dict(RAW), d)
    return d


def test_hist_reads_one_snapshot_and_gives_no_verdict_of_a_partial_run(killed, capsys, monkeypatch):
    reads = _count_live_reads(monkeypatch)
    assert main(["hist", str(killed)]) == 0
    assert main(["hist", str(killed), "--json"]) == 0
    out = capsys.readouterr().out
    assert len(reads) == 2 and "stopped at step 150 of 200" in out  # one each
    assert not [a for a in ADVICE if a in out]


def test_the_end_of_run_warnings_wait_for_the_end(killed):
    """Of the results so far: a seed not yet acquired may still acquire, and the regime is judged on the
    seeds acquired so far; diverged seeds are a fact now."""
    run = icl_race.load(killed)
    rise = 0.5  # above the abrupt regime's bound
    final = warnings.of_run(dataclasses.replace(run, state=FINISHED), rise)
    assert [w.split(":")[1] for w in final] == [
        " no seed acquired ICL within 150 steps (0 of 2; train.optimizer sgd, train.lr 0.1)",
        " outside the abrupt regime",
    ]
    assert warnings.of_run(run, rise) == []
    one = dataclasses.replace(run, diverged=np.array([True, False]))
    assert [w.split(" (")[0] for w in warnings.of_run(one, rise)] == ["warning: 1 of 2 seeds diverged"]


def _commit_by_hand(d) -> None:
    """A stopped run finished as its commit would: live.npz's arrays as results.npz, with its meta.json."""
    arrays = dict(np.load(d / rundir.LIVE))
    headline = str(arrays.pop(rundir.LIVE_HEADLINE))
    cfg = json.loads((d / rundir.CONFIG).read_text())
    (d / rundir.META).write_text(json.dumps({"config": cfg, "stop_event": headline}))
    (d / rundir.RESULTS).write_bytes(rundir.npz_bytes(arrays))
    (d / rundir.LIVE).unlink()


def test_a_run_that_finishes_while_reported_gets_its_final_report(killed, tmp_path, capsys, monkeypatch):
    """The commit lands while `report` reads the results so far: the report reads the finished run
    instead of writing one that the commit has already retired."""
    d = tmp_path / "run"
    shutil.copytree(killed, d)
    from icl_race.report import classification

    real = classification.run_report

    def finished_meanwhile(run, draws):
        if run.partial:
            _commit_by_hand(d)
        return real(run, draws)

    monkeypatch.setattr(classification, "run_report", finished_meanwhile)
    assert main(["report", str(d), "--boot", "20"]) == 0
    err = capsys.readouterr().err
    assert "finished while its results so far were read" in err
    rep = json.loads((d / "report.json").read_text())
    assert "state" not in rep and "partial" not in (d / "report.md").read_text()


def test_retire_removes_only_a_partial_report_and_only_the_files_it_wrote(killed, tmp_path, capsys):
    d = tmp_path / "run"
    shutil.copytree(killed, d)
    assert main(["report", str(d), "--boot", "20"]) == 0
    capsys.readouterr()
    figures = json.loads((d / "report.json").read_text())["figures"]
    (d / "report.md").write_text("my notes on the partial report")  # edited since: the user's
    assert sorted(partial.retire(d)) == sorted([*figures, "report.json"])
    assert (d / "report.md").read_text() == "my notes on the partial report" and not (d / "figures").exists()
    assert partial.retire(d) == []  # no partial report.json left: nothing to do


def test_a_sweep_with_a_stopped_cell_reports_its_finished_cells_and_no_advice_of_the_whole(
    killed, tmp_path, capsys, monkeypatch
):
    """A sweep's report reads its finished cells only (their numbers are final; no live.npz is read), names
    the stopped one, and says of the finished ones only what the whole sweep has not yet shown."""
    d = tmp_path / "sweep"
    for cell in ("a", "b"):
        shutil.copytree(killed, d / "cells" / cell)
    _commit_by_hand(d / "cells" / "b")
    reads = _count_live_reads(monkeypatch)
    assert main(["report", str(d), "--boot", "20"]) == 0
    err = capsys.readouterr().err
    md = (d / "report.md").read_text()
    assert reads == [] and "1 finished cells" in md and "`a`" in md and "stopped at step 150 of 200" in md
    assert "every finished cell (1 of 2): no seed acquired ICL" in err and "every cell:" not in err
    _commit_by_hand(d / "cells" / "a")
    assert main(["report", str(d), "--boot", "20"]) == 0
    assert "every cell: no seed acquired ICL" in capsys.readouterr().err


def test_a_sweep_reported_with_cells_unfinished_is_marked_partial_and_a_cells_commit_retires_it(
    killed, tmp_path, capsys, monkeypatch
):
    """A sweep of three cells (train.lr): one finished, one training (this process holds its lock, as its
    worker would), one not started. Its report says "partial: 1 of 3 cells finished", names the other two,
    marks every table and figure, and says of the finished cell only what the whole sweep has not yet
    shown; the sweep, run to its end, retires that report at its cells' commits, and the final one has
    none of it."""
    from icl_race.run import sweep

    spec_path = tmp_path / "sweep.toml"
    spec_path.write_text(tiny.toml(RAW) + '[grid]\n"train.lr" = [0.1, 0.05, 0.02]\n')
    spec = sweep.load(spec_path)
    d = tmp_path / "sweep"
    sweep.store_spec(d, spec, print)  # as `icl-race sweep` stores it before its first cell
    cells = {c.values["train.lr"]: sweep.cell_dir(d, c) for c in spec.cells}
    shutil.copytree(killed, cells[0.1])  # lr 0.1: stopped at step 150 of 200
    shutil.copytree(killed, cells[0.05], ignore=shutil.ignore_patterns("checkpoints"))
    cfg = json.loads((cells[0.05] / rundir.CONFIG).read_text())
    cfg["train"]["lr"] = 0.05
    (cells[0.05] / rundir.CONFIG).write_text(json.dumps(cfg))
    _commit_by_hand(cells[0.05])  # lr 0.05: finished; lr 0.02: no folder yet
    titles = _titles(monkeypatch)
    with rundir.lock(cells[0.1]):  # a live process holds it: training
        assert main(["report", str(d), "--boot", "20"]) == 0
        err = capsys.readouterr().err
        assert main(["hist", str(d)]) == 0
        hist = capsys.readouterr().out
    rep = json.loads((d / "report.json").read_text())
    unfinished = "training: train.lr=0.1 at step 150 of 200; not started: train.lr=0.02"
    assert rep["partial"].startswith(f"partial: 1 of 3 cells finished in {d}; {unfinished};"), rep["partial"]
    assert {k: rep[k] for k in ("state", "cells_finished", "grid_cells", "training", "stopped", "not_started")} == {
        "state": "training",
        "cells_finished": 1,
        "grid_cells": 3,
        "training": ["train.lr=0.1 at step 150 of 200"],
        "stopped": [],
        "not_started": ["train.lr=0.02"],
    }
    assert f"**{rep['partial']}.**" in (d / "report.md").read_text().splitlines()[:3]
    assert_marked(d, "partial: 1 of 3 cells finished", titles, at_least=2)
    assert "every finished cell (1 of 3): no seed acquired ICL" in err and "every cell:" not in err
    assert hist.rstrip().endswith(rep["partial"])
    # the sweep run to its end: its cells' commits retire the partial report (and only its files)
    found = rundir.load_sweep(d)
    unseen = dataclasses.replace(found, cells=tuple(c for c in found.cells if c.status != "partial"))
    assert not partial.finished_since(found) and not partial.finished_since(unseen)
    assert main(["sweep", str(spec_path), "--out", str(d), "--quiet"]) == 0
    capsys.readouterr()
    # a report that read the sweep before must read it again: the training cell committed, and so did
    # the one it did not see (no folder then)
    assert partial.finished_since(found) and partial.finished_since(unseen)
    assert not (d / "report.md").exists() and not (d / "report.json").exists() and not (d / "figures").exists()
    titles.clear()
    assert main(["report", str(d), "--boot", "20"]) == 0
    err = capsys.readouterr().err
    md, rep = (d / "report.md").read_text(), json.loads((d / "report.json").read_text())
    assert "partial" not in md and "state" not in rep and "partial" not in rep and "3 finished cells" in md
    assert "every cell: no seed acquired ICL" in err
    assert titles and all("partial" not in title for title in titles.values())
