"""Summaries of the transformer-side claims (icl_race.analysis.race) as JSON and PNG in experiments/race/results/.

  python experiments/race/analyze.py transience runs/race/transience
  python experiments/race/analyze.py loss RUN_OR_SWEEP_DIR [--name loss_relation]
  python experiments/race/analyze.py independence runs/race/memorization_frozen runs/race/t_icl_frozen_mlp \
      runs/race/mlp_only runs/race/mlp_only_scaled
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from icl_race.analysis import race
from icl_race.plots import race as figures
from icl_race.rundir import load_cells

RESULTS = Path(__file__).parent / "results"


def _fmt(d: dict, key: str, f: str = "{:.0f}") -> str:
    v, ci = d.get(key), d.get(f"{key}_ci") or [None, None]
    if v is None:
        return "not reached"
    ci_txt = "" if ci[0] is None else f" [{f.format(ci[0])}, {f.format(ci[1])}]"
    return f.format(v) + ci_txt


def _save(name: str, summary: dict, fig) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(summary, indent=1) + "\n")
    fig.savefig(RESULTS / f"{name}.png", dpi=110)
    print(f"wrote {RESULTS / name}.json and .png")


def transience(args) -> None:
    s = race.summarize_transience(load_cells(args.dir), level=args.level, n_boot=args.boot)
    for c in s["cells"]:
        lr = c["loss_relation"]
        print(f"wd {c['weight_decay_attn']:g}: acquired {c['acquired']}/{c['seeds']}, rise {_fmt(c['rise'], 'median')}, "
              f"fell {c['fell']}/{c['acquired']}, fall {_fmt(c['fall'], 'median')} (budget {c['budget']:.0f}), "
              f"medians at the fall {c['at_fall_median']}, loss relation slope {_fmt(lr, 'slope', '{:.2f}')} "
              f"intercept {_fmt(lr, 'intercept', '{:.2f}')} prop {_fmt(lr, 'prop', '{:.2f}')}")
    for k, t in s["vs_wd_loglog"].items():
        verdict = t.get("verdict") or f"slope 1: {t['verdict_slope_1']}"
        what = "fall median" if k == "fall" else f"median {k} at the fall"
        print(f"log10 {what} vs log10 wd: slope {_fmt(t, 'slope', '{:.2f}')} -> {verdict}")
    _save("transience", s, figures.transience(s))


def loss(args) -> None:
    for cfg, r in load_cells(args.dir):
        wd = cfg["train"]["weight_decay_attn"]
        fits = {f"x > {m:g}": race.loss_relation(r["icl_loss"], r["iwl_loss"], r["eval_steps"], r["t_icl"], m,
                                                 n_boot=args.boot) for m in (-np.inf, args.min_x)}
        for label, fit in fits.items():
            print(f"wd {wd:g}, {label}: slope {_fmt(fit, 'slope', '{:.2f}')}, intercept {_fmt(fit, 'intercept', '{:.2f}')}, "
                  f"prop {_fmt(fit, 'prop', '{:.2f}')} ({fit['points']} points, {fit['seeds_used']} seeds)")
        fit = fits["x > -inf"]
        fig = figures.loss_relation(fit["x"], fit["y"], fit, title=f"{args.dir}: wd {wd:g}")
        _save(f"{args.name}_wd{wd:g}", {"dir": str(args.dir)} | {
            label: {k: v for k, v in f.items() if k not in ("x", "y")} for label, f in fits.items()}, fig)


def independence(args) -> None:
    s = race.summarize_independence(load_cells(args.memorization), load_cells(args.t_icl), load_cells(*args.mlp_only), level=args.level, n_boot=args.boot)
    for part in ("memorization", "t_icl"):
        for name, c in s[part]["conditions"].items():
            extra = f", t_ICL {_fmt(c['t_icl'], 'median')}" if "t_icl" in c and part == "t_icl" else ""
            print(f"{part} | {name}: IWL acc > {s['level']} at {_fmt(c['memorization'], 'median')} "
                  f"(final IWL acc {c['final_iwl_acc']:.3f}){extra}")
        for name, r in s[part]["ratios"].items():
            print(f"{part} ratio {name}: {_fmt(r, 'ratio', '{:.2f}')}")
    _save("independence", s, figures.independence(s))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--boot", type=int, default=1000)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("transience")
    t.add_argument("dir")
    t.add_argument("--level", type=float, default=0.9, help="fall = first ICL accuracy below this after t_ICL")
    lo = sub.add_parser("loss")
    lo.add_argument("dir")
    lo.add_argument("--name", default="loss_relation")
    lo.add_argument("--min-x", type=float, default=0.5, help="second fit on points with -1/2 log L_IWL > this")
    i = sub.add_parser("independence")
    i.add_argument("memorization")
    i.add_argument("t_icl")
    i.add_argument("mlp_only", nargs="+")
    i.add_argument("--level", type=float, default=0.9, help="memorization time = first IWL accuracy above this")
    args = p.parse_args()
    np.seterr(all="ignore")
    {"transience": transience, "loss": loss, "independence": independence}[args.cmd](args)


if __name__ == "__main__":
    main()
