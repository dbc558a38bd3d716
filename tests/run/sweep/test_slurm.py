"""`icl-race sweep --executor slurm` against a real Slurm: one node on this machine, started by
.ci/slurm/start.sh (root, Debian's slurm-wlm, munge, slurmdbd and MariaDB; `make test-slurm`). The job
array is submitted with the --slurm options, its cells finish, and a cell whose job was cancelled while it
trained is resumed by the same command, to the results of an uninterrupted run.

Skipped when no Slurm controller answers (`sinfo` missing or failing), unless ICL_RACE_REQUIRE_SLURM is
set (.ci/run sets it once it started one): then that is a failure."""

import csv
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
import tiny

from icl_race.run import sweep
from icl_race.run.runner import execute

# Two cells, each training long enough (24 chunks, a checkpoint after each) that a cancel lands mid-run:
# the job's SIGTERM stops the run at its next chunk boundary, with a checkpoint there.
RAW = tiny.small(train={**tiny.RESUMABLE, "steps": 1200, "evals_per_chunk": 1}, ensemble={"seeds": 2, "block": 2})
SPEC = tiny.toml(RAW) + '[grid]\n"task.K" = [200, 400]\n'


def _no_slurm() -> str:
    """Why this machine has no Slurm to test against, "" when a controller answers."""
    if shutil.which("sinfo") is None:
        return "no Slurm here (sinfo missing): as root, .ci/slurm/install.sh, .ci/slurm/start.sh, make test-slurm"
    try:
        r = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "no Slurm controller answers (sinfo timed out): as root, .ci/slurm/start.sh"
    if r.returncode != 0:
        return f"no Slurm controller answers (sinfo: {' '.join(r.stderr.split())[:200]}): as root, .ci/slurm/start.sh"
    return ""


@pytest.fixture(scope="module", autouse=True)
def slurm():
    if reason := _no_slurm():
        if os.environ.get("ICL_RACE_REQUIRE_SLURM"):
            pytest.fail(reason)
        pytest.skip(reason)


def _sweep_cmd(spec, out) -> list[str]:
    # --gpus 0: the test node has none. mem and comment: two --slurm options, read back from squeue.
    return [
        *(sys.executable, "-m", "icl_race", "sweep", str(spec), "--out", str(out), "--quiet"),
        *("--executor", "slurm", "--gpus", "0", "--time", "10"),
        *("--slurm", "mem=600M", "--slurm", "comment=icl-race-test"),
    ]


def _statuses(out) -> dict[str, str]:
    with open(out / "summary.csv") as f:
        return {r["task.K"]: r["status"] for r in csv.DictReader(f)}


def _squeue() -> list[list[str]]:
    """The queue's array tasks, one per line: id (ARRAY_TASK), state, comment, memory asked."""
    r = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%T|%k|%m"], capture_output=True, text=True, check=True)
    return [line.split("|") for line in r.stdout.split()]


def test_a_sweep_runs_on_slurm_and_a_cancelled_cell_resumes(tmp_path):
    spec = tmp_path / "grid.toml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    cells = sweep.load(spec).cells
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    first = subprocess.Popen(_sweep_cmd(spec, out), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Wait for a cell to have a checkpoint (partial), then cancel that cell's job: the array's task i
    # is the i-th unfinished cell, here every cell.
    deadline, seen, victim = time.monotonic() + 300, [], None
    while victim is None:
        assert first.poll() is None and time.monotonic() < deadline, "no cell reached a checkpoint on Slurm"
        seen = _squeue() or seen
        victim = next((i for i, c in enumerate(cells) if sweep.status(out, c) == "partial"), None)
        time.sleep(0.2)
    assert len(seen) == len(cells) and all(row[2:] == ["icl-race-test", "600M"] for row in seen), seen
    job = seen[0][0].split("_")[0] + f"_{victim}"
    subprocess.run(["scancel", job], check=True)
    _, err = first.communicate(timeout=300)
    assert first.returncode == 1, err
    assert f"job {job} CANCELLED" in err and "rerun the same command" in err, err
    cancelled = str(cells[victim].values["task.K"])
    assert _statuses(out) == {str(c.values["task.K"]): "partial" if c is cells[victim] else "done" for c in cells}

    again = subprocess.run(_sweep_cmd(spec, out), env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "submitted 1 cells" in again.stderr, "only the cancelled cell runs again"
    assert set(_statuses(out).values()) == {"done"}, _statuses(out)
    resumed = dict(np.load(sweep.cell_dir(out, cells[victim]) / "results.npz"))
    plain = execute(cells[victim].cfg, tmp_path / "uninterrupted", progress=False)
    # Both trained on this machine: bit equality of the passages holds (docs/reproducibility.md).
    for k in ("t_icl", "t_converged", "eval_steps", "seed_ids", "diverged"):
        np.testing.assert_array_equal(resumed[k], plain[k], err_msg=f"K={cancelled}: {k}")
    for k in ("icl_acc", "iwl_acc", "icl_loss", "iwl_loss", "train_loss"):
        np.testing.assert_allclose(resumed[k], plain[k], atol=1e-6, err_msg=f"K={cancelled}: {k}")
