"""A classification condition's seeds as one typed record, built once from `icl_race.load`'s `Run`.

    Sample.of(run)   every per-seed array of the run (all seeds, diverged ones included and flagged), the
                     censoring time and the few config values the statistics use, read from the typed config
    pool(samples)    samples of the same condition (cells that differ only in seeds or blocking) as one

Every statistic reads the kept (not diverged) seeds through the properties; `outcomes` counts the
diverged ones. Nothing here re-reads a config default: `Run.cfg` is the resolved, validated `Config`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

import numpy as np

from icl_race import rundir
from icl_race.analysis import outcome as oc
from icl_race.analysis.events import level_event
from icl_race.analysis.race import first_passage
from icl_race.config import Config, ConfigError
from icl_race.configbase import FULL_ON_CPU
from icl_race.report.paper import IGNORED_FIELDS, flat
from icl_race.rundir.provenance import platform_of

REQUIRED = ("icl_acc", "iwl_acc")
# Curves a classification run records beside the accuracies, plotted when present.
LOSS_CURVES = ("train_loss", "icl_loss", "iwl_loss")
C_STATISTICS = ("c1", "c2", "c3")
# Per-seed arrays: what pooling concatenates and deduplicates.
PER_SEED = ("seed_ids", "root_seeds", "diverged", "t_icl", "t_start", "icl_acc", "iwl_acc", "final_icl_ref_acc")


@dataclasses.dataclass(frozen=True, eq=False)
class Sample:
    cells: tuple[str, ...]  # the run directory's name, or the pooled cells' names
    config: dict  # the resolved config, as stored (the paper's differences, the condition)
    cfg: Config
    seed_ids: np.ndarray  # [S]
    root_seeds: np.ndarray  # [S]
    diverged: np.ndarray  # [S] bool
    t_icl: np.ndarray  # [S] first passage over the ICL threshold, -1 = censored
    t_start: np.ndarray  # [S] first passage over the lowest ICL level (the regime's start)
    eval_steps: np.ndarray  # [T]
    icl_acc: np.ndarray  # [S, T]
    iwl_acc: np.ndarray  # [S, T]
    final_icl_ref_acc: np.ndarray | None  # [S] balanced runs: the reference's ICL test
    censor_at: int
    budget: int
    steps_run: int
    n_duplicates: int = 0  # seeds dropped by pooling: the same (root seed, seed id) in two cells
    platform: str = ""  # what computed the run ("cpu", "gpu", ...: meta.json's device), "" when not recorded
    recorded: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)  # [S, T] as stored

    @classmethod
    def of(cls, run: rundir.Run) -> Sample:
        missing = [k for k in REQUIRED if k not in run.curves] + ([] if "icl" in run.times else ["t_icl"])
        if missing:
            raise ConfigError(f"{run.dir}/results.npz: missing {', '.join(missing)}")
        cfg = run.cfg
        icl = np.asarray(run.curves["icl_acc"], float)
        level = min(cfg.train.icl_levels) if cfg.train.icl_levels else 0.6
        start = level_event(level)
        # Runs written before the levels were recorded: the same first passage read off the stored curve
        # (equal to the device's, tests/analysis/test_regime.py).
        t_start = run.times[start] if start in run.times else first_passage(icl, run.eval_steps, level)
        ref = run.curves.get("icl_ref_acc")
        return cls(
            cells=(run.dir.name,),
            config=run.config,
            cfg=cfg,
            seed_ids=np.asarray(run.seed_ids),
            root_seeds=np.full(run.seed_ids.size, cfg.ensemble.root_seed),
            diverged=np.asarray(run.diverged, bool),
            t_icl=np.asarray(run.times["icl"], np.int64),
            t_start=np.asarray(t_start, np.int64),
            eval_steps=np.asarray(run.eval_steps),
            icl_acc=icl,
            iwl_acc=np.asarray(run.curves["iwl_acc"], float),
            final_icl_ref_acc=(
                oc.last_finite(np.asarray(ref, float)) if ref is not None and ref.ndim == 2 and ref.shape[1] else None
            ),
            censor_at=run.censor_at("icl"),
            budget=run.budget,
            steps_run=run.steps_run,
            platform=platform_of((run.meta or {}).get("device")),
            recorded={
                k: np.asarray(run.curves[k])
                for k in LOSS_CURVES + C_STATISTICS
                if k in run.curves and run.curves[k].ndim == 2
            },
        )

    # ---- what the statistics read -------------------------------------------------------------------
    @property
    def kept(self) -> np.ndarray:
        return ~self.diverged

    @property
    def t(self) -> np.ndarray:
        """t_ICL of the kept seeds (-1 = censored)."""
        return self.t_icl[self.kept]

    @property
    def curves(self) -> dict[str, np.ndarray]:
        """The recorded loss and c-statistic curves of the kept seeds, in a fixed order."""
        return {k: v[self.kept] for k, v in self.recorded.items()}

    @property
    def seed_keys(self) -> list[tuple[int, int]]:
        """Each seed's identity, (root seed, seed id): the same key in two cells is the same seed run twice."""
        return list(zip(self.root_seeds.tolist(), self.seed_ids.tolist()))

    @property
    def reads_final_accuracy(self) -> bool:
        """False for a run with train.settle_iwl or train.retire_at_fall: a settled or fallen seed's last ICL
        accuracy is read when it retired, not at the budget, so final accuracy is not measured there."""
        return not (self.cfg.train.settle_iwl or self.cfg.train.retire_at_fall)

    @functools.cached_property
    def final_icl(self) -> np.ndarray:
        """Each kept seed's last finite ICL accuracy (a retired seed's curve ends in NaN)."""
        return oc.last_finite(self.icl_acc[self.kept])

    @functools.cached_property
    def outcomes(self) -> oc.Outcomes:
        """Every seed's outcome (diverged ones counted apart)."""
        return oc.classify(self.t_icl, self.diverged, self.icl_acc, self.iwl_acc, self.eval_steps)

    @property
    def n_seeds(self) -> int:
        return int(self.kept.sum())

    @property
    def n_diverged(self) -> int:
        return int(self.diverged.sum())

    @property
    def variant(self) -> str:
        return self.cfg.task.variant

    @property
    def K(self) -> int | None:
        return None if self.variant == "infinite" else self.cfg.task.K

    @property
    def N(self) -> int:
        return self.cfg.task.N

    @property
    def start_level(self) -> float:
        return min(self.cfg.train.icl_levels) if self.cfg.train.icl_levels else 0.6

    @property
    def label(self) -> str:
        return f"{self.variant} K={'inf' if self.K is None else self.K} N={self.N}"

    @property
    def paper_rule(self) -> bool:
        """The paper's acquisition rule: t_ICL = the first evaluation above 0.95 (a single look). Its
        early stop at 0.99 does not move that first passage; it matters for final accuracies only."""
        return self.cfg.train.icl_threshold == 0.95 and self.cfg.train.icl_confirm == 1

    def condition(self) -> dict:
        return condition(self.config, self.platform)


