"""Packed ensembles (pack.train_pack, issue 42 item 4): runs of one program trained as the members of one
ensemble write, run by run, what each writes alone, also when a member stops early and when the pack is
interrupted and resumed."""

import signal
from pathlib import Path

import numpy as np
import pytest
import tiny

from icl_race import config, rundir
from icl_race.run import identity, runner
from icl_race.run.records import RunPlan
from icl_race.run.signals import Interrupted

# Two cells of a K grid that differ in traced values only (K and the ICL threshold, so that the members'
# constants differ in an int and a float), 3 seeds each in vmaps of 2: alone each is padded to 4 seeds,
# packed the 6 seeds share 3 vmaps and a seed's neighbours are another cell's. Chunks of 100 steps: the
# first cell acquires in every seed by step 150 and stops at 200, the second trains to 300.
CELLS = [
    tiny.small(
        task={"K": K, "K_max": 1000},
        train={"steps": 300, "icl_threshold": th, "lr": 0.3, "evals_per_chunk": 2, **tiny.RESUMABLE},
        ensemble={"seeds": 3, "block": 2},
    )
    for K, th in ((100, 0.5), (1000, 0.58))
]
for cell in CELLS:
    cell["train"]["stop_when_all_acquired"] = True


def _cfgs():
    return [config.from_dict(c) for c in CELLS]


def _plans():
    return [RunPlan.of(c) for c in _cfgs()]


@pytest.fixture(scope="module")
def alone(tmp_path_factory) -> list[Path]:
    d = tmp_path_factory.mktemp("alone")
    outs = [d / str(i) for i in range(len(CELLS))]
    for cfg, out in zip(_cfgs(), outs):
        runner.execute(cfg, out, progress=False, log=lambda m: None)
    return outs


def _same_results(a: Path, b: Path) -> None:
    ra, rb = rundir.load_run_results(a)[1], rundir.load_run_results(b)[1]
    assert ra.keys() == rb.keys()
    for k in ra:
        np.testing.assert_array_equal(ra[k], rb[k], err_msg=k)


def test_a_packed_grid_writes_each_cell_as_it_trains_alone(tmp_path, alone):
    outs = [tmp_path / str(i) for i in range(len(CELLS))]
    assert runner.execute_pack(list(zip(_plans(), outs)), progress=False, log=lambda m: None) == outs
    for a, b in zip(outs, alone):
        _same_results(a, b)
    first, second = rundir.load_run(outs[0]), rundir.load_run(outs[1])
    # each member stops on its own test, where it stops alone (not a step pinned: that holds on one machine)
    assert [first.steps_run, second.steps_run] == [rundir.load_run(a).steps_run for a in alone]
    assert first.steps_run < second.steps_run
    assert np.all(first.t() >= 0) and first.meta["packed_with"] == 1
    assert [rundir.checkpoint_steps(o) for o in outs] == [rundir.checkpoint_steps(o) for o in alone]


def test_a_packed_grid_interrupted_resumes_each_cell_from_its_own_checkpoint(tmp_path, alone, monkeypatch):
    outs = [tmp_path / str(i) for i in range(len(CELLS))]

    def interrupt_after_first_chunk(*args, **kwargs):  # the progress bar's place: a SIGINT after chunk 1,
        # recorded on the run's Stop as its signal watcher records one (a real signal arrives there later)
        return lambda p: signal.getsignal(signal.SIGINT).stop.received.append(signal.SIGINT)

    monkeypatch.setattr(runner, "ProgressBar", interrupt_after_first_chunk)
    with pytest.raises(Interrupted, match="step 100"):
        runner.execute_pack(list(zip(_plans(), outs)), progress=True, log=lambda m: None)
    assert [rundir.cell_status(o) for o in outs] == ["partial", "partial"]
    monkeypatch.undo()
    logged = []
    runner.execute_pack(list(zip(_plans(), outs)), progress=False, log=logged.append)
    assert sum("resuming from the checkpoint at step 100" in m for m in logged) == 2
    for a, b in zip(outs, alone):
        _same_results(a, b)


def test_a_member_that_finished_before_a_stop_resumes_finished_not_from_an_older_checkpoint(tmp_path, monkeypatch):
    """The first cell finishes at its chunk 2 (step 200); checkpoints are due every 4 chunks; a SIGINT after
    chunk 3 stops the pack. The finished member saved at its last chunk, so the rerun resumes it there and
    trains it no further (before, it had no checkpoint and trained again from step 0)."""
    plans = [
        RunPlan.of(config.from_dict({**c, "train": {**c["train"], "steps": 500, "checkpoint_every": 4}})) for c in CELLS
    ]
    ref = [tmp_path / "ref" / str(i) for i in range(len(CELLS))]
    runner.execute_pack(list(zip(plans, ref)), progress=False, log=lambda m: None)
    finished_at = rundir.load_run(ref[0]).steps_run
    outs = [tmp_path / "out" / str(i) for i in range(len(CELLS))]
    chunks = []

    def interrupt_after_chunk_3(*args, **kwargs):
        def on_chunk(p):
            chunks.append(p.step)
            if len(chunks) == 3:
                signal.getsignal(signal.SIGINT).stop.received.append(signal.SIGINT)

        return on_chunk

    monkeypatch.setattr(runner, "ProgressBar", interrupt_after_chunk_3)
    with pytest.raises(Interrupted) as stopped:
        runner.execute_pack(list(zip(plans, outs)), progress=True, log=lambda m: None)
    monkeypatch.undo()
    assert finished_at < chunks[-1] and rundir.checkpoint_steps(outs[0]) == [finished_at]
    # the line names where the members still training resume, not the finished member's last save
    assert str(stopped.value).endswith(f"resume from the checkpoint at step {chunks[-1]:,}")
    logged = []
    runner.execute_pack(list(zip(plans, outs)), progress=False, log=logged.append)
    assert f"{outs[0]}: resuming from the checkpoint at step {finished_at:,}" in logged
    assert rundir.load_run(outs[0]).meta["seed_steps_computed"] == 0
    for a, b in zip(outs, ref):
        _same_results(a, b)


def test_runs_of_one_program_share_a_pack_key_and_other_shapes_do_not():
    a, b = _plans()
    assert identity.of(a).pack == identity.of(b).pack
    wider = config.from_dict(tiny.small(**{**CELLS[0], "model": {"width": 8}}))
    assert identity.of(RunPlan.of(wider)).pack != identity.of(a).pack


def test_a_run_records_what_decides_its_kernels(tmp_path, monkeypatch):
    """Issue 42 item 5: meta.json keeps XLA_FLAGS and the compile and autotuning caches, so that a run
    resumed on other terms (another kernel choice) can be told apart (run/compile_cache.py)."""
    import jax

    from icl_race.run import compile_cache

    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_autotune_level=0")
    before = jax.config.jax_compilation_cache_dir, jax.config.jax_enable_compilation_cache
    try:  # nothing is compiled in between
        jax.config.update("jax_enable_compilation_cache", False)  # the tests' process has one on (conftest)
        off = compile_cache.record()
        jax.config.update("jax_compilation_cache_dir", str(tmp_path))
        jax.config.update("jax_enable_compilation_cache", True)
        got = compile_cache.record()
    finally:
        jax.config.update("jax_compilation_cache_dir", before[0])
        jax.config.update("jax_enable_compilation_cache", before[1])
    assert off == {"compile_cache": None, "autotune_cache": None, "xla_flags": "--xla_gpu_autotune_level=0"}
    assert got["autotune_cache"] == str(tmp_path / "xla_gpu_per_fusion_autotune_cache_dir")
