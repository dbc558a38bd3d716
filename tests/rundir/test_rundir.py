"""The run directory: one commit finishes a run, a kill at any step of it reruns to the same results,
half-finished directories of older versions are repaired, and `icl_race.load` reads it all back."""

import collections
import dataclasses
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import tiny

import icl_race
from icl_race import config, rundir
from icl_race.run import sweep
from icl_race.run.runner import execute

RAW = tiny.small(
    task={"K": 200}, train={**tiny.RESUMABLE, "steps": 200, "evals_per_chunk": 1}, ensemble={"seeds": 3, "block": 4}
)
CFG = config.from_dict(RAW)
FINISH_STEPS = [
    "staged t_icl_hist.png",
    "staged meta.json",
    "staged results.npz",
    "renamed t_icl_hist.png",
    "renamed meta.json",
    "renamed results.npz",
    "removed checkpoints",
]


class Killed(BaseException):
    """Stands for a SIGKILL: nothing in the package catches a BaseException that is not an Exception."""


def _same(a: dict, b: dict) -> None:
    # Both sides trained on this machine in this session: bit equality holds (docs/reproducibility.md).
    assert set(a) == set(b)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("plain") / "run"
    execute(CFG, out, progress=False)
    return out, rundir.read_results(out)


def _kill_at(monkeypatch, step):
    def hook(name):
        if name == step:
            raise Killed(name)

    monkeypatch.setattr(rundir.write, "fault_hook", hook)


def test_finish_steps_are_the_ones_the_kill_test_covers(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(rundir.write, "fault_hook", seen.append)
    execute(CFG, tmp_path / "run", progress=False)
    assert seen == FINISH_STEPS


@pytest.mark.parametrize("step", FINISH_STEPS)
def test_a_kill_at_any_step_of_the_finish_reruns_to_the_uninterrupted_results(
    tmp_path, monkeypatch, step, uninterrupted
):
    out = tmp_path / "run"
    _kill_at(monkeypatch, step)
    with pytest.raises(Killed):
        execute(CFG, out, progress=False)
    committed = FINISH_STEPS.index(step) >= FINISH_STEPS.index("renamed results.npz")
    assert rundir.is_done(out) == committed
    assert committed or rundir.checkpoint_steps(out), "an uncommitted run keeps its checkpoints"
    assert not rundir.half_finished(out)
    monkeypatch.setattr(rundir.write, "fault_hook", None)
    logs = []
    execute(CFG, out, progress=False, log=logs.append)
    _same(rundir.read_results(out), uninterrupted[1])
    assert rundir.is_done(out) and not (out / "checkpoints").exists()
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in uninterrupted[0].iterdir())
    assert any(("nothing to do" if committed else "resuming from the checkpoint at step 150") in m for m in logs)


def test_results_without_meta_from_an_older_version_are_redone_from_the_checkpoint(
    tmp_path, monkeypatch, uninterrupted
):
    out = tmp_path / "run"
    _kill_at(monkeypatch, "staged results.npz")
    with pytest.raises(Killed):
        execute(CFG, out, progress=False)
    # The state an older version left when killed between writing results.npz and meta.json.
    next(out.glob(".results.npz.tmp*")).rename(out / "results.npz")
    for tmp in out.glob(".*.tmp*"):
        tmp.unlink()
    assert rundir.half_finished(out) and rundir.cell_status(out) == "partial"
    monkeypatch.setattr(rundir.write, "fault_hook", None)
    logs = []
    execute(CFG, out, progress=False, log=logs.append)
    assert any("results.npz without meta.json" in m and "checkpoint at step 150" in m for m in logs)
    _same(rundir.read_results(out), uninterrupted[1])
    assert rundir.is_done(out) and not (out / "checkpoints").exists()


def test_results_without_meta_and_no_checkpoint_redo_the_run(tmp_path, uninterrupted):
    out = tmp_path / "run"
    execute(CFG, out, progress=False)
    (out / "meta.json").unlink()
    logs = []
    execute(CFG, out, progress=False, log=logs.append)
    assert [m for m in logs if "results.npz without meta.json" in m and "redoing the run" in m]
    _same(rundir.read_results(out), uninterrupted[1])


def test_sigkill_between_the_renames_leaves_a_resumable_run(tmp_path, uninterrupted):
    out = tmp_path / "run"
    kill = (
        "import os, signal\nfrom icl_race.rundir import write\n"
        "write.fault_hook = lambda s: s == 'renamed meta.json' and os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    code = (
        f"{kill}import json\nfrom icl_race import config\nfrom icl_race.run.runner import execute\n"
        f"execute(config.from_dict(json.loads({json.dumps(json.dumps(RAW))})), {str(out)!r}, progress=False)"
    )
    p = subprocess.run([sys.executable, "-c", code], env={**os.environ, "JAX_PLATFORMS": "cpu"}, timeout=300)
    assert p.returncode == -signal.SIGKILL
    assert (out / "meta.json").exists() and not rundir.is_done(out)
    execute(CFG, out, progress=False)
    _same(rundir.read_results(out), uninterrupted[1])