def condition(cfg: dict, platform: str = "") -> dict:
    """The fields that say what a cell measures (not its seeds or blocking): equal conditions pool.

    A CPU computes every float32 matmul in full whatever train.matmul_precision says (runs at "default",
    "highest" and "bfloat16" are bit-identical there: tests/systems/test_classification.py), so a CPU run measures what a
    GPU run at "highest" measures and pools with it; a GPU run at "default" (TF32 on recent NVIDIA chips)
    stays apart. A run resumed on another platform is read as its last one's: resume across platforms
    at "highest" only. "BF16_BF16_F32" changes a CPU run too (configbase.FULL_ON_CPU): it stays apart."""
    f = {k: v for k, v in flat(cfg).items() if k not in IGNORED_FIELDS}
    if f.get("task.variant") == "infinite":
        f.pop("task.K", None)
    if platform == "cpu" and f.get("train.matmul_precision") in FULL_ON_CPU:
        f["train.matmul_precision"] = "highest"
    return f


def _merge(a: Sample, b: Sample) -> Sample:
    # The same seed (root_seed, seed id) run twice, e.g. K = infinity cells that differ only in the unused
    # task.K, is one sample, not two: keep its first copy.
    seen = set(a.seed_keys)
    new = np.array([k not in seen for k in b.seed_keys], bool)
    both: dict[str, Any] = {  # replace's keyword arguments: arrays, or None where a cell lacks one
        k: (
            None
            if getattr(a, k) is None or getattr(b, k) is None
            else np.concatenate([getattr(a, k), getattr(b, k)[new]])
        )
        for k in PER_SEED
    }
    # A curve that only some of the cells recorded is dropped: it would not cover every seed.
    recorded = {k: np.concatenate([v, b.recorded[k][new]]) for k, v in a.recorded.items() if k in b.recorded}
    return dataclasses.replace(
        a,
        cells=a.cells + b.cells,
        n_duplicates=a.n_duplicates + b.n_duplicates + int((~new).sum()),
        recorded=recorded,
        **both,
    )


def pool(samples: list[Sample]) -> list[Sample]:
    """Samples with the same condition pooled (in the order of their first cell); two that were censored
    at different times or evaluated on grids of different lengths stay apart."""
    merged: dict[str, Sample] = {}
    for s in samples:
        key = json.dumps(s.condition(), sort_keys=True, default=str)
        m = merged.get(key)
        if m is None:
            merged[key] = s
        elif m.censor_at != s.censor_at or m.eval_steps.shape != s.eval_steps.shape:
            merged[key + s.cells[0]] = s  # not poolable: kept apart
        else:
            merged[key] = _merge(m, s)
    return list(merged.values())
