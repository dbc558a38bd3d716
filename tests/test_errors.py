"""Every user error is one line on stderr naming the field or path, with exit code 2 (1 for a failing
environment such as a read-only disk), and nothing is created or changed: across run, sweep, report
and hist. Nothing is compiled either, which is how "refused before any work" is checked."""

import errno
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import tiny
from refusal import refused

from icl_race.cli import main
from icl_race.run import compile_stats

TINY = "\n" + tiny.toml(tiny.small(ensemble={"seeds": 3, "block": 4}))
DEMO = str(Path(__file__).parents[1] / "experiments" / "demo.toml")


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished tiny run directory and the config it came from."""
    root = tmp_path_factory.mktemp("finished")
    (root / "tiny.toml").write_text(TINY)
    assert main(["run", str(root / "tiny.toml"), "--out", str(root / "run"), "--quiet"]) == 0
    return root


def _write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def _finished_copy(finished, tmp_path, damage: bytes | None = None, file: str = "results.npz") -> Path:
    d = tmp_path / "run"
    shutil.copytree(finished / "run", d)
    shutil.copy(finished / "tiny.toml", tmp_path / "tiny.toml")
    if damage is not None:
        data = (d / file).read_bytes()
        (d / file).write_bytes(damage if damage != b"half" else data[: len(data) // 2])
    return d


def _sweep_file(tmp_path, grid: str, body: str = TINY) -> Path:
    return _write(tmp_path / "sweep.toml", body + "\n[grid]\n" + grid + "\n")


# (case id, builder(tmp_path, finished) -> argv, exit code, text the one stderr line must hold)
RUN = "run"
# Fields whose refusal comes from the config's own checks, before the first line that says jax is loading:
# their stderr is the one line and nothing else (tests/refusal.py).
BAD_FIELDS = [
    "task.N=inf",
    "task.N=nan",
    "task.N=-inf",
    "task.K=inf",
    "model.width=1.5",
    "ensemble.seeds=1e300",
    "task.pool_seed=18446744073709551616",
    "task.novel_seed=-1",
    "ensemble.root_seed=4294967296",
    "ensemble.first_seed=9223372036854775807",
    "ensemble.first_seed=4294967295",
    "train.steps=3e9",
    "train.batch_size=true",
    'task.K="abc"',
    "train.lr=nan",
    "train.lr=inf",
    "train.eval_every=-1",
    "ensemble.block=2147483648",
]
CONFIG_FILES = ["run config not UTF-8", "run config not TOML", "run config missing", "run config is a directory"]
BEFORE_THE_FIRST_LINE = {f"run {s}" for s in BAD_FIELDS} | set(CONFIG_FILES)

CASES = [
    # integer fields: non-finite, beyond 64 bits, beyond what a key, a seed id or an index holds
    *[
        (f"run {s}", lambda t, f, s=s: [RUN, _write(t / "c.toml", TINY), "--set", s], 2, s.partition("=")[0])
        for s in BAD_FIELDS
    ],
    # sizes no machine holds: refused by the memory estimate before anything is allocated
    *[
        (
            f"run {'+'.join(s)}",
            lambda t, f, s=s: [RUN, DEMO, *[a for x in s for a in ("--set", x)]],
            2,
            s[-1].partition("=")[0],
        )
        for s in tiny.IMPOSSIBLE_SIZES
    ],
    # config files and paths
    ("run config not UTF-8", lambda t, f: [RUN, _write(t / "c.toml", b"[task]\nK = 1000 # \xff\xfe\n")], 2, "c.toml"),
    ("run config not TOML", lambda t, f: [RUN, _write(t / "c.toml", "[task\nK=")], 2, "c.toml"),
    ("run config missing", lambda t, f: [RUN, t / "nope.toml"], 2, "nope.toml"),
    ("run config is a directory", lambda t, f: [RUN, (t / "dir.toml").mkdir() or t / "dir.toml"], 2, "dir.toml"),
    (
        "run --out is a file",
        lambda t, f: [RUN, _write(t / "c.toml", TINY), "--out", _write(t / "file", "x")],
        2,
        "--out",
    ),
    # a finished run whose results file is damaged
    *[
        (
            f"rerun with results {name}",
            lambda t, f, dmg=dmg: [RUN, (_finished_copy(f, t, dmg), t / "tiny.toml")[1], "--out", t / "run"],
            2,
            "results.npz",
        )
        for name, dmg in [("truncated", b"half"), ("garbage", os.urandom(300)), ("empty", b"")]
    ],
    (
        "rerun with meta.json damaged",
        lambda t, f: [RUN, (_finished_copy(f, t, b"{\xff", "meta.json"), t / "tiny.toml")[1], "--out", t / "run"],
        2,
        "meta.json: damaged",
    ),
    # sweeps
    *[
        (f"sweep grid {g}", lambda t, f, g=g: ["sweep", _sweep_file(t, g)], 2, field)
        for g, field in [
            ('"task.K" = ["abc"]', "task.K"),
            ('"task.K" = [[500]]', "task.K"),
            ('"task.K" = [inf]', "task.K"),
            ('"task.K" = [500, 500]', "task.K"),
            ('"task.KK" = [500]', "task.KK"),
            ('"task.K" = 500', "task.K"),
            ('"train.lr" = [0.1, nan]', "train.lr"),
        ]
    ],
    (
        "sweep with one impossible cell",
        lambda t, f: ["sweep", _sweep_file(t, '"train.batch_size" = [16, 1000000000]')],
        2,
        "train.batch_size=1000000000: memory:",
    ),
    (
        "sweep --set task.N=inf",
        lambda t, f: ["sweep", _sweep_file(t, '"task.K" = [500]'), "--set", "task.N=inf"],
        2,
        "task.N",
    ),
    ("sweep file not UTF-8", lambda t, f: ["sweep", _write(t / "s.toml", b"\xff[grid]\n")], 2, "s.toml"),
    (
        "sweep --out is a file",
        lambda t, f: ["sweep", _sweep_file(t, '"task.K" = [500]'), "--out", _write(t / "file", "x")],
        2,
        "--out",
    ),
    # values no config holds: integers beyond any float, nesting beyond what is read recursively, a base
    # whose section is not a table, a grid that is not a table, a boolean in a numeric grid
    *[
        (f"run --set {s[:24]}", lambda t, f, s=s: [RUN, _write(t / "c.toml", TINY), "--set", s], 2, s.partition("=")[0])
        for s in [
            f"task.K={'9' * 400}",
            f"train.lr={'9' * 400}",
            f"train.icl_levels=[{'9' * 400}]",
            "train.lr=1e400",
            f"task.K={'[' * 3000}1{']' * 3000}",
        ]
    ],
    *[
        (
            f"run config {name}",
            lambda t, f, body=body: [RUN, _write(t / "c.toml", TINY + "\n[train]\n" + body)],
            2,
            "c.toml",
        )
        for name, body in [
            ("500 nested inline tables", "x = " + "{a = " * 500 + "1" + "}" * 500),
            ("5000 nested arrays", "x = " + "[" * 5000 + "1" + "]" * 5000),
        ]
    ],
    *[
        (f"sweep grid {name}", lambda t, f, g=g: ["sweep", _sweep_file(t, g), "--dry-run"], 2, text)
        for name, g, text in [
            ("400-digit K", f'"task.K" = [{"9" * 400}]', "task.K"),
            ("true among integers", '"task.K" = [true, 1]', "task.K = True: expected an integer"),
            ("nested 5000 deep", '"task.K" = ' + "[" * 5000 + "1" + "]" * 5000, "sweep.toml"),
        ]
    ],
    (
        "sweep grid = 5",
        lambda t, f: ["sweep", _write(t / "sweep.toml", "grid = 5\n" + TINY)],
        2,
        "[grid]: expected a table",
    ),
    (
        "sweep base with task = 'x'",
        lambda t, f: [
            "sweep",
            _write(t / "s.toml", 'base = "b.toml"\n' + TINY + '[grid]\n"task.K" = [500]'),
            (_write(t / "b.toml", 'task = "x"\n'), "")[1],
        ][:2],
        2,
        "b.toml: task = 'x' here",
    ),
    (
        "sweep task = 'x' on a base with [task]",
        lambda t, f: [
            "sweep",
            _write(t / "s.toml", 'base = "b.toml"\ntask = "x"\n[grid]\n"task.K" = [500]'),
            (_write(t / "b.toml", TINY), "")[1],
        ][:2],
        2,
        "b.toml: [task] a table here, task = 'x'",
    ),
    (
        "run a 1 MB string",
        lambda t, f: [RUN, _write(t / "c.toml", TINY.replace("[task]", "[task]\nvariant = '" + "a" * 10**6 + "'"))],
        2,
        "(1,000,002 characters): must be one of",
    ),
    # report and hist on damaged or missing directories
    *[
        (f"{cmd} results {name}", lambda t, f, cmd=cmd, dmg=dmg: [cmd, _finished_copy(f, t, dmg)], 2, "results.npz")
        for cmd in ("report", "hist")
        for name, dmg in [("truncated", b"half"), ("garbage", os.urandom(300)), ("empty", b"")]
    ],
    *[
        (
            f"{cmd} config.json damaged",
            lambda t, f, cmd=cmd: [cmd, _finished_copy(f, t, b"{\xff", "config.json")],
            2,
            "config.json",
        )
        for cmd in ("report", "hist")
    ],
    *[
        (f"{cmd} missing directory", lambda t, f, cmd=cmd: [cmd, t / "nowhere"], 2, "nowhere")
        for cmd in ("report", "hist")
    ],
    *[
        (f"{cmd} on a file", lambda t, f, cmd=cmd: [cmd, _write(t / "file", "x")], 2, "file")
        for cmd in ("report", "hist")
    ],
    # issue 43: a results.npz that is a FIFO hung run and hist; bad paths were exit 1; the range of a
    # count was quoted from -2147483648
    *[
        (f"{cmd} results a FIFO", lambda t, f, cmd=cmd: _fifo_results(t, f, cmd), 2, "not a regular file")
        for cmd in ("run", "report", "hist")
    ],
    (
        "run --out through a file",
        lambda t, f: [RUN, _write(t / "c.toml", TINY), "--out", t / "c.toml" / "run"],
        2,
        "Not a directory",
    ),
    (
        "run --out name over 255 bytes",
        lambda t, f: [RUN, _write(t / "c.toml", TINY), "--out", t / ("a" * 300)],
        2,
        "File name too long",
    ),
    ("hist name over 255 bytes", lambda t, f: ["hist", t / ("a" * 300)], 2, "File name too long"),
    (
        "run ensemble.seeds=1e10",
        lambda t, f: [RUN, _write(t / "c.toml", TINY), "--set", "ensemble.seeds=1e10"],
        2,
        "ensemble.seeds = 10000000000.0: out of range: must be at most 2,147,483,647",
    ),
]


def _fifo_results(t: Path, finished: Path, cmd: str) -> list:
    d = _finished_copy(finished, t)
    (d / "results.npz").unlink()
    os.mkfifo(d / "results.npz")
    return [RUN, t / "tiny.toml", "--out", d] if cmd == RUN else [cmd, d]


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("name, argv, code, text", CASES, ids=[c[0] for c in CASES])
def test_error_is_one_line_with_its_exit_code_and_nothing_is_created(
    name, argv, code, text, tmp_path, finished, capsys
):
    argv = [str(a) for a in argv(tmp_path, finished)]
    if argv[0] in ("run", "sweep") and "--out" not in argv:
        argv += ["--out", str(tmp_path / "out")]
    before, compiles = _tree(tmp_path), compile_stats.snapshot()[0]
    capsys.readouterr()
    assert main(argv) == code
    raw = capsys.readouterr().err
    lines = refused(raw)  # after the line saying what it loads, if it said one
    if name in BEFORE_THE_FIRST_LINE:  # checked before any slow import: the one line is all of stderr
        assert raw.strip().splitlines() == lines, raw
    err = lines[0] if len(lines) == 1 else "\n".join(lines)
    assert len(lines) == 1 and text in err, err[:2000]
    assert len(err) < 600, f"a short line quotes at most ~80 characters of a value: {err[:2000]}"
    assert _tree(tmp_path) == before, "nothing may be created or changed"
    assert compile_stats.snapshot()[0] == compiles, "refused before any work: nothing compiled"


@pytest.mark.parametrize("command", ["report", "compare"])
@pytest.mark.parametrize("option, text", [("--boot=1000000000", "--boot: must be"), ("--seed=-1", "--seed: must be")])
def test_bootstrap_options_beyond_their_range_are_refused_before_any_work(command, option, text, finished, capsys):
    # issue 43: report took --seed -1, compare --boot 10^9 allocated 15 GiB (config.check_bootstrap's bounds)
    run = str(finished / "run")
    argv = (
        [command, run, run, "--out", str(finished / "compared"), option]
        if command == "compare"
        else [command, run, option]
    )
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1 and text in err, err
    assert not (finished / "run" / "report.md").exists() and not (finished / "compared").exists()


def test_a_regression_run_where_no_seed_reached_any_event_is_reported(tmp_path):
    # issue 43: "Data cannot be log-scaled" (the transition-times figure), and no report.md
    from icl_race import rundir

    d = shutil.copytree(Path(__file__).parent / "golden" / "inputs" / "regression_run", tmp_path / "run")
    res = rundir.read_results(d)
    (d / "results.npz").write_bytes(
        rundir.npz_bytes({k: np.full_like(v, -1) if k.startswith("t_") else v for k, v in res.items()})
    )
    assert main(["report", str(d)]) == 0
    assert "censored" in (d / "report.md").read_text() and (d / "figures" / "transition_times.png").exists()


def test_the_table_covers_every_command_with_at_least_40_cases():
    commands = {c[0].split()[0].replace("rerun", "run") for c in CASES}
    assert len(CASES) >= 40 and commands == {"run", "sweep", "report", "hist"}, (len(CASES), commands)


def test_a_read_only_directory_is_an_environment_failure_naming_the_path(tmp_path, monkeypatch, capsys):
    def read_only(self, *a, **k):
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    cfg = _write(tmp_path / "c.toml", TINY)
    monkeypatch.setattr(Path, "mkdir", read_only)
    before = _tree(tmp_path)
    assert main(["run", str(cfg), "--out", str(tmp_path / "out")]) == 1
    assert refused(capsys.readouterr().err) == [f"icl-race: error: {tmp_path / 'out'}: Read-only file system"]
    assert _tree(tmp_path) == before


def test_redo_trains_a_damaged_run_again_and_keeps_the_damaged_files(tmp_path, finished, capsys):
    d = _finished_copy(finished, tmp_path, b"half")
    good = np.load(finished / "run" / "results.npz")  # trained on this machine in this session
    assert main(["run", str(tmp_path / "tiny.toml"), "--out", str(d), "--quiet", "--redo"]) == 0
    redone = np.load(d / "results.npz")
    for k in ("t_icl", "seed_ids", "eval_steps"):
        np.testing.assert_array_equal(redone[k], good[k])
    np.testing.assert_allclose(redone["icl_acc"], good["icl_acc"], atol=1e-6)
    aside = [p for p in d.iterdir() if p.name.startswith("damaged-")]
    assert len(aside) == 1 and (aside[0] / "results.npz").exists() and (aside[0] / "meta.json").exists()
    assert json.loads((d / "meta.json").read_text())["seeds"] == 3


def test_a_failed_checkpoint_write_names_its_own_step_and_the_last_good_one(tmp_path, monkeypatch):
    from icl_race.run.checkpoint import Checkpointer, CheckpointError

    ck = Checkpointer(tmp_path / "ck")
    tree = {"a": np.arange(4.0)}
    ck.save(1, tree, {})
    ck.save(2, tree, {})
    # Step 2's background write fails as on a full disk, leaving its temporary directory; it surfaces only
    # when step 3 is saved. The leftover is made once orbax's own write is over: made earlier, it races
    # orbax's creation of that directory (seen under load: orbax failed first, "File exists").
    real = ck.manager.wait_until_finished
    failures = [1]  # one failed write (close() waits again)

    def full_disk():
        real()
        if not failures:
            return
        failures.pop()
        (tmp_path / "ck" / "2.orbax-checkpoint-tmp").mkdir(exist_ok=True)
        raise ValueError(
            'RESOURCE_EXHAUSTED: Error writing "a/0" in OCDBT database: Failed to write 409914 bytes '
            "to file 14: No space left on device [os_error_code='28']"
        )

    monkeypatch.setattr(ck.manager, "wait_until_finished", full_disk)
    with pytest.raises(CheckpointError) as e:
        ck.save(3, tree, {})
    ck.close()
    assert str(e.value) == (
        f"checkpoint at step 2 could not be written to {tmp_path / 'ck'} (No space left on "
        "device); the last good checkpoint is at step 1"
    )
    assert not list((tmp_path / "ck").glob("*tmp*")), "the failed step's temporary directory is removed"


def test_a_full_disk_is_one_line_without_tracebacks(tmp_path):
    """A real full disk (a 600 KB tmpfs: root only) under orbax's asynchronous writer."""
    import subprocess
    import sys

    disk = tmp_path / "disk"
    disk.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(disk)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("needs root to mount a small tmpfs")
    try:
        cfg = _write(
            tmp_path / "c.toml", TINY.replace("steps = 100", "steps = 1000").replace("width = 16", "width = 128")
        )
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "icl_race.cli",
                "run",
                str(cfg),
                "--out",
                str(disk / "run"),
                "--quiet",
                "--set",
                "train.checkpoint_every=1",
                "--set",
                "train.evals_per_chunk=2",
                "--set",
                "train.stop_when_all_acquired=false",
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "JAX_PLATFORMS": "cpu"},
            timeout=300,
        )
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 1 and len(lines) == 1 and "No space left on device" in lines[0], r.stderr
        assert "the last good checkpoint is at step" in lines[0] or "no checkpoint was written" in lines[0]
        assert not [p for p in (disk / "run").rglob("*") if "tmp" in p.name]
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    from icl_race import rundir

    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        rundir.atomic_write(tmp_path / "results.npz", b"x" * 1000)
    assert list(tmp_path.iterdir()) == []


