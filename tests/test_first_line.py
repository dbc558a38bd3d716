"""Every command says what it does before its slow imports (docs/commands.md, "What a command says"): its
first line on stdout or stderr is written before jax, scipy.stats, matplotlib, pandas or xarray are
imported, where its input checks do not need them; run, demo and sweep check that the ensemble fits the
device (engine/memory.py: jax) before theirs, so a refusal stays one line. Asserted on the order of
events in a fresh process, never on a time."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import tiny

HEAVY = ("jax", "scipy.stats", "matplotlib", "pandas", "xarray")

# The child: its streams wrapped to record which HEAVY modules are loaded at the first line written, then
# the command run by its console entry; it ends there (what comes after the first line is not asked).
PROBE = f"""
import json, os, sys
HEAVY = {HEAVY!r}

class First:
    def __init__(self, stream):
        self.stream = stream
    def write(self, text):
        if text.strip():
            with open(os.environ["FIRST_LINE_RECORD"], "w") as f:
                json.dump({{"line": text.strip(), "loaded": [m for m in HEAVY if m in sys.modules]}}, f)
            os._exit(0)
        return self.stream.write(text)
    def __getattr__(self, name):
        return getattr(self.stream, name)

sys.stdout, sys.stderr = First(sys.stdout), First(sys.stderr)
from icl_race.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


def first_line(argv: list, tmp_path) -> dict:
    """{"line": the command's first line, "loaded": the HEAVY modules imported before it}."""
    record = tmp_path / "first_line.json"
    env = os.environ | {"FIRST_LINE_RECORD": str(record), "JAX_PLATFORMS": "cpu"}
    r = subprocess.run([sys.executable, "-c", PROBE, *map(str, argv)], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and record.exists(), r.stderr
    return json.loads(record.read_text())


@pytest.mark.parametrize(
    "argv, says",
    [
        (lambda d, t: ["report", t / "a"], "report: read the run in"),
        (lambda d, t: ["report", t / "sweep"], "report: read the sweep in"),
        (lambda d, t: ["hist", d / "a"], "hist: read the run in"),
        (lambda d, t: ["hist", d / "sweep", "--json"], "hist: read the sweep in"),
        (lambda d, t: ["export", d / "a", d / "b", "--out", t / "e"], "export: read 2 runs; writing their tables"),
        (lambda d, t: ["compare", d / "a", d / "b", "--out", t / "c"], "compare: read 2 runs; their icl times"),
        (lambda d, t: ["sweep", t / "sweep.toml", "--out", t / "s", "--dry-run"], "dry run: 2 cells of"),
        (lambda d, t: ["bench", t / "tiny.toml"], "bench: "),
    ],
    ids=["report run", "report sweep", "hist run", "hist sweep", "export", "compare", "sweep dry run", "bench"],
)
def test_a_command_says_what_it_does_before_its_heavy_imports(lr_runs, tmp_path, argv, says):
    shutil.copytree(lr_runs / "a", tmp_path / "a")  # report writes into its directory
    shutil.copytree(lr_runs / "sweep", tmp_path / "sweep")
    (tmp_path / "tiny.toml").write_text(tiny.toml(tiny.small()))
    (tmp_path / "sweep.toml").write_text(tiny.toml(tiny.small()) + '[grid]\n"train.lr" = [0.1, 0.05]\n')
    first = first_line(argv(lr_runs, tmp_path), tmp_path)
    assert first["line"].startswith(says) and first["loaded"] == [], first


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_run_says_what_it_does_once_it_knows_it_fits_and_before_the_reports_imports(tmp_path, command):
    # The memory check needs jax (the program's shapes), so its line comes after jax; the summary's and the
    # figures' libraries come after it.
    (tmp_path / "c.toml").write_text(
        tiny.toml(tiny.small()) + ('[grid]\n"train.lr" = [0.1, 0.05]\n' if command == "sweep" else "")
    )
    first = first_line([command, tmp_path / "c.toml", "--out", tmp_path / "out"], tmp_path)
    assert str(tmp_path / "out") in first["line"] and "matplotlib" not in first["loaded"], first
    assert "pandas" not in first["loaded"] and "xarray" not in first["loaded"], first
