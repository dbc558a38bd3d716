"""SIGINT and SIGTERM stop a run at the next chunk boundary with a checkpoint there, one line on
stderr and exit 130 / 143; the rerun resumes to the uninterrupted results; a second signal exits at once.

The signals are sent at known moments (from a hook inside the run, or once the run is known to be
inside a chunk), not after a guessed delay."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tiny
from runproc import start_run

from icl_race import config
from icl_race.run.runner import execute

RAW = tiny.raw(
    train={**tiny.RESUMABLE, "steps": 600, "eval_size": 100, "evals_per_chunk": 2}, ensemble={"seeds": 3, "block": 4}
)


def _tmp_left(out):
    return [str(p) for p in out.rglob("*") if "tmp" in p.name]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    cfg = config.from_dict({**RAW, "train": {**RAW["train"], "checkpoint_every": 0}})
    return execute(cfg, tmp_path_factory.mktemp("plain") / "run", progress=False)


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_stops_at_the_next_chunk_with_a_checkpoint_and_the_rerun_resumes(tmp_path, uninterrupted, sig, code):
    out = tmp_path / "run"
    # The signal arrives right after the checkpoint at step 200 is queued, i.e. inside the run.
    hook = (
        "import os, signal\nimport icl_race.run.checkpoint as c\n_save = c.Checkpointer.save\n"
        "def save(self, step, *a, **k):\n    _save(self, step, *a, **k)\n"
        f"    if step == 200: os.kill(os.getpid(), {int(sig)})\nc.Checkpointer.save = save"
    )
    p = start_run(RAW, out, hook)
    _, err = p.communicate(timeout=300)
    assert p.returncode == code, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"stopped by {sig.name} at step 300" in lines[0], err
    assert "resume from the checkpoint at step 300" in lines[0]
    assert _tmp_left(out) == [] and not (out / "results.npz").exists()
    steps = sorted(int(d.name) for d in (out / "checkpoints").iterdir() if d.name.isdigit())
    assert steps[-1] == 300, "the stop point itself is checkpointed"
    if sig == signal.SIGTERM:
        return  # the resume is the same whichever signal stopped the run
    p = start_run(RAW, out)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert "resuming from the checkpoint at step 300" in err
    got = dict(np.load(out / "results.npz"))
    for k in ("t_icl", "t_converged", "eval_steps", "seed_ids", "diverged"):
        np.testing.assert_array_equal(got[k], uninterrupted[k], err_msg=k)
    for k in ("icl_acc", "iwl_acc", "icl_loss", "iwl_loss", "train_loss"):
        np.testing.assert_allclose(got[k], uninterrupted[k], atol=1e-6, err_msg=k)


def _inside_a_slow_second_chunk(tmp_path, out, seconds):
    """A run whose second chunk takes `seconds` longer, returned once it is inside that chunk. The hook
    wraps the one-device chunk program, which every chunk runs (with retirement or without)."""
    marker = tmp_path / "in_chunk"
    hook = (
        "import time, pathlib, icl_race.engine.ensemble as e\n_run = e.chunk_on_device\nn = [0]\n"
        "def chunk_on_device(*a, **k):\n    r = _run(*a, **k)\n    n[0] += 1\n"
        f"    if n[0] == 2:\n        pathlib.Path({str(marker)!r}).touch()\n        time.sleep({seconds})\n"
        "    return r\ne.chunk_on_device = chunk_on_device"
    )
    p = start_run(RAW, out, hook)
    deadline = time.time() + 240
    while not marker.exists() and time.time() < deadline and p.poll() is None:
        time.sleep(0.05)
    assert marker.exists(), p.communicate()[1]
    return p


def test_a_second_ctrl_c_exits_at_once_even_inside_a_long_chunk(tmp_path):
    # The second chunk takes 10 minutes: only the second signal can end the process soon.
    p = _inside_a_slow_second_chunk(tmp_path, tmp_path / "run", 600)
    p.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert p.poll() is None, "the first Ctrl-C waits for the chunk to end"
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130 and err.strip().splitlines() == [
        "icl-race: interrupted again: exiting at once; rerun the same command to resume from the last checkpoint"
    ], err


def test_one_sigterm_delivered_twice_as_timeout_does_still_stops_at_the_chunk_boundary(tmp_path):
    # GNU `timeout` sends SIGTERM to the command and then to its process group: two deliveries
    # microseconds apart (here 20 ms, so that they are not merged into one pending signal). That is one
    # stop, to be taken at the next chunk boundary with its checkpoint, not "interrupted again".
    out = tmp_path / "run"
    p = _inside_a_slow_second_chunk(tmp_path, out, 3)
    p.send_signal(signal.SIGTERM)
    time.sleep(0.02)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    lines = err.strip().splitlines()
    assert p.returncode == 143 and len(lines) == 1 and "stopped by SIGTERM at step 200" in lines[0], err
    assert (out / "checkpoints" / "200").is_dir()


def test_sigterm_during_the_imports_is_one_line_and_exit_143(tmp_path):
    """Before a run installs its own handling: the signal arrives while jax is being imported (from
    an import hook, a known moment), and the command's entry turns it into one line."""
    out = tmp_path / "run"
    hook = (
        "import os, signal, sys\nclass AtJax:\n    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'jax':\n            os.kill(os.getpid(), signal.SIGTERM)\n\n"
        "sys.meta_path.insert(0, AtJax())"
    )
    p = start_run(RAW, out, hook)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 143 and err.strip().splitlines() == [
        "icl-race: stopped by SIGTERM; finished work is kept, rerun the command to go on"
    ], err
    assert not (out / "results.npz").exists() and _tmp_left(out) == []


