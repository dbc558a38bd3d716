"""The race's transformer-side claims (experiments/race/, arXiv 2412.00104 §5): reads run or sweep
directories for `icl_race.analysis.race`, its typed results with their text; the figures through
`icl_race.plots.race`.

  transience DIR                       --set level=0.9
  loss DIR...                          --set min_x=0.5
  independence MEM T_ICL MLP_ONLY...   --set level=0.9   (the directories in that order)
  settle DIR...                        --set level=0.9   (train.settle_iwl's bet, on runs without it)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from icl_race.analysis import race
from icl_race.analysis.text import value_ci
from icl_race.config import ConfigError
from icl_race.studies.inputs import FRACTION, Option, runs_of

# ---- typed results (`icl-race analyze race ...`) --------------------------------------------------


def _med(d: dict, key: str = "median", fmt: str = "{:.0f}") -> str:
    return value_ci(d.get(key), d.get(f"{key}_ci"), fmt)


def _fit_text(fit: dict, sep: str = ",") -> str:
    """A loss_relation fit's slope, intercept and prop with their CIs, `sep` after all but the last
    (Transience's cells run them together: "")."""
    return f"{sep} ".join(f"{k} {_med(fit, k, '{:.2f}')}" for k in ("slope", "intercept", "prop"))


@dataclass(frozen=True)
class Transience:
    """summarize_transience: per weight-decay cell (`cells`) the rise and fall of ICL accuracy through
    `level`, c3 and L_IWL at the fall and the loss relation; across cells (`vs_wd_loglog`) the log-log
    slopes of the fall and of those values against weight decay."""

    level: float
    cells: list
    vs_wd_loglog: dict

    def text(self) -> str:
        lines = []
        for c in self.cells:
            lines.append(
                f"wd {c['weight_decay_attn']:g}: acquired {c['acquired']}/{c['seeds']}, rise {_med(c['rise'])}, "
                f"fell {c['fell']}/{c['acquired']}, fall {_med(c['fall'])} (budget {c['budget']:.0f}), "
                f"medians at the fall {c['at_fall_median']}, loss relation {_fit_text(c['loss_relation'], '')}"
            )
        for k, t in self.vs_wd_loglog.items():
            verdict = t.get("verdict") or f"slope 1: {t['verdict_slope_1']}"
            what = "fall median" if k == "fall" else f"median {k} at the fall"
            lines.append(f"log10 {what} vs log10 wd: slope {_med(t, 'slope', '{:.2f}')} -> {verdict}")
        return "\n".join(lines)


@dataclass(frozen=True)
class LossRelations:
    """summarize_loss_relations: per cell (weight decay), loss_relation over every point after t_ICL and over those with x > min_x;
    `points` (not in the JSON) holds the first fit's x and y for its figure."""

    min_x: float
    cells: list  # {"weight_decay_attn", "x > -inf": fit, "x > <min_x>": fit}, fits without x and y
    points: list = field(default_factory=list, metadata={"json": False})  # per cell (wd, x, y, fit)

    def text(self) -> str:
        lines = []
        for c in self.cells:
            for label, fit in c.items():
                if label == "weight_decay_attn":
                    continue
                lines.append(
                    f"wd {c['weight_decay_attn']:g}, {label}: {_fit_text(fit)} "
                    f"({fit['points']} points, {fit['seeds_used']} seeds)"
                )
        return "\n".join(lines)


@dataclass(frozen=True)
class Settling:
    """summarize_settling: after_memorization per cell (task.K) and pooled, with the Wilson 95% CI of the
    fraction of memorized-first seeds that acquired ICL later."""

    level: float
    cells: list  # {"K", **after_memorization}
    memorized_first: int
    acquired_after: int
    fraction_ci: list  # Wilson 95% of acquired_after / memorized_first

    def text(self) -> str:
        lines = []
        for c in self.cells:
            when = "" if c["t_mem_range"] is None else " at steps {:,}-{:,}".format(*c["t_mem_range"])
            peak = "-" if c["max_icl_after"] is None else f"{c['max_icl_after']:.2f}"
            lines.append(
                f"K {c['K']:,}: {c['memorized_first']}/{c['seeds']} seeds memorized (IWL > {self.level:g}) "
                f"before ICL{when}; {c['acquired_after']} of them acquired ICL later; ICL accuracy after "
                f"memorizing at most {peak}"
            )
        lo, hi = self.fraction_ci
        lines.append(
            f"pooled: {self.acquired_after}/{self.memorized_first} memorized-first seeds acquired ICL later "
            f"(Wilson 95% CI {lo:.3f}-{hi:.3f})"
        )
        return "\n".join(lines)


@dataclass(frozen=True)
class Independence:
    """summarize_independence: the memorization time (`memorization`) and t_ICL (`t_icl`) per condition,
    a sub-circuit frozen at init or the MLP alone, with their ratios to the unfrozen model."""

    level: float
    memorization: dict
    t_icl: dict

    def text(self) -> str:
        lines = []
        for part in ("memorization", "t_icl"):
            s = getattr(self, part)
            for name, c in s["conditions"].items():
                extra = f", t_ICL {_med(c['t_icl'])}" if "t_icl" in c and part == "t_icl" else ""
                lines.append(
                    f"{part} | {name}: IWL acc > {self.level} at {_med(c['memorization'])} "
                    f"(final IWL acc {c['final_iwl_acc']:.3f}){extra}"
                )
            for name, r in s["ratios"].items():
                lines.append(f"{part} ratio {name}: {_med(r, 'ratio', '{:.2f}')}")
        return "\n".join(lines)


# ---- the subcommands ------------------------------------------------------------------------------


def transience(dirs, *, level: float = 0.9, n_boot: int = 1000, seed: int = 0) -> Transience:
    """ICL's rise and fall per weight decay (train.weight_decay_attn) cell; fall = first ICL accuracy
    below `level` after t_ICL."""
    with np.errstate(all="ignore"):
        return Transience(**race.summarize_transience(runs_of("race transience", dirs), level, n_boot, seed))


def loss(dirs, *, min_x: float = 0.5, n_boot: int = 1000, seed: int = 0) -> LossRelations:
    """The loss relation L_ICL vs -1/2 log L_IWL per cell, on every point after t_ICL and on x > min_x."""
    with np.errstate(all="ignore"):
        return LossRelations(**race.summarize_loss_relations(runs_of("race loss", dirs), min_x, n_boot, seed))


def independence(dirs, *, level: float = 0.9, n_boot: int = 1000, seed: int = 0) -> Independence:
    """Directories: the memorization sweep (model.freeze none, attention), the t_ICL sweep (model.freeze
    none, mlp x task.variant), then the MLP-only runs; memorization time = first IWL accuracy > level."""
    if len(dirs) < 3:
        raise ConfigError("analyze race independence: give MEMORIZATION_DIR T_ICL_DIR MLP_ONLY_DIR... (3 or more)")
    with np.errstate(all="ignore"):
        return Independence(
            **race.summarize_independence(
                runs_of("race independence", dirs[:1]),
                runs_of("race independence", dirs[1:2]),
                runs_of("race independence", dirs[2:], ("classification", "memorization")),
                level=level,
                n_boot=n_boot,
                seed=seed,
            )
        )


def settle(dirs, *, level: float = 0.9, n_boot: int = 1000, seed: int = 0) -> Settling:
    """Whether memorization ends the race: per cell, the seeds whose IWL accuracy passed `level` before
    they acquired ICL, and how many of those acquired ICL later. Read runs trained without
    train.settle_iwl (a settled seed's later history is not computed)."""
    runs = runs_of("race settle", dirs)
    if any(r.cfg.train.settle_iwl for r in runs):
        raise ConfigError(
            "analyze race settle: a run trained with train.settle_iwl cannot show what a settled seed "
            "would have done; give runs without it"
        )
    return Settling(**race.summarize_settling(runs, level))


def _transience_figures(result) -> dict:
    from icl_race.plots import race as figures

    return {"": figures.transience(dataclasses.asdict(result))}


def _loss_figures(result) -> dict:
    from icl_race.plots import race as figures

    return {
        f"_wd{wd:g}": figures.loss_relation(np.asarray(x), np.asarray(y), fit, title=f"wd {wd:g}")
        for wd, x, y, fit in result.points
        if len(x)
    }  # a cell with no point after t_ICL: no figure


def _independence_figures(result) -> dict:
    from icl_race.plots import race as figures

    return {"": figures.independence(dataclasses.asdict(result))}


COMMANDS: dict[str, Callable[..., object]] = {
    "transience": transience,
    "loss": loss,
    "independence": independence,
    "settle": settle,
}
OPTIONS = {"level": FRACTION, "min_x": Option(float)}
FIGURES = {"transience": _transience_figures, "loss": _loss_figures, "independence": _independence_figures}