def test_debug_shows_the_traceback(tmp_path):
    from icl_race.config import ConfigError

    with pytest.raises(ConfigError, match=r"nope\.toml"):
        main(["--debug", "run", str(tmp_path / "nope.toml"), "--out", str(tmp_path / "out")])


def test_a_sweep_summary_marks_a_damaged_cell_instead_of_failing(tmp_path):
    from icl_race.run import sweep

    spec = sweep.expand({"task": {"K": 1000, "N": 8}}, {"train.lr": [0.1, 0.2]})
    d = sweep.cell_dir(tmp_path, spec.cells[0])
    _write(d / "results.npz", b"PK\x03\x04 not really a zip")
    _write(d / "meta.json", "{}")
    assert [sweep.summary_row(tmp_path, c)["status"] for c in spec.cells] == ["damaged", "pending"]


def test_a_multi_line_warning_is_one_line(monkeypatch, capsys):
    # issue 43: JAX's multi-line warnings (and Python's source line after each) under --quiet
    import dataclasses
    import warnings

    from icl_race import cli

    def warns(args):
        warnings.warn(
            "Some donated buffers were not usable:\nShapedArray(float32[4]).\nSee an explanation at ...", stacklevel=1
        )
        return 0

    monkeypatch.setattr(cli, "COMMANDS", tuple(dataclasses.replace(c, handler=warns) for c in cli.COMMANDS))
    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)  # restored after the test
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert main(["hist", "anything"]) == 0
    err = capsys.readouterr().err
    assert (
        err
        == "icl-race: warning: UserWarning: Some donated buffers were not usable: ShapedArray(float32[4]). See an explanation at ...\n"
    )
