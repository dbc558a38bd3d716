"""One-line warnings where a user would want them, computed from a config or a run's numbers (no I/O);
`run` / `demo` print them before training and in the summary, `sweep` after its cells, `report` in
report.md and on stderr (docs/warnings.md lists them).

    budget(cfg)                      the budget is shorter than the expected t_ICL (at K = infinity, or the
                                     earliest at finite K)
    nothing_acquired(...)            no seed acquired ICL within the budget, naming the optimizer and lr
    diverged(...)                    seeds diverged, naming the optimizer and lr
    outside_regime(rise)             the median rise fraction is above analysis.regime.RISE_BOUND
    of_run(run), of_sweep(sweep)     those that apply to a finished run or sweep directory (an unfinished
                                     run's: the diverged seeds only)

The expected t_ICL comes from the scale bridge's measurements (SCALE_FIT): ICL's clock is steps x lr
(gradient flow), and the Kaplan-Meier median of t_ICL x lr was measured at K = infinity with SGD for MLP
widths 64-512 and N = 32-128, 16 seeds per cell.
"""

from __future__ import annotations

import math

import numpy as np

from icl_race import rundir
from icl_race.configbase import Config

PREFIX = "warning: "
# width -> (lr, {N: KM median t_ICL in steps}, exponent of t_ICL on N over N = 32-128): SGD, K = infinity,
# one-layer model, experiments/scale/README.md (Results, item 2; results/kinf.json); width 64's row is
# experiments/regime/README.md's. Width 512 ran at its bridge lr 0.03 (t_ICL x lr = lr 0.01's, item 1).
SCALE_FIT: dict[int, tuple[float, dict[int, float], float]] = {
    64: (0.1, {32: 2480, 64: 6320, 128: 21280}, 1.55),
    128: (0.1, {32: 1960, 64: 4880, 128: 15840}, 1.51),
    256: (0.1, {32: 1640, 64: 4400, 128: 11840}, 1.43),
    512: (0.03, {32: 4389, 64: 9443, 100: 19684, 128: 26999}, 1.33),
}
SOURCE = "scale-bridge fits, experiments/scale/README.md item 2"
N_RANGE = (32, 512)  # measured over N = 32-128; extrapolated with the exponent to 4x the largest, no further
ADAM_LR = 1e-3  # Adam's calibrated lr at N = 32 (experiments/levers/adam.toml: 64/64 acquired at K = infinity)


def _log_t_lr(width: int, N: int) -> float:
    """log(t_ICL x lr) of one measured width at N >= 32: piecewise linear in log N between the measured N,
    the fitted exponent beyond the largest."""
    lr, t_N, exponent = SCALE_FIT[width]
    ns = sorted(t_N)
    logs = [math.log(t_N[n] * lr) for n in ns]
    if N >= ns[-1]:
        return logs[-1] + exponent * math.log(N / ns[-1])
    return float(np.interp(math.log(N), np.log(ns), logs))


def expected_t_icl(N: int, width: int, lr: float) -> float | None:
    """The expected KM median t_ICL (steps) at K = infinity with SGD, from SCALE_FIT: interpolated in log
    width between the measured widths (the nearest one outside 64-512); None outside N_RANGE (below N = 32
    nothing was measured in the abrupt regime; far beyond N = 128 the exponent is a guess)."""
    if not N_RANGE[0] <= N <= N_RANGE[1] or lr <= 0:
        return None
    widths = sorted(SCALE_FIT)
    w = min(max(width, widths[0]), widths[-1])
    lo = max(x for x in widths if x <= w)
    hi = min(x for x in widths if x >= w)
    if lo == hi:
        log_t_lr = _log_t_lr(lo, N)
    else:
        f = math.log(w / lo) / math.log(hi / lo)
        log_t_lr = (1 - f) * _log_t_lr(lo, N) + f * _log_t_lr(hi, N)
    return math.exp(log_t_lr) / lr


def _expected(cfg: Config) -> float | None:
    """`expected_t_icl` for a config the fits describe (the race's one-layer transformer trained with SGD,
    standard or infinite contexts, no data lever); None for any other."""
    t, m, tr = cfg.task, cfg.model, cfg.train
    if getattr(t, "kind", None) != "classification" or getattr(m, "kind", None) != "transformer":
        return None
    plain = (
        t.variant in ("standard", "infinite")
        and t.zipf_alpha == 0
        and t.epsilon == 0
        and t.burstiness == 0
        and m.layers == 1
        and m.freeze == "none"
        and m.qk_init_scale == 1
        and tr.optimizer == "sgd"
    )
    return expected_t_icl(t.N, m.width, tr.lr) if plain else None


def _setting(cfg: Config) -> str:
    return f"train.optimizer {cfg.train.optimizer}, train.lr {cfg.train.lr:g}"


# At finite K a few times above K*, ICL came sooner than at K = infinity: 1.4x at N = 16, 2.1x at N = 32,
# 3.1x at N = 64, the gap growing with N (experiments/regime/README.md, "t_ICL against K"; width 64, lr 0.1,
# 16 seeds per cell). So at finite K a budget is surely short only below t_ICL(K = infinity) / 3.1, and only
# where that was measured: beyond N = 64 the speed-up may be larger, and nothing is said.
FINITE_K_SPEEDUP, FINITE_K_N_MAX = 3.1, 64


