"""Sweeps, job by job: expansion (spec.py: grid x zip, bases, --set, hash names, the stored TOML), the plan
(plan.py: states, programs, the dry run) and execution (execute.py: skipping finished work, compilation
reuse, executors)."""

import csv
import io
from pathlib import Path

import pytest
import tiny
from fresh_process import imported_by

from icl_race.cli import main
from icl_race.config import ConfigError
from icl_race.run import compile_stats, sweep
from icl_race.run.sweep import execute
from icl_race.rundir import owner

BASE = tiny.small(ensemble={"seeds": 2, "block": 2})
SPEC = (
    "\n"
    + tiny.toml({**BASE, "task": {"N": 8}})
    + """[grid]
"task.K" = [200, 400, 800]
"train.weight_decay_attn" = [0.0, 0.001]
"""
)


def test_grid_is_the_cartesian_product_with_a_shared_pool_size():
    s = sweep.expand(BASE, {"task.K": [200, 400], "task.N": [8, 12], "train.lr": [0.1, 0.2, 0.3]})
    assert len(s.cells) == 12 and len({c.name for c in s.cells}) == 12
    assert {c.cfg.task.K_max for c in s.cells} == {400}
    assert {(c.values["task.K"], c.values["task.N"], c.values["train.lr"]) for c in s.cells} == {
        (k, n, lr) for k in (200, 400) for n in (8, 12) for lr in (0.1, 0.2, 0.3)
    }


def test_zipped_fields_vary_together_and_cross_the_grid(tmp_path):
    s = sweep.expand(BASE, {"train.lr": [0.1, 0.2]}, {"task.N": [8, 12], "train.steps": [200, 400]})
    assert {(c.values["train.lr"], c.cfg.task.N, c.cfg.train.steps) for c in s.cells} == {
        (lr, n, st) for lr in (0.1, 0.2) for n, st in ((8, 200), (12, 400))
    }
    assert s.fields == ["train.lr", "task.N", "train.steps"]
    spec = tmp_path / "s.toml"
    spec.write_text(sweep.spec_toml(s))
    assert [c.name for c in sweep.load(spec).cells] == [c.name for c in s.cells]  # the stored spec round-trips
    with pytest.raises(ConfigError, match="same length"):
        sweep.expand(BASE, {}, {"task.N": [8, 12], "train.steps": [200]})
    with pytest.raises(ConfigError, match="both"):
        sweep.expand(BASE, {"task.N": [8]}, {"task.N": [12]})