def _command(argv: list[str], hook: str) -> subprocess.CompletedProcess:
    """`icl-race ARGV` in a fresh process, with `hook` run first, to its end (a stop that did not act at
    once would leave it in the hook's long sleep, and the test fails on the timeout)."""
    code = f"{hook}\nimport sys\nfrom icl_race.__main__ import main\nsys.exit(main({[str(a) for a in argv]!r}))"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=240)


def _signal_inside(module: str, function: str, sig: signal.Signals) -> str:
    """A hook: `module.function` says that it started, signals its own process and sleeps ten minutes."""
    return (
        f"import os, sys, time, {module} as m\n"
        f"def {function}(*a, **k):\n"
        "    print('measurement started', file=sys.stderr, flush=True)\n"
        f"    os.kill(os.getpid(), {int(sig)})\n    time.sleep(600)\n"
        f"m.{function} = {function}"
    )


def test_a_dry_run_says_what_it_measures_before_it_starts_and_a_signal_stops_it_at_once(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(tiny.toml(RAW) + '[grid]\n"task.K" = [500, 1000]\n')
    out = tmp_path / "out"
    hook = _signal_inside("icl_race.run.cost", "measure", signal.SIGTERM)
    r = _command(["sweep", spec, "--out", out, "--dry-run", "--remeasure"], hook)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 143, r.stderr
    assert lines[0].startswith(f"dry run: 2 cells of {spec} in {out}: their state on disk"), r.stderr
    assert "program 1 (task.K=500): measuring on this machine" in lines[-3], r.stderr
    assert lines[-2:] == [
        "measurement started",
        "icl-race: stopped by SIGTERM during the dry run (nothing is lost: it trains nothing, and a cost measured "
        "is kept whole)",
    ], r.stderr
    assert r.stdout == f"2 cells in {out}\n" and not out.exists()  # its rows come as each cell is planned


def test_bench_says_what_it_times_first_and_a_signal_stops_it_at_once(tmp_path):
    hook = _signal_inside("icl_race.run.bench", "measure_program", signal.SIGINT)
    r = _command(["bench", "--seeds", "1", "--set", "task.K=100", "--set", "task.N=8"], hook)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 130, r.stderr
    assert lines[0].startswith("bench: compile seconds and seed-steps/s of the training step of standard K=100, N=8")
    assert lines[-2:] == [
        "measurement started",
        "icl-race: stopped by SIGINT during bench (nothing is lost: a cost measured is kept whole)",
    ], r.stderr
