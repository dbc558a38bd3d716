"""Retraining chosen seeds of a finished run (icl_race.run.retrain): each seed's first passages and curves
are exactly its run's, whatever seeds are asked for beside it, and nothing is written."""

import numpy as np
import pytest
import tiny

from icl_race import config, rundir
from icl_race.config import ConfigError
from icl_race.run.retrain import retrain, train_seeds
from icl_race.run.runner import execute

RAW = tiny.raw(
    train={
        "steps": 300,
        "eval_size": 100,
        "evals_per_chunk": 2,
        "checkpoint_every": 0,
        "stop_when_all_acquired": False,
    },
    ensemble={"seeds": 3, "first_seed": 5, "block": 4},
)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("retrain") / "run"
    execute(config.from_dict(RAW), out, progress=False)
    return out, rundir.read_results(out)


def _files(d):
    return sorted((p.relative_to(d), p.stat().st_mtime_ns) for p in d.rglob("*"))


def test_retrained_seeds_are_their_runs_exactly_and_on_chunk_sees_each_chunk(run):
    out, res = run
    before = _files(out)
    seen = []
    got = retrain(out, [7, 5], on_chunk=lambda p: seen.append(p.step))
    assert seen == [100, 200, 300]  # 6 evaluations, 2 per chunk
    idx = [2, 0]  # seeds 7 and 5 of the run's 5, 6, 7
    assert sorted(got) == sorted(res)
    for k, v in res.items():
        want = v if v.ndim == 0 or k == "eval_steps" else v[idx]
        np.testing.assert_array_equal(got[k], want, err_msg=k)
    assert res["t_icl"][idx].tolist() == got["t_icl"].tolist()
    assert _files(out) == before, "retraining writes nothing"


def test_a_shorter_budget_is_a_prefix_of_the_run(run):
    out, res = run
    got = retrain(out, [6], steps=100)
    assert got["eval_steps"].tolist() == [50, 100]
    for k in ("icl_acc", "iwl_acc", "train_loss"):
        np.testing.assert_array_equal(got[k], res[k][[1], :2], err_msg=k)


def test_seeds_outside_the_run_or_repeated_are_one_line_errors(run):
    out, _ = run
    with pytest.raises(ConfigError, match=r"seed 8 is not one of the run's seeds \(5\.\.7\)"):
        retrain(out, [5, 8])
    with pytest.raises(ConfigError, match="expected distinct integers >= 0"):
        train_seeds(config.from_dict(RAW), [5, 5])
