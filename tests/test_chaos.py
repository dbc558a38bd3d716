"""Chaos: a tiny packed sweep killed with SIGKILL at many seeded moments, resumed after each, must end with
the files of the uninterrupted sweep byte for byte (every cell's config.json and results.npz, summary.csv
but for its rate column, sweep.toml).

A moment is the k-th durable step of a process: a call of os.fsync, os.replace or os.rename (every staged
write, the cells' commits, the marker and summary.csv) or a checkpoint queued (the kill then lands inside
orbax's asynchronous save). Each resumed process draws its own k, so kills fall early and late, between
chunks, inside saves and inside commits. A failure prints the seed and every moment."""

import csv
import io
import os
import signal
import subprocess
import sys

import numpy as np
import tiny

SEED, KILLS, MAX_K = 20261206, 20, 24
SPEC = (
    tiny.toml(
        tiny.small(
            train={"steps": 100, "evals_per_chunk": 1, "checkpoint_every": 1, "stop_when_all_acquired": False},
            ensemble={"seeds": 2, "block": 2},
        )
    )
    + '[grid]\n"task.K" = [200, 400, 800]\n'
)

# Run first in the sweep's process: counts its durable steps and dies at the CHAOS_KILL_AT-th.
HOOK = """
import os, signal, traceback
import icl_race.run.checkpoint as checkpoint
_kill_at, _n = int(os.environ.get("CHAOS_KILL_AT", "0")), [0]
def _event(what):
    _n[0] += 1
    if _n[0] == _kill_at:
        stack = traceback.extract_stack()
        where = "commit" if any(f.name == "finish" and f.filename.endswith("rundir/write.py") for f in stack) else (
            "owner write" if any(f.filename.endswith("rundir/owner.py") for f in stack) else "other")
        os.write(2, f"CHAOS {what} #{_n[0]} in {where if what != 'checkpoint' else 'orbax save'}\\n".encode())
        os.kill(os.getpid(), signal.SIGKILL)
def _wrap(fn):
    def call(*a, **k):
        _event(fn.__name__)
        return fn(*a, **k)
    return call
for _name in ("fsync", "replace", "rename"):
    setattr(os, _name, _wrap(getattr(os, _name)))
_save = checkpoint.Checkpointer.save
def _queued(self, *a, **k):
    _save(self, *a, **k)
    _event("checkpoint")
checkpoint.Checkpointer.save = _queued
"""


def _sweep(spec, out, kill_at: int) -> subprocess.CompletedProcess:
    code = (
        f"{HOOK}\nimport sys\nfrom icl_race.__main__ import main\n"
        f"sys.exit(main(['sweep', {str(spec)!r}, '--out', {str(out)!r}, '--quiet']))"
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "CHAOS_KILL_AT": str(kill_at)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


def _files(out) -> dict[str, bytes]:
    """What must be identical: every cell's config.json and results.npz, sweep.toml, and summary.csv
    without its seed_steps_per_s (a measured rate)."""
    files = {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.glob("cells/*/*"))
        if p.name in ("config.json", "results.npz")
    }
    rows = list(csv.DictReader(io.StringIO((out / "summary.csv").read_text())))
    files["summary.csv"] = repr([{k: v for k, v in r.items() if k != "seed_steps_per_s"} for r in rows]).encode()
    files["sweep.toml"] = (out / "sweep.toml").read_bytes()
    return files


def test_a_packed_sweep_killed_at_many_random_moments_ends_byte_identical(tmp_path):
    spec = tmp_path / "sweep.toml"
    spec.write_text(SPEC)
    plain = _sweep(spec, tmp_path / "plain", 0)
    assert plain.returncode == 0, plain.stderr
    rng = np.random.default_rng(SEED)
    out, moments = tmp_path / "chaos", []
    while len(moments) < KILLS:
        k = int(rng.integers(1, MAX_K + 1))
        r = _sweep(spec, out, k)
        if r.returncode == 0:  # finished before its k-th step: start over, and kill the next run again
            assert _files(out) == _files(tmp_path / "plain"), f"seed {SEED}, moments {moments}"
            for p in sorted(out.rglob("*"), reverse=True):
                p.unlink() if p.is_file() or p.is_symlink() else p.rmdir()
            out.rmdir()
            continue
        assert r.returncode == -signal.SIGKILL, (SEED, moments, k, r.stderr[-2000:])
        moments.append(next(line for line in r.stderr.splitlines() if line.startswith("CHAOS")))
    r = _sweep(spec, out, 0)
    assert r.returncode == 0, (SEED, moments, r.stderr[-2000:])
    assert _files(out) == _files(tmp_path / "plain"), f"seed {SEED}, moments {moments}"
    print(f"seed {SEED}: {len(moments)} kills:", "; ".join(m.removeprefix("CHAOS ") for m in moments))
    where = " ".join(moments)
    assert "orbax save" in where and "commit" in where, f"seed {SEED}: the moments missed a kind: {moments}"
