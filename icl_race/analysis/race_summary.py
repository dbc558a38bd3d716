"""The race study's summaries of finished runs (`analysis.runs.FinishedRun`, read through their typed config)
with the per-seed statistics of `analysis.race`: typed records, which `icl-race analyze race ...`
(studies/race.py) writes and renders. Every bootstrap draws from a fresh `Draws.bootstrap()` (the command's
root, --seed, alone), so conditions of equal seed counts resample the same seed positions (paired by seed id).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from icl_race.analysis import race
from icl_race.analysis.compare import ratio_of_boots
from icl_race.analysis.draws import Draws
from icl_race.analysis.outcome import SeedCounts, seed_counts
from icl_race.analysis.race import AfterMemorization, KmMedian, LossFit
from icl_race.analysis.record import INLINE, NOT_JSON, OMIT_NONE, NotFitted, Record
from icl_race.analysis.runs import FinishedRun
from icl_race.analysis.survival import censor_time, proportion_ci
from icl_race.analysis.threshold import Slope, interval_verdict, power_law_slope, sign_verdict


def _censor_at(run: FinishedRun, *t_S) -> float:
    """The censoring time of a cell (analysis.survival.censor_time) for the first passages `t_S`."""
    return float(censor_time(int(run.budget), int(run.steps_run), any(np.any(t < 0) for t in t_S)))


AT_FALL = ("c3", "iwl_loss")  # curves read at each seed's fall: the memory path's c3, and the IWL test loss


@dataclass(frozen=True)
class TransienceCell(Record):
    """One weight decay of summarize_transience. Seed medians of the curves: a seed whose MLP reads the
    attention output can have a huge c3 without it."""

    weight_decay_attn: float
    counts: SeedCounts = field(metadata=INLINE)
    fell: int
    budget: float
    rise: KmMedian
    fall: KmMedian
    t_icl: list
    t_fall: list
    at_fall: dict  # AT_FALL probe -> its value at each fallen seed's fall
    at_fall_median: dict  # the same, its median (probes with a fallen seed)
    eval_steps: list
    icl_acc_mean: list
    c3_seed_median: list | None = field(metadata=OMIT_NONE)  # c3 is absent in runs made before its probe
    iwl_loss_seed_median: list
    loss_relation: LossFit
    at_fall_boot: dict = field(repr=False, metadata=NOT_JSON)  # at_fall_median's bootstrap replicates


@dataclass(frozen=True)
class Trend(Record):
    """A log10-log10 slope against weight decay with its verdict: on its sign (`verdict`: the fall) or on
    slope 1 (`verdict_slope_1`: the values at the fall)."""

    fit: Slope | NotFitted = field(metadata=INLINE)
    verdict: str | None = field(default=None, metadata=OMIT_NONE)
    verdict_slope_1: str | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True)
class Transience(Record):
    """summarize_transience's cells (per weight decay) and the slopes across them (`vs_wd_loglog`)."""

    level: float
    cells: list[TransienceCell]
    vs_wd_loglog: dict[str, Trend]


def _transience_cell(run: FinishedRun, level: float, draws: Draws, rng: np.random.Generator) -> TransienceCell:
    steps, t_icl, icl_acc = run.eval_steps, run.t("icl"), run.curve("icl_acc")
    acquired = t_icl >= 0
    t_fall = race.fall_times(icl_acc, steps, t_icl, level)
    fell = t_fall >= 0
    T = _censor_at(run, t_icl, t_fall[acquired])
    probes = [k for k in AT_FALL if k in run.curves]
    at_fall = {k: run.curve(k)[fell, np.searchsorted(steps, t_fall[fell])] for k in probes}
    seed_median = {k: np.median(run.curve(k), 0).tolist() for k in probes}
    return TransienceCell(
        run.cfg.train.weight_decay_attn,
        seed_counts(acquired),
        int(fell.sum()),
        T,
        race.km_summary(t_icl, T, draws.bootstrap()),
        race.km_summary(t_fall[acquired], T, draws.bootstrap()),
        t_icl.tolist(),
        t_fall.tolist(),
        {k: v.tolist() for k, v in at_fall.items()},
        {k: float(np.median(v)) for k, v in at_fall.items() if v.size},
        steps.tolist(),
        icl_acc.mean(0).tolist(),
        seed_median.get("c3"),
        seed_median["iwl_loss"],
        race.loss_relation(run.curve("icl_loss"), run.curve("iwl_loss"), steps, t_icl, draws.bootstrap()),
        {k: np.median(rng.choice(v, (draws.n_boot, v.size)), axis=1) for k, v in at_fall.items() if v.size},
    )


