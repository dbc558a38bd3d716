"""What every system's config builds on (no jax, nothing of icl_race): `ConfigError` and `check`, the
[train] and [ensemble] sections shared by all systems, the `Config` of four sections, and the `System`
record a system registers (`icl_race.systems` lists them; `icl_race.config` loads a Config through them).

A system's own [task] and [model] sections are frozen dataclasses beside it (`systems/<name>_spec.py`),
whose `kind` default is the kind that selects them. The loader checks every field's type generically
(finite floats, integers within what the engine holds: `icl_race.config`); a system's `validate` checks
its own fields' ranges, each in one place, with `check`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class ConfigError(ValueError):
    """A config value is missing, unknown or out of range; str() is a one-line message."""


SHOWN = 80  # the most characters of a value an error message quotes


def short(value: Any) -> str:
    """repr(value) for an error message, cut to about SHOWN characters: a 1 MB string or a list nested
    a thousand deep stays one short line."""
    try:
        text = repr(value)
    except RecursionError:
        return "<a value nested too deeply to show>"
    return text if len(text) <= SHOWN else f"{text[: SHOWN - 20]}... ({len(text):,} characters)"


def name_of(key: Any) -> str:
    """A key or field name for an error message: as it is when printable and short, else short()."""
    return key if isinstance(key, str) and key.isprintable() and len(key) <= SHOWN else short(key)


def check(ok: bool, name: str, value: Any, allowed: str) -> None:
    """Refuse a field's value in one line: `NAME = VALUE: must be ALLOWED`."""
    if not ok:
        raise ConfigError(f"{name} = {short(value)}: must be {allowed}")


# jax maps "bfloat16" to lax.Precision.DEFAULT, the same dots as "default" (TF32 on a recent GPU);
# "BF16_BF16_F32" (a jax DotAlgorithmPreset: bf16 inputs, float32 sums) is what computes in bf16 there.
# XLA:CPU computes the first four in full float32 (tests/systems/test_classification.py), not the last.
FULL_ON_CPU = ("default", "highest", "tensorfloat32", "bfloat16")
MATMUL_PRECISIONS = (*FULL_ON_CPU, "BF16_BF16_F32")
# train.keep_params: which parameters of every seed a run keeps in DIR/params/ (rundir.Run.params)
KEEP_PARAMS = {"none": (), "final": ("final",), "at_t_icl": ("at_t_icl",), "both": ("final", "at_t_icl")}
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")


class ItemPool:
    """A task section's K items drawn from a static pool of K_max (0: K): runs with equal K_max share one
    compilation, and every K <= K_max reads the same first items."""

    K: int  # declared by the task sections that inherit this (their dataclass fields)
    K_max: int

    @property
    def pool_size(self) -> int:
        return self.K_max or self.K


