"""Speed and memory of the classification training step per train.optimizer, side by side in one run.

    .venv/bin/python benchmarks/optimizers.py [--rounds 3] [--steps 5] [--out FILE]

For each shape, every optimizer is measured once per round (icl_race.run.bench.measure: AOT compile timed
apart, one warm-up call, best of 3 timed calls); rounds interleave the optimizers so that a change in
the machine's load hits them alike, and the best round counts (compile seconds: the first round's).
Memory is XLA's own account of the
compiled step (arguments + outputs + temporaries - aliased), per seed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from icl_race import config  # noqa: E402
from icl_race.configbase import OPTIMIZERS  # noqa: E402
from icl_race.run.bench import measure  # noqa: E402
from icl_race.rundir.provenance import device_description, versions  # noqa: E402

# (name, task/model overrides, seeds, block): the paper's step one seed at a time (the fast CPU layout),
# and the demo's small step in a vmap of 16.
SHAPES = [
    ("paper N=100 W=512 K=1e4", {"task": {"N": 100, "K": 10_000}, "model": {"width": 512}}, 1, 1),
    ("paper N=100 W=512 K=1e4", {"task": {"N": 100, "K": 10_000}, "model": {"width": 512}}, 8, 8),
    ("demo N=8 W=64 K=1e3", {"task": {"N": 8, "K": 1000}, "model": {"width": 64}}, 16, 16),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5, help="steps per timed call")
    ap.add_argument("--out", default=str(HERE / "results-optimizers.json"))
    args = ap.parse_args()
    rows = {}
    for r in range(args.rounds):
        for shape, raw, seeds, block in SHAPES:
            for opt in OPTIMIZERS:
                cfg = config.from_dict({**raw, "train": {"optimizer": opt}})
                row = measure(cfg, seeds, args.steps, repeats=3, block=block)
                key = (shape, seeds, block, opt)
                if key not in rows or row["seed_steps_per_s"] > rows[key]["seed_steps_per_s"]:
                    # jax keeps the executable: only the first round's compile is a compilation.
                    rows[key] = {**row, "compile_s": rows[key]["compile_s"] if key in rows else row["compile_s"]}
                print(
                    f"round {r}: {shape} S={seeds} block={block} {opt}: {row['seed_steps_per_s']:,.0f} seed-steps/s",
                    file=sys.stderr,
                    flush=True,
                )
    print(f"device {device_description()}")
    print("| shape | S | block | optimizer | compile s | ms/step | seed-steps/s | vs sgd | MB/seed |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for (shape, seeds, block, opt), row in rows.items():
        sgd = rows[(shape, seeds, block, "sgd")]["seed_steps_per_s"]
        mb = "-" if row["bytes_per_seed"] is None else f"{row['bytes_per_seed'] / 2**20:.2f}"
        print(
            f"| {shape} | {seeds} | {block} | {opt} | {row['compile_s']:.2f} | {row['step_ms']:.2f} | "
            f"{row['seed_steps_per_s']:,.0f} | {row['seed_steps_per_s'] / sgd:.2f} | {mb} |"
        )
    Path(args.out).write_text(
        json.dumps(
            {
                "device": device_description(),
                "versions": versions(),
                "steps_per_call": args.steps,
                "rounds": args.rounds,
                "rows": [
                    {"shape": s, "seeds": n, "block": b, "optimizer": o, **row} for (s, n, b, o), row in rows.items()
                ],
            },
            indent=2,
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
