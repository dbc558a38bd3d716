"""What each seed of a classification run did: six classes, each what its name says.

An acquired seed (t_ICL >= 0) is placed by two facts about its ICL accuracy after t_ICL: did it have a
*lasting fall* (`lasting` consecutive evaluations below `level`: the rule of `icl-race analyze levers
transience`, level 0.9, 10 evaluations), and does it *end* below `level` (its last finite evaluation)?

                        ends >= level    ends < level
    no lasting fall     persistent       falling
    a lasting fall      recovered        transient

    persistent  acquired ICL and held it: no lasting fall, and at or above `level` at the end
    falling     acquired, then below `level` at the end, for fewer than `lasting` evaluations: a fall
                too recent to call lasting (the budget ended during it)
    transient   acquired, then a lasting fall, and still below `level` at the end: ICL lost
    recovered   acquired, a lasting fall, then back at or above `level` at the end
    censored    never acquired within what the run observed
    diverged    a non-finite loss; excluded from every other statistic, counted here

So no seed that ends with ICL accuracy below `level` (e.g. at chance) is persistent. The fall time is the
first evaluation of the first lasting stretch (transient and recovered seeds; -1 otherwise). A seed's
curve may end in NaN (a seed retired before the run's end holds NaN after its retirement): its final
accuracy is its last finite evaluation, and a stretch below `level` that runs into the NaN tail counts
with the evaluations it has. Pure numpy; no jax. docs/outcomes.md states the rules for readers.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from icl_race.analysis import survival as sv
from icl_race.analysis.events import LASTING, LEVEL
from icl_race.analysis.record import Record

CLASSES = ("persistent", "recovered", "falling", "transient", "censored", "diverged")
KEPT = CLASSES[:-1]  # the classes of the seeds every statistic keeps (all but diverged)
ACQUIRED = CLASSES[:4]  # the classes of the seeds that acquired ICL


@dataclasses.dataclass(frozen=True)
class SeedCounts(Record):
    """A cell's seeds and how many of them acquired ICL, as a study's row states them (`seed_counts`)."""

    seeds: int
    acquired: int


def seed_counts(acquired_S: np.ndarray) -> SeedCounts:
    """The counts of one bool per seed (True: acquired)."""
    return SeedCounts(int(acquired_S.size), int(acquired_S.sum()))


def last_finite(values_SxT: np.ndarray) -> np.ndarray:
    """Each row's last finite value (NaN for a row with none, or no columns)."""
    v = np.asarray(values_SxT, float)
    if v.ndim != 2 or v.shape[1] == 0:
        return np.full(v.shape[0] if v.ndim else 0, np.nan)
    finite = np.isfinite(v)
    idx = v.shape[1] - 1 - np.argmax(finite[:, ::-1], axis=1)
    out = v[np.arange(v.shape[0]), idx]
    return np.where(finite.any(axis=1), out, np.nan)


def lasting_fall(
    icl_acc_SxT: np.ndarray, steps_T: np.ndarray, t_icl_S: np.ndarray, level: float = LEVEL, lasting: int = LASTING
) -> np.ndarray:
    """Per seed, the step of the first evaluation after t_ICL that starts `lasting` consecutive
    evaluations below `level`; -1 when there is none (or the seed never acquired)."""
    acc = np.asarray(icl_acc_SxT, float)
    steps = np.asarray(steps_T)
    t = np.asarray(t_icl_S)
    S = t.size
    fall = np.full(S, -1, np.int64)
    if acc.ndim != 2 or acc.shape[1] == 0:
        return fall
    below_SxT = (steps[None, :] > t[:, None]) & (t[:, None] >= 0) & (acc < level)  # NaN < level is False
    run_S, start_S = np.zeros(S, int), np.zeros(S, int)
    for j in range(acc.shape[1]):
        start_S = np.where(below_SxT[:, j] & (run_S == 0), j, start_S)
        run_S = np.where(below_SxT[:, j], run_S + 1, 0)
        hit = (run_S >= lasting) & (fall < 0)
        fall = np.where(hit, steps[start_S], fall)
    return fall


@dataclasses.dataclass(frozen=True)
class Count(sv.Proportion):
    """One class's count among all seeds, with its interval (`Outcomes.counts`)."""

    ci_method: str