@dataclass(frozen=True)
class TrainConfig:
    lr: float = 0.01  # linear_regression: the full-batch step in units of tau
    batch_size: int = 128
    steps: int = 469_000  # budget in SGD steps
    eval_every: int = 469  # one reference epoch
    eval_size: int = 2000  # fresh sequences per evaluation, for each of the ICL and IWL tests
    # Evaluation sequences per forward pass (classification). 256 bounds memory at GPU-sized blocks; on a
    # CPU 16-32 keeps a block's evaluation batch in cache (benchmarks/RESULTS.md). It draws other eval
    # sequences, so runs at different values agree in distribution, not seed by seed.
    eval_batch: int = 256
    weight_decay_attn: float = 1e-10  # L2 on LayerNorm and q/k/v (coupled; decoupled with adamw)
    weight_decay_mlp: float = 1e-10  # L2 on the MLPs (coupled; decoupled with adamw)
    icl_threshold: float = 0.95  # t_ICL = first evaluation with ICL accuracy above this
    # ... of icl_confirm consecutive evaluations above it (1: the paper's rule, a single look)
    icl_confirm: int = 1
    # Further first passages of ICL accuracy, recorded as t_icl60, t_icl75, ...: the rise's shape
    # (the regime diagnostic: rise fraction (t_icl - t_icl60) / t_icl, analysis/regime.py).
    icl_levels: tuple = (0.6, 0.75, 0.9)
    early_stop: str = "off"  # off | freeze (a seed stops updating once ICL accuracy > stop_threshold,
    # or once converged for linear_regression)
    stop_threshold: float = 0.99
    stop_when_all_acquired: bool = True  # end the run once every seed has acquired ICL (converged)
    # Classification only. 0: off. Otherwise a seed that has not acquired ICL is *settled* (IWL won the
    # race) at the first evaluation with IWL accuracy above this: it records t_settled, freezes, records
    # no later first passage and retires, so a K* grid stops paying for the seeds below K*. A bet that
    # memorization ends the race: no seed of the width-64 K* grid acquired ICL after IWL accuracy 0.9
    # (experiments/regime/README.md, "Settling"); its t_ICL counts as censored at the budget.
    settle_iwl: float = 0.0
    # Classification only, with early_stop "off". A seed that acquired ICL and then lost it (a lasting
    # fall: analysis/outcome.py's LASTING evaluations in a row below LEVEL) records t_fell, freezes and
    # retires, so a transience grid (Fig A6) stops paying for a seed once its event is seen. A bet that
    # lost ICL stays lost: a retired seed cannot recover, so no seed is classed "recovered".
    retire_at_fall: bool = False
    evals_per_chunk: int = 10  # evaluations per jitted chunk: the host sees the ensemble this often
    eval_spacing: str = "linear"  # linear | log: chunk c evaluates every eval_every * 2^c steps
    # jax_default_matmul_precision for the run: default | highest | tensorfloat32 | bfloat16 | BF16_BF16_F32
    # (MATMUL_PRECISIONS). TF32 and bf16 act on GPUs only (XLA:CPU computes float32 dots in float32 whatever this says).
    matmul_precision: str = "default"
    checkpoint_every: int = 5  # chunks between checkpoints (0: none); the last 2 are kept
    optimizer: str = "sgd"  # sgd | momentum | adam | adamw (icl_race.systems.optim); weight decays per group as above
    momentum: float = 0.9  # optimizer = "momentum"
    b1: float = 0.9  # adam, adamw
    b2: float = 0.999
    eps: float = 1e-8
    # Each seed's parameters kept in DIR/params/ with orbax: none | final (at the end of training) |
    # at_t_icl (at the evaluation of its first passage of the stop event, t_icl; NaN for a seed that never
    # passes) | both. Read back as rundir.Run.params(seed, at).
    keep_params: str = "none"

    @property
    def kept(self) -> tuple[str, ...]:
        """The parameters this run keeps, by name ("final", "at_t_icl")."""
        return KEEP_PARAMS[self.keep_params]


@dataclass(frozen=True)
class EnsembleConfig:
    seeds: int = 64
    first_seed: int = 0  # seed ids are first_seed .. first_seed + seeds - 1
    root_seed: int = 0  # key_s = fold_in(key(root_seed), seed_id)
    # Seeds per vmap. A seed's results are bit-identical in any ensemble with the same block; the
    # ensemble is padded with extra seeds to a multiple of it. On a GPU raise it (256-1024) for speed.
    block: int = 16
    devices: int = 0  # local devices to split the seeds over; 0 = all of them
    # Retire at chunk boundaries the seeds whose results can no longer change (frozen by the early stop
    # with every event recorded, diverged; engine.ensemble.retired): the live ones are packed into fewer
    # blocks of the same width, so results are bit-identical and a run pays for the live seeds only.
    # A retired seed's curves hold its last evaluated value, from results.npz's retired_at[S] on.
    retire: bool = True


