"""Summaries of the memorization and minimal-model sweeps (JSON on stdout).

    python experiments/memorization/analyze.py mlp runs/memorization/mlp_cpu [--T STEPS ...]
    python experiments/memorization/analyze.py minimal runs/memorization/minimal_cpu [more sweep dirs ...]
    python experiments/memorization/analyze.py race runs/memorization/mlp_cpu --kinf runs/cpu/fig6b --T 2000 \
        [--kstar runs/cpu/fig6a/report.json]

race: K*(N) predicted from the MLP-only I_K(T) and the K = infinity t_ICL(N) of --kinf, next to the
measured K*(N) of an `icl-race report` (its "finite K" threshold table) when --kstar is given.
"""

import argparse
import json
from pathlib import Path

from icl_race import rundir
from icl_race.analysis import memorization as mem


def measured_k_star(report_json) -> dict:
    th = next(t for t in json.loads(Path(report_json).read_text())["thresholds"] if t["label"] == "finite K")
    return {"per_N": [{"N": int(n), "k_star": a["kstar"], "k_star_ci": a["kstar_ci"]} for n, a in th["acquisition"].items()],
            "k_star_slope": th["kstar_slope"]}


p = argparse.ArgumentParser()
p.add_argument("kind", choices=("mlp", "minimal", "race"))
p.add_argument("out", nargs="+", help="sweep directories (mlp, race: the first only)")
p.add_argument("--T", type=float, nargs="+", default=None, help="times (SGD steps) at which I_K is compared across K")
p.add_argument("--kinf", help="race: a K = infinity sweep of the race (t_ICL per N)")
p.add_argument("--kstar", help="race: report.json of the finite-K race sweep (measured K*)")
p.add_argument("--boot", type=int, default=1000)
a = p.parse_args()
if a.kind == "mlp":
    res = mem.summarize_memorization(rundir.load_cells(a.out[0]), a.T, n_boot=a.boot)
elif a.kind == "minimal":
    res = mem.summarize_minimal(rundir.load_cells(*a.out), a.boot)
else:
    res = {"predicted": mem.summarize_race(rundir.load_cells(a.out[0]), rundir.load_cells(a.kinf), a.T[0], a.boot),
           "measured": measured_k_star(a.kstar) if a.kstar else None}
print(json.dumps(res, indent=1))
