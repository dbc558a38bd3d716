"""The transformer side of the race's theory (arXiv 2412.00104 §5; experiments/race/README.md):
the loss relation after acquisition, ICL's transience under L2 on the attention path, and the
independence ablation (one sub-circuit frozen at init). Pure numpy on results.npz arrays.

  first_passage   per seed, the first evaluation step where a curve is above (or below) a level,
                  optionally only after a per-seed start; -1 = never within the run (censored).
  fall_times      transience: the first evaluation after acquisition (t_ICL) with ICL accuracy below
                  `level` (0.9, the reference's rule); -1 for seeds that acquired and never fell
                  (censored at the last evaluation) and for seeds that never acquired (not at risk).
  loss_relation   L_ICL against x = -1/2 log L_IWL over every seed's evaluations at or after t_ICL
                  (theory: L_ICL = x): the pooled least-squares line and the proportionality constant
                  a of L_ICL = a x (sum xy / sum xx; theory 1), CIs by resampling seeds; `min_x`
                  keeps only x > min_x (e.g. 0.5: L_IWL < e^-1, where memorization is under way).
  km_summary      Kaplan-Meier median of censored times with a seed-bootstrap CI.
  ratios          of two conditions' Kaplan-Meier medians: `analysis.compare.ratio_of_boots` on their
                  km_summary replicates, which resample the same seed positions (paired by seed id).
  after_memorization  the bet of train.settle_iwl: of the seeds that memorized (IWL accuracy above a
                  level) before acquiring ICL, how many acquired ICL later, and how high ICL got after.

Times are SGD steps (eval_steps); a run's censoring time is its last evaluation. The summaries read
finished runs (`analysis.runs.FinishedRun`: a study's `rundir.Run`s), through their typed config, and
return dicts; the study's typed results and their text are icl_race/studies/race.py's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from icl_race.analysis.compare import ratio_of_boots
from icl_race.analysis.draws import generator
from icl_race.analysis.outcome import seed_counts
from icl_race.analysis.runs import FinishedRun
from icl_race.analysis.survival import censor_time, censored_times, km_median, proportion_ci
from icl_race.analysis.threshold import interval_verdict, km_median_boot, percentile_ci, power_law_slope, sign_verdict


def first_passage(values_SxT, steps_T, level: float, below: bool = False, after_S=None) -> np.ndarray:
    """Step of the first evaluation with value > level (< level with `below`) per seed, -1 if none.
    With after_S, only evaluations strictly after after_S[s] count, and seeds with after_S < 0 get -1."""
    v = np.asarray(values_SxT, float)
    steps = np.asarray(steps_T)
    hit = v < level if below else v > level
    if after_S is not None:
        after = np.asarray(after_S)[:, None]
        hit &= (steps[None, :] > after) & (after >= 0)
    return np.where(hit.any(1), steps[np.argmax(hit, axis=1)], -1)


def fall_times(icl_acc_SxT, steps_T, t_icl_S, level: float = 0.9) -> np.ndarray:
    return first_passage(icl_acc_SxT, steps_T, level, below=True, after_S=t_icl_S)


def km_summary(t_S, censor_at: float, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95) -> dict:
    """KM median of times t_S (-1 = censored at censor_at) with a percentile seed-bootstrap CI. The
    replicates draw from `generator(seed)`: two samples of equal size resample the same seed positions."""
    times, observed = censored_times(t_S, censor_at)
    med = km_median(times, observed) if times.size else float("nan")
    boot = km_median_boot(times, observed, n_boot, generator(seed)) if times.size else np.empty(0)
    return {
        "n": int(times.size),
        "observed": int(observed.sum()),
        "median": float(med) if np.isfinite(med) else None,
        "median_ci": percentile_ci(boot, confidence),
        "boot": boot,
    }


def _line_stats(stats_K):
    """Pooled fits from summed sufficient statistics [..., 5] = (n, sum x, sum y, sum xx, sum xy)."""
    n, sx, sy, sxx, sxy = np.moveaxis(stats_K, -1, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
        return slope, (sy - slope * sx) / n, sxy / sxx


def loss_relation(
    icl_loss_SxT,
    iwl_loss_SxT,
    steps_T,
    t_icl_S,
    min_x: float = -np.inf,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict:
    """L_ICL vs x = -1/2 log L_IWL at evaluations >= t_ICL of acquired seeds with x > min_x (see module
    docstring). Returns slope, intercept, prop (a of L_ICL = a x) with CIs and the points used."""
    t_icl = np.asarray(t_icl_S)
    with np.errstate(divide="ignore"):
        x_SxT = -0.5 * np.log(np.asarray(iwl_loss_SxT, float))
    after_SxT = (t_icl[:, None] >= 0) & (np.asarray(steps_T)[None, :] >= t_icl[:, None]) & (x_SxT > min_x)
    x_SxT = np.where(after_SxT, x_SxT, 0.0)
    y_SxT = np.where(after_SxT, np.asarray(icl_loss_SxT, float), 0.0)
    stats_Sx5 = np.stack(
        [after_SxT.sum(1), x_SxT.sum(1), y_SxT.sum(1), (x_SxT * x_SxT).sum(1), (x_SxT * y_SxT).sum(1)], axis=1
    ).astype(float)
    used = stats_Sx5[:, 0] > 0
    out = {
        "seeds_used": int(used.sum()),
        "points": int(stats_Sx5[:, 0].sum()),
        "confidence": confidence,
        "x": x_SxT[after_SxT].tolist(),
        "y": y_SxT[after_SxT].tolist(),
    }
    if used.sum() < 1:
        return out | {"slope": None, "intercept": None, "prop": None}
    slope, intercept, prop = _line_stats(stats_Sx5[used].sum(0))
    out |= {"slope": float(slope), "intercept": float(intercept), "prop": float(prop)}
    if used.sum() > 1 and n_boot:
        # Resampling seeds = weighting each seed's sufficient statistics by its multiplicity.
        S = int(used.sum())
        counts_BxS = generator(seed).multinomial(S, np.full(S, 1 / S), size=n_boot)
        bs, bi, bp = _line_stats(counts_BxS @ stats_Sx5[used])
        out |= {
            "slope_ci": percentile_ci(bs, confidence),
            "intercept_ci": percentile_ci(bi, confidence),
            "prop_ci": percentile_ci(bp, confidence),
        }
    return out


def after_memorization(t_icl_S, iwl_acc_SxT, icl_acc_SxT, steps_T, level: float = 0.9) -> dict:
    """Whether memorization ends the race, per seed of one cell: t_mem = the first evaluation with IWL
    accuracy above `level`; a seed *memorized first* when t_mem comes before its t_ICL (or it never
    acquired ICL): the seeds that train.settle_iwl = level would settle. Counts those, those among them
    that acquired ICL later (each one a loss of the bet), and ICL's highest accuracy after t_mem."""
    t_icl = np.asarray(t_icl_S)
    steps = np.asarray(steps_T)
    t_mem = first_passage(iwl_acc_SxT, steps, level)
    first = (t_mem >= 0) & ((t_icl < 0) | (t_mem < t_icl))
    after = np.where(steps[None, :] >= t_mem[:, None], np.asarray(icl_acc_SxT, float), np.nan)[first]
    peak = float(np.nanmax(after)) if after.size and np.isfinite(after).any() else None
    return {
        "seeds": int(t_icl.size),
        "memorized_first": int(first.sum()),
        "acquired_after": int(np.sum(first & (t_icl >= 0))),
        "t_mem_range": [int(t_mem[first].min()), int(t_mem[first].max())] if first.any() else None,
        "max_icl_after": peak,
        "acquired": int(np.sum(t_icl >= 0)),
    }