@dataclass(frozen=True)
class Config:
    """A resolved config: the system's task and model sections, and the shared train and ensemble."""

    task: Any
    model: Any
    train: TrainConfig = field(default_factory=TrainConfig)
    ensemble: EnsembleConfig = field(default_factory=EnsembleConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return dataclasses.asdict(self)

    def digest(self) -> str:
        """Hash of the config's non-default values (and each section's kind): names a run directory in
        a sweep. Leaving defaults out keeps the names of finished cells valid when a later version
        adds a field whose default reproduces the old behaviour."""
        return hashlib.sha256(json.dumps(self.essentials(), sort_keys=True).encode()).hexdigest()[:16]

    def essentials(self) -> dict[str, dict[str, Any]]:
        out = {}
        for sec, value in self.to_dict().items():
            defaults = dataclasses.asdict(type(getattr(self, sec))())
            out[sec] = {k: v for k, v in value.items() if k == "kind" or v != defaults[k]}
        return out


def validate_minibatch_train(tr: TrainConfig) -> None:
    """The [train] fields of a system trained on sampled batches by an optax optimizer (icl_race.systems.optim):
    its `validate` calls this (a full-batch system such as linear regression has its own rule)."""
    check(tr.batch_size >= 1, "train.batch_size", tr.batch_size, "an integer >= 1")
    check(tr.eval_size >= 1, "train.eval_size", tr.eval_size, "an integer >= 1")
    for name in ("weight_decay_attn", "weight_decay_mlp"):
        v = getattr(tr, name)
        check(v >= 0, f"train.{name}", v, "a finite number >= 0")
    check(0 <= tr.icl_threshold < 1, "train.icl_threshold", tr.icl_threshold, "in [0, 1)")
    check(0 <= tr.stop_threshold < 1, "train.stop_threshold", tr.stop_threshold, "in [0, 1)")
    check(tr.eval_batch >= 1, "train.eval_batch", tr.eval_batch, "an integer >= 1 (sequences per forward pass)")
    check(tr.icl_confirm >= 1, "train.icl_confirm", tr.icl_confirm, "an integer >= 1 (consecutive evaluations)")
    lv = tr.icl_levels
    check(
        all(0 < v < 1 and abs(round(100 * v) - 100 * v) < 1e-9 for v in lv) and list(lv) == sorted(set(lv)),
        "train.icl_levels",
        list(lv),
        "increasing, distinct levels in (0, 1), whole percents (e.g. [0.6, 0.75, 0.9])",
    )
    check(tr.optimizer in OPTIMIZERS, "train.optimizer", tr.optimizer, f"one of {', '.join(OPTIMIZERS)}")
    for name in ("momentum", "b1", "b2"):
        v = getattr(tr, name)
        check(0 <= v < 1, f"train.{name}", v, "in [0, 1)")
    check(tr.eps > 0, "train.eps", tr.eps, "a finite number > 0")


def never(cfg: Config) -> bool:
    return False


@dataclass(frozen=True)
class System:
    """One system, registered once in `icl_race.systems`: its config sections and their validation
    (code, imported with the registry: no jax), and its program and report, by reference.

    program and report are objects, or "module:attribute" / "module" names (the entry-point convention)
    that the layer using them resolves (`systems.build`, `icl_race.report`): the program needs jax and
    the report sits above `rundir`, which loads configs through this registry, so the registry names
    them instead of importing them."""

    task: type  # the [task] section; its `kind` default is the task.kind that selects this system
    model: type  # the [model] section
    validate: Callable[[Config], None]  # the task's and model's ranges (and train fields this system constrains)
    program: Any  # a class with from_config(cfg) -> (program, consts): the engine's five-function protocol
    describe: Callable[[Config], str]  # the run's one-line description in the progress header
    # The model.kind values that select it with its task kind (the first is the default); () means the one
    # kind of the [model] section's default, as the task kind is the [task] section's.
    model_kinds: tuple[str, ...] = ()
    needs_x64: Callable[[Config], bool] = never  # whether a run is built and trained under jax.enable_x64
    # A module with any of run_report(run, draws), sweep_report(sweep, draws) -> (report dict, markdown,
    # {name: Figure}) (draws: analysis.draws.Draws, the bootstrap's seed and size), hist_text(run, bins),
    # sweep_hist_text(sweep) -> str, hist_record(run, bins), sweep_hist_record(sweep) -> dict (`hist --json`);
    # or None with no_report.
    report: Any = None
    no_report: str = ""  # why there is no report (one line), when report is None
    # The item-pool size K a sweep cell needs from its raw [task] table, or None: cells sweeping task.K
    # then share one pool size (task.K_max) and one compilation.
    pool_K: Callable[[dict], Any] | None = None

    def __post_init__(self):
        if not self.model_kinds:
            object.__setattr__(self, "model_kinds", (self.model().kind,))

    @property
    def task_kind(self) -> str:
        return self.task().kind


def resolve(ref: Any) -> Any:
    """A `System` reference: the object itself, or the one a "module:attribute" or "module" name names."""
    if not isinstance(ref, str):
        return ref
    module, _, attr = ref.partition(":")
    obj = importlib.import_module(module)
    return getattr(obj, attr) if attr else obj