def summarize_transience(runs: Sequence[FinishedRun], draws: Draws, level: float = 0.9) -> Transience:
    """Per weight decay (train.weight_decay_attn) cell: rise (t_ICL) and fall (first evaluation after
    t_ICL with ICL accuracy < level) KM medians with CIs; the seed-mean ICL accuracy and the seed-median
    curves of the MLP path's c3 = <exp(-phi+)> and of L_IWL; the values of c3 and of L_IWL at each fallen seed's fall (L_IWL
    = <softplus(-m)> ~ <exp(-m)> once items are memorized: c3 of the whole model's logit on IWL
    queries); the loss relation. Across cells, log10-log10 slopes against weight decay of the fall
    median (theory: stronger L2, sooner fall: slope < 0) and of the medians at the fall.
    [inferred, not from the paper] In the minimal model after memorization, dw/dt ~ a c3 e^(-w a) -
    wd w, so w settles where wd w e^(w a) = a c3; if ICL is lost once w falls to a fixed level, c3 at
    the fall is proportional to wd: slope 1."""
    rng = draws.rng()  # the values at the fall resampled, one cell after another
    cells = [_transience_cell(r, level, draws, rng) for r in sorted(runs, key=lambda r: r.cfg.train.weight_decay_attn)]
    reached = [c for c in cells if c.fall.median]
    trends = {}
    if len(reached) >= 2:
        # the fall median's slope, then those of the values at the fall present in every reached cell
        values: dict[str, tuple[list, list]] = {
            "fall": ([c.fall.median for c in reached], [c.fall.boot for c in reached])
        }
        for k in AT_FALL:
            if all(k in c.at_fall_median for c in reached):
                values[k] = ([c.at_fall_median[k] for c in reached], [c.at_fall_boot[k] for c in reached])
        for k, (med, boot) in values.items():
            fit = power_law_slope(np.log10([c.weight_decay_attn for c in reached]), np.log10(med), np.log10(boot))
            ci = fit.slope_ci if isinstance(fit, Slope) else None
            fall = k == "fall"
            trends[k] = Trend(fit, sign_verdict(ci, -1) if fall else None, None if fall else interval_verdict(ci, 1.0))
    return Transience(level, cells, trends)


@dataclass(frozen=True)
class Condition(Record):
    """One condition of summarize_independence: its cell, the memorization time (first IWL accuracy above
    the level) and t_ICL (KM medians), the IWL accuracy curve (seed mean, 10% and 90% quantiles)."""

    K: int | None
    variant: str | None
    width: int
    lr: float
    seeds: int
    budget: float
    memorization: KmMedian
    final_iwl_acc: float
    eval_steps: list
    iwl_acc_mean: list
    iwl_acc_q: list
    t_icl: KmMedian | None = field(default=None, metadata=OMIT_NONE)  # an MLP-only run has no ICL event
    t_icl_seeds: list | None = field(default=None, metadata=OMIT_NONE)


def _condition(run: FinishedRun, draws: Draws, level: float) -> Condition:
    cfg, iwl_acc = run.cfg, run.curve("iwl_acc")
    t_icl = run.t("icl") if "icl" in run.times else None
    t_mem = race.first_passage(iwl_acc, run.eval_steps, level)
    T = _censor_at(run, t_mem, *([] if t_icl is None else [t_icl]))
    return Condition(
        getattr(cfg.task, "K", None),
        getattr(cfg.task, "variant", None),
        cfg.model.width,
        cfg.train.lr,
        int(iwl_acc.shape[0]),
        T,
        race.km_summary(t_mem, T, draws.bootstrap()),
        float(iwl_acc[:, -1].mean()),
        run.eval_steps.tolist(),
        iwl_acc.mean(0).tolist(),
        np.quantile(iwl_acc, [0.1, 0.9], axis=0).tolist(),
        *([] if t_icl is None else [race.km_summary(t_icl, T, draws.bootstrap()), t_icl.tolist()]),
    )


@dataclass(frozen=True)
class Ratio(Record):
    """median(a) / median(b) of two conditions' KM medians, None where one is not reached."""

    ratio: float | None
    ratio_ci: list


@dataclass(frozen=True)
class Ablation(Record):
    """The conditions of one part of summarize_independence, by name, and their ratios."""

    conditions: dict[str, Condition]
    ratios: dict[str, Ratio]


