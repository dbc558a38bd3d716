"""train.keep_params (issue 57, item 4): each seed's parameters kept with orbax in DIR/params/<at>/ by the
commit, read back by `Run.params(seed, at)` as what the training computed: at the end, and at the seed's
first passage of t_icl (captured on the device inside the chunk); alone, packed, resumed; refused before
any work when the disk cannot hold them; a run that keeps nothing is the run it always was."""

import signal
from pathlib import Path

import jax
import numpy as np
import pytest
import tiny
from refusal import one_line_exit_2
from seeds import train_seeds

from icl_race import config, rundir, systems
from icl_race.run import host, identity, runner
from icl_race.run.records import RunPlan
from icl_race.run.signals import Interrupted

# test_pack's cells, keeping both: the first acquires in every seed by step ~150 and trains on to 300
# (no early end, a checkpoint after every chunk of 100 steps), 3 seeds in vmaps of 2 (one padding seed).
CELLS = [
    tiny.small(
        task={"K": K, "K_max": 1000},
        train={"steps": 300, "icl_threshold": th, "lr": 0.3, "evals_per_chunk": 2, "keep_params": "both"}
        | tiny.RESUMABLE,
        ensemble={"seeds": 3, "block": 2},
    )
    for K, th in ((100, 0.5), (1000, 0.58))
]
quiet = {"progress": False, "log": lambda m: None}


def _cfg(raw: dict, **train) -> config.Config:
    return config.from_dict(tiny.small(**{**raw, "train": raw["train"] | train}))


@pytest.fixture(scope="module")
def kept(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("kept") / "run"
    runner.execute(_cfg(CELLS[0]), out, **quiet)
    return out


def _trained_final(cfg: config.Config, seed_ids) -> dict:
    """The parameters of `seed_ids` after cfg's training, from the engine directly (nothing written)."""
    with systems.precision(cfg):
        program, consts = systems.build(cfg)
        carry, _, _ = train_seeds(program, consts, cfg, seed_ids, block=cfg.ensemble.block)
    return jax.device_get(program.params(carry["state"]))


def _assert_tree_equal(a, b) -> None:
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(x, y)


def test_run_params_are_the_trained_parameters(kept):
    run = rundir.load(kept)
    assert sorted(p.name for p in (kept / rundir.PARAMS).iterdir()) == ["at_t_icl", "final"]
    final = _trained_final(run.cfg, run.seed_ids)
    for i, s in enumerate(run.seed_ids):
        _assert_tree_equal(run.params(int(s)), jax.tree.map(lambda a: a[i], final))
    # the model's pytree: the shapes of one seed's parameters as the program makes them
    program, consts = systems.build(run.cfg)
    one = jax.eval_shape(lambda k: program.params(program.init(k, consts)), jax.random.key(0))
    assert jax.tree.map(np.shape, run.params(0)) == jax.tree.map(lambda a: a.shape, one)


def test_params_at_t_icl_are_those_of_a_run_stopped_at_that_evaluation(kept):
    run = rundir.load(kept)
    t = run.times["icl"]
    assert np.all(t >= 0) and np.all(t < run.budget)  # every seed passed, before the end
    for i, s in enumerate(run.seed_ids):
        # the same seed trained to its t_icl only: its last parameters are those at its first passage
        at = jax.tree.map(lambda a: a[i], _trained_final(_cfg(CELLS[0], steps=int(t[i])), run.seed_ids))
        _assert_tree_equal(run.params(int(s), "at_t_icl"), at)
        assert not all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(at), jax.tree.leaves(run.params(int(s)))))
    with pytest.raises(ValueError, match="not a seed"):
        run.params(99)
    with pytest.raises(ValueError, match="at = 'middle'"):
        run.params(0, "middle")


def test_a_run_that_keeps_nothing_writes_what_it_always_did(tmp_path, kept):
    out = tmp_path / "none"
    runner.execute(_cfg(CELLS[0], keep_params="none"), out, **quiet)
    assert not (out / rundir.PARAMS).exists()
    assert (out / rundir.RESULTS).read_bytes() == (kept / rundir.RESULTS).read_bytes()  # capture changes nothing
    with pytest.raises(config.ConfigError, match="no kept parameters params/final/"):
        rundir.load(out).params(0)


