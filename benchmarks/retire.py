"""Retirement's gain (ensemble.retire), side by side in one process, on cells the science uses.

    .venv/bin/python benchmarks/retire.py [--case NAME ...] [--out FILE]

Each case is a config (a path under experiments/ and --set overrides) trained twice through
`runner.execute`, retirement off then on, into fresh directories; the two results must be identical
(every t_<event>, steps_run, and each curve up to the seed's `retired_at`), and the script prints:

- predicted, seeds: S * T_run / sum_i min(t_i, T_run), t_i = the step after which seed i's results
  can no longer change (`retired_at`, the end of the chunk in which it froze with every event recorded,
  settled or diverged): the most retirement can save;
- predicted, blocks: the same at the engine's granularity, live seeds rounded up to whole blocks of
  `ensemble.block` per chunk (what a run with that block can save);
- predicted, t_ICL: S * T_run / sum_i min(t_ICL_i, T_run), the ratio if every seed left at its
  acquisition (the issue's formula);
- the wall times (compilation counted, as a user pays it; each mode compiles its own programs, the
  in-memory caches dropped and the persistent cache off) and their ratio, the process CPU seconds and
  their ratio (steadier than the wall time on a shared machine), and the compile seconds of each.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

os.environ["ICL_RACE_COMPILE_CACHE"] = "off"  # both modes compile from scratch, as the first run of a shape does

import jax  # noqa: E402

from icl_race import config, rundir  # noqa: E402
from icl_race.engine.chunks import chunk_plan  # noqa: E402
from icl_race.run.runner import execute  # noqa: E402
from icl_race.rundir.provenance import device_description  # noqa: E402

EXP = HERE.parent / "experiments"
FREEZE = ['train.early_stop="freeze"']


def kstar_n32(K: int, block: int, *extra: str, K_max: int | None = None) -> tuple[Path, list[str]]:
    """A cell of kstar_N32.toml's grid (regime/base.toml at N = 32: 10,000 steps, an evaluation every 50
    steps in batches of 32 sequences) at this K and vmap width; K_max as the grid file sets it (one
    compilation for the grid), `extra` overrides last."""
    pool = [] if K_max is None else [f"task.K_max={K_max}"]
    base = ["train.steps=10000", "train.eval_every=50", "train.eval_batch=32"]
    return EXP / "regime" / "base.toml", ["task.N=32", f"task.K={K}", *pool, *base, f"ensemble.block={block}", *extra]


# name: (config file, overrides)
CASES = {
    "demo-freeze": (EXP / "demo.toml", FREEZE),
    "demo-freeze-block4": (EXP / "demo.toml", [*FREEZE, "ensemble.block=4"]),
    # kstar_N32.toml's cells at block 4: above K* (every seed acquires, the run stops at the last t_ICL)
    # and at the cell nearest K* (some seeds never acquire, so the run goes to its budget)
    **{f"kstar_N32-K{K}-block4": kstar_n32(K, 4) for K in (4525, 2263)},
    # the same two cells at block 1, this CPU's fastest layout (every seed retires on its own), with the
    # paper's early stop at 0.99 and with the freeze at acquisition (stop_threshold = icl_threshold: a seed
    # leaves at t_ICL, so its curves after that are not computed: what a K*-only grid needs)
    **{
        f"kstar_N32-K{K}-block1{tag}": kstar_n32(K, 1, *extra)
        for K in (4525, 2263)
        for tag, extra in (("", []), ("-freeze95", ["train.stop_threshold=0.95"]))
    },
    # the rest of kstar_N32.toml's grid at block 1, frozen at acquisition (the K*-grid setting)
    **{
        f"kstar_N32-K{K}-block1-freeze95": kstar_n32(K, 1, "train.stop_threshold=0.95", K_max=6400)
        for K in (566, 800, 1131, 1600, 3200, 6400)
    },
    # the whole grid frozen at acquisition and settled by IWL (train.settle_iwl = 0.9): a seed below K* leaves
    # once it has memorized, the bet being that it would not acquire ICL later (experiments/regime/README.md)
    **{
        f"kstar_N32-K{K}-block1-settle90": kstar_n32(
            K, 1, "train.stop_threshold=0.95", "train.settle_iwl=0.9", K_max=6400
        )
        for K in (566, 800, 1131, 1600, 2263, 3200, 4525, 6400)
    },
    # kinf.toml's N = 64 cell (K = infinity, 24,000 steps, the paper's 0.99 stop) at block 1
    "kinf_N64-block1": (
        EXP / "regime" / "base.toml",
        [
            'task.variant="infinite"',
            "task.infinite_bank=262144",
            "task.N=64",
            "train.steps=24000",
            "train.eval_every=80",
            "train.eval_batch=32",
            "ensemble.block=1",
        ],
    ),
    # nothing retires (early stop off): the one-block programs looped on the host against lax.map
    "demo-block4-no-freeze-1000": (EXP / "demo.toml", ["ensemble.block=4", "train.steps=1000"]),
}


def predicted(run: rundir.Run, cfg: config.Config) -> tuple[float, float]:
    """(seed-level, block-level) work ratios of the run with retirement off over on."""
    tr, S, unit = cfg.train, len(run.seed_ids), cfg.ensemble.block
    T = run.steps_run
    done = np.where(run.retired_at >= 0, run.retired_at, T)
    seeds = S * T / done.sum()
    plan = [c for c in chunk_plan(tr.steps, tr.eval_every, tr.evals_per_chunk, tr.eval_spacing) if c[0] < T]
    live = [int(np.sum(done > t0)) for t0, _, _ in plan]
    full = math.ceil(S / unit) * unit * T
    blocks = full / sum(math.ceil(n / unit) * unit * p * k for n, (_, p, k) in zip(live, plan))
    return seeds, blocks


def predicted_t_icl(run: rundir.Run) -> float:
    """The issue's work ratio from the t_ICL distribution alone: S * T_run / sum_i min(t_ICL_i, T_run),
    a censored seed counting T_run (what retiring every seed at its acquisition would save)."""
    t, T = run.t("icl"), run.steps_run
    return len(t) * T / np.where(t >= 0, np.minimum(t, T), T).sum()


def same_results(off: rundir.Run, on: rundir.Run) -> None:
    assert off.steps_run == on.steps_run and np.array_equal(off.eval_steps, on.eval_steps)
    for e in off.times:
        assert np.array_equal(off.times[e], on.times[e]), e
    for s, at in enumerate(on.retired_at):
        upto = on.eval_steps <= at if at >= 0 else np.ones(on.eval_steps.size, bool)
        for k, c in off.curves.items():
            assert np.array_equal(c[s, upto], on.curves[k][s, upto], equal_nan=True), (k, s)


def measure(name: str, root: Path) -> dict:
    path, sets = CASES[name]
    row = {"case": name, "config": str(path.relative_to(HERE.parent)), "set": sets}
    runs = {}
    for retire in (False, True):
        cfg = config.load(path, [*sets, f"ensemble.retire={str(retire).lower()}"])
        jax.clear_caches()  # each mode compiles its programs (the persistent cache is off: see main)
        tic, cpu = time.perf_counter(), time.process_time()
        execute(cfg, root / f"{name}-{retire}", progress=False, log=lambda m: None)
        wall, cpu = time.perf_counter() - tic, time.process_time() - cpu
        row[f"cpu_s_{'on' if retire else 'off'}"] = round(cpu, 1)
        runs[retire] = rundir.load_run(root / f"{name}-{retire}")
        meta = runs[retire].meta
        row[f"wall_s_{'on' if retire else 'off'}"] = round(wall, 1)
        row[f"compile_s_{'on' if retire else 'off'}"] = meta["compile_seconds"]
        print(
            f"{name}: retire={retire} {wall:.1f} s ({meta['compile_seconds']:.1f} s compiling)",
            file=sys.stderr,
            flush=True,
        )
    same_results(runs[False], runs[True])
    seeds, blocks = predicted(runs[True], cfg)
    run = runs[True]
    return {
        **row,
        "seeds": len(run.seed_ids),
        "block": cfg.ensemble.block,
        "steps_run": run.steps_run,
        "retired": int(np.sum(run.retired_at >= 0)),
        "predicted_t_icl": round(predicted_t_icl(run), 2),
        "predicted_seeds": round(seeds, 2),
        "predicted_blocks": round(blocks, 2),
        "gain": round(row["wall_s_off"] / row["wall_s_on"], 2),
        "gain_cpu": round(row["cpu_s_off"] / row["cpu_s_on"], 2),
        "identical": True,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", action="append", choices=sorted(CASES), help="default: every case")
    ap.add_argument("--out", default=str(HERE / "results-retire.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="icl-race-retire-") as tmp:
        args.case = args.case or list(CASES)
        rows = [measure(name, Path(tmp)) for name in args.case]
    print(f"device {device_description()}")
    print(
        "| case | S | block | steps run | retired | predicted (t_ICL) | predicted (seeds) | predicted (blocks) | "
        "wall off s | wall on s | gain | CPU off / on s | gain (CPU) | compile off / on s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['case']} | {r['seeds']} | {r['block']} | {r['steps_run']:,} | {r['retired']} | "
            f"{r['predicted_t_icl']:.2f} | {r['predicted_seeds']:.2f} | {r['predicted_blocks']:.2f} | "
            f"{r['wall_s_off']:.1f} | {r['wall_s_on']:.1f} | {r['gain']:.2f} | "
            f"{r['cpu_s_off']:.1f} / {r['cpu_s_on']:.1f} | {r['gain_cpu']:.2f} | "
            f"{r['compile_s_off']:.1f} / {r['compile_s_on']:.1f} |"
        )
    out = Path(args.out)  # rows of other cases measured before are kept
    kept = [r for r in (json.loads(out.read_text())["rows"] if out.exists() else []) if r["case"] not in args.case]
    out.write_text(json.dumps({"device": device_description(), "rows": kept + rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
