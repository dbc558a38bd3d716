"""The notebook API (`icl_race.train`, `icl_race.load`): a run trained in memory is the same `Run` as the
one its directory gives back (every array, the same statistics), overrides are typed values checked
like `--set`, and every reader of directories takes the in-memory Run."""

import re
from pathlib import Path

import numpy as np
import pytest
import runproc
import tiny

import icl_race
from icl_race import rundir
from icl_race.config import ConfigError
from icl_race.report.summary import run_summary

SMALL = tiny.small(ensemble={"seeds": 2, "block": 2}, train={"steps": 100})


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The same config trained in memory (with the seeds and lr as overrides) and into a directory."""
    d = tmp_path_factory.mktemp("train") / "run"
    in_memory = icl_race.train(SMALL, seeds=3, overrides={"train.lr": 0.05})
    on_disk = icl_race.train(tiny.small(ensemble={"seeds": 3, "block": 2}, train={"steps": 100, "lr": 0.05}), out=d)
    return in_memory, on_disk, d


def test_a_run_trained_in_memory_equals_its_directory_read_back(pair):
    in_memory, on_disk, d = pair
    loaded = icl_race.load(d)
    assert in_memory.dir == icl_race.IN_MEMORY and not icl_race.IN_MEMORY.exists()
    assert in_memory.cfg.ensemble.seeds == 3 and in_memory.cfg.train.lr == 0.05
    assert in_memory.config == loaded.config
    for run in (in_memory, on_disk):
        np.testing.assert_array_equal(run.seed_ids, loaded.seed_ids)
        np.testing.assert_array_equal(run.eval_steps, loaded.eval_steps)
        assert run.times.keys() == loaded.times.keys() and run.curves.keys() == loaded.curves.keys()
        for e in loaded.times:
            np.testing.assert_array_equal(run.times[e], loaded.times[e])
        for k in loaded.curves:
            np.testing.assert_array_equal(run.curves[k], loaded.curves[k])
        assert run.censor_at() == loaded.censor_at() and run.km_median() == loaded.km_median()
    assert in_memory.meta["config_digest"] == loaded.meta["config_digest"]


def test_the_readers_of_directories_take_an_in_memory_run(pair):
    in_memory, _, d = pair
    assert rundir.load(in_memory) is in_memory
    s, t = run_summary(in_memory), run_summary(rundir.load(d))
    assert (s.seeds, s.reached, s.km_median, s.outcomes) == (t.seeds, t.reached, t.km_median, t.outcomes)
    assert s.dir == str(icl_race.IN_MEMORY)


def test_a_run_in_memory_names_no_file_and_gives_nan_for_events_not_reached(pair):
    in_memory, on_disk, d = pair
    s = run_summary(in_memory)
    assert s.histogram is None and "histogram" not in s.text(), "an in-memory run leaves no histogram file"
    assert run_summary(on_disk).histogram == str(d / "t_icl_hist.png")
    unreached = 0
    for run in (in_memory, on_disk):
        for e, t in run.times.items():  # results.npz's integers (-1: not reached), as the readers take them
            f = run.first_passage(e)
            assert f.dtype.kind == "f" and f.shape == t.shape
            np.testing.assert_array_equal(np.isnan(f), t < 0)
            np.testing.assert_array_equal(f[t >= 0], t[t >= 0])
            unreached += int(np.isnan(f).sum())
    assert unreached > 0, "100 steps leave some event unreached: the NaN is exercised"
    np.testing.assert_array_equal(in_memory.first_passage(), in_memory.first_passage("icl"))


def test_train_shows_what_the_command_line_shows_and_nothing_with_progress_off(capsys):
    icl_race.train(SMALL)
    out, err = capsys.readouterr()
    assert out.startswith(f"{icl_race.IN_MEMORY}: ") and "2 seeds x 100 steps: compiling" in out, out
    assert "loading jax" not in out, "jax is loaded (by the first train in a notebook): the line says what comes"
    assert "icl-race-train-" not in out, "no line names the temporary directory, gone once the run is committed"
    assert "step 100/100" in err and "ICL acquired" in err, err
    icl_race.train(SMALL, progress=False)
    out, err = capsys.readouterr()
    assert out == "" and "step" not in err, (out, err)


@pytest.mark.parametrize(
    "overrides, words",
    [
        ({"train.lr": -1.0}, ["train.lr"]),
        ({"trainlr": 0.1}, ["trainlr", "section.key"]),
        ({"task.colour": 1}, ["task.colour"]),
    ],
)
def test_bad_overrides_are_one_line_errors_naming_the_field(overrides, words):
    with pytest.raises(ConfigError) as e:
        icl_race.train(SMALL, overrides=overrides)
    assert all(w in str(e.value) for w in words) and "\n" not in str(e.value), e.value


def test_the_example_notebook_runs_train_numbers_export_figure(tmp_path):
    """docs/notebook.ipynb executed top to bottom in a fresh kernel (nbclient, the dev extra): every cell
    runs, the training shows its progress line, most of its seeds acquire ICL, the summary names the seeds,
    the export has one row per seed and the figure is drawn."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(Path(__file__).parents[2] / "docs" / "notebook.ipynb", as_version=4)
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    ).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    text = lambda c: "".join(o.get("text", "") + "".join(o.get("data", {}).get("text/plain", "")) for o in c.outputs)
    stderr = "".join(o.get("text", "") for o in code[0].outputs if o.get("name") == "stderr")
    assert "\r[" in stderr and "ICL acquired" in stderr, "the progress line, redrawn in place"
    acquired = re.search(r"ICL acquired in (\d)/4 seeds", text(code[1]))
    assert acquired and int(acquired[1]) >= 3, text(code[1])
    html = "".join(o.get("data", {}).get("text/html", "") for o in code[2].outputs)
    assert "<p>4 rows" in html, "one row per seed"
    assert any("image/png" in o.get("data", {}) for o in code[3].outputs)


