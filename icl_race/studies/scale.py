"""The scale bridge (experiments/scale/, issue 25): reads run directories for `icl_race.analysis.scale`."""

from __future__ import annotations

import numpy as np

from icl_race.analysis.events import level_event
from icl_race.analysis.outcome import classify
from icl_race.analysis.scale import LrBridge, WidthAxis, lr_bridge, width_axis
from icl_race.config import ConfigError
from icl_race.rundir import runset
from icl_race.studies.inputs import check_kinds


def lr(dirs, n_boot: int = 2000, seed: int = 0) -> LrBridge:
    """The lr rescaling of K = infinity cells of one MLP width: the cells of each train.lr pooled."""
    runs = runset.load(dirs).runs
    check_kinds("scale lr", runs)
    widths = {r.cfg.model.width for r in runs}
    if len(widths) > 1 or any(r.cfg.task.variant != "infinite" for r in runs):
        raise ConfigError(
            f"{', '.join(map(str, dirs))}: analyze scale lr needs K = infinity runs "
            f"(task.variant = 'infinite') of one model.width, got widths {sorted(widths)}"
        )
    by_lr = _groups(runs, lambda r: r.cfg.train.lr, "train.lr")
    if len(by_lr) < 2:
        raise ConfigError(f"{', '.join(map(str, dirs))}: analyze scale lr needs runs at >= 2 values of train.lr")
    lrs = sorted(by_lr)
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("t", "start", "censor", "diverged", "collapsed")}
    for x in lrs:
        group = by_lr[x]
        # every seed, diverged ones included: lr_bridge counts and excludes them
        for k, v in zip(("t", "start", "censor", "diverged"), _pooled(group)):
            cols[k].append(v)
        cols["collapsed"].append(
            np.concatenate(
                [
                    classify(r.times["icl"], r.diverged, r.curves["icl_acc"], r.curves["iwl_acc"], r.eval_steps).fall_S
                    >= 0
                    for r in group
                ]
            )
        )
    return lr_bridge(
        np.array(lrs),
        cols["t"],
        cols["start"],
        cols["censor"],
        cols["diverged"],
        cols["collapsed"],
        width=widths.pop(),
        n_boot=n_boot,
        seed=seed,
    )


def kinf(dirs, n_boot: int = 2000, seed: int = 0) -> WidthAxis:
    """t_ICL(N) at K = infinity per (width, lr): the K = infinity runs of `dirs`, the cells of one
    (width, lr, N) pooled, each group fitted over its abrupt N."""
    runs = runset.load(dirs).runs
    check_kinds("scale kinf", runs)
    runs = [r for r in runs if r.cfg.task.variant == "infinite"]
    if not runs:
        raise ConfigError(
            f"{', '.join(map(str, dirs))}: analyze scale kinf needs K = infinity runs (task.variant = 'infinite')"
        )
    groups = _groups(
        runs, lambda r: (r.cfg.model.width, r.cfg.train.lr, r.cfg.task.N), "(model.width, train.lr, task.N)"
    )
    keys = sorted(groups)
    t_icl, t_start, censor_at, diverged = (list(col) for col in zip(*(_pooled(groups[k]) for k in keys)))
    return width_axis(
        [k[0] for k in keys],
        [k[1] for k in keys],
        [k[2] for k in keys],
        t_icl,
        t_start,
        censor_at,
        diverged,
        n_boot=n_boot,
        seed=seed,
    )


def _groups(runs, key, named: str) -> dict:
    """The runs by `key`, each group's seeds pooled: a seed (root seed, seed id) in two runs of one group
    is refused, since it would count twice (the same cell run again, e.g. on another machine)."""
    groups: dict = {}
    for r in runs:
        groups.setdefault(key(r), []).append(r)
    for k, group in groups.items():
        first: dict[tuple, object] = {}
        for r in group:
            for s in r.seed_ids.tolist():
                other = first.setdefault((r.cfg.ensemble.root_seed, s), r.dir)
                if other != r.dir:
                    raise ConfigError(
                        f"{other} and {r.dir}: seed {s} (root seed {r.cfg.ensemble.root_seed}) twice at "
                        f"{named} = {k}; pass one of the two runs"
                    )
    return groups


def _pooled(group) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(t_ICL, the rise's first passage, censoring step, diverged) per seed over the runs of one group."""
    start = level_event(min(group[0].cfg.train.icl_levels))
    return (
        np.concatenate([r.times["icl"] for r in group]),
        np.concatenate([r.times[start] for r in group]),
        np.concatenate([np.full(r.seed_ids.size, r.censor_at()) for r in group]),
        np.concatenate([r.diverged for r in group]),
    )


def kinf_figure(axis: WidthAxis):
    from icl_race.plots.scale import exponent_vs_width

    fitted = [f for f in axis.fits if f.exponent is not None and None not in f.exponent_ci]
    return {
        "": exponent_vs_width(
            [f.width for f in fitted],
            [f.lr for f in fitted],
            [f.exponent for f in fitted],
            [f.exponent_ci[0] for f in fitted],
            [f.exponent_ci[1] for f in fitted],
        )
    }


COMMANDS = {"lr": lr, "kinf": kinf}
FIGURES = {"kinf": kinf_figure}