def test_a_base_may_have_a_base_and_a_variant_inherits_its_grid(tmp_path):
    (tmp_path / "protocol.toml").write_text(SPEC.split("[grid]")[0])
    (tmp_path / "grid.toml").write_text('base = "protocol.toml"\n[grid]\n"task.K" = [200, 400]\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "wide.toml").write_text('base = "../grid.toml"\n[model]\nwidth = 32\n')
    cells = sweep.load(tmp_path / "sub" / "wide.toml").cells
    assert [(c.cfg.task.K, c.cfg.model.width, c.cfg.train.eval_size) for c in cells] == [(200, 32, 50), (400, 32, 50)]
    (tmp_path / "protocol.toml").write_text('base = "sub/wide.toml"\n')
    with pytest.raises(ConfigError, match=r"cycle: wide\.toml -> grid\.toml -> protocol\.toml -> wide\.toml"):
        sweep.load(tmp_path / "sub" / "wide.toml")


def test_bad_grid_names_the_field_or_the_cell():
    with pytest.raises(ConfigError, match=r"task\.KK"):
        sweep.expand(BASE, {"task.KK": [1]})
    with pytest.raises(ConfigError, match="non-empty list"):
        sweep.expand(BASE, {"task.K": 5})
    with pytest.raises(ConfigError, match=r"cell task.K=3: task.K = 3: must be >= task.N"):
        sweep.expand(BASE, {"task.K": [100, 3]})


def test_a_grid_above_the_cap_is_refused_by_its_count_before_any_cell_is_built(tmp_path, capsys, monkeypatch):
    import time

    from refusal import one_line_exit_2

    from icl_race.run.sweep import spec

    built = []
    monkeypatch.setattr(spec.config, "from_dict", lambda raw: built.append(raw))  # no cell may be built
    values = list(range(200, 1200))
    with pytest.raises(ConfigError, match=r"1000 x 1000 x 3 \[zip\] rows = 3,000,000 cells, more than the 10,000"):
        sweep.expand(BASE, {"task.K": values, "train.lr": values}, {"task.N": [8, 9, 10]})
    assert built == []
    monkeypatch.undo()
    f = tmp_path / "huge.toml"
    f.write_text(SPEC.split("[grid]")[0] + f'[grid]\n"task.K" = {values}\n"train.lr" = {[v / 1e4 for v in values]}\n')
    start = time.process_time()
    one_line_exit_2(
        ["sweep", str(f), "--out", str(tmp_path / "o"), "--dry-run"], tmp_path / "o", capsys, "1,000,000 cells"
    )
    print(f"refused in {time.process_time() - start:.2f} CPU s")  # a figure, not an assertion


def test_a_grid_edit_that_changes_a_shared_field_says_no_finished_cell_is_reused(tmp_path):
    """Adding a larger K moves task.K_max (the grid's largest K) for every cell: the finished cells are runs
    of other configs, so nothing is reused, and the sweep says so before training (dry run included)."""
    import json

    before = sweep.expand(BASE, {"task.K": [200, 400]})
    for c in before.cells:  # finished, as is_done sees it
        d = tmp_path / "cells" / c.name
        d.mkdir(parents=True)
        (d / "config.json").write_text(json.dumps(c.cfg.to_dict()))
        (d / "results.npz").write_bytes(b"")
        (d / "meta.json").write_text("{}")
    assert sweep.unreusable(tmp_path, before) is None  # the same grid: every cell is reused
    line = sweep.unreusable(tmp_path, sweep.expand(BASE, {"task.K": [200, 400, 800]}))
    assert line is not None and "\n" not in line
    assert (
        line.startswith("2 finished cells of an earlier grid cannot be reused")
        and "task.K_max (400 then, 800 now)" in line
    )
    # K_max set by the file: the old cells are this grid's, nothing to say
    assert (
        sweep.unreusable(tmp_path, sweep.expand({**BASE, "task": {**BASE["task"], "K_max": 400}}, {"task.K": [200]}))
        is None
    )
    # a changed base value is shared too; a cell that differs in a swept field is simply another cell
    line = sweep.unreusable(
        tmp_path, sweep.expand({**BASE, "train": {**BASE["train"], "lr": 0.3}}, {"task.K": [200, 400]})
    )
    assert line is not None and "train.lr (0.1 then, 0.3 now)" in line


def test_cell_names_are_the_config_digests_of_today():
    # A cell's name is its run directory: existing sweeps must find their cells under the same names.
    s = sweep.expand(BASE, {"task.K": [200, 400]}, {"task.N": [8, 12], "train.steps": [200, 400]})
    assert [c.name for c in s.cells] == ["4a87f91dce8596ac", "eeb306d19ac94bcb", "6c0502204d8bde4d", "fdd193fc6ca8906c"]
    assert [c.values for c in s.cells][:2] == [
        {"task.K": 200, "task.N": 8, "train.steps": 200},
        {"task.K": 200, "task.N": 12, "train.steps": 400},
    ]


def test_expansion_reads_the_file_its_bases_and_set_and_writes_nothing(tmp_path):
    (tmp_path / "base.toml").write_text(SPEC.split("[grid]")[0])
    spec = tmp_path / "s.toml"
    spec.write_text('base = "base.toml"\n[train]\nlr = 0.2\n[grid]\n"task.K" = [200, 400]\n[zip]\n"task.N" = [8, 10]\n')
    before = sorted(p.name for p in tmp_path.iterdir())
    s = sweep.load(spec, ["train.steps=150", "model.width=8"])
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert [(c.cfg.task.K, c.cfg.task.N) for c in s.cells] == [(200, 8), (200, 10), (400, 8), (400, 10)]
    assert {(c.cfg.train.lr, c.cfg.train.steps, c.cfg.model.width, c.cfg.task.K_max) for c in s.cells} == {
        (0.2, 150, 8, 400)
    }  # the file over its base, --set over both, one pool size for every K
    assert s.raw["train"]["steps"] == 150 and s.fields == ["task.K", "task.N"]
    # --set cannot touch a swept field: the grid's value wins in every cell
    assert {c.cfg.task.K for c in sweep.load(spec, ["task.K=999"]).cells} == {200, 400}


def test_expansion_imports_no_jax():
    code = "from icl_race.run.sweep import spec\nspec.expand({'task': {'N': 8}}, {'task.K': [200, 400]})"
    assert imported_by(code, ["jax"]) == []


def test_the_stored_spec_is_written_by_tomli_w_and_parses_back_to_the_same_spec(tmp_path):
    import tomllib

    s = sweep.expand(
        {
            **BASE,
            "task": {**BASE["task"], "variant": "standard"},
            "train": {**BASE["train"], "stop_when_all_acquired": False, "weight_decay_attn": 1e-05},
        },
        {"task.K": [200, 400]},
        {"task.N": [8, 12], "train.steps": [200, 400]},
    )
    text = sweep.spec_toml(s)
    assert tomllib.loads(text) == s.raw and sweep.same_spec(text, s)
    out = tmp_path / "out"
    out.mkdir()
    sweep.store_spec(out, s, log=pytest.fail)
    assert (out / "sweep.toml").read_text() == text
    assert [c.name for c in sweep.load(out / "sweep.toml").cells] == [c.name for c in s.cells]


# What icl-race wrote as sweep.toml before tomli-w (its own writer: inline arrays, a blank line after each table).
OLD_FORMAT = """[task]
K = 1000
N = 8

[model]
width = 16

[train]
lr = 0.1
batch_size = 16
steps = 100
eval_every = 50
eval_size = 50

[ensemble]
seeds = 2
block = 2

[grid]
"task.K" = [200, 400]

[zip]
"task.N" = [8, 12]
"train.steps" = [200, 400]
"""


def test_a_sweep_toml_of_the_old_writer_is_the_same_spec_and_left_alone(tmp_path):
    s = sweep.expand(BASE, {"task.K": [200, 400]}, {"task.N": [8, 12], "train.steps": [200, 400]})
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.toml").write_text(OLD_FORMAT)
    # A pre-marker sweep with no cell yet is taken once with --force (rundir/owner.py), as run_sweep does.
    owner.write(owner.check(out, "sweep", ["sweep.toml", "summary.csv"], force=True), {})
    sweep.store_spec(out, s, log=pytest.fail)  # no "the sweep spec changed"
    assert (out / "sweep.toml").read_text() == OLD_FORMAT
    assert sorted(p.name for p in out.iterdir()) == [owner.marker("sweep"), owner.lock_name("sweep"), "sweep.toml"]
    # A spec that did change is still moved aside, with one line saying so.
    said = []
    sweep.store_spec(out, sweep.expand(BASE, {"task.K": [200, 800]}), log=said.append)
    assert len(said) == 1 and "the sweep spec changed" in said[0]
    assert (
        len(list(out.glob("sweep.previous-*.toml"))) == 1
        and sweep.same_spec((out / "sweep.toml").read_text(), s) is False
    )
    # 1 and 1.0 are different specs, as they were as text; a file that is not TOML is a changed spec
    assert not sweep.same_spec(
        OLD_FORMAT.replace("lr = 0.1", "lr = 1"),
        sweep.expand({**BASE, "train": {**BASE["train"], "lr": 1.0}}, {"task.K": [200, 400]}),
    )
    assert not sweep.same_spec("[task\n", s)


def test_the_plan_groups_cells_by_program_and_reads_their_state(tmp_path):
    s = sweep.expand(BASE, {"task.K": [200, 400], "model.width": [16, 32]})
    programs = [p.program for p in sweep.planned(tmp_path, s)]
    # K is traced (one program per width); the width is a shape
    assert programs[0] == programs[2] and programs[1] == programs[3] and programs[0] != programs[1]
    assert [sweep.status(tmp_path, c) for c in s.cells] == ["pending"] * 4
    plan = sweep.dry_run(tmp_path / "out", s, measure=False)
    assert [c.status for c in plan.cells] == ["pending"] * 4 and plan.unmeasured == 4
    assert plan.text().endswith("0/4 done; no projection (not measured)") and not (tmp_path / "out").exists()


def _rows(path):
    return list(csv.DictReader(io.StringIO(path.read_text())))


def test_sweep_runs_cells_once_and_reuses_one_compilation(tmp_path, capsys):
    spec = tmp_path / "sweep.toml"
    spec.write_text("[sweep]\npack = false\n" + SPEC)  # one cell after another (packed: tests/run/test_pack.py)
    out = tmp_path / "out"
    # First one cell of the sweep's own program (K = 100, not a cell of the grid, on the grid's pool of
    # 800 items), so that this process has compiled everything a cell needs, the work after a cell
    # included: then no cell of the grid compiles. (A warm-up cell of another shape compiled a second
    # set of programs only to warm that work.)
    warm = tmp_path / "warm.toml"
    warm_cfg = {**BASE, "task": {"N": 8, "K_max": 800}}
    warm.write_text("[sweep]\npack = false\n" + tiny.toml(warm_cfg) + '[grid]\n"task.K" = [100]\n')
    assert main(["sweep", str(warm), "--out", str(tmp_path / "warm"), "--quiet"]) == 0
    warmed = compile_stats.snapshot()[0]
    compiles = []
    real = execute.write_summary

    def counting(o, s):
        compiles.append(compile_stats.snapshot()[0])
        return real(o, s)

    execute.write_summary = counting  # what run_local calls after each cell
    try:
        assert main(["sweep", str(spec), "--out", str(out), "--quiet"]) == 0
    finally:
        execute.write_summary = real
    # compiles[i] is the running count after cell i: no cell compiled anything (K and the weight decay
    # are traced), so one compilation serves all six.
    assert len(compiles) >= 6 and compiles[:6] == [warmed] * 6, (warmed, compiles)
    rows = _rows(out / "summary.csv")
    assert len(rows) == 6 and all(r["status"] == "done" and r["seeds"] == "2" for r in rows)
    assert {(r["task.K"], r["train.weight_decay_attn"]) for r in rows} == {
        (k, w) for k in ("200", "400", "800") for w in ("0.0", "0.001")
    }
    assert all(0 <= float(r["acquired_fraction"]) <= 1 and r["censored"] != "" for r in rows)
    # Rerun: everything is skipped, nothing rewritten.
    stamps = {p: p.stat().st_mtime_ns for p in (out / "cells").rglob("results.npz")}
    capsys.readouterr()
    assert main(["sweep", str(spec), "--out", str(out), "--quiet"]) == 0
    assert capsys.readouterr().err.count("done, skipped") == 6
    assert {p: p.stat().st_mtime_ns for p in (out / "cells").rglob("results.npz")} == stamps


def test_dry_run_lists_cells_and_projects_time_without_writing(tmp_path, capsys):
    spec = tmp_path / "sweep.toml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "6 cells" in text and text.count("pending") == 6 and "projected wall time" in text
    assert "unknown" not in text
    assert not out.exists()


def test_the_dry_run_projection_bounds_a_measured_tiny_sweep(tmp_path):
    """The projection's "<=" holds for what small cells mostly pay, compilation: it is measured on the
    cell's own programs. Before, a 2-cell sweep projected at <= 4 s took 51 s. The run compiles from
    scratch (caches dropped after the measurement, as a fresh process would); the factor 2 is the
    machine's drift between the measurement and the run, far below the 12x that compilation made."""
    import jax

    from icl_race import rundir

    raw = {**BASE, "train": {**BASE["train"], "steps": 400, "checkpoint_every": 2}, "sweep": {"pack": False}}
    s = sweep.expand(raw, {"task.K": [200, 400]})
    out = tmp_path / "out"
    plan = sweep.dry_run(out, s)
    assert not out.exists() and plan.unmeasured == 0
    first, second = (c.seconds for c in plan.cells)
    assert first > second > 0, "the second cell of the program pays no compilation"
    jax.clear_caches()
    sweep.run_local(out, s, log=lambda m: None, progress=False)
    ran = [rundir.read_meta(sweep.cell_dir(out, c))["run_seconds"] for c in s.cells]
    assert ran[0] <= 2 * first and sum(ran) <= 2 * plan.seconds, (ran, plan)
    # Each process compiles for itself under submitit: the projection charges every cell.
    jax.clear_caches()
    per_process = sweep.dry_run(tmp_path / "elsewhere", s, executor="submitit-local")
    assert per_process.cells[1].seconds > second


def test_submitit_local_executor_runs_the_job_array(tmp_path):
    s = sweep.expand(BASE, {"task.K": [200, 400]})
    out = tmp_path / "out"
    out.mkdir()
    sweep.run_submitit(out, s, cluster="local", params={"timeout_min": 10}, wait=True, log=lambda m: None)
    rows = _rows(out / "summary.csv")
    assert [r["status"] for r in rows] == ["done", "done"]
    assert (out / "submitit").is_dir()


def test_slurm_options_reach_sbatch_typed_through_submitits_additional_parameters():
    pairs = ["account=proj", "qos=high", "constraint=a100|h100", "mem=32G", "cpus_per_task=8", "exclusive=true"]
    cluster, params = execute.submitit_params("slurm", 60, "gpu", 1, None, pairs)
    assert cluster == "slurm" and params["slurm_partition"] == "gpu" and params["timeout_min"] == 60
    # sbatch's spelling (hyphens), whole numbers as ints, "true" a bare flag (#SBATCH --exclusive).
    assert params["slurm_additional_parameters"] == {
        "account": "proj",
        "qos": "high",
        "constraint": "a100|h100",
        "mem": "32G",
        "cpus-per-task": 8,
        "exclusive": True,
    }
    assert execute.submitit_params("slurm", 60, None, 1, None, [])[1]["slurm_additional_parameters"] is None


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--slurm", "account"], ["--slurm 'account'", "KEY=VALUE"]),
        (["--slurm", "=proj"], ["--slurm '=proj'", "KEY=VALUE"]),
        (["--slurm", "my account=proj"], ["KEY=VALUE"]),
        (["--slurm", "qos=a", "--slurm", "qos=b"], ["--slurm qos", "twice"]),
        (["--slurm", "time=10"], ["--slurm time", "--time"]),
        (["--slurm", "exclusive=false"], ["leave the option out"]),
        (["--slurm", "account=proj", "--executor", "local"], ["--slurm", "--executor slurm", "local"]),
    ],
)
def test_a_malformed_slurm_option_is_refused_in_one_line_before_anything_is_written(tmp_path, capsys, extra, words):
    from refusal import one_line_exit_2

    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    out = tmp_path / "o"
    executor = [] if "--executor" in extra else ["--executor", "slurm"]
    one_line_exit_2(["sweep", str(spec), "--out", str(out), "--quiet", *executor, *extra], out, capsys, *words)


