"""Checkpoints and resume: SIGKILL at random moments, damaged checkpoints, locks, divergence, write errors."""

import asyncio
import gc
import json
import signal
import time

import numpy as np
import pytest
import tiny
from refusal import refused
from runproc import set_args, start_run

from icl_race import config
from icl_race.cli import main
from icl_race.run.checkpoint import Checkpointer
from icl_race.run.runner import execute

RAW = tiny.raw(
    train={**tiny.RESUMABLE, "steps": 1200, "eval_size": 100, "evals_per_chunk": 2}, ensemble={"seeds": 6, "block": 8}
)


def _assert_same(a, b):
    # Both trained on this machine in this test: bit equality of the passages holds (docs/reproducibility.md).
    for k in ("t_icl", "t_converged", "eval_steps", "seed_ids", "diverged"):
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    for k in ("icl_acc", "iwl_acc", "icl_loss", "iwl_loss", "train_loss"):
        np.testing.assert_allclose(a[k], b[k], atol=1e-6, err_msg=k)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    cfg = config.from_dict({**RAW, "train": {**RAW["train"], "checkpoint_every": 0}})
    return execute(cfg, tmp_path_factory.mktemp("plain") / "run", progress=False)


def test_sigkill_at_random_moments_then_resume_gives_the_same_results(tmp_path, uninterrupted):
    out = tmp_path / "run"
    rng = np.random.default_rng(0)
    # Kill 1: inside a checkpoint write (the save is queued, then the process dies at once).
    kill_in_save = (
        "import os, signal\nimport icl_race.run.checkpoint as c\n_save = c.Checkpointer.save\n"
        "def save(self, step, *a, **k):\n    _save(self, step, *a, **k)\n"
        "    if step >= 300: os.kill(os.getpid(), signal.SIGKILL)\nc.Checkpointer.save = save"
    )
    p = start_run(RAW, out, kill_in_save)
    assert p.wait(timeout=300) == -signal.SIGKILL
    # Kills 2-3: at random wall-clock moments.
    for _ in range(2):
        p = start_run(RAW, out)
        time.sleep(rng.uniform(4.0, 9.0))
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
        # A kill may land after the commit (the run was quick); results.npz, renamed last, is then whole.
        assert not (out / "results.npz").exists() or (out / "meta.json").exists()
    p = start_run(RAW, out)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    _assert_same(dict(np.load(out / "results.npz")), uninterrupted)
    assert not (out / "checkpoints").exists(), "checkpoints are removed once results are written"


