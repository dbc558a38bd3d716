"""Summaries of the levers (issue 14 item 4) as printed lines and JSON in experiments/levers/results/.

  python experiments/levers/analyze.py beta0 runs/levers/beta0
  python experiments/levers/analyze.py beta0 runs/levers/adam_kinf_fine --name beta0_adam
  python experiments/levers/analyze.py pair runs/levers/beta0 runs/levers/adam_kinf_fine --name sgd_vs_adam
  python experiments/levers/analyze.py race task.zipf_alpha --values 0 1 --mlp runs/regime/mlp_matched \
      runs/levers/mlp_zipf1 --kinf runs/regime/kinf --N 32 --T 10000 --t-fixed 1200 --name zipf_race
  python experiments/levers/analyze.py transience runs/levers/adam_l2 runs/levers/adam_l2_wd
  python experiments/levers/analyze.py ceiling --epsilon 0 0.5 1
  python experiments/levers/analyze.py collapse runs/levers/epsilon_kinf_long --name collapse_eps1
  python experiments/levers/analyze.py kstar task.epsilon runs/levers/epsilon --counts kstar_epsilon --name kstar_epsilon

kstar keeps every cell's acquired count in its JSON and takes an earlier JSON back (--counts), so K* per
lever value can grow over sessions whose run directories (git-ignored) are gone.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy import stats

from icl_race.analysis.memorization import budgets_by_K, log_t_vs_beta0, predict_k_star
from icl_race.analysis.race import summarize_transience
from icl_race.analysis.regime import rise_fraction
from icl_race.analysis.threshold import acquisition_curve, percentile_ci
from icl_race.configbase import ConfigError
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
        cells.append({**_setting(cfg), "N": cfg["task"]["N"], "seeds": int(t.size),
                      "acquired": int(ok.sum()), "beta0_mean": float(b.mean()), "fit": fit,
                      "ln_t_spread": _spread(np.log(t[ok]), args.boot, rng) if ok.any() else None, "beta0_spread": _spread(b, args.boot, rng)})
        pooled_t.append(t)
        pooled_b.append(b)
    out = {"cells": sorted(cells, key=lambda c: tuple(c[k] for k in SETTING)),
           "pooled": log_t_vs_beta0(np.concatenate(pooled_t), np.concatenate(pooled_b), n_boot=args.boot)}
    for c in out["cells"]:
        f, s, sb = c["fit"], c["ln_t_spread"] or {"sd": float("nan"), "sd_ci": None}, c["beta0_spread"]
        slope = "not fitted (< 3 acquired)" if f is None else f"{f['slope']:.2f} {_ci(f['slope_ci'], '{:.2f}')}"
        print(f"{_label(c)} (N = {c['N']}): acquired {c['acquired']}/{c['seeds']}, mean beta0 "
              f"{c['beta0_mean']:.3f}; slope of ln t_ICL on beta0 {slope}; sd of ln t_ICL "
              f"{s['sd']:.3f} {_ci(s['sd_ci'])} vs sd of beta0 {sb['sd']:.3f} {_ci(sb['sd_ci'])}")
    p = out["pooled"]
    print(f"pooled: slope {p['slope']:.2f} {_ci(p['slope_ci'], '{:.2f}')} over {p['n']} acquired seeds ({p['censored']} censored, dropped)")
    return _write(args.name or "beta0", out)


def pair(args) -> dict:
    """The same seeds (same initial weights) under two settings, e.g. SGD and Adam: the Spearman
    correlation of their t_ICL, per pair of cells, over the seeds both acquired."""
    def by_setting(d):
        return {tuple(_setting(cfg).values()): dict(zip(r["seed_ids"].tolist(), r["t_icl"].tolist()))
                for cfg, r in load_cells(d)}
    a, b = by_setting(args.dir), by_setting(args.other)
    out = {"pairs": []}
    for ka, ta in sorted(a.items()):
        for kb, tb in sorted(b.items()):
            seeds = sorted(s for s in ta.keys() & tb.keys() if ta[s] > 0 and tb[s] > 0)
            rho = stats.spearmanr([ta[s] for s in seeds], [tb[s] for s in seeds]) if len(seeds) > 2 else None
            row = {"a": dict(zip(SETTING, ka)), "b": dict(zip(SETTING, kb)), "seeds": len(seeds),
                   "spearman": None if rho is None else float(rho.statistic),
                   "p": None if rho is None else float(rho.pvalue)}
            out["pairs"].append(row)
            if rho is not None:
                print(f"{_label(row['a'])} vs {_label(row['b'])}: Spearman rho of t_ICL {row['spearman']:.2f} "
                      f"(p = {row['p']:.2g}) over {len(seeds)} seeds acquired in both")
    return _write(args.name or "pair", out)


def race(args) -> dict:
    """(b), (c): the K* the race predicts at one N for each value of a lever, from the MLP-only I_K(T) = C K^nu
    measured under that value (one --mlp directory per --values entry, I_K at the race's budget T) and the
    K = infinity median t_ICL of the --kinf cells at that N with that value of the lever (or, for a lever the
    K = infinity variant cannot take, such as Zipf frequencies, its default value). With --t-fixed, also the
    K* = (t / C)^(1/nu) for that t, the same for every value: the shift that memorization alone predicts."""
    section, key = args.field.split(".")
    value_of = lambda cfg: float(cfg[section].get(key, 0.0))
    kinf = [(c, r) for d in args.kinf for c, r in load_cells(d) if c["task"]["N"] == args.N]
    out = {"field": args.field, "N": args.N, "T": args.T, "t_fixed": args.t_fixed, "values": []}
    for v, mlp_dir in zip(args.values, args.mlp, strict=True):
        K, I_by_K = budgets_by_K([(c, r) for c, r in load_cells(mlp_dir) if value_of(c) == v], args.T)
        same = [(c, r) for c, r in kinf if value_of(c) == v]
        source = "the same value" if same else "the lever's default (no K = infinity cell with this value)"
        same = same or [(c, r) for c, r in kinf if value_of(c) == 0.0]
        if len(same) != 1 or not K:
            raise SystemExit(f"{args.field} = {v}: {len(same)} K = infinity cells at N = {args.N} and "
                             f"{len(K)} MLP-only cells reaching T = {args.T} (need 1 and some)")
        (_, r), = same
        # --t-fixed as a cell of seeds that all acquire at t: its KM median is t, with no spread.
        times = [np.asarray(r["t_icl"], float)] + ([np.full(r["t_icl"].size, args.t_fixed)] if args.t_fixed else [])
        pred = predict_k_star(K, I_by_K, np.full(len(times), args.N), times, float(r["budget"]), args.boot)
        row = {"value": v, "mlp": mlp_dir, "K": list(K), "nu": pred["nu"], "C": pred["C"], "t_icl_from": source,
               "kinf": pred["per_N"][0], "fixed": pred["per_N"][1] if args.t_fixed else None}
        out["values"].append(row)
    base = out["values"][0]
    for row in out["values"]:
        for k in ("kinf", "fixed"):
            if row[k]:
                row[k]["shift"] = row[k]["k_star"] / base[k]["k_star"]
        k, f = row["kinf"], row["fixed"]
        kinf = (f"{k['median_t_icl']:.0f} ({row['t_icl_from']}) -> K* {k['k_star']:.0f} {_ci(k['k_star_ci'], '{:.0f}')} "
                f"(x{k['shift']:.2f})") if np.isfinite(k["median_t_icl"]) else \
            f"not reached by the budget ({row['t_icl_from']}) -> no K*"
        line = f"{args.field} = {row['value']:g}: nu {row['nu']:.3f}, C {row['C']:.3g}; K = inf median t_ICL {kinf}"
        if f:
            line += f"; at t = {args.t_fixed:g}: K* {f['k_star']:.0f} {_ci(f['k_star_ci'], '{:.0f}')} (x{f['shift']:.2f})"
        print(line)
    return _write(args.name or "race", out)


def transience(args) -> dict:
    """(d): ICL's rise and fall (first evaluation after t_ICL with ICL accuracy < --level) per optimizer and
    L2 on the attention path (analysis.race.summarize_transience, one optimizer at a time), with the seeds'
    median final ICL and IWL accuracies. A fall by that rule may be a one-evaluation dip, so also: the
    acquired seeds that stay below --level for --lasting consecutive evaluations (a lasting loss), and
    those that end the run below it."""
    cells = [c for d in args.dirs for c in load_cells(d)]
    out = {"level": args.level, "lasting": args.lasting, "cells": []}
    for opt in sorted({cfg["train"]["optimizer"] for cfg, _ in cells}):
        mine = [(cfg, r) for cfg, r in cells if cfg["train"]["optimizer"] == opt]
        by_wd = {cfg["train"]["weight_decay_attn"]: r for cfg, r in mine}
        for row in summarize_transience(mine, level=args.level, n_boot=args.boot)["cells"]:
            r = by_wd[row["weight_decay_attn"]]
            acquired = r["t_icl"] >= 0
            after_SxT = (r["eval_steps"][None, :] > r["t_icl"][:, None]) & acquired[:, None]
            below_SxT = after_SxT & (r["icl_acc"] < args.level)
            row = {"optimizer": opt, "final_icl_acc_median": float(np.median(r["icl_acc"][:, -1])),
                   "final_iwl_acc_median": float(np.median(r["iwl_acc"][:, -1])),
                   "lost_lasting": int((_longest_run(below_SxT) >= args.lasting).sum()),
                   "ended_below": int((acquired & (r["icl_acc"][:, -1] < args.level)).sum()),
                   **{k: row[k] for k in ("weight_decay_attn", "seeds", "acquired", "fell", "budget", "rise", "fall")}}
            out["cells"].append(row)
            med = lambda d: "not reached" if d["median"] is None else f"{d['median']:.0f} {_ci(d.get('median_ci'), '{:.0f}')}"
            print(f"{opt}, L2 {row['weight_decay_attn']:g}: acquired {row['acquired']}/{row['seeds']} (KM median "
                  f"t_ICL {med(row['rise'])}), fell {row['fell']}/{row['acquired']} (KM median fall "
                  f"{med(row['fall'])}, budget {row['budget']:.0f}), lost for >= {args.lasting} evaluations "
                  f"{row['lost_lasting']}, ended below {args.level:g} {row['ended_below']}; final ICL accuracy "
                  f"{row['final_icl_acc_median']:.2f}, IWL {row['final_iwl_acc_median']:.2f} (seed medians)")
    return _write(args.name or "transience", out)


def _longest_run(mask_SxT: np.ndarray) -> np.ndarray:
    """The longest run of consecutive True per row."""
    longest, run = np.zeros(mask_SxT.shape[0], int), np.zeros(mask_SxT.shape[0], int)
    for col in mask_SxT.T:
        run = np.where(col, run + 1, 0)
        longest = np.maximum(longest, run)
    return longest


def kstar(args) -> dict:
    """(b), (c): K* per value of a lever at one N, the logistic midpoint of the acquired fraction against
    log K (analysis.threshold.acquisition_curve, the report's estimator) over the finite-K cells of the
    directories, with each cell's median rise fraction r (analysis.regime) where its seeds are at hand,
    together with the per-cell counts of an earlier kstar JSON (--counts) for the (value, K) cells the
    directories lack. A cell in both must agree: the same config digest trains the same seeds."""
    section, key = args.field.split(".")
    rows = {}
    if args.counts:
        path = RESULTS / f"{args.counts}.json"
        if not path.is_file():
            raise SystemExit(f"error: --counts {args.counts}: no {path}")
        prior = json.loads(path.read_text())
        if (prior["field"], prior["N"]) != (args.field, args.N):
            raise SystemExit(f"--counts {args.counts}: field {prior['field']} at N = {prior['N']}, not "
                             f"{args.field} at N = {args.N}")
        rows = {(c["value"], c["K"]): c for c in prior["cells"]}
    for d in args.dirs:
        for cfg, r in load_cells(d):
            task = cfg["task"]
            if task["N"] != args.N or task.get("variant") == "infinite":
                continue
            t = np.asarray(r["t_icl"])
            r_S = rise_fraction(t, np.asarray(r["t_icl60"]))
            cell = {"value": float(cfg[section].get(key, 0.0)), "K": int(task["K"]), "seeds": int(t.size),
                    "acquired": int((t >= 0).sum()), "budget": int(cfg["train"]["steps"]),
                    "rise_fraction_median": float(np.nanmedian(r_S)) if (t >= 0).any() else None, "source": str(d)}
            old = rows.get((cell["value"], cell["K"]))
            if old and (old["seeds"], old["acquired"]) != (cell["seeds"], cell["acquired"]):
                raise SystemExit(f"{args.field} = {cell['value']:g}, K = {cell['K']}: {d} has {cell['acquired']}/"
                                 f"{cell['seeds']} acquired, --counts {args.counts} {old['acquired']}/{old['seeds']}")
            rows[(cell["value"], cell["K"])] = {**cell, "source": old["source"] if old else cell["source"]}
    # The regime check beside each K*: a median rise fraction above the protocol's bound (0.10 at K =
    # infinity; 0.17-0.25 near K* without a lever) says ICL climbed to the threshold rather than jumped.
    rise = lambda c: "" if c.get("rise_fraction_median") is None else f" (r {c['rise_fraction_median']:.2f})"
    rng = np.random.default_rng(0)
    out = {"field": args.field, "N": args.N, "cells": [rows[k] for k in sorted(rows)], "kstar": []}
    for v in sorted({v for v, _ in rows}):
        cells = [rows[k] for k in sorted(rows) if k[0] == v]
        fit = acquisition_curve(np.log10([c["K"] for c in cells]),
                                [np.arange(c["seeds"]) < c["acquired"] for c in cells], n_boot=args.boot, rng=rng)
        fit.pop("boot_log10_kstar", None)
        out["kstar"].append({"value": v, **fit})
        counts = ", ".join(f"{c['acquired']}/{c['seeds']} at {c['K']:,}{rise(c)}" for c in cells)
        if not fit["ok"]:
            verdict = f"no K* ({fit['reason']})"
        else:
            verdict = (f"K* {fit['kstar']:,.0f} {_ci(fit['kstar_ci'], '{:,.0f}')}"
                       + ("" if fit["bracketed"] else ", not bracketed by the grid: an extrapolation"))
        print(f"{args.field} = {v:g} (N = {args.N}): {verdict}; acquired {counts}")
    return _write(args.name or "kstar", out)


def ceiling(args) -> dict:
    """(c): the ICL accuracy that an ideal copy rule reaches under item noise epsilon, the ceiling the 0.95
    threshold must fit under. Monte Carlo over sequences built as the task builds them at K = infinity:
    N - 1 distinct context items mu ~ N(0, I/D) with i.i.d. labels, every occurrence noised as
    (mu + epsilon eta)/sqrt(1 + epsilon^2), the query a noisy copy of one context item. Rules:
    the label of the context item nearest the query (inner product), and a softmax attention on those
    inner products read out as the sign of the attended labels, at its best inverse temperature."""
    rng = np.random.default_rng(0)
    D, N, n = args.D, args.N, args.sequences
    out = {"D": D, "N": N, "sequences": n, "rows": []}
    for eps in args.epsilon:
        mu_SxCxD = rng.normal(size=(n, N - 1, D)) / np.sqrt(D)
        noisy = lambda x: (x + eps * rng.normal(size=x.shape) / np.sqrt(D)) / np.sqrt(1 + eps**2)
        ctx_SxCxD, q_SxD = noisy(mu_SxCxD), noisy(mu_SxCxD[:, 0])
        same_SxC = rng.random((n, N - 1)) < 0.5  # whether each item's label is the query's...
        same_SxC[:, 0] = True  # ...which its copy's (column 0) is
        score_SxC = np.einsum("scd,sd->sc", ctx_SxCxD, q_SxD)
        nearest = float(same_SxC[np.arange(n), score_SxC.argmax(1)].mean())
        soft = {}
        for beta in (5, 10, 20, 40, 80, 160):
            w_SxC = np.exp(beta * (score_SxC - score_SxC.max(1, keepdims=True)))
            soft[beta] = float(((w_SxC * np.where(same_SxC, 1, -1)).sum(1) > 0).mean())
        best = max(soft, key=soft.get)
        out["rows"].append({"epsilon": eps, "nearest": nearest, "soft_best": soft[best], "soft_beta": best,
                            "copy_found": float((score_SxC.argmax(1) == 0).mean())})
        print(f"epsilon = {eps:g} (N = {N}, D = {D}): nearest-item rule {nearest:.3f} (copy found in "
              f"{out['rows'][-1]['copy_found']:.3f}), softmax attention {soft[best]:.3f} at beta {best}")
    return _write(args.name or "ceiling", out)


def collapse(args) -> dict:
    """(c): what a run's network looks like along its training, one seed of a finished cell retrained alone
    (icl_race.retrain) in vmaps of one seed, the fast CPU layout this was first written with, so the same
    trajectory as inside its ensemble to float tolerance (without the ensemble.block override: exactly
    its run's, at the cost of a whole block): at each of --at steps the ICL accuracy and training loss,
    the spread of the query's attention logits over its context, the fraction of each MLP layer's ReLUs
    active on a training batch, and the mean |logit|. Written for epsilon = 1 at K = infinity, where ICL
    rose and then the training loss went back to ln 2 with nothing to memorize."""
    import jax
    import jax.numpy as jnp

    from icl_race import load, systems
    from icl_race.retrain import retrain
    from icl_race.rundir import SweepDir

    found = load(args.dir)
    runs = found.runs if isinstance(found, SweepDir) else [found]
    if len(runs) != 1:
        raise SystemExit(f"error: {args.dir}: collapse needs a directory with one finished cell, found {len(runs)}")
    kept = {}  # step -> the seed's parameters, copied before the next chunk donates the carry

    def keep(p):
        if p.step in args.at:
            kept[p.step] = jax.device_get(jax.tree.map(lambda a: a[0], p.carry["state"]["params"]))

    # One evaluation per chunk, at every multiple of the --at steps' gcd, and no early stop: each --at step
    # is a chunk boundary, where `keep` looks.
    res = retrain(runs[0].dir, [args.seed], steps=max(args.at), on_chunk=keep,
                  overrides=["ensemble.block=1", "ensemble.devices=0", f"train.eval_every={np.gcd.reduce(args.at)}",
                             "train.evals_per_chunk=1", "train.stop_when_all_acquired=false"])
    program, consts = systems.build(runs[0].cfg)
    out = {"dir": args.dir, "seed": args.seed, "rows": []}
    for stop, params in sorted(kept.items()):
        i = int(np.searchsorted(res["eval_steps"], stop))
        # The forward pass spelled out (unfolded LayerNorm), for the hidden activations the model's
        # __call__ does not return.
        m = program.model.bind(params)
        x_BxNxE, _ = program.train_batch({"params": params}, consts, jax.random.key(stop), 512)
        h_BxNxE = m.ln(x_BxNxE)
        h1_BxW = jax.nn.relu(m.mlp.fc1(h_BxNxE[:, -1] + m.attn.query(h_BxNxE)))
        h2_BxW = jax.nn.relu(m.mlp.fc2(h1_BxW))
        row = {"step": stop, "icl_acc": float(res["icl_acc"][0, i]), "train_loss": float(res["train_loss"][0, i]),
               "score_spread": float(jnp.std(m.attn.query_scores(h_BxNxE), -1).mean()),
               "relu_active_fc1": float((h1_BxW > 0).mean()), "relu_active_fc2": float((h2_BxW > 0).mean()),
               "logit_abs": float(jnp.abs(m.mlp.fc3(h2_BxW)).mean())}
        out["rows"].append(row)
        print(f"step {stop}: ICL accuracy {row['icl_acc']:.3f}, training loss {row['train_loss']:.3f}; attention "
              f"logit spread {row['score_spread']:.1f}; ReLUs active {row['relu_active_fc1']:.2f} (layer 1), "
              f"{row['relu_active_fc2']:.2f} (layer 2); mean |logit| {row['logit_abs']:.3f}")
    return _write(args.name or "collapse", out)


SETTING = ("optimizer", "lr", "qk_init_scale")  # what tells a lever's cells apart here


def _setting(cfg: dict) -> dict:
    return {"optimizer": cfg["train"]["optimizer"], "lr": cfg["train"]["lr"], "qk_init_scale": cfg["model"]["qk_init_scale"]}


def _label(c: dict) -> str:
    return f"{c['optimizer']} lr {c['lr']:g}, qk_init_scale {c['qk_init_scale']:g}"


def _write(name: str, out: dict) -> dict:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(out, indent=1, default=float) + "\n")
    print(f"wrote {RESULTS / name}.json")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("beta0", help="(a) ln t_ICL against beta0")
    p.add_argument("dir")
    p = sub.add_parser("pair", help="Spearman of t_ICL over the same seeds under two settings")
    p.add_argument("dir")
    p.add_argument("other")
    p = sub.add_parser("race", help="(b), (c) the K* that the MLP-only I_K under each lever value predicts")
    p.add_argument("field", help="the lever, e.g. task.epsilon")
    p.add_argument("--values", type=float, nargs="+", required=True, help="the lever's values, the default first")
    p.add_argument("--mlp", nargs="+", required=True, help="one MLP-only sweep directory per value")
    p.add_argument("--kinf", nargs="+", required=True, help="K = infinity race sweep directories")
    p.add_argument("--T", type=float, default=10000, help="the race's budget, in steps")
    p.add_argument("--t-fixed", type=float, help="also predict K* for this t_ICL")
    p = sub.add_parser("transience", help="(d) ICL's rise and fall per optimizer and L2")
    p.add_argument("dirs", nargs="+")
    p.add_argument("--level", type=float, default=0.9, help="ICL is lost below this accuracy")
    p.add_argument("--lasting", type=int, default=10, help="a lasting loss: this many evaluations in a row below --level")
    p = sub.add_parser("kstar", help="(b), (c) the measured K* per lever value")
    p.add_argument("field", help="the lever, e.g. task.epsilon")
    p.add_argument("dirs", nargs="*", help="sweep directories of finite-K cells")
    p.add_argument("--counts", help="an earlier kstar result (results/<name>.json) whose cells are kept")
    p = sub.add_parser("ceiling", help="(c) the ICL accuracy an ideal copy rule reaches under item noise")
    p.add_argument("--epsilon", type=float, nargs="+", default=[0.0, 0.5, 1.0])
    p.add_argument("--D", type=int, default=63)
    p.add_argument("--sequences", type=int, default=20000)
    p = sub.add_parser("collapse", help="(c) one seed of a cell retrained alone, its network inspected along the way")
    p.add_argument("dir", help="a sweep directory with one cell")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--at", type=int, nargs="+", default=[3000, 6000, 9000, 12000, 18000, 24000, 30000])
    for p in sub.choices.values():
        p.add_argument("--boot", type=int, default=1000)
        p.add_argument("--name", help="results/<name>.json (default: the subcommand's name)")
        if p.prog.split()[-1] in ("race", "kstar", "ceiling"):
            p.add_argument("--N", type=int, default=32, help="the N of the cells")
    args = ap.parse_args()
    try:
        {"beta0": beta0, "pair": pair, "race": race, "transience": transience, "kstar": kstar,
         "ceiling": ceiling, "collapse": collapse}[args.what](args)
    except ConfigError as e:  # a missing or unreadable directory: one line, as the CLI says it
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
