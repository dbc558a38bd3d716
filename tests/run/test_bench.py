"""run/bench.py (`icl-race bench`) on a tiny shape: positive compile times and seed-steps/s, finite losses,
every key of a row and of the JSON header, and the refusals of bad --seeds and --block."""

import json

import pytest
import tiny

from icl_race import config
from icl_race.cli import main
from icl_race.run import bench

ROW_KEYS = {
    "seeds",
    "block",
    "init_compile_s",
    "compile_s",
    "step_ms",
    "seed_steps_per_s",
    "peak_bytes",
    "bytes_per_seed",
    "finite",
}
# The smallest shape that trains: what is under test is the measurement, not the model.
SHAPE = {"task": {"K": 40, "N": 4}, "model": {"width": 8}, "train": {"batch_size": 4}}
CFG = config.from_dict(tiny.small(**SHAPE))


@pytest.mark.parametrize("block, expected_block", [(None, 2), (1, 1)])
def test_a_row_times_the_training_step_of_a_tiny_shape(block, expected_block):
    row = bench.measure(CFG, seeds=2, steps=2, repeats=2, block=block)
    assert set(row) == ROW_KEYS
    assert (row["seeds"], row["block"]) == (2, expected_block)
    assert row["finite"] and row["seed_steps_per_s"] > 0 and row["step_ms"] > 0
    assert row["init_compile_s"] >= 0 and row["compile_s"] >= 0
    # seed-steps/s and ms/step are one best repeat, each rounded: 2 seeds * 1000 / ms per step
    assert row["seed_steps_per_s"] == pytest.approx(2e3 / row["step_ms"], rel=0.02)
    if row["peak_bytes"] is not None:  # what XLA's memory analysis reports (some backends report none)
        assert row["peak_bytes"] > 0 and row["bytes_per_seed"] == row["peak_bytes"] // 2


def test_the_json_header_carries_provenance_and_the_config(capsys):
    sets = [a for s, sec in SHAPE.items() for k, v in sec.items() for a in ("--set", f"{s}.{k}={v}")]
    assert main(["bench", "--seeds", "2", "--steps", "1", "--repeats", "1", "--json", *sets]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"versions", "git_commit", "device", "cpu", "config", "steps_per_repeat", "rows"}
    assert set(out["config"]) == {"task", "model", "batch_size", "optimizer"}
    assert (out["config"]["task"]["K"], out["config"]["model"]["width"], out["config"]["batch_size"]) == (40, 8, 4)
    assert out["steps_per_repeat"] == 1
    assert [r["seeds"] for r in out["rows"]] == [2] and all(set(r) == ROW_KEYS for r in out["rows"])


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--seeds", "x"], ["--seeds", "expected comma-separated integers"]),
        (["--seeds", "0"], ["--seeds", "0", "expected comma-separated integers"]),
        (["--seeds", "4", "--block", "3"], ["--block 3", "must divide"]),
    ],
)
def test_bad_seeds_and_blocks_are_refused_before_any_measurement(argv, words, capsys):
    assert main(["bench", *argv]) == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words) and "\n" not in err.strip(), err


def test_bench_of_a_config_times_its_own_run_and_projects_its_budget(tmp_path, capsys):
    """`bench CONFIG`: the config's own program (its evaluations included) on one block, its seeds in
    blocks, and the projection of its whole run, which cannot be less than its setup plus one period per
    block and evaluation period of the budget at the measured rate."""
    path = tmp_path / "small.toml"
    path.write_text(tiny.toml(tiny.small(**SHAPE, ensemble={"seeds": 3, "block": 2})))
    assert main(["bench", str(path), "--set", "train.steps=200", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"versions", "git_commit", "device"} <= set(out)
    assert (out["config"], out["seeds"], out["budget"], out["eval_every"]) == (str(path), 3, 200, 50)
    assert (out["block"], out["blocks"], out["devices"]) == (2, 2, 1)
    assert out["seed_steps_per_s"] > 0
    assert out["s_per_1000_steps_per_seed"] == pytest.approx(1000 / out["seed_steps_per_s"], rel=1e-3)
    # 2 blocks x 200 steps of 2 seeds each at the measured rate, plus the setup: a floor of the bound
    floor = out["setup_s"] + 2 * 200 * 2 / out["seed_steps_per_s"]
    assert out["projected_s"] >= 0.99 * floor
    assert main(["bench", str(path), "--block", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("device ") and "3 seeds, 100 steps, evaluated every 50" in lines[0]
    assert lines[1].split() == [
        "seeds/block",
        "blocks",
        "devices",
        "setup",
        "s",
        "seed-steps/s",
        "s/1k",
        "steps/seed",
        "projected",
        "wall",
    ]
    assert lines[2].split()[:3] == ["1", "3", "1"] and lines[2].split()[-2] == "<="
    assert lines[3].startswith("projected wall: an upper bound") and "not counted" in lines[3]  # what it leaves out


@pytest.mark.parametrize("option", [["--seeds", "8"], ["--steps", "2"], ["--repeats", "2"]])
def test_the_paper_shape_options_are_refused_with_a_config(tmp_path, capsys, option):
    path = tmp_path / "small.toml"
    path.write_text(tiny.toml(tiny.small(**SHAPE)))
    assert main(["bench", str(path), *option]) == 2
    err = capsys.readouterr().err
    assert option[0] in err and "--set" in err and "\n" not in err.strip(), err


def test_a_bare_bench_on_a_cpu_takes_the_cpu_sizes_and_says_so(capsys):
    assert bench.default_sizes(quiet=False) == bench.CPU_SIZES  # the tests run on the CPU
    assert "on a CPU: seeds 1,8" in capsys.readouterr().out
    assert bench.default_sizes(quiet=True) == bench.CPU_SIZES and capsys.readouterr().out == ""