def test_damaged_newest_checkpoint_falls_back_with_a_warning(tmp_path, uninterrupted):
    out = tmp_path / "run"
    stop_after_4 = (
        "import icl_race.run.checkpoint as c\n_save = c.Checkpointer.save\n"
        "def save(self, step, *a, **k):\n    _save(self, step, *a, **k)\n"
        "    if step >= 400:\n        self.wait(); raise SystemExit(3)\nc.Checkpointer.save = save"
    )
    p = start_run(RAW, out, stop_after_4)
    p.communicate(timeout=300)
    steps = sorted(int(d.name) for d in (out / "checkpoints").iterdir() if d.name.isdigit())
    assert steps == [300, 400]
    # Damage the newest: truncate every array data file of its state to half, flipping a byte too.
    for f in (out / "checkpoints" / "400" / "state").rglob("*"):
        if f.is_file() and f.parent.name == "d":
            data = bytearray(f.read_bytes())[: max(1, f.stat().st_size // 2)]
            data[-1] ^= 0xFF
            f.write_bytes(bytes(data))
    p = start_run(RAW, out)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert "step 400 is damaged" in err and "resuming from the checkpoint at step 300" in err
    assert "Traceback" not in err and "Event loop is closed" not in err and len(err.strip().splitlines()) == 2, err
    _assert_same(dict(np.load(out / "results.npz")), uninterrupted)


def test_second_process_on_the_same_directory_is_refused_untouched(tmp_path):
    out = tmp_path / "run"
    first = start_run(
        RAW,
        out,
        "import time, icl_race.engine.ensemble as e\n_t = e.train\n"
        "def train(*a, **k):\n    time.sleep(30)\n    return _t(*a, **k)\ne.train = train",
    )
    deadline = time.time() + 60
    while not (out / "checkpoints").exists() and time.time() < deadline:  # the first is now in train()
        time.sleep(0.2)
    time.sleep(1.0)
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    second = start_run(RAW, out)
    _, err = second.communicate(timeout=120)
    first.kill()
    first.wait()
    assert second.returncode == 2 and "another icl-race process" in err and len(refused(err)) == 1
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before


def test_diverged_seeds_are_marked(tmp_path):
    # lr 1e4 blows the logistic loss up within a few steps for every seed.
    cfg = config.from_dict(
        {
            **RAW,
            "train": {**RAW["train"], "lr": 1e4, "steps": 200, "checkpoint_every": 0, "stop_when_all_acquired": True},
        }
    )
    res = execute(cfg, tmp_path / "run", progress=False)
    assert res["diverged"].dtype == bool and res["diverged"].all()
    np.testing.assert_array_equal(res["diverged"], ~np.isfinite(res["train_loss"]).all(axis=1))
    assert res["steps_run"] < 200, "a run whose seeds all diverged ends early"
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["diverged"] == 6


def test_write_error_ends_the_run_with_a_clear_message(tmp_path, monkeypatch, capsys):
    from icl_race.rundir import write

    real = write._write_synced

    def full_disk(path, data, final=None):
        if "results.npz" in path.name:
            raise OSError(28, "No space left on device", str(path))
        real(path, data, final)

    monkeypatch.setattr(write, "_write_synced", full_disk)
    out = tmp_path / "run"
    (tmp_path / "base.toml").touch()
    args = ["run", str(tmp_path / "base.toml"), "--out", str(out), "--quiet"] + set_args(RAW)
    args += ["--set", "train.steps=200"]
    assert main(args) == 1
    err = capsys.readouterr().err.strip()
    assert "No space left on device" in err and "checkpoint" in err and len(err.splitlines()) == 1
    assert not (out / "results.npz").exists()
    steps = sorted(int(d.name) for d in (out / "checkpoints").iterdir() if d.name.isdigit())
    assert steps == [100], "the last good checkpoint is kept"
    assert not [p.name for p in out.iterdir() if ".tmp" in p.name], "no temporary file is left behind"


def test_checksum_catches_a_checkpoint_that_reads_back_wrong(tmp_path):
    from icl_race.run.checkpoint import Checkpointer, CheckpointWarning

    ck = Checkpointer(tmp_path / "ck")
    tree = {"a": np.arange(6, dtype=np.float32), "b": {"c": np.ones((2, 3), np.int32)}}
    ck.save(1, tree, {})
    ck.save(2, {**tree, "a": tree["a"] + 1}, {})
    ck.wait()
    meta = tmp_path / "ck" / "2" / "meta" / "metadata"
    stored = json.loads(meta.read_text())
    meta.write_text(json.dumps({**stored, "sha256": "0" * 64}))  # as if the arrays had changed on disk
    with pytest.warns(CheckpointWarning, match="step 2 is damaged"):
        restored, info = ck.restore_latest()
    ck.close()
    assert info["step"] == 1
    np.testing.assert_array_equal(restored["a"], tree["a"])
    assert (tmp_path / "ck.damaged").is_dir() and not (tmp_path / "ck" / "2").exists()


@pytest.mark.parametrize("kind", ["task", "future"])
def test_sibling_task_errors_of_a_damaged_restore_are_not_logged(tmp_path, caplog, kind):
    # A damaged restore fails in several concurrent tensorstore reads; the first reaches the fallback as
    # an exception, the others would be logged by asyncio when their tasks (or bare futures: CI once
    # printed "Future exception was never retrieved" with its traceback) are collected.
    Checkpointer(tmp_path / "checkpoints")

    async def read():
        raise ValueError("OUT_OF_RANGE: damaged")

    loop = asyncio.new_event_loop()
    if kind == "task":
        pending = loop.create_task(read())
    else:
        pending = loop.create_future()
        pending.set_exception(ValueError("OUT_OF_RANGE: damaged"))
    loop.run_until_complete(asyncio.sleep(0.01))
    del pending
    gc.collect()
    loop.close()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
