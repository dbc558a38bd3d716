"""Seconds from a command's start to the first byte it writes (stdout or stderr), per command: what a user
waits before the command says what it does (issue 57 item 6: within a second). Each command is started
as `python -m icl_race ...` with the source tree on PYTHONPATH, timed from just before the process is
spawned to its first byte, then killed (what comes after is not asked); the median of --repeats.

Several trees (e.g. a base commit's `git archive` and the working tree) are measured interleaved, repeat
by repeat, so that the machine's load falls on each alike (each started from its tree's parent folder,
so that `python -m` finds the tree's icl_race through PYTHONPATH, not the working directory's):

    git archive BASE | tar -x -C /tmp/base
    python benchmarks/first_line.py /tmp/base . --json benchmarks/results-first-line.json

The inputs are made once in a temporary folder: a tiny config, a two-cell sweep of it, and two finished
tiny runs (for `analyze levers pair` and `report`). A time, not a test: tests/test_first_line.py checks
the order (the first line before jax), never a time.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import tiny  # noqa: E402  (the tests' one tiny config)

COMMANDS = {
    "run": lambda i, o: ["run", i / "tiny.toml", "--out", o / "run"],
    "demo": lambda i, o: ["demo", "--out", o / "demo"],
    "sweep": lambda i, o: ["sweep", i / "sweep.toml", "--out", o / "sweep"],
    "sweep --dry-run": lambda i, o: ["sweep", i / "sweep.toml", "--out", o / "sweep", "--dry-run", "--no-measure"],
    "analyze": lambda i, o: ["analyze", "levers", "pair", i / "a", i / "b", "--out", o / "pair.json"],
    "report": lambda i, o: ["report", o / "report"],
}


def _inputs(d: Path, python: str, tree: Path) -> None:
    """The tiny config, its sweep, and two finished runs of it (trained once, by the first tree)."""
    raw = tiny.small(ensemble={"seeds": 2, "block": 2})
    (d / "tiny.toml").write_text(tiny.toml(raw))
    (d / "sweep.toml").write_text(tiny.toml(raw) + '[grid]\n"train.lr" = [0.1, 0.05]\n')
    for name, lr in (("a", 0.1), ("b", 0.05)):
        args = ["run", d / "tiny.toml", "--out", d / name, "--quiet", "--set", f"train.lr={lr}"]
        cmd = [python, "-m", "icl_race", *map(str, args)]
        subprocess.run(cmd, env=_env(tree), cwd=tree.parent, check=True, capture_output=True)


def _env(tree: Path) -> dict:
    return os.environ | {"PYTHONPATH": str(tree), "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")}


def first_byte(python: str, tree: Path, argv: list) -> tuple[float, str]:
    """(seconds from spawn to the first byte on stdout or stderr, the first line); the process is killed."""
    sel = selectors.DefaultSelector()
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [python, "-m", "icl_race", *map(str, argv)],
        env=_env(tree),
        cwd=tree.parent,  # not a source tree: `python -m` puts the working directory before PYTHONPATH
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert p.stdout is not None and p.stderr is not None
    sel.register(p.stdout, selectors.EVENT_READ)
    sel.register(p.stderr, selectors.EVENT_READ)
    try:
        while True:
            for key, _ in sel.select():
                data = os.read(key.fileobj.fileno(), 4096)  # type: ignore[union-attr]
                if data:
                    text = data.decode(errors="replace").strip()
                    return time.perf_counter() - t0, text.splitlines()[0] if text else repr(data)
            if p.poll() is not None:
                return time.perf_counter() - t0, "(ended without a word)"
    finally:
        p.kill()
        p.wait()
        sel.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="+", type=Path, help="source trees (each holds icl_race/), measured interleaved")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--commands", default=",".join(COMMANDS), help="comma-separated, of: " + ", ".join(COMMANDS))
    ap.add_argument("--json", type=Path, help="also write the times there")
    ap.add_argument("--labels", help="comma-separated, one per tree, e.g. the commits: their keys in the JSON")
    args = ap.parse_args()
    names = args.commands.split(",")
    python = sys.executable
    labels = args.labels.split(",") if args.labels else [str(t) for t in args.trees]
    assert len(labels) == len(args.trees), "--labels: one per tree"
    label = dict(zip(map(str, args.trees), labels))
    times: dict = {str(t): {n: [] for n in names} for t in args.trees}
    lines: dict = {str(t): {} for t in args.trees}
    with tempfile.TemporaryDirectory() as tmp:
        inputs = Path(tmp) / "inputs"
        inputs.mkdir()
        _inputs(inputs, python, args.trees[-1].resolve())
        for r in range(args.repeats):
            for name in names:
                for tree in args.trees:
                    out = Path(tmp) / f"out-{r}-{len(times)}-{abs(hash(str(tree)))}-{name.replace(' ', '')}"
                    out.mkdir()
                    if name == "report":  # report writes into its directory: a copy each time
                        subprocess.run(["cp", "-r", inputs / "a", out / "report"], check=True)
                    s, line = first_byte(python, tree.resolve(), COMMANDS[name](inputs, out))
                    times[str(tree)][name].append(s)
                    lines[str(tree)][name] = line
    load = os.getloadavg()[0]
    result = {
        "method": "median over repeats of seconds from spawn to the first byte (stdout or stderr), trees interleaved",
        "repeats": args.repeats,
        "load_1min_at_end": round(load, 2),
        "cpus": os.cpu_count(),
        "median_s": {label[t]: {n: round(statistics.median(v), 2) for n, v in c.items()} for t, c in times.items()},
        "all_s": {label[t]: {n: [round(x, 2) for x in v] for n, v in c.items()} for t, c in times.items()},
        "first_line": {label[t]: c for t, c in lines.items()},
    }
    for name in names:
        cells = "  ".join(f"{statistics.median(times[str(t)][name]):5.2f} s" for t in args.trees)
        print(f"{name:16s} {cells}   {lines[str(args.trees[-1])][name][:90]}")
    print(f"load average (1 min) at the end: {load:.2f} on {os.cpu_count()} CPUs")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
