"""The scale bridge (experiments/scale/, issue 25): reads run directories for `icl_race.analysis.scale`
and renders its records as tables (RENDER)."""

from __future__ import annotations

import numpy as np

from icl_race.analysis.draws import Draws
from icl_race.analysis.events import level_event
from icl_race.analysis.outcome import classify
from icl_race.analysis.regime import RISE_BOUND
from icl_race.analysis.scale import LrBridge, WidthAxis, lr_bridge, width_axis
from icl_race.config import ConfigError
from icl_race.report.format import value_ci
from icl_race.rundir import runset
from icl_race.studies.inputs import check_kinds


def lr(dirs, *, draws: Draws = Draws(0, 2000)) -> LrBridge:
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
    # every seed, diverged ones included: lr_bridge counts and excludes them
    t, start, censor, diverged = (list(col) for col in zip(*(_pooled(by_lr[x]) for x in lrs)))
    collapsed = [np.concatenate([_fell(r) for r in by_lr[x]]) for x in lrs]
    return lr_bridge(np.array(lrs), t, start, censor, diverged, collapsed, draws, width=widths.pop())


def _fell(r) -> np.ndarray:
    """Per seed of a run: acquired ICL, then fell for good (`outcome.classify`'s lasting fall)."""
    return classify(r.times["icl"], r.diverged, r.curves["icl_acc"], r.curves["iwl_acc"], r.eval_steps).fall_S >= 0


def kinf(dirs, *, draws: Draws = Draws(0, 2000)) -> WidthAxis:
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
    width, lrs, N = (list(col) for col in zip(*keys))
    return width_axis(width, lrs, N, t_icl, t_start, censor_at, diverged, draws)


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


def lr_text(b: LrBridge) -> str:
    rows = [
        "| lr | seeds | acquired | diverged | collapsed | KM median t_ICL (95% CI) | t_ICL x lr (95% CI) | "
        "ratio to lr " + f"{b.reference_lr:g} (95% CI) | rise fraction (95% CI) | agrees, stable |",
        "|---|---:|---:|---:|---:|---|---|---|---|---|",
        *(
            f"| {c.lr:g} | {c.seeds} | {c.acquired} | {c.diverged} | {c.collapsed} | "
            f"{value_ci(c.t_icl, c.t_icl_ci, '{:,.0f}')} | {value_ci(c.t_lr, c.t_lr_ci, '{:,.0f}')} | "
            f"{value_ci(c.ratio, c.ratio_ci, '{:.2f}')} | {value_ci(c.rise, c.rise_ci, '{:.3f}')} | "
            f"{'yes' if c.agrees else 'no'}, {'yes' if c.stable else 'no'} |"
            for c in b.cells
        ),
    ]
    abrupt = [c.lr for c in b.cells if c.rise is not None and c.rise <= RISE_BOUND]
    width = f"width {b.width}: " if b.width else ""
    return "\n".join(
        [
            *rows,
            "",
            f"{width}bridge lr {b.bridge_lr:g} (the largest lr whose t_ICL x lr ratio "
            f"to lr {b.reference_lr:g} has a CI containing 1, with no diverged or collapsed seed); "
            f"abrupt (median rise fraction <= {RISE_BOUND}) at lr {', '.join(f'{x:g}' for x in abrupt) or 'none'}",
            f"Method: {b.method}.",
        ]
    )


def kinf_text(axis: WidthAxis) -> str:
    lines = [
        "| width | lr | N (abrupt: *) | KM median t_ICL per N (95% CI) | rise fraction per N | exponent "
        "(95% CI) | slope, steps per token (95% CI) | intercept (95% CI) | quadratic term (95% CI) |",
        "|---:|---:|---|---|---|---|---|---|---|",
    ]
    for f in axis.fits:
        ns = ", ".join(f"{p.N}{'*' if p.abrupt else ''}" for p in f.per_N)
        meds = "; ".join(value_ci(p.t_icl, p.t_icl_ci, "{:,.0f}") for p in f.per_N)
        rises = "; ".join(value_ci(p.rise, p.rise_ci, "{:.3f}") for p in f.per_N)
        fit = (
            [
                value_ci(f.exponent, f.exponent_ci, "{:.2f}"),
                value_ci(f.slope, f.slope_ci, "{:,.0f}"),
                value_ci(f.intercept, f.intercept_ci, "{:,.0f}"),
                "-" if f.quadratic is None else value_ci(f.quadratic, f.quadratic_ci, "{:,.0f}"),
            ]
            if f.exponent is not None
            else [f"not fitted: {f.reason}", "-", "-", "-"]
        )
        lines.append(f"| {f.width} | {f.lr:g} | {ns} | {meds} | {rises} | {' | '.join(fit)} |")
    return "\n".join([*lines, "", f"Method: {axis.method}."])


COMMANDS = {"lr": lr, "kinf": kinf}
RENDER = {"lr": lr_text, "kinf": kinf_text}
FIGURES = {"kinf": kinf_figure}