def budget(cfg: Config, where: str = "") -> str | None:
    """The budget (train.steps) is shorter than the expected t_ICL: at K = infinity (task.variant =
    "infinite") the scale bridge's; at finite K the earliest measured, that over FINITE_K_SPEEDUP (N <= 64
    only). Below either, fewer than half the seeds are expected to acquire ICL."""
    t = _expected(cfg)
    if t is None:
        return None
    setting = f"N = {cfg.task.N}, width {cfg.model.width}, lr {cfg.train.lr:g}"
    if cfg.task.variant == "infinite":
        if cfg.train.steps >= t:
            return None
        short = f"the expected t_ICL at K = infinity, ~{t:,.0f} steps for {setting} ({SOURCE})"
    else:
        earliest = t / FINITE_K_SPEEDUP
        if cfg.task.N > FINITE_K_N_MAX or cfg.train.steps >= earliest:
            return None
        short = (
            f"the earliest t_ICL expected at any finite K, ~{earliest:,.0f} steps for {setting} (the t_ICL at "
            f"K = infinity, ~{t:,.0f} ({SOURCE}), over {FINITE_K_SPEEDUP}, the largest speed-up measured a few "
            "times above K*, experiments/regime/README.md)"
        )
    return f"{PREFIX}{where}train.steps = {cfg.train.steps:,} is shorter than {short}: most seeds may not acquire ICL; raise train.steps"


def _hint(cfg: Config) -> str:
    if cfg.train.optimizer in ("adam", "adamw") and cfg.train.lr > 10 * ADAM_LR:
        return f"Adam's calibrated lr is {ADAM_LR:g} (experiments/levers/adam.toml)"
    t = _expected(cfg)
    if t is not None and t > cfg.train.steps:
        return f"the expected t_ICL at K = infinity is ~{t:,.0f} steps ({SOURCE}): raise train.steps"
    return "raise train.steps, lower train.lr or raise task.K"


def nothing_acquired(cfg: Config, seeds: int, budget: int, where: str = "") -> str:
    return f"{PREFIX}{where}no seed acquired ICL within {budget:,} steps (0 of {seeds}; {_setting(cfg)}): {_hint(cfg)}"


def diverged(cfg: Config, k: int, seeds: int, where: str = "") -> str:
    return f"{PREFIX}{where}{k} of {seeds} seeds diverged (a non-finite loss; {_setting(cfg)}): lower train.lr" + (
        f" (Adam's calibrated lr is {ADAM_LR:g})" if cfg.train.optimizer in ("adam", "adamw") else ""
    )


def outside_regime(rise: float | None) -> str | None:
    """The median rise fraction above the abrupt-regime bound: ICL climbs to the threshold, not a jump."""
    # Imported here: analysis.regime needs scipy (~1-2 s), which run's and sweep's budget warning, said
    # before their first line, must not pay.
    from icl_race.analysis.regime import RISE_BOUND as bound

    if rise is None or not rise > bound:
        return None
    return (
        f"{PREFIX}outside the abrupt regime: median rise fraction {rise:.2f} > {bound:.2f} (analysis/regime.py): "
        "ICL climbs to the threshold rather than jumping, so t_ICL times a slow crossing (docs/regime.md)"
    )


def _counts(run: rundir.Run) -> tuple[int, int, int]:
    """(seeds, acquired, diverged) of a run's headline event."""
    t = run.times[run.headline]
    return int(t.size), int(np.sum(t >= 0)), int(np.sum(run.diverged))


def of_run(run: rundir.Run, rise: float | None) -> list[str]:
    """The warnings of a finished classification run (none for another system): nothing acquired, seeds
    diverged, outside the abrupt regime (`rise`: the median rise fraction, None when not recorded). Of an
    unfinished run (`run.partial`), only the diverged seeds: a seed not yet acquired may still acquire, and
    the regime is judged on the seeds acquired so far, so those two verdicts wait for the run's end."""
    if run.headline != "icl":
        return []
    seeds, acquired, div = _counts(run)
    if run.partial:
        return [diverged(run.cfg, div, seeds)] if div else []
    out = [nothing_acquired(run.cfg, seeds, run.censor_at())] if not acquired else []
    out += [diverged(run.cfg, div, seeds)] if div else []
    return out + [w for w in [outside_regime(rise)] if w]


def of_sweep(sweep: rundir.SweepDir) -> list[str]:
    """The warnings of a sweep's finished classification cells: nothing acquired in any of them (said of
    the finished ones only while others are training or stopped); else, per setting of (train.optimizer,
    train.lr) when the sweep varies them, a setting that acquired nothing or diverged; without such a grid,
    the diverged seeds of all cells."""
    runs = [c.run for c in sweep.cells if c.run is not None and c.run.headline == "icl"]
    if not runs:
        return []
    groups: dict[tuple[str, float], list[rundir.Run]] = {}
    for r in runs:
        groups.setdefault((r.cfg.train.optimizer, r.cfg.train.lr), []).append(r)
    total = np.sum([_counts(r) for r in runs], axis=0)
    if not total[1]:
        st = sweep.state  # its grid's cells, those not started included
        every = f"every finished cell ({st.finished} of {st.cells}): " if sweep.partial else "every cell: "
        return [nothing_acquired(runs[0].cfg, int(total[0]), max(r.censor_at() for r in runs), every)]
    out = []
    for group in groups.values():
        seeds, acquired, div = (int(x) for x in np.sum([_counts(r) for r in group], axis=0))
        where = f"{len(group)} cell{'s' * (len(group) > 1)}: "
        if len(groups) > 1 and not acquired:
            out.append(nothing_acquired(group[0].cfg, seeds, max(r.censor_at() for r in group), where))
        if div:
            out.append(diverged(group[0].cfg, div, seeds, where))
    return out