def test_a_sweep_worker_counts_only_committed_cells(tmp_path, monkeypatch):
    spec = sweep.expand(RAW, {})
    [cell] = spec.cells
    d = sweep.cell_dir(tmp_path, cell)
    _kill_at(monkeypatch, "renamed meta.json")
    with pytest.raises(Killed):
        execute(cell.cfg, d, progress=False)
    assert sweep.status(tmp_path, cell) == "partial"
    row = next(iter(_rows(sweep.write_summary(tmp_path, spec))))
    assert row["status"] == "partial" and row["median_t_icl"] == ""


def _rows(path):
    import csv

    return list(csv.DictReader(path.read_text().splitlines()))


# The hand-made cells' layout: their results hold the config's 4 seeds and its budget of 300 steps
# (rundir/verify.py checks a run's arrays against its config).
HAND = tiny.small(task={"K": 200}, train={"steps": 300}, ensemble={"seeds": 4, "block": 4})


def _hand_made_cell(out, cell, t_icl, budget=300):
    d = sweep.cell_dir(out, cell)
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps(cell.cfg.to_dict()))
    (d / "meta.json").write_text(
        json.dumps({"config": cell.cfg.to_dict(), "stop_event": "icl", "seed_steps_per_s": 1.0})
    )
    S = len(t_icl)
    np.savez(
        d / "results.npz",
        seed_ids=np.arange(S),
        t_icl=np.array(t_icl),
        diverged=np.zeros(S, bool),
        eval_steps=np.array([100, 200, 300]),
        icl_acc=np.zeros((S, 3)),
        iwl_acc=np.zeros((S, 3)),
        steps_run=budget,
        budget=budget,
    )
    return d


def test_summary_median_is_kaplan_meier(tmp_path):
    spec = sweep.expand(HAND, {"task.K": [200, 400]})
    _hand_made_cell(tmp_path, spec.cells[0], [100, 200, -1, -1])  # S(200) = 1/2: the KM median is 200
    _hand_made_cell(tmp_path, spec.cells[1], [100, -1, -1, -1])  # never down to 1/2: not reached
    rows = _rows(sweep.write_summary(tmp_path, spec))
    assert [r["median_t_icl"] for r in rows] == ["200.0", ""]
    assert [r["censored"] for r in rows] == ["2", "3"]


def test_load_reads_a_run_and_a_sweep_with_their_swept_values(tmp_path, uninterrupted):
    run = icl_race.load(uninterrupted[0])
    assert isinstance(run, rundir.Run) and run.headline == "icl" and run.cfg == CFG
    assert run.seed_ids.tolist() == [0, 1, 2] and run.eval_steps.tolist() == [50, 100, 150, 200]
    assert run.curves["icl_acc"].shape == (3, 4) and run.budget == 200 and run.meta["seeds"] == 3
    assert run.censor_at() == 200 and {"icl", "converged"} <= set(run.times)
    spec = sweep.expand(HAND, {"task.K": [200, 400]})
    (tmp_path / "sweep.toml").write_text(sweep.spec_toml(spec))
    _hand_made_cell(tmp_path, spec.cells[0], [100, 200, -1, -1])
    sweep.cell_dir(tmp_path, spec.cells[1]).mkdir(parents=True)
    (sweep.cell_dir(tmp_path, spec.cells[1]) / "config.json").write_text(json.dumps(spec.cells[1].cfg.to_dict()))
    found = icl_race.load(tmp_path)
    assert isinstance(found, rundir.SweepDir) and found.fields == ["task.K"]
    by_k = {c.values["task.K"]: c for c in found.cells}
    assert by_k[200].status == "done" and by_k[200].run.km_median() == 200
    assert by_k[400].status == "pending" and by_k[400].run is None
    assert found.runs == [by_k[200].run]