def test_packed_members_keep_their_own_seeds_parameters(tmp_path, kept):
    outs = [tmp_path / "0", tmp_path / "1"]
    cfgs = [_cfg(c) for c in CELLS]
    plans = [RunPlan.of(c) for c in cfgs]
    assert identity.of(plans[0]).pack == identity.of(plans[1]).pack
    assert runner.execute_pack(list(zip(plans, outs)), **quiet) == outs
    first, second = rundir.load(outs[0]), rundir.load(outs[1])
    assert first.meta["packed_with"] == 1
    for at in ("final", "at_t_icl"):
        _assert_tree_equal(rundir.read_params(outs[0], at), rundir.read_params(kept, at))
    final = _trained_final(second.cfg, second.seed_ids)
    for i, s in enumerate(second.seed_ids):
        _assert_tree_equal(second.params(int(s)), jax.tree.map(lambda a: a[i], final))
        if second.times["icl"][i] < 0:
            with pytest.raises(ValueError, match="never reached t_icl"):
                second.params(int(s), "at_t_icl")


def test_a_resumed_run_keeps_the_parameters_of_an_uninterrupted_one(tmp_path, kept, monkeypatch):
    out = tmp_path / "resumed"

    def interrupt_after_first_chunk(*args, **kwargs):  # as tests/run/test_pack.py: a SIGINT after chunk 1
        return lambda p: signal.getsignal(signal.SIGINT).stop.received.append(signal.SIGINT)

    monkeypatch.setattr(runner, "ProgressBar", interrupt_after_first_chunk)
    with pytest.raises(Interrupted, match="step 100"):
        runner.execute(_cfg(CELLS[0]), out, progress=True, log=lambda m: None)
    assert not (out / rundir.PARAMS).exists() and rundir.checkpoint_steps(out) == [100]
    monkeypatch.undo()
    logged: list[str] = []
    runner.execute(_cfg(CELLS[0]), out, progress=False, log=logged.append)
    assert any("resuming from the checkpoint at step 100" in m for m in logged)
    for at in ("final", "at_t_icl"):
        _assert_tree_equal(rundir.read_params(out, at), rundir.read_params(kept, at))


class Killed(BaseException):
    """Stands for a SIGKILL (as in tests/rundir/test_rundir.py): nothing in the package catches it."""


@pytest.mark.parametrize("step", ["staged params", "renamed params"])
def test_a_kill_while_the_parameters_are_committed_reruns_to_the_same_parameters(tmp_path, monkeypatch, step, kept):
    out = tmp_path / "run"

    def kill(name):
        if name == step:
            raise Killed(name)

    monkeypatch.setattr(rundir.write, "fault_hook", kill)
    with pytest.raises(Killed):
        runner.execute(_cfg(CELLS[0]), out, **quiet)
    assert not rundir.is_done(out) and rundir.checkpoint_steps(out)  # not committed: it resumes
    monkeypatch.setattr(rundir.write, "fault_hook", None)
    runner.execute(_cfg(CELLS[0]), out, **quiet)
    assert (out / rundir.RESULTS).read_bytes() == (kept / rundir.RESULTS).read_bytes()
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in kept.iterdir())
    for at in ("final", "at_t_icl"):
        _assert_tree_equal(rundir.read_params(out, at), rundir.read_params(kept, at))


def test_keeping_more_than_the_disk_holds_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(host, "disk_free", lambda path: 4096)
    toml = tmp_path / "c.toml"
    toml.write_text(tiny.toml(CELLS[0]))
    out = tmp_path / "never"
    line = one_line_exit_2(["run", str(toml), "--out", str(out)], out, capsys, "train.keep_params", "free")
    assert "3 seeds x 2 x" in line, line
    # keeping nothing needs no disk for parameters
    assert host.check_memory(RunPlan.of(_cfg(CELLS[0], keep_params="none")), out) is None


def test_keep_params_is_one_of_its_values(tmp_path):
    with pytest.raises(config.ConfigError, match=r"train\.keep_params = 'last': must be one of none, final"):
        _cfg(CELLS[0], keep_params="last")
