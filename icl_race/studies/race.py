"""The race's transformer-side claims (experiments/race/, arXiv 2412.00104 §5): reads run or sweep
directories for `icl_race.analysis.race_summary`, whose typed results it returns and renders (`RENDER`);
the figures through `icl_race.plots.race`.

  transience DIR                       --set level=0.9
  loss DIR...                          --set min_x=0.5
  independence MEM T_ICL MLP_ONLY...   --set level=0.9   (the directories in that order)
  settle DIR...                        --set level=0.9   (train.settle_iwl's bet, on runs without it)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from icl_race.analysis import race_summary as race
from icl_race.analysis.draws import Draws
from icl_race.analysis.race import KmMedian, LossFit
from icl_race.analysis.threshold import Slope
from icl_race.config import ConfigError
from icl_race.report.format import value_ci
from icl_race.studies.inputs import FRACTION, Option, runs_of


def transience(dirs, *, level: float = 0.9, draws: Draws = Draws(0, 1000)) -> race.Transience:
    """ICL's rise and fall per weight decay (train.weight_decay_attn) cell; fall = first ICL accuracy
    below `level` after t_ICL."""
    with np.errstate(all="ignore"):
        return race.summarize_transience(runs_of("race transience", dirs), draws, level)


def loss(dirs, *, min_x: float = 0.5, draws: Draws = Draws(0, 1000)) -> race.LossRelations:
    """The loss relation L_ICL vs -1/2 log L_IWL per cell, on every point after t_ICL and on x > min_x."""
    with np.errstate(all="ignore"):
        return race.summarize_loss_relations(runs_of("race loss", dirs), draws, min_x)


def independence(dirs, *, level: float = 0.9, draws: Draws = Draws(0, 1000)) -> race.Independence:
    """Directories: the memorization sweep (model.freeze none, attention), the t_ICL sweep (model.freeze
    none, mlp x task.variant), then the MLP-only runs; memorization time = first IWL accuracy > level."""
    if len(dirs) < 3:
        raise ConfigError("analyze race independence: give MEMORIZATION_DIR T_ICL_DIR MLP_ONLY_DIR... (3 or more)")
    with np.errstate(all="ignore"):
        return race.summarize_independence(
            runs_of("race independence", dirs[:1]),
            runs_of("race independence", dirs[1:2]),
            runs_of("race independence", dirs[2:], ("classification", "memorization")),
            draws,
            level,
        )


def settle(dirs, *, level: float = 0.9) -> race.Settling:
    """Whether memorization ends the race: per cell, the seeds whose IWL accuracy passed `level` before
    they acquired ICL, and how many of those acquired ICL later. Read runs trained without
    train.settle_iwl (a settled seed's later history is not computed)."""
    runs = runs_of("race settle", dirs)
    if any(r.cfg.train.settle_iwl for r in runs):
        raise ConfigError(
            "analyze race settle: a run trained with train.settle_iwl cannot show what a settled seed "
            "would have done; give runs without it"
        )
    return race.summarize_settling(runs, level)


def _figures(result: race.Transience | race.LossRelations | race.Independence) -> dict:
    """A result's figures by the suffix of their PNG's name (matplotlib imported only here)."""
    from icl_race.plots import race as figures

    if isinstance(result, race.LossRelations):  # each cell's fit on every point after t_ICL, if it has one
        first = ((c.weight_decay_attn, c.fits["x > -inf"]) for c in result.cells)
        return {f"_wd{wd:g}": figures.loss_relation(fit, title=f"wd {wd:g}") for wd, fit in first if fit.x}
    return {"": figures.transience(result) if isinstance(result, race.Transience) else figures.independence(result)}


def _median(k: KmMedian) -> str:
    return value_ci(k.median, k.median_ci, "{:.0f}")


def _fit(f: LossFit, sep: str = ",") -> str:
    """slope, intercept and prop with their CIs, `sep` after all but the last."""
    return f"{sep} ".join(
        f"{k} {value_ci(getattr(f, k), getattr(f, f'{k}_ci'), '{:.2f}')}" for k in ("slope", "intercept", "prop")
    )


def transience_text(r: race.Transience) -> str:
    lines = [
        f"wd {c.weight_decay_attn:g}: acquired {c.counts.acquired}/{c.counts.seeds}, rise {_median(c.rise)}, "
        f"fell {c.fell}/{c.counts.acquired}, fall {_median(c.fall)} (budget {c.budget:.0f}), "
        f"medians at the fall {c.at_fall_median}, loss relation {_fit(c.loss_relation, '')}"
        for c in r.cells
    ]
    for k, t in r.vs_wd_loglog.items():
        s = t.fit if isinstance(t.fit, Slope) else None
        slope = value_ci(s and s.slope, s and s.slope_ci, "{:.2f}")
        what = "fall median" if k == "fall" else f"median {k} at the fall"
        lines.append(f"log10 {what} vs log10 wd: slope {slope} -> {t.verdict or f'slope 1: {t.verdict_slope_1}'}")
    return "\n".join(lines)


def loss_text(r: race.LossRelations) -> str:
    return "\n".join(
        f"wd {c.weight_decay_attn:g}, {label}: {_fit(fit)} ({fit.points} points, {fit.seeds_used} seeds)"
        for c in r.cells
        for label, fit in c.fits.items()
    )


def independence_text(r: race.Independence) -> str:
    lines = []
    for part, s in (("memorization", r.memorization), ("t_icl", r.t_icl)):
        for name, c in s.conditions.items():
            extra = f", t_ICL {_median(c.t_icl)}" if c.t_icl is not None and part == "t_icl" else ""
            lines.append(
                f"{part} | {name}: IWL acc > {r.level} at {_median(c.memorization)} "
                f"(final IWL acc {c.final_iwl_acc:.3f}){extra}"
            )
        lines += [f"{part} ratio {n}: {value_ci(q.ratio, q.ratio_ci, '{:.2f}')}" for n, q in s.ratios.items()]
    return "\n".join(lines)


def settle_text(r: race.Settling) -> str:
    lines = []
    for c in r.cells:
        when = "" if c.t_mem_range is None else " at steps {:,}-{:,}".format(*c.t_mem_range)
        peak = "-" if c.max_icl_after is None else f"{c.max_icl_after:.2f}"
        lines.append(
            f"K {c.K:,}: {c.memorized_first}/{c.seeds} seeds memorized (IWL > {r.level:g}) "
            f"before ICL{when}; {c.acquired_after} of them acquired ICL later; ICL accuracy after "
            f"memorizing at most {peak}"
        )
    lo, hi = r.fraction_ci
    lines.append(
        f"pooled: {r.acquired_after}/{r.memorized_first} memorized-first seeds acquired ICL later "
        f"(Wilson 95% CI {lo:.3f}-{hi:.3f})"
    )
    return "\n".join(lines)


RENDER = {"transience": transience_text, "loss": loss_text, "independence": independence_text, "settle": settle_text}
COMMANDS: dict[str, Callable[..., object]] = {
    "transience": transience,
    "loss": loss,
    "independence": independence,
    "settle": settle,
}
OPTIONS = {"level": FRACTION, "min_x": Option(float)}
FIGURES = dict.fromkeys(("transience", "loss", "independence"), _figures)