def test_a_checkpoint_of_another_state_layout_is_refused_in_one_line_and_left_alone(tmp_path, monkeypatch):
    # A checkpoint written by a version whose seed state had other fields (e.g. before the optimizer
    # state joined it) must not reach the compiled step, where it failed with a KeyError traceback.
    import icl_race.run.checkpoint as ck
    from icl_race.systems.classification import ClassificationRace

    save = ck.Checkpointer.save

    def stop_after_100(self, step, *a, **k):
        save(self, step, *a, **k)
        if step >= 100:
            self.wait()
            raise Killed("after the checkpoint at step 100")

    out = tmp_path / "run"
    monkeypatch.setattr(ck.Checkpointer, "save", stop_after_100)
    with pytest.raises(Killed):
        execute(CFG, out, progress=False)
    monkeypatch.setattr(ck.Checkpointer, "save", save)

    def files():  # all but the lock, which the second attempt takes and releases
        return sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in out.rglob("*") if p.name != rundir.LOCK)

    before = files()
    init = ClassificationRace.init
    monkeypatch.setattr(ClassificationRace, "init", lambda self, key, consts: {**init(self, key, consts), "extra": key})
    with pytest.raises(rundir.RunDirError) as e:
        execute(CFG, out, progress=False)
    msg = str(e.value)
    assert "\n" not in msg and "checkpoint at step 100" in msg and "lacks ['extra']" in msg, msg
    assert files() == before


def _counting(monkeypatch, calls: collections.Counter, *targets) -> None:
    """Count the calls of each (module, function name) in `calls`, by name."""
    for module, name in targets:
        original = getattr(module, name)

        def counted(*args, _original=original, _name=name, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)


def test_a_run_derives_its_layout_and_plan_once_and_reads_nothing_back(tmp_path, monkeypatch, capsys):
    """One `execute` takes its parsed Config and derives the device layout and the chunk plan once
    (records.RunPlan), for the memory check, the progress line, the engine's chunks, the checkpoints and
    retirement alike; the committed run comes back from memory (no config parsed, no file read back),
    and a rerun of the finished run reads results.npz once."""
    from icl_race.engine import chunks
    from icl_race.report.summary import run_summary
    from icl_race.run import records, runner

    cfg = config.from_dict({**RAW, "ensemble": {**RAW["ensemble"], "retire": True}})
    calls: collections.Counter = collections.Counter()
    _counting(
        monkeypatch,
        calls,
        (config, "from_dict"),
        (records, "layout"),
        (records, "chunks"),
        (chunks, "chunk_plan"),
        (rundir.files, "read_npz"),
        (rundir.files, "read_json"),
    )
    out = tmp_path / "run"
    run = runner.execute_run(cfg, out, progress=True)
    summary = run_summary(run)
    assert dict(calls) == {"layout": 1, "chunks": 1, "chunk_plan": 1}
    assert run.cfg is cfg and summary.dir == str(out)

    calls.clear()
    again = execute(cfg, out, progress=False, log=lambda m: None)
    assert calls["read_npz"] == 1 and not {"layout", "chunks", "chunk_plan"} & set(calls)
    _same(again, rundir.read_results(out))
    capsys.readouterr()


def test_the_committed_run_is_the_run_loading_its_directory_gives(tmp_path):
    """`runner.execute_run`'s Run, made from the arrays just committed, equals `rundir.load_run` of the
    directory field by field (arrays with their dtypes, meta.json as written), and so do their summaries
    (`run --json`)."""
    from icl_race.report.summary import run_summary
    from icl_race.run import runner

    out = tmp_path / "run"
    mem = runner.execute_run(CFG, out, progress=False)
    disk = rundir.load_run(out)
    for f in dataclasses.fields(rundir.Run):
        a, b = getattr(mem, f.name), getattr(disk, f.name)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype, f.name
            np.testing.assert_array_equal(a, b, err_msg=f.name)
        elif f.name in ("times", "curves"):
            assert {k: v.dtype for k, v in a.items()} == {k: v.dtype for k, v in b.items()}, f.name
            _same(a, b)
        else:
            assert a == b, f.name
    assert mem.cfg == disk.cfg == CFG
    as_json = lambda s: json.dumps(dataclasses.asdict(s), sort_keys=True)
    assert as_json(run_summary(mem)) == as_json(run_summary(rundir.load(out)))


def test_the_run_plan_is_the_configs_layout_chunks_and_digest_derived_once():
    """`RunPlan.of` derives what the phases (cost, the memory check, prepare) take: the config's chunk
    plan, layout and digest, as the functions that compute them give them; `cost.project` defaults to its
    layout's devices."""
    from icl_race.run import cost, host, records

    cfg = config.from_dict({**RAW, "train": {**RAW["train"], "eval_spacing": "log", "steps": 1600}})
    run = records.RunPlan.of(cfg)
    assert run.chunks == records.chunks(cfg) and run.layout == records.layout(cfg) and run.digest == cfg.digest()
    measured = cost.Cost(setup_s=2.0, compile_s=1.5, period_s=0.1, first_period=50, checkpoint_s=0.3, finish_s=0.2)
    for start in (0, 150):
        assert cost.project(run, measured, start) == cost.project(run, measured, start, shards=run.layout.shards)
    host.check_memory(run)
