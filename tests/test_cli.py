"""The command line: a tiny end-to-end run, the run-directory contract, and bad input."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tiny
from fresh_process import imported_by

from icl_race.analysis.draws import Draws
from icl_race.cli import main

TINY = "\n" + tiny.toml(tiny.raw(train={"steps": 300, "eval_size": 100}, ensemble={"seeds": 3, "block": 4}))


@pytest.fixture
def tiny_toml(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return path


def test_tiny_run_end_to_end(tiny_toml, tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "icl_race.cli",
            "run",
            str(tiny_toml),
            "--out",
            str(out),
            "--seeds",
            "5",
            "--set",
            "train.steps=200",
            "--set",
            "train.stop_when_all_acquired=false",
        ],
        capture_output=True,
        text=True,
        env=env,
    )  # four evaluations whatever the seeds do
    assert r.returncode == 0, r.stderr
    assert "ICL acquired in" in r.stdout and "seed-steps/s" in r.stderr
    res = np.load(out / "results.npz")
    S, T = 5, 4
    np.testing.assert_array_equal(res["seed_ids"], np.arange(5))
    assert res["t_icl"].shape == (S,) and res["eval_steps"].tolist() == [50, 100, 150, 200]
    for k in ("icl_acc", "iwl_acc", "icl_loss", "iwl_loss", "train_loss"):
        assert res[k].shape == (S, T) and np.isfinite(res[k]).all(), k
    assert np.all((res["t_icl"] == -1) | np.isin(res["t_icl"], res["eval_steps"]))
    meta = json.loads((out / "meta.json").read_text())
    assert meta["config"]["ensemble"]["seeds"] == 5 and meta["config"]["train"]["steps"] == 200
    assert meta["seed_steps_per_s"] > 0 and meta["compile_seconds"] > 0 and "cpu" in meta["device"]
    assert meta["versions"]["jax"] and meta["cpu"].endswith(f", {os.cpu_count()} cores") and len(meta["cpu"]) > 9
    assert (out / "t_icl_hist.png").read_bytes()[:4] == b"\x89PNG"
    assert not [p for p in os.listdir(out) if p.startswith(".") and p != ".lock"], "temporary files left behind"


def test_finished_run_is_skipped_and_other_config_refused(tiny_toml, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", str(tiny_toml), "--out", str(out), "--quiet", "--set", "train.steps=50"]) == 0
    before = {p: p.stat().st_mtime_ns for p in out.iterdir()}
    assert main(["run", str(tiny_toml), "--out", str(out), "--quiet", "--set", "train.steps=50"]) == 0
    assert "already exist" in capsys.readouterr().err
    # The summary as JSON: the same record the text line is written from (docs/report-json.md).
    assert main(["run", str(tiny_toml), "--out", str(out), "--quiet", "--set", "train.steps=50", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    res = np.load(out / "results.npz")
    assert summary["schema"] == "icl-race/run-summary/1" and summary["seeds"] == res["t_icl"].size
    assert summary["reached"] == int(np.sum(res["t_icl"] >= 0)) and summary["censor_at"] == 50
    assert sum(summary["outcomes"].values()) == summary["seeds"]
    assert main(["run", str(tiny_toml), "--out", str(out), "--quiet", "--set", "train.steps=100"]) == 2
    err = capsys.readouterr().err
    assert "different config" in err and "train.steps" in err
    assert {p: p.stat().st_mtime_ns for p in out.iterdir()} == before, "a refused run must not touch the directory"


def test_config_digest_names_only_non_defaults_so_new_fields_keep_old_runs(tiny_toml, tmp_path, capsys):
    from icl_race import config

    plain = config.from_dict({"task": {"K": 1000}})
    assert (
        plain.digest()
        == config.from_dict({"task": {"K": 1000, "N": 100}, "train": {"eval_spacing": "linear"}}).digest()
    )
    assert plain.digest() != config.from_dict({"task": {"K": 1001}}).digest()
    assert config.from_dict({}).digest() == "bd635ec5118b5db9", "run directory names of existing sweeps would change"
    # A run written before a field existed (here: without train.eval_spacing) is still this config's run.
    out = tmp_path / "run"
    assert main(["run", str(tiny_toml), "--out", str(out), "--quiet", "--set", "train.steps=50"]) == 0
    stored = json.loads((out / "config.json").read_text())
    del stored["train"]["eval_spacing"]
    (out / "config.json").write_text(json.dumps(stored))
    capsys.readouterr()
    assert main(["run", str(tiny_toml), "--out", str(out), "--quiet", "--set", "train.steps=50"]) == 0
    assert "already exist" in capsys.readouterr().err


# The --set overrides of runs that must be refused (separated by spaces); the error names the last one's field.
@pytest.mark.parametrize(
    "overrides",
    [
        "task.K=1",
        'task.variant="balanced" task.K=1001',
        "task.N=1",
        "train.batch_size=0",
        "train.bogus=3",
        'task.K="many"',
        "task.K=abc",
        "train.lr=-0.1",
        "train.eval_every=300 train.steps=1000",
        'task.variant="zipf"',
        'train.eval_spacing="geometric"',
        'train.matmul_precision="fp8"',
        'train.optimizer="rmsprop"',
        "train.b1=1.0",
        "train.b2=-0.1",
        "train.momentum=1",
        "train.eps=0",
        "task.zipf_alpha=-0.5",
        'task.variant="infinite" task.zipf_alpha=1',
        "task.epsilon=-1",
        "task.epsilon=nan",
        "task.noise_bank=4096",  # no noise to draw
        "task.epsilon=0.5 task.noise_bank=-1",
        "task.burstiness=2",  # N - 1 = 7
        "task.burstiness=-7",
        "task.p_bursty=1.5",
        "model.qk_init_scale=0",
        "nosection",
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tiny_toml, tmp_path, capsys, overrides):
    out = tmp_path / "never"
    args = ["run", str(tiny_toml), "--out", str(out)]
    for o in overrides.split():
        args += ["--set", o]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    field = overrides.split()[-1].split("=")[0]
    assert len(err.splitlines()) == 1 and field in err, err
    assert not out.exists()


def test_missing_config_file(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.toml"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert "nope.toml" in err and "not found" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_unknown_key_in_file_and_bad_seeds_flag(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[task]\nKK = 3\n")
    assert main(["run", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "task.KK" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["run", str(bad), "--out", str(tmp_path / "o"), "--seeds", "0"])
    assert e.value.code == 2 and "--seeds" in capsys.readouterr().err


def test_help_lists_every_command():
    r = subprocess.run([sys.executable, "-m", "icl_race.cli", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and all(c in r.stdout for c in ("run", "demo", "bench"))
    r = subprocess.run([sys.executable, "-m", "icl_race.cli", "run", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--set" in r.stdout and "--seeds" in r.stdout


def test_bench_times_both_layouts_and_rejects_a_block_that_does_not_divide(capsys):
    tiny = ["--set", "task.N=4", "--set", "task.K=40", "--set", "model.width=8", "--set", "train.batch_size=4"]
    assert main(["bench", "--seeds", "2", "--steps", "1", "--repeats", "1", "--json", *tiny]) == 0
    whole = json.loads(capsys.readouterr().out)["rows"][0]
    assert main(["bench", "--seeds", "2", "--steps", "1", "--repeats", "1", "--block", "1", "--json", *tiny]) == 0
    blocks = json.loads(capsys.readouterr().out)["rows"][0]
    assert (whole["block"], blocks["block"]) == (2, 1)
    assert whole["finite"] and blocks["finite"] and whole["seed_steps_per_s"] > 0 and blocks["seed_steps_per_s"] > 0
    assert whole["init_compile_s"] > 0 and whole["compile_s"] > 0  # both compilations reported
    assert main(["bench", "--seeds", "2,3", "--block", "2", *tiny]) == 2
    assert "--block 2" in capsys.readouterr().err
    # Any system: the header is its own sections (the memorization task has no N).
    mlp = [
        "--set",
        'task.kind="memorization"',
        "--set",
        'model.kind="mlp"',
        "--set",
        "task.K=40",
        "--set",
        "model.width=8",
        "--set",
        "train.batch_size=4",
    ]
    assert main(["bench", "--seeds", "1", "--steps", "1", "--repeats", "1", "--json", *mlp]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["config"]["task"]["kind"], out["config"]["model"]["kind"]) == ("memorization", "mlp")
    assert out["rows"][0]["finite"]


def test_analyze_help_lists_every_study_subcommand(capsys):
    # The epilog is generated from the studies' registry (registry.help_text): a subcommand added to a
    # study's COMMANDS is listed, with what it takes and its options, without anyone editing the help.
    import importlib
    import inspect

    from icl_race.studies import registry

    with pytest.raises(SystemExit) as e:
        main(["analyze", "--help"])
    out = capsys.readouterr().out
    listed = set(re.findall(r"^  (\w+) (\w+)", out, flags=re.M))
    expected = {(s, c) for s in registry.STUDIES for c in registry.commands(s)}
    assert e.value.code == 0 and expected <= listed, sorted(expected - listed)
    flat = " ".join(out.split())
    for study in registry.STUDIES:
        module = importlib.import_module(f"icl_race.studies.{study}")
        for sub, fn in module.COMMANDS.items():
            for name, p in inspect.signature(fn).parameters.items():
                if p.kind == p.KEYWORD_ONLY and name != "draws":
                    assert f"{name}=" in flat, (study, sub, name)  # an entry of HELP naming every option
    assert set(registry.HELP) <= {f"{s} {c}" for s, c in expected}, "an entry of HELP for no registered subcommand"
    assert "levers kstar [DIR...]" in flat and "linear_attention single_head the single-active-head" in flat


def test_a_new_subcommand_is_in_the_help_with_its_options(monkeypatch):
    from icl_race.studies import race, registry

    def newest(dirs, *, width: float = 0.25, names=("a", "b"), draws: Draws = Draws(0, 1000)):
        """What the newest analysis computes. More words."""

    monkeypatch.setitem(race.COMMANDS, "newest", newest)
    text = registry.help_text()
    line = next(line for line in text.splitlines() if line.startswith("  race newest"))
    assert line.split() == [
        "race",
        "newest",
        "DIR...",
        "What",
        "the",
        "newest",
        "analysis",
        "computes",
        "(width=0.25;",
        "names=a,b)",
    ]


def test_help_and_input_errors_import_no_jax_and_no_study():
    # The parser is built from the table without importing any command's work: the analyze help's list
    # is made only when that help is shown (importing a study can set its process up, e.g. BLAS threads).
    from icl_race.studies.registry import STUDIES

    code = (
        "from icl_race.cli import main\n"
        "for argv in (['--help'], ['sweep', '--help'], ['run', 'missing.toml', '--out', 'o']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
    )
    assert imported_by(code, ["jax", *(f"icl_race.studies.{s}" for s in STUDIES)]) == []


def test_the_parser_is_the_table_of_commands():
    from icl_race import cli

    parser = cli._parser()
    sub = next(a for a in parser._actions if isinstance(a, cli.argparse._SubParsersAction))
    assert list(sub.choices) == [c.name for c in cli.COMMANDS]
    for c in cli.COMMANDS:
        assert sub.choices[c.name].get_default("handler") is c.handler and c.handler.__module__ != "icl_race.cli"
        assert c.handler.__module__.split(".")[1] in ("run", "report", "studies"), c  # lives with its package


COMMANDS = {
    "run": "--set",
    "demo": "--seeds",
    "sweep": "--dry-run",
    "bench": "--block",
    "report": "--boot",
    "hist": "--bins",
    "export": "--format",
    "compare": "--boot",
}


@pytest.mark.parametrize("command, option", COMMANDS.items())
def test_every_subcommand_has_help_naming_its_options(command, option, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and out.startswith(f"usage: icl-race {command}") and option in out


TINY_SET = [
    "--set",
    "task.K=200",
    "--set",
    "task.N=8",
    "--set",
    "model.width=16",
    "--set",
    "train.batch_size=16",
    "--set",
    "train.steps=100",
    "--set",
    "train.eval_every=50",
    "--set",
    "train.eval_size=50",
    "--set",
    "ensemble.block=2",
]


def test_demo_sweep_report_and_hist_on_tiny_directories(tmp_path, capsys):
    demo = tmp_path / "demo"
    assert main(["demo", "--out", str(demo), "--seeds", "2", *TINY_SET]) == 0
    out = capsys.readouterr().out
    assert "ICL acquired in" in out and "/2 seeds" in out and f"histogram: {demo / 't_icl_hist.png'}" in out
    # the second line: every seed's outcome, the counts adding up to the seeds
    line = re.search(r"\n(\d+ persistent, .*) of 2 seeds", out)
    assert line and sum(int(k) for k, _ in re.findall(r"(\d+) (\w+)", line.group(1))) == 2, out
    assert json.loads((demo / "meta.json").read_text())["config"]["train"]["steps"] == 100
    spec = tmp_path / "sweep.toml"
    spec.write_text('[ensemble]\nseeds = 2\n[grid]\n"task.K" = [200, 400]\n')
    sweep_dir = tmp_path / "sweep"
    assert main(["sweep", str(spec), "--out", str(sweep_dir), "--quiet", *TINY_SET]) == 0
    assert str(sweep_dir / "summary.csv") in capsys.readouterr().out
    rows = (sweep_dir / "summary.csv").read_text().splitlines()
    assert len(rows) == 3 and all(",done," in r for r in rows[1:])
    for d in (demo, sweep_dir):
        assert main(["report", str(d), "--boot", "20"]) == 0
        assert (d / "report.md").exists() and json.loads((d / "report.json").read_text())["n_boot"] == 20
        assert main(["hist", str(d)]) == 0
    out = capsys.readouterr().out
    assert "n=2 seeds" in out and "sweep" in out and "2 finished cells, 0 unfinished" in out
