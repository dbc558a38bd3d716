"""A K* grid packed (the cells of one program as one ensemble, issue 42 item 4) against apart (one cell
after another), each mode a fresh process running the sweep's local executor, on this machine.

    .venv/bin/python benchmarks/pack.py [--grid experiments/regime/kstar_N16.toml] [--cells 4]
        [--set section.key=value ...] [--out benchmarks/results-pack.json]

Prints, per mode, the wall time of the sweep (compilation counted, the persistent cache off, as the first
sweep of a shape pays it) and the process CPU seconds (steadier on a shared machine), and checks that every
cell's results.npz holds the same arrays in both modes (identity: every t_<event>, curve and step).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

DEFAULT_SET = ["ensemble.seeds=4", "ensemble.block=4", "train.steps=1200", "train.eval_size=500"]


def _cells(grid: str, n: int, overrides: list[str], pack: bool):
    from icl_race.run import sweep

    spec = sweep.load(grid, overrides)
    raw = {k: v for k, v in spec.raw.items() if k not in ("grid", "zip")}
    field, values = next(iter(spec.raw["grid"].items()))
    return sweep.expand({**raw, "sweep": {"pack": pack}}, {field: values[:n]})


def child(args) -> None:
    """One mode in this process: the sweep's local executor into args.dir; its times as JSON on stdout."""
    from icl_race.run import sweep

    s = _cells(args.grid, args.cells, args.set, args.mode == "packed")
    tic, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    sweep.run_local(Path(args.dir), s, log=lambda m: None, progress=False)
    now = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "wall_s": round(time.perf_counter() - tic, 2),
                "cpu_s": round(now.ru_utime + now.ru_stime - cpu.ru_utime - cpu.ru_stime, 2),
                "packs": len(sweep.packs(sweep.planned(Path(args.dir) / "none", s), s.pack)),
            }
        )
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", default=str(HERE.parent / "experiments/regime/kstar_N16.toml"))
    p.add_argument("--cells", type=int, default=4)
    p.add_argument("--set", action="append", default=None)
    p.add_argument("--out", default=str(HERE / "results-pack.json"))
    p.add_argument("--mode", choices=("packed", "apart"))
    p.add_argument("--dir")
    args = p.parse_args()
    args.set = args.set if args.set is not None else DEFAULT_SET
    if args.mode:
        return child(args)

    import numpy as np

    from icl_race import rundir
    from icl_race.run import sweep
    from icl_race.rundir.provenance import device_description

    env = {**os.environ, "ICL_RACE_COMPILE_CACHE": "off", "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")}
    rows = {}
    with tempfile.TemporaryDirectory(prefix="icl-race-pack-") as d:
        for mode in ("apart", "packed"):
            cmd = [sys.executable, __file__, "--mode", mode, "--dir", f"{d}/{mode}", "--grid", args.grid]
            cmd += ["--cells", str(args.cells), *[f"--set={s}" for s in args.set]]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
            rows[mode] = json.loads(out.strip().splitlines()[-1])
            print(f"{mode:7s} {rows[mode]}", flush=True)
        cells = _cells(args.grid, args.cells, args.set, True).cells
        same, t_icl = True, {}
        for c in cells:
            a, b = (rundir.load_run_results(sweep.cell_dir(Path(d) / m, c))[1] for m in ("apart", "packed"))
            same &= a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)
            t_icl[c.name] = a["t_icl"].tolist()
    result = {
        "grid": args.grid,
        "cells": args.cells,
        "set": args.set,
        "device": device_description(),
        **rows,
        "packed_over_apart_wall": round(rows["packed"]["wall_s"] / rows["apart"]["wall_s"], 3),
        "packed_over_apart_cpu": round(rows["packed"]["cpu_s"] / rows["apart"]["cpu_s"], 3),
        "identical": bool(same),
        "t_icl": t_icl,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "t_icl"}, indent=1))
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