def test_workers_started_together_keep_each_others_record_of_the_sweep_file(tmp_path, monkeypatch):
    """One worker per GPU starts them at once on one DIR (docs/gpu.md). Another worker that writes sweep.toml
    while this one checks the cells' sizes (seconds) stays recorded: this one neither refuses the file as
    not the sweep's own nor drops it from the folder's marker, so every later run goes on."""
    from icl_race.rundir import owner

    s = sweep.expand(BASE, {"task.K": [200, 400]})
    out = tmp_path / "out"
    check_sizes = execute.check_sizes

    def another_worker_starts_meanwhile(o, todo):
        check_sizes(o, todo)
        owner.write(owner.check(o, "sweep", ["sweep.toml", "summary.csv"]), {})
        execute.store_spec(o, s, log=pytest.fail)

    monkeypatch.setattr(execute, "check_sizes", another_worker_starts_meanwhile)
    slurm = {"minutes": 10, "partition": None, "gpus": 0, "parallelism": None}
    execute.run_sweep(out, s, "local", lambda m: None, False, slurm, wait=True)
    monkeypatch.undo()
    execute.run_sweep(out, s, "local", lambda m: None, False, slurm, wait=True)
    assert [r["status"] for r in _rows(out / "summary.csv")] == ["done", "done"]


