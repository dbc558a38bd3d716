"""Summaries of the levers (issue 14 item 4) as printed lines and JSON in experiments/levers/results/.

  python experiments/levers/analyze.py beta0 runs/levers/beta0
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from icl_race.analysis.memorization import log_t_vs_beta0
from icl_race.analysis.threshold import percentile_ci
from icl_race.rundir import load_cells

RESULTS = Path(__file__).parent / "results"


def _ci(ci, f: str = "{:.3f}") -> str:
    return "" if not ci or ci[0] is None else f"[{f.format(ci[0])}, {f.format(ci[1])}]"


def _spread(values, n_boot: int, rng) -> dict:
    """Standard deviation of values with a bootstrap CI over seeds."""
    v = np.asarray(values, float)
    boot = [np.std(v[rng.integers(0, v.size, v.size)]) for _ in range(n_boot)]
    return {"sd": float(np.std(v)), "sd_ci": percentile_ci(boot, 0.95)}


def beta0(args) -> dict:
    """(a): per seed ln t_ICL against the beta0 measured at init, per init scale and pooled (theory
    slope -1); the spread of ln t_ICL beside the spread of ln e^-beta0 = -beta0 (equal if beta0 alone
    set t_ICL)."""
    rng = np.random.default_rng(0)
    cells, pooled_t, pooled_b = [], [], []
    for cfg, r in load_cells(args.dir):
        t, b = np.asarray(r["t_icl"], float), np.asarray(r["beta0"], float)[:, 0]
        ok = t > 0
        fit = log_t_vs_beta0(t, b, n_boot=args.boot) if ok.sum() > 2 else None
        cells.append({"qk_init_scale": cfg["model"]["qk_init_scale"], "N": cfg["task"]["N"], "seeds": int(t.size),
                      "acquired": int(ok.sum()), "beta0_mean": float(b.mean()), "fit": fit,
                      "ln_t_spread": _spread(np.log(t[ok]), args.boot, rng) if ok.any() else None, "beta0_spread": _spread(b, args.boot, rng)})
        pooled_t.append(t)
        pooled_b.append(b)
    out = {"cells": sorted(cells, key=lambda c: c["qk_init_scale"]),
           "pooled": log_t_vs_beta0(np.concatenate(pooled_t), np.concatenate(pooled_b), n_boot=args.boot)}
    for c in out["cells"]:
        f, s, sb = c["fit"], c["ln_t_spread"] or {"sd": float("nan"), "sd_ci": None}, c["beta0_spread"]
        slope = "not fitted (< 3 acquired)" if f is None else f"{f['slope']:.2f} {_ci(f['slope_ci'], '{:.2f}')}"
        print(f"qk_init_scale {c['qk_init_scale']:g} (N = {c['N']}): acquired {c['acquired']}/{c['seeds']}, mean beta0 "
              f"{c['beta0_mean']:.3f}; slope of ln t_ICL on beta0 {slope}; sd of ln t_ICL "
              f"{s['sd']:.3f} {_ci(s['sd_ci'])} vs sd of beta0 {sb['sd']:.3f} {_ci(sb['sd_ci'])}")
    p = out["pooled"]
    print(f"pooled: slope {p['slope']:.2f} {_ci(p['slope_ci'], '{:.2f}')} over {p['n']} acquired seeds ({p['censored']} censored, dropped)")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "beta0.json").write_text(json.dumps(out, indent=1, default=float) + "\n")
    print(f"wrote {RESULTS / 'beta0.json'}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["beta0"])
    ap.add_argument("dir")
    ap.add_argument("--boot", type=int, default=1000)
    args = ap.parse_args()
    {"beta0": beta0}[args.what](args)


if __name__ == "__main__":
    main()
