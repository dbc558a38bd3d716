"""The ensemble's curves logged where researchers look (issue 57, item 3; run/tracking.py): per evaluation, from
the host between chunks, to TensorBoard event files (read back with tbparse) and to W&B (offline here)."""

import numpy as np
import pytest
import tiny
from refusal import one_line_exit_2

from icl_race import rundir
from icl_race.cli import main
from icl_race.engine.ensemble import Progress
from icl_race.run import tracking


def test_aggregates_per_evaluation_of_a_chunk():
    # 4 seeds and a padding row; ICL first passed at 50, 100 and 200, one seed never; evaluations at 100 and 200
    acc = np.array([[0.2, 0.9], [0.4, np.nan], [0.6, 0.7], [0.8, 0.5], [9.0, 9.0]])
    p = Progress(
        step=200,
        steps=400,
        seeds=4,
        t_first={"icl": np.array([100, -1, 200, 50]), "diverged": np.full(4, -1)},
        chunk_seconds=2.0,
        chunk_steps=200,
        chunks_done=2,
        chunk_seeds=3,
        carry={},
        history=[{"icl_acc": acc, "beta0": acc, "c1": acc}],
        eval_steps=[np.array([100, 200])],
        finished=np.array([False]),
        member_seeds=np.array([3]),
    )
    rows = list(tracking.aggregates(p))
    assert [step for step, _ in rows] == [100, 200]
    (_, at100), (_, at200) = rows
    assert at100["acquired/icl"] == 0.5 and at200["acquired/icl"] == 0.75
    assert at100["icl_acc/q50"] == pytest.approx(0.5)  # the padding row left out
    assert at200["icl_acc/q50"] == pytest.approx(0.7)  # the NaN seed left out
    assert at200["icl_acc/q10"] == pytest.approx(np.quantile([0.9, 0.7, 0.5], 0.1))
    assert at100["live_seeds"] == 3 and at100["seed_steps_per_s"] == 300.0
    assert not any(k.startswith(("beta0", "c1", "acquired/diverged")) for k in at100)


def test_a_run_logs_its_curves_to_tensorboard_and_wandb(tmp_path, monkeypatch):
    tbparse = pytest.importorskip("tbparse")
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    # what the W&B run was given, recorded on the way through (its offline file is W&B's own binary log)
    sent, log = [], wandb.sdk.wandb_run.Run.log
    monkeypatch.setattr(
        wandb.sdk.wandb_run.Run, "log", lambda self, row, step: sent.append((step, row)) or log(self, row, step=step)
    )
    # test_keep_params' first cell: every seed acquires by step ~150 of 200
    raw = tiny.small(
        task={"K": 100, "K_max": 1000},
        train={"steps": 200, "icl_threshold": 0.5, "lr": 0.3, "evals_per_chunk": 2, "stop_when_all_acquired": False},
        ensemble={"seeds": 3, "block": 2},
    )
    out, tb = tmp_path / "run", tmp_path / "tb"
    toml = tmp_path / "c.toml"
    toml.write_text(tiny.toml(raw | {"log": {"tensorboard": str(tb)}}))  # one by the file's [log], one by its flag
    assert main(["run", str(toml), "--out", str(out), "--wandb", "icl-race-test", "--quiet"]) == 0
    run = rundir.load(out)
    assert "log" not in run.config  # where the curves went is not the run's config
    scalars = tbparse.SummaryReader(str(tb)).scalars
    acquired = scalars[scalars.tag == "acquired/icl"].sort_values("step")
    np.testing.assert_array_equal(acquired.step, run.eval_steps)  # one point per evaluation
    expected = [np.mean((run.times["icl"] >= 0) & (run.times["icl"] <= s)) for s in run.eval_steps]
    np.testing.assert_allclose(acquired.value, expected)
    assert expected[-1] > 0
    q50 = scalars[scalars.tag == "icl_acc/q50"].sort_values("step")
    np.testing.assert_allclose(q50.value, np.median(run.curves["icl_acc"], axis=0), rtol=1e-6)
    assert {"iwl_acc/q90", "icl_loss/q10", "train_loss/q50", "live_seeds", "seed_steps_per_s"} <= set(scalars.tag)
    assert [step for step, _ in sent] == list(run.eval_steps)
    assert [row["acquired/icl"] for _, row in sent] == pytest.approx(expected)
    [offline] = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    assert b"acquired/icl" in offline.read_bytes() and b"icl_acc/q50" in offline.read_bytes()
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [".lock", "config.json", "meta.json", "results.npz", "t_icl_hist.png"]
    ), "the run directory holds only the run's files"


def test_an_unknown_log_key_is_refused_in_one_line(tmp_path, capsys):
    toml = tmp_path / "c.toml"
    toml.write_text(tiny.toml(tiny.small() | {"log": {"tensorbord": "tb"}}))
    out = tmp_path / "never"
    one_line_exit_2(["run", str(toml), "--out", str(out)], out, capsys, "log.tensorbord", "tensorboard, wandb")


def test_a_destination_whose_library_is_missing_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(tracking.importlib.util, "find_spec", lambda name: None)
    toml = tmp_path / "c.toml"
    toml.write_text(tiny.toml(tiny.small()))
    out = tmp_path / "never"
    one_line_exit_2(["run", str(toml), "--out", str(out), "--wandb", "p"], out, capsys, "--wandb", "icl-race[tracking]")