def test_a_local_sweep_over_many_shapes_keeps_its_memory_flat(tmp_path, monkeypatch):
    # Each width is a new program. Without dropping the last cell's compilations the worker grew by
    # ~44 MB a cell, never released (benchmarks/compile_memory.py: 580 -> 1,658 MB over 24 cells; with
    # jax.clear_caches() between programs 603 -> 628 MB, flat after the first cells). Over the last 4
    # of 6 cells the bound is 15 MB a cell: a third of the old growth, above the allocator's noise.
    # The cells and the memory reading are that benchmark's own.
    monkeypatch.syspath_prepend(str(Path(__file__).parents[3] / "benchmarks"))
    from compile_memory import cell, rss_mb

    widths = [5, 6, 7, 8, 9, 10]
    s = sweep.expand(cell(widths[0]), {"model.width": widths})
    rss = []
    real = execute.write_summary
    monkeypatch.setattr(execute, "write_summary", lambda o, sw: (rss.append(rss_mb()), real(o, sw))[1])
    sweep.run_local(tmp_path / "out", s, log=lambda m: None, progress=False)
    assert len(rss) == len(widths)
    growth = (rss[-1] - rss[1]) / (len(widths) - 2)
    assert growth < 15, f"resident memory grew {growth:.1f} MB a cell over distinct shapes: {rss}"