# ---- sweep directories ------------------------------------------------------------------------------


def _censor_at(run: FinishedRun, *t_S) -> float:
    """The censoring time of a cell (analysis.survival.censor_time) for the first passages `t_S`."""
    return float(censor_time(int(run.budget), int(run.steps_run), any(np.any(t < 0) for t in t_S)))


def _without_boot(d: dict) -> dict:
    return {k: v for k, v in d.items() if k != "boot"}


AT_FALL = ("c3", "iwl_loss")  # curves read at each seed's fall: the memory path's c3, and the IWL test loss


def summarize_transience(runs: Sequence[FinishedRun], level: float = 0.9, n_boot: int = 1000, seed: int = 0) -> dict:
    """Per weight decay (train.weight_decay_attn) cell: rise (t_ICL) and fall (first evaluation after
    t_ICL with ICL accuracy < level) KM medians with CIs; the seed-mean ICL accuracy and the seed-median
    curves of the MLP path's c3 = <exp(-phi+)> and of L_IWL; the values of c3 and of L_IWL at each fallen seed's fall (L_IWL
    = <softplus(-m)> ~ <exp(-m)> once items are memorized: c3 of the whole model's logit on IWL
    queries); the loss relation. Across cells, log10-log10 slopes against weight decay of the fall
    median (theory: stronger L2, sooner fall: slope < 0) and of the medians at the fall.
    [inferred, not from the paper] In the minimal model after memorization, dw/dt ~ a c3 e^(-w a) -
    wd w, so w settles where wd w e^(w a) = a c3; if ICL is lost once w falls to a fixed level, c3 at
    the fall is proportional to wd: slope 1."""
    rows, fall_boots, at_fall_boots = [], [], []
    rng = generator(seed)
    for run in sorted(runs, key=lambda r: r.cfg.train.weight_decay_attn):
        steps, t_icl, icl_acc = run.eval_steps, run.t("icl"), run.curve("icl_acc")
        acquired = t_icl >= 0
        t_fall = fall_times(icl_acc, steps, t_icl, level)
        fell = t_fall >= 0
        T = _censor_at(run, t_icl, t_fall[acquired])
        fall = km_summary(t_fall[acquired], T, n_boot, seed)
        fall_boots.append(fall["boot"])
        # c3 is absent in runs made before the memory-path probes.
        probes = [k for k in AT_FALL if k in run.curves]
        at_fall = {k: run.curve(k)[fell, np.searchsorted(steps, t_fall[fell])] for k in probes}
        at_fall_boots.append(
            {k: np.median(rng.choice(v, (n_boot, v.size)), axis=1) for k, v in at_fall.items() if v.size}
        )
        rows.append(
            {
                "weight_decay_attn": run.cfg.train.weight_decay_attn,
                **seed_counts(acquired),
                "fell": int(fell.sum()),
                "budget": T,
                "rise": _without_boot(km_summary(t_icl, T, n_boot, seed)),
                "fall": _without_boot(fall),
                "t_icl": t_icl.tolist(),
                "t_fall": t_fall.tolist(),
                "at_fall": {k: v.tolist() for k, v in at_fall.items()},
                "at_fall_median": {k: float(np.median(v)) for k, v in at_fall.items() if v.size},
                "eval_steps": steps.tolist(),
                "icl_acc_mean": icl_acc.mean(0).tolist(),
                # Seed medians: a seed whose MLP reads the attention output can have a huge c3 without it.
                **{f"{k}_seed_median": np.median(run.curve(k), 0).tolist() for k in probes},
                "loss_relation": {
                    k: v
                    for k, v in loss_relation(
                        run.curve("icl_loss"), run.curve("iwl_loss"), steps, t_icl, n_boot=n_boot, seed=seed
                    ).items()
                    if k not in ("x", "y")
                },
            }
        )
    reached = [i for i, w in enumerate(rows) if w["fall"]["median"]]
    trends = {}
    if len(reached) >= 2:
        log_wd = np.log10([rows[i]["weight_decay_attn"] for i in reached])
        trends["fall"] = power_law_slope(
            log_wd,
            np.log10([rows[i]["fall"]["median"] for i in reached]),
            np.log10(np.stack([fall_boots[i] for i in reached])),
        ).to_json()
        trends["fall"]["verdict"] = sign_verdict(trends["fall"].get("slope_ci"), -1)
        for k in AT_FALL:
            if all(k in rows[i]["at_fall_median"] for i in reached):
                trends[k] = power_law_slope(
                    log_wd,
                    np.log10([rows[i]["at_fall_median"][k] for i in reached]),
                    np.log10(np.stack([at_fall_boots[i][k] for i in reached])),
                ).to_json()
                trends[k]["verdict_slope_1"] = interval_verdict(trends[k].get("slope_ci"), 1.0)
    return {"level": level, "cells": rows, "vs_wd_loglog": trends}


