"""The scale bridge (experiments/scale/, issue 25): reads run directories for `icl_race.analysis.scale`."""

from __future__ import annotations

import numpy as np

from icl_race import runset
from icl_race.analysis.outcome import classify
from icl_race.analysis.regime import level_event
from icl_race.analysis.scale import LrBridge, lr_bridge
from icl_race.config import ConfigError


def lr(dirs, n_boot: int = 2000, seed: int = 0) -> LrBridge:
    """The lr rescaling of K = infinity cells of one MLP width: the cells of each train.lr pooled."""
    runs = runset.load(dirs).runs
    widths = {r.cfg.model.width for r in runs}
    if len(widths) > 1 or any(r.cfg.task.variant != "infinite" for r in runs):
        raise ConfigError(f"{', '.join(map(str, dirs))}: analyze scale lr needs K = infinity runs "
                          f"(task.variant = 'infinite') of one model.width, got widths {sorted(widths)}")
    by_lr: dict[float, list] = {}
    for r in runs:
        by_lr.setdefault(r.cfg.train.lr, []).append(r)
    if len(by_lr) < 2:
        raise ConfigError(f"{', '.join(map(str, dirs))}: analyze scale lr needs runs at >= 2 values of train.lr")
    lrs = sorted(by_lr)
    cols = {k: [] for k in ("t", "start", "censor", "diverged", "collapsed")}
    for x in lrs:
        group = by_lr[x]
        start = level_event(min(group[0].cfg.train.icl_levels))
        # every seed, diverged ones included: lr_bridge counts and excludes them
        cols["t"].append(np.concatenate([r.times["icl"] for r in group]))
        cols["start"].append(np.concatenate([r.times[start] for r in group]))
        cols["censor"].append(np.concatenate([np.full(r.seed_ids.size, r.censor_at()) for r in group]))
        cols["diverged"].append(np.concatenate([r.diverged for r in group]))
        cols["collapsed"].append(np.concatenate([
            classify(r.times["icl"], r.diverged, r.curves["icl_acc"], r.curves["iwl_acc"], r.eval_steps).classes_S
            == "transient" for r in group]))
    return lr_bridge(np.array(lrs), cols["t"], cols["start"], cols["censor"], cols["diverged"], cols["collapsed"],
                     width=widths.pop(), n_boot=n_boot, seed=seed)


COMMANDS = {"lr": lr}
