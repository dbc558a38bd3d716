"""Chaos: a tiny packed sweep killed with SIGKILL at many seeded moments, resumed after each, must end with
the files of the uninterrupted sweep byte for byte (every cell's config.json and results.npz, summary.csv
but for its rate column, sweep.toml, a design's design.json). Two sweeps: a grid, and a K* design whose
rounds are chosen from the outcomes so far: killed anywhere, it must make the same choices.

A moment is the k-th durable step of a sweep: a call of os.fsync, os.replace or os.rename (every staged
write, the cells' commits, the marker and summary.csv) or a checkpoint queued (the kill then lands inside
orbax's asynchronous save). Each resumed process draws its own k, so kills fall early and late, between
chunks, inside saves and inside commits. A failure prints the seed and every moment."""

import csv
import io
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
import tiny

SEED = 20261206
CONFIG = tiny.toml(
    tiny.small(
        train={"steps": 100, "evals_per_chunk": 1, "checkpoint_every": 1, "stop_when_all_acquired": False},
        ensemble={"seeds": 2, "block": 2},
    )
)
# (the sweep file, kills, the latest durable step a kill is drawn up to): a grid, and a K* design of two
# rounds (issue 54: its choices after any kill are an uninterrupted design's), whose rounds write more.
SPECS = {
    "grid": (CONFIG + '[grid]\n"task.K" = [200, 400, 800]\n', 20, 24),
    "design": (
        CONFIG + '[design]\nkind = "kstar"\nk_lo = 200\nk_hi = 800\nseeds_per_round = 2\nmax_seeds = 4\n',
        8,
        40,
    ),
}

# The driver: one process that imports what a sweep loads (jax without a backend, orbax, matplotlib) and
# then forks one child per sweep, so the 20-odd runs do not pay the imports each (~1.5 s of CPU apiece).
# Each line on stdin is "K OUT": a child sweeps SPEC into OUT and SIGKILLs itself at its K-th durable
# step (0: never); the driver answers with the child's exit code and the moment it died at.
DRIVER = """
import os, signal, sys, traceback
import jax, orbax.checkpoint, matplotlib.pyplot, icl_race.run.runner, icl_race.run.sweep
import icl_race.run.checkpoint as checkpoint
from icl_race.__main__ import main
spec, moment = sys.argv[1], sys.argv[2]

def hook(kill_at):
    n = [0]
    def event(what):
        n[0] += 1
        if n[0] == kill_at:
            stack = traceback.extract_stack()
            where = "orbax save" if what == "checkpoint" else "commit" if any(
                f.name == "finish" and f.filename.endswith("rundir/write.py") for f in stack) else "owner write" if any(
                f.filename.endswith("rundir/owner.py") for f in stack) else "other"
            with open(moment, "w") as f:
                f.write(f"{what} #{n[0]} in {where}")
            os.kill(os.getpid(), signal.SIGKILL)
    def wrap(fn):
        def call(*a, **k):
            event(fn.__name__)
            return fn(*a, **k)
        return call
    for name in ("fsync", "replace", "rename"):
        setattr(os, name, wrap(getattr(os, name)))
    save = checkpoint.Checkpointer.save
    def queued(self, *a, **k):  # the save is queued: the kill lands inside orbax's asynchronous write
        save(self, *a, **k)
        event("checkpoint")
    checkpoint.Checkpointer.save = queued

for line in sys.stdin:
    kill_at, out = line.split(maxsplit=1)
    if os.path.exists(moment):
        os.unlink(moment)
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # stdout is the driver's answers
        hook(int(kill_at))
        os._exit(main(["sweep", spec, "--out", out.strip(), "--quiet"]))
    rc = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    print(rc, open(moment).read() if os.path.exists(moment) else "", flush=True)
"""


class _Driver:
    def __init__(self, spec, moment):
        self.p = subprocess.Popen(
            [sys.executable, "-c", DRIVER, str(spec), str(moment)],
            env={**os.environ, "JAX_PLATFORMS": "cpu"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def sweep(self, out, kill_at: int) -> tuple[int, str]:
        """The child's exit code (-9: killed) and the moment it was killed at."""
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.write(f"{kill_at} {out}\n")
        self.p.stdin.flush()
        rc, _, moment = self.p.stdout.readline().strip().partition(" ")
        return int(rc), moment


def _files(out) -> dict[str, bytes]:
    """What must be identical: every cell's config.json and results.npz, sweep.toml, a design's design.json,
    and summary.csv without its seed_steps_per_s (a measured rate)."""
    files = {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.glob("cells/*/*"))
        if p.name in ("config.json", "results.npz")
    }
    rows = list(csv.DictReader(io.StringIO((out / "summary.csv").read_text())))
    files["summary.csv"] = repr([{k: v for k, v in r.items() if k != "seed_steps_per_s"} for r in rows]).encode()
    files["sweep.toml"] = (out / "sweep.toml").read_bytes()
    if (out / "design.json").exists():
        files["design.json"] = (out / "design.json").read_bytes()
    return files


@pytest.mark.parametrize("kind", SPECS)
def test_a_packed_sweep_killed_at_many_random_moments_ends_byte_identical(tmp_path, kind):
    text, KILLS, MAX_K = SPECS[kind]
    spec = tmp_path / "sweep.toml"
    spec.write_text(text)
    driver = _Driver(spec, tmp_path / "moment.txt")
    try:
        assert driver.sweep(tmp_path / "plain", 0)[0] == 0
        rng = np.random.default_rng(SEED)
        out, moments = tmp_path / "chaos", []
        while len(moments) < KILLS:
            k = int(rng.integers(1, MAX_K + 1))
            rc, moment = driver.sweep(out, k)
            if rc == 0:  # finished before its k-th step: compare, start over, and kill the next run again
                assert _files(out) == _files(tmp_path / "plain"), f"seed {SEED}, moments {moments}"
                shutil.rmtree(out)
                continue
            assert rc == -signal.SIGKILL, (SEED, moments, k, rc)
            moments.append(moment)
        assert driver.sweep(out, 0)[0] == 0, (SEED, moments)
    finally:
        driver.p.stdin.close()  # type: ignore[union-attr]
        driver.p.wait(timeout=60)
    assert _files(out) == _files(tmp_path / "plain"), f"seed {SEED}, moments {moments}"
    print(f"seed {SEED}: {len(moments)} kills:", "; ".join(moments))
    where = " ".join(moments)
    assert "orbax save" in where and "commit" in where, f"seed {SEED}: the moments missed a kind: {moments}"
