"""Every command says what it does before its slow imports (docs/commands.md, "What a command says"): its
first line on stdout or stderr is written before jax, scipy.stats, matplotlib, pandas or xarray are
imported. Where its input checks do not need them, they come first (a refusal stays one line); run, demo
and sweep check that the ensemble fits the device with jax (engine/memory.py), and analyze's checks are
its study's, so those say first what they load (a refusal found after it is the one line that follows:
tests/refusal.py). Asserted on the order of events in a fresh process, never on a time
(benchmarks/first_line.py measures the time)."""

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


@pytest.mark.parametrize(
    "argv, says",
    [
        (lambda d, t: ["run", t / "tiny.toml", "--out", t / "o"], "/o: config checked; loading jax, then checking"),
        (lambda d, t: ["demo", "--out", t / "o"], "/o: config checked; loading jax, then checking"),
        (lambda d, t: ["sweep", t / "sweep.toml", "--out", t / "o"], "/o: 2 cells checked; loading jax, then planning"),
        (
            lambda d, t: ["sweep", t / "design.toml", "--out", t / "o"],
            "/o: design checked; loading jax, then its rounds",
        ),
        (
            lambda d, t: ["analyze", "levers", "pair", d / "a", d / "b", "--out", t / "p.json"],
            "icl-race analyze: levers pair: loading the study's analysis, then checking and reading its 2 directories",
        ),
    ],
    ids=["run", "demo", "sweep", "design sweep", "analyze"],
)
def test_a_command_that_needs_jax_for_its_checks_says_so_before_importing_it(lr_runs, tmp_path, argv, says):
    (tmp_path / "tiny.toml").write_text(tiny.toml(tiny.small()))
    (tmp_path / "sweep.toml").write_text(tiny.toml(tiny.small()) + '[grid]\n"train.lr" = [0.1, 0.05]\n')
    design = '[design]\nkind = "kstar"\nk_lo = 16\nk_hi = 256\nseeds_per_round = 2\nmax_seeds = 4\n'
    (tmp_path / "design.toml").write_text(tiny.toml(tiny.small(ensemble={"seeds": 2, "block": 2})) + design)
    first = first_line(argv(lr_runs, tmp_path), tmp_path)
    # a design's file is parsed by its analysis (analysis/design.py: scipy), which its checks need
    assert says in first["line"] and set(first["loaded"]) <= ({"scipy.stats"} if "design" in says else set()), first