@dataclasses.dataclass(frozen=True)
class Spread(Record):
    """Median and range of a class's final accuracies."""

    median: float
    min: float
    max: float


@dataclasses.dataclass(frozen=True)
class ClassSummary(Record):
    """One class: its seeds and their final accuracies (`class_summary`)."""

    n: int
    final_icl_acc: Spread | None
    final_iwl_acc: Spread | None


@dataclasses.dataclass(frozen=True)
class Outcomes:
    """Every seed's class (over all seeds, diverged included) and the per-class summaries."""

    level: float
    lasting: int
    classes_S: np.ndarray  # [S] str, one of CLASSES
    fall_S: np.ndarray  # [S] step of the lasting fall, -1 = none
    final_icl_S: np.ndarray  # [S] last finite ICL accuracy
    final_iwl_S: np.ndarray  # [S] last finite IWL accuracy

    def count(self, name: str) -> int:
        return int(np.sum(self.classes_S == name))

    def counts(self) -> dict[str, Count]:
        """Each class's count with its Wilson 95% CI as a fraction of all seeds."""
        return {c: Count.of(self.count(c), int(self.classes_S.size), ci_method="Wilson score 95%") for c in CLASSES}


def classify(
    t_icl_S: np.ndarray,
    diverged_S: np.ndarray,
    icl_acc_SxT: np.ndarray,
    iwl_acc_SxT: np.ndarray,
    steps_T: np.ndarray,
    level: float = LEVEL,
    lasting: int = LASTING,
) -> Outcomes:
    """Outcomes of all S seeds (arrays over every seed, diverged ones included)."""
    t = np.asarray(t_icl_S, np.int64)
    div = np.asarray(diverged_S, bool)
    fall = np.where(div, -1, lasting_fall(icl_acc_SxT, steps_T, t, level, lasting))
    final_icl, final_iwl = last_finite(icl_acc_SxT), last_finite(iwl_acc_SxT)
    below = final_icl < level  # NaN (no finite evaluation) is not below
    acquired = np.where(fall >= 0, np.where(below, "transient", "recovered"), np.where(below, "falling", "persistent"))
    classes = np.where(div, "diverged", np.where(t < 0, "censored", acquired))
    return Outcomes(level, lasting, classes.astype(str), fall, final_icl, final_iwl)


def of_results(
    times: dict[str, np.ndarray], diverged_S: np.ndarray, curves: dict[str, np.ndarray], steps_T: np.ndarray
) -> Outcomes | None:
    """`classify` on a run's arrays (every seed; event -> t[S], probe -> [S, T]); None for a system
    without an ICL event and ICL/IWL accuracy curves (the classes are about acquiring ICL)."""
    if "icl" not in times or not {"icl_acc", "iwl_acc"} <= curves.keys():
        return None
    return classify(times["icl"], diverged_S, curves["icl_acc"], curves["iwl_acc"], steps_T)


def fall_survival(o: Outcomes, t_icl_S: np.ndarray, censor_at: float) -> sv.KaplanMeier | None:
    """Kaplan-Meier of the time from t_ICL to the lasting fall over the acquired seeds (those without one,
    persistent and falling, censored at `censor_at` - t_ICL); None without an acquired seed."""
    acq = np.isin(o.classes_S, ACQUIRED)
    if not acq.any():
        return None
    t = np.asarray(t_icl_S, float)[acq]
    fell = o.fall_S[acq] >= 0
    times = np.where(fell, o.fall_S[acq] - t, float(censor_at) - t)
    return sv.kaplan_meier(np.maximum(times, 1.0), fell)


def _spread(v: np.ndarray) -> Spread | None:
    v = v[np.isfinite(v)]
    return Spread(float(np.median(v)), float(v.min()), float(v.max())) if v.size else None


def class_summary(o: Outcomes) -> dict[str, ClassSummary]:
    """Per class but diverged: n, median and range of the final ICL and IWL accuracies."""
    masks = {c: o.classes_S == c for c in KEPT}
    return {
        c: ClassSummary(int(m.sum()), _spread(o.final_icl_S[m]), _spread(o.final_iwl_S[m])) for c, m in masks.items()
    }
