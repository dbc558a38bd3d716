"""Summaries of the memorization and minimal-model sweeps (JSON on stdout).

    python experiments/memorization/analyze.py mlp runs/memorization/mlp_cpu [--T STEPS]
    python experiments/memorization/analyze.py minimal runs/memorization/minimal_cpu
"""

import argparse
import json

from icl_race.analysis import memorization as mem

p = argparse.ArgumentParser()
p.add_argument("kind", choices=("mlp", "minimal"))
p.add_argument("out")
p.add_argument("--T", type=float, default=None, help="time (SGD steps) at which I_K is compared across K")
p.add_argument("--boot", type=int, default=1000)
a = p.parse_args()
res = mem.summarize_memorization(a.out, a.T, n_boot=a.boot) if a.kind == "mlp" else mem.summarize_minimal(a.out, a.boot)
print(json.dumps(res, indent=1))