def _condition(run: FinishedRun, n_boot, level, seed):
    cfg, iwl_acc = run.cfg, run.curve("iwl_acc")
    t_icl = run.t("icl") if "icl" in run.times else None  # an MLP-only run has no ICL event
    t_mem = first_passage(iwl_acc, run.eval_steps, level)
    T = _censor_at(run, t_mem, *([] if t_icl is None else [t_icl]))
    out = {
        "K": getattr(cfg.task, "K", None),
        "variant": getattr(cfg.task, "variant", None),
        "width": cfg.model.width,
        "lr": cfg.train.lr,
        "seeds": int(iwl_acc.shape[0]),
        "budget": T,
        "memorization": km_summary(t_mem, T, n_boot, seed),
        "final_iwl_acc": float(iwl_acc[:, -1].mean()),
        "eval_steps": run.eval_steps.tolist(),
        "iwl_acc_mean": iwl_acc.mean(0).tolist(),
        "iwl_acc_q": np.quantile(iwl_acc, [0.1, 0.9], axis=0).tolist(),
    }
    if t_icl is not None:
        out |= {"t_icl": km_summary(t_icl, T, n_boot, seed), "t_icl_seeds": t_icl.tolist()}
    return out


def _ratios(conds: dict, pairs: dict, key: str) -> dict:
    """median(a) / median(b) of each pair's km_summary: the replicates of equal-size conditions resample
    the same seed positions, so the CI is paired by seed id (right when the conditions share seed ids,
    as a sweep's cells do)."""
    out = {}
    for name, (a, b) in pairs.items():
        if a in conds and b in conds:
            x, y = conds[a][key], conds[b][key]
            r = ratio_of_boots(y["median"], x["median"], y["boot"], x["boot"])
            out[name] = {"ratio": r.ratio, "ratio_ci": list(r.ci)}
    return out


