"""Resident memory of one process that runs many cells of distinct shapes, with and without clearing
JAX's in-memory compilation caches between cells.

Every distinct shape (N, width, block, chunk length) is a new XLA program; jit keeps each compiled
executable (and its traced jaxpr, lowering and LLVM module) alive for the life of the process. A sweep
worker or a pytest process that runs many distinct shapes grows by that much per compilation. This
prints the resident set size after each cell, for `--clear off` (what the worker did) and `--clear on`
(`jax.clear_caches()` after each cell), so the two growth rates can be compared side by side:

    .venv/bin/python benchmarks/compile_memory.py --cells 24 --clear off
    .venv/bin/python benchmarks/compile_memory.py --cells 24 --clear on
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import numpy as np


def rss_mb() -> float:
    """Current resident set size (not the peak): /proc/self/statm's second field, in pages."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def cell(width: int) -> dict:
    """One cell's config: a seed of a small classification race, 20 steps, no checkpoint. Distinct widths
    make distinct programs (a new compilation of init, chunk, probe); tests/run/sweep/test_sweep.py bounds a sweep's
    growth over such cells."""
    return {
        "task": {"K": 64, "N": 4, "D": 8},
        "model": {"width": width},
        "train": {
            "lr": 0.1,
            "batch_size": 8,
            "steps": 20,
            "eval_every": 10,
            "eval_size": 16,
            "eval_batch": 16,
            "checkpoint_every": 0,
        },
        "ensemble": {"seeds": 1, "block": 1},
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=24, help="cells of distinct shapes to run in this process")
    ap.add_argument("--clear", choices=("on", "off"), default="off", help="jax.clear_caches() after each cell")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    import jax

    from icl_race import config
    from icl_race.run.runner import execute

    jax.config.update("jax_enable_compilation_cache", False)  # measure compilation, not the disk cache
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.cells):
            cfg = config.from_dict(cell(4 + i))
            tic = time.perf_counter()
            execute(cfg, Path(tmp) / str(i), progress=False, log=lambda m: None)
            if args.clear == "on":
                jax.clear_caches()
            rows.append({"cell": i, "seconds": time.perf_counter() - tic, "rss_mb": rss_mb()})
            if not args.json:
                print(f"cell {i:3d}  {rows[-1]['seconds']:5.2f} s  rss {rows[-1]['rss_mb']:7.1f} MB", flush=True)
    # Growth per cell from a least-squares line over the second half (the first cells carry imports
    # and allocator warm-up).
    half = rows[len(rows) // 2 :]
    slope = float(np.polyfit([r["cell"] for r in half], [r["rss_mb"] for r in half], 1)[0]) if len(half) > 1 else 0.0
    out = {
        "clear": args.clear,
        "cells": args.cells,
        "rss_first_mb": rows[0]["rss_mb"],
        "rss_last_mb": rows[-1]["rss_mb"],
        "growth_mb_per_cell": slope,
    }
    print(
        json.dumps(out)
        if args.json
        else f"clear_caches {args.clear}: rss {out['rss_first_mb']:.0f} -> {out['rss_last_mb']:.0f} MB, "
        f"{slope:.1f} MB per cell over the second half"
    )
    return out


if __name__ == "__main__":
    main()