@pytest.fixture(scope="module")
def live_and_full(tmp_path_factory):
    """One config trained twice: killed before its commit (a run stopped, as a reader sees it:
    config.json and live.npz, no results.npz) and to the end."""
    from icl_race import config
    from icl_race.run import runner

    raw = tiny.small(
        train={"steps": 200, "evals_per_chunk": 1, "stop_when_all_acquired": False}, ensemble={"seeds": 4, "block": 4}
    )
    root = tmp_path_factory.mktemp("live")
    full = runner.execute_run(config.from_dict(raw), root / "full", progress=False)
    runproc.killed_before_commit(config.from_dict(raw), root / "live")
    return root / "live", full


def test_a_run_still_training_loads_as_its_last_chunk_marked_partial(live_and_full):
    d, full = live_and_full
    assert not (d / rundir.RESULTS).exists() and (d / rundir.LIVE).exists()
    assert not (full.dir / rundir.LIVE).exists(), "a committed run leaves no live.npz"
    run = icl_race.load(d)
    assert run.partial and not full.partial and run.meta is None
    # the chunks before the last, every one of 50 steps: the run's curves up to step 150, exactly
    assert (run.steps_run, run.budget, run.headline) == (150, 200, full.headline)
    np.testing.assert_array_equal(run.eval_steps, full.eval_steps[:3])
    for k in full.curves:
        np.testing.assert_array_equal(run.curves[k], full.curves[k][:, :3])
    for e, t in full.times.items():  # first passages so far: the full run's up to step 150, the rest unreached
        np.testing.assert_array_equal(run.times[e], np.where(t <= 150, t, -1))
    assert run.censor_at() == (150 if np.any(run.t() < 0) else 200)
    # killed (its process gone, the lock free): stopped, not "still training"
    assert run.state.kind == "stopped" and "stopped at step 150 of 200" in run.partial_note()


def test_report_and_hist_of_a_run_still_training_say_it_is_partial(live_and_full, capsys):
    import json

    from icl_race.cli import main

    d, _ = live_and_full
    assert main(["report", str(d), "--boot", "50"]) == 0
    md = (d / "report.md").read_text()
    assert "**partial: " in md.splitlines()[2] and "step 150 of 200" in md
    assert "step 150 of 200" in json.loads((d / "report.json").read_text())["partial"]
    capsys.readouterr()
    assert main(["hist", str(d)]) == 0
    assert "partial: " in capsys.readouterr().out
