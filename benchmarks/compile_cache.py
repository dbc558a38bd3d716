"""The persistent compilation cache's effect (icl_race/run/compile_cache.py), in fresh processes, side by side.

    .venv/bin/python benchmarks/compile_cache.py [--demo-steps 500] [--out FILE]

Two workloads, each run as a user runs it, in new processes: `icl-race demo` (its programs are those of
`make demo`; --demo-steps shortens its training only: the chunk program is the same at any budget) and
a two-cell `icl-race sweep --executor submitit-local` (each cell a process of its own). Each is run
with the cache off twice, then with an empty cache (cold) and again (warm). Printed per run: the
compile seconds, compilations and cache hits that meta.json records (summed over a sweep's cells), the
run seconds and the process's wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ICL_RACE = [sys.executable, "-m", "icl_race"]
SWEEP = """
base = "{demo}"
[ensemble]
seeds = 8
[train]
steps = 500
[grid]
"task.K" = [1800, 3600]
"""


def _metas(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.rglob("meta.json"))]


def _one(cmd: list[str], out: Path, cache: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"} | {
        "ICL_RACE_COMPILE_CACHE": cache,
        "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu"),
    }
    tic = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - tic
    metas = _metas(out)
    return {
        "compile_s": round(sum(m["compile_seconds"] for m in metas), 2),
        "compiles": sum(m["compiles"] for m in metas),
        "cache_hits": sum(m.get("compile_cache_hits", 0) for m in metas),
        "run_s": round(sum(m["run_seconds"] for m in metas), 2),
        "wall_s": round(wall, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demo-steps", type=int, default=500)
    ap.add_argument("--out", type=Path, default=HERE / "results-compile-cache.json")
    args = ap.parse_args()
    demo = HERE.parent / "experiments" / "demo.toml"
    rows = []
    with tempfile.TemporaryDirectory(prefix="icl-race-cache-bench-") as tmp:
        tmp = Path(tmp)
        spec = tmp / "sweep.toml"
        spec.write_text(SWEEP.format(demo=demo))
        workloads = {
            "demo": lambda out: [*ICL_RACE, "demo", "--out", str(out), "--set", f"train.steps={args.demo_steps}"],
            "submitit-local sweep, 2 cells": lambda out: [
                *ICL_RACE,
                "sweep",
                str(spec),
                "--out",
                str(out),
                "--executor",
                "submitit-local",
                "--quiet",
            ],
        }
        for name, cmd in workloads.items():
            for i, (mode, cache) in enumerate(
                [
                    ("off", "off"),
                    ("off, again", "off"),
                    ("cold", str(tmp / f"cache-{name[:4]}")),
                    ("warm", str(tmp / f"cache-{name[:4]}")),
                ]
            ):
                out = tmp / f"{name[:4]}-{i}"
                row = {"workload": name, "cache": mode, **_one(cmd(out), out, cache)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    args.out.write_text(
        json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": rows}, indent=2) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