def test_a_second_dry_run_reads_the_kept_costs_and_a_device_dry_run_measures_nothing(monkeypatch, tmp_path):
    from icl_race.run import cost

    calls: list = []
    made_up = cost.Cost(setup_s=10.0, compile_s=4.0, period_s=1.0, first_period=50, checkpoint_s=0.0, finish_s=2.0)
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.setenv("ICL_RACE_COMPILE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cost, "measure", lambda run: calls.append(run) or made_up)
    s = sweep.expand(BASE, {"task.K": [200, 400], "model.width": [16, 32]})  # two programs
    first = sweep.dry_run(tmp_path / "out", s)
    assert len(calls) == 2
    assert sweep.dry_run(tmp_path / "out", s) == first and len(calls) == 2
    sweep.dry_run(tmp_path / "out", s, remeasure=True)
    assert len(calls) == 4
    on_gpu = sweep.dry_run(tmp_path / "out", s, device="h200")
    assert len(calls) == 4 and on_gpu.device == "h200" and on_gpu.unmeasured == 0
    assert on_gpu.seconds == pytest.approx(sum(p.seconds for p in on_gpu.packs)) and on_gpu.seconds > 0
    assert (
        "GPU hours, an estimate" in on_gpu.text() and "<=" not in on_gpu.text()
    )  # a projection from a rate measured elsewhere