def _ablation(conds: dict[str, Condition], pairs: dict, key: str) -> Ablation:
    """conds with median(a) / median(b) of their `key` KmMedian for each pair present: the replicates of
    equal-size conditions resample the same seed positions, so the CI is paired by seed id (right when the
    conditions share seed ids, as a sweep's cells do)."""
    ratios = {}
    for name, (a, b) in pairs.items():
        if a in conds and b in conds:
            x, y = getattr(conds[a], key), getattr(conds[b], key)
            r = ratio_of_boots(y.median, x.median, y.boot, x.boot)
            ratios[name] = Ratio(r.ratio, list(r.ci))
    return Ablation(conds, ratios)


@dataclass(frozen=True)
class Independence(Record):
    """summarize_independence's two parts: the memorization time and t_ICL per condition, with ratios."""

    level: float
    memorization: Ablation
    t_icl: Ablation


def summarize_independence(
    memorization_runs: Sequence[FinishedRun],
    t_icl_runs: Sequence[FinishedRun],
    mlp_only_runs: Sequence[FinishedRun],
    draws: Draws,
    level: float = 0.9,
) -> Independence:
    """memorization_runs: a sweep over model.freeze (none, attention); t_icl_runs: a sweep over
    model.freeze (none, mlp) x task.variant; mlp_only_runs: MLP-only runs at matched K, width, lr and
    budget (named by task.input_scale). Memorization time = the first evaluation with IWL accuracy >
    `level` (KM median, censored at the budget); ratios of KM medians with seed-bootstrap CIs (paired
    by seed id)."""
    mem = {getattr(r.cfg.model, "freeze", "none"): _condition(r, draws, level) for r in memorization_runs}
    mem |= {
        f"mlp_only x{getattr(r.cfg.task, 'input_scale', 1.0):g}": _condition(r, draws, level) for r in mlp_only_runs
    }
    icl = {
        f"{r.cfg.task.variant}, freeze {getattr(r.cfg.model, 'freeze', 'none')}": _condition(r, draws, level)
        for r in t_icl_runs
    }
    mem_pairs = {f"{a} / {b}": (a, b) for a in ("attention", "none") for b in mem if b.startswith("mlp_only")}
    icl_pairs = {
        f"{v}: mlp_frozen_over_trained": (f"{v}, freeze mlp", f"{v}, freeze none") for v in ("standard", "infinite")
    }
    return Independence(level, _ablation(mem, mem_pairs, "memorization"), _ablation(icl, icl_pairs, "t_icl"))


@dataclass(frozen=True)
class LossCell(Record):
    """One cell (weight decay) of summarize_loss_relations: its fits by label ("x > -inf", "x > <min_x>")."""

    weight_decay_attn: float
    fits: dict[str, LossFit] = field(metadata=INLINE)


@dataclass(frozen=True)
class LossRelations(Record):
    """summarize_loss_relations' cells (per weight decay)."""

    min_x: float
    cells: list[LossCell]


def summarize_loss_relations(runs: Sequence[FinishedRun], draws: Draws, min_x: float = 0.5) -> LossRelations:
    """loss_relation per cell (train.weight_decay_attn), on all points and on those with x > min_x."""
    cells = []
    for run in runs:
        curves = (run.curve("icl_loss"), run.curve("iwl_loss"), run.eval_steps, run.t("icl"))
        fits = {f"x > {m:g}": race.loss_relation(*curves, draws.bootstrap(), m) for m in (-np.inf, min_x)}
        cells.append(LossCell(run.cfg.train.weight_decay_attn, fits))
    return LossRelations(min_x, cells)


@dataclass(frozen=True)
class Settling(Record):
    """summarize_settling's cells (after_memorization per task.K) and their pooled counts."""

    level: float
    cells: list[AfterMemorization]
    memorized_first: int
    acquired_after: int
    fraction_ci: list  # Wilson 95% of acquired_after / memorized_first


def summarize_settling(runs: Sequence[FinishedRun], level: float = 0.9) -> Settling:
    """after_memorization per cell (task.K) and pooled, with the Wilson 95% CI of the fraction of
    memorized-first seeds that acquired ICL later: the bet train.settle_iwl = level makes."""
    cells = [
        race.after_memorization(
            r.t("icl"), r.curve("iwl_acc"), r.curve("icl_acc"), r.eval_steps, level, getattr(r.cfg.task, "K", None)
        )
        for r in runs
    ]
    cells.sort(key=lambda c: c.K or 0)
    k, n = sum(c.acquired_after for c in cells), sum(c.memorized_first for c in cells)
    return Settling(level, cells, n, k, list(proportion_ci(k, n)))