def _strip_boot(conds: dict) -> dict:
    return {n: {k: _without_boot(v) if isinstance(v, dict) else v for k, v in c.items()} for n, c in conds.items()}


def summarize_independence(
    memorization_runs: Sequence[FinishedRun],
    t_icl_runs: Sequence[FinishedRun],
    mlp_only_runs: Sequence[FinishedRun],
    level: float = 0.9,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict:
    """memorization_runs: a sweep over model.freeze (none, attention); t_icl_runs: a sweep over
    model.freeze (none, mlp) x task.variant; mlp_only_runs: MLP-only runs at matched K, width, lr and
    budget (named by task.input_scale). Memorization time = the first evaluation with IWL accuracy >
    `level` (KM median, censored at the budget); ratios of KM medians with seed-bootstrap CIs (paired
    by seed id)."""
    mem = {getattr(r.cfg.model, "freeze", "none"): _condition(r, n_boot, level, seed) for r in memorization_runs}
    mem |= {
        f"mlp_only x{getattr(r.cfg.task, 'input_scale', 1.0):g}": _condition(r, n_boot, level, seed)
        for r in mlp_only_runs
    }
    icl = {
        f"{r.cfg.task.variant}, freeze {getattr(r.cfg.model, 'freeze', 'none')}": _condition(r, n_boot, level, seed)
        for r in t_icl_runs
    }
    mem_ratios = _ratios(
        mem,
        {f"{a} / {b}": (a, b) for a in ("attention", "none") for b in mem if b.startswith("mlp_only")},
        "memorization",
    )
    icl_ratios = _ratios(
        icl,
        {f"{v}: mlp_frozen_over_trained": (f"{v}, freeze mlp", f"{v}, freeze none") for v in ("standard", "infinite")},
        "t_icl",
    )
    return {
        "level": level,
        "memorization": {"conditions": _strip_boot(mem), "ratios": mem_ratios},
        "t_icl": {"conditions": _strip_boot(icl), "ratios": icl_ratios},
    }


def summarize_loss_relations(
    runs: Sequence[FinishedRun], min_x: float = 0.5, n_boot: int = 1000, seed: int = 0
) -> dict:
    """loss_relation per cell (train.weight_decay_attn), on all points and on those with x > min_x (the fits
    without x and y); `points` holds per cell (wd, x, y, fit) of the first fit, for its figure."""
    rows, points = [], []
    for run in runs:
        wd = run.cfg.train.weight_decay_attn
        curves = (run.curve("icl_loss"), run.curve("iwl_loss"), run.eval_steps, run.t("icl"))
        fits = {f"x > {m:g}": loss_relation(*curves, m, n_boot=n_boot, seed=seed) for m in (-np.inf, min_x)}
        rows.append(
            {"weight_decay_attn": wd}
            | {label: {k: v for k, v in f.items() if k not in ("x", "y")} for label, f in fits.items()}
        )
        first = fits["x > -inf"]
        points.append((wd, first["x"], first["y"], first))
    return {"min_x": min_x, "cells": rows, "points": points}


def summarize_settling(runs: Sequence[FinishedRun], level: float = 0.9) -> dict:
    """after_memorization per cell (task.K) and pooled, with the Wilson 95% CI of the fraction of
    memorized-first seeds that acquired ICL later: the bet train.settle_iwl = level makes."""
    rows = [
        {
            "K": getattr(r.cfg.task, "K", None),
            **after_memorization(r.t("icl"), r.curve("iwl_acc"), r.curve("icl_acc"), r.eval_steps, level),
        }
        for r in runs
    ]
    rows.sort(key=lambda c: c["K"] or 0)
    k, n = sum(c["acquired_after"] for c in rows), sum(c["memorized_first"] for c in rows)
    return {
        "level": level,
        "cells": rows,
        "memorized_first": n,
        "acquired_after": k,
        "fraction_ci": list(proportion_ci(k, n)),
    }
