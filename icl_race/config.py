"""Run configuration: frozen dataclasses, TOML loading, `--set` overrides and validation.

Every field is validated on load, so a bad value fails before anything is compiled or written.
Errors name the field as `section.key` and say what is allowed (`ConfigError`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icl_race.theory.linear_attention import SPECTRA


class ConfigError(ValueError):
    """A config value is missing, unknown or out of range; str() is a one-line message."""


@dataclass(frozen=True)
class TaskConfig:
    kind: str = "classification"
    variant: str = "standard"  # standard | infinite (K = inf, fresh items) | balanced
    K: int = 10_000  # number of training items (ignored by the infinite variant)
    K_max: int = 0  # static pool size; 0 means K. Runs with equal K_max share one compilation.
    N: int = 100  # tokens per sequence including the query (the reference's len_context)
    D: int = 63  # item dimension; tokens have D + 2 features
    icl_pool: int = 20_000  # the ICL test draws novel items from min(icl_pool, K) of them
    pool_seed: int = 10  # fixed key of the training item pool, shared by every seed (as the reference)
    novel_seed: int = 100  # fixed key of the novel (ICL-test) pool
    # K = infinity only: 0 draws every item fresh from N(0, I/D); P > 0 draws item vectors from a fixed
    # bank of P such items (pool_seed) with labels still fresh per sequence, so nothing can be
    # memorized either way and sampling costs B N ids instead of B N D Gaussians (experiments/README.md).
    infinite_bank: int = 0
    # Data-distribution levers (classification-task.md §2.7, in the N&R token format):
    zipf_alpha: float = 0.0  # item k drawn with P(k) ~ (k + 1)^-alpha wherever items are drawn i.i.d.; 0 = uniform
    epsilon: float = 0.0  # every occurrence of an item is (mu_k + epsilon * eta) / sqrt(1 + epsilon^2), fresh eta
    burstiness: int = 0  # B > 0: training contexts of (N - 1) / B items each repeated B times; 0 = the standard sampler
    p_bursty: float = 1.0  # with burstiness: the fraction of bursty training sequences (the rest i.i.d.)

    @property
    def pool_size(self) -> int:
        return self.K_max or self.K

    @property
    def novel_size(self) -> int:
        return min(self.icl_pool, self.pool_size)


@dataclass(frozen=True)
class ModelConfig:
    kind: str = "transformer"
    layers: int = 1  # 1: the paper's model; 2: the two-layer variant of its appendix
    width: int = 512  # hidden width of every MLP
    freeze_readout: bool = False  # two-layer only: reproduce the reference's untrained readout MLP
    freeze: str = "none"  # none | attention (LayerNorm + q/k/v) | mlp (every MLP): kept at init (ablation)
    qk_init_scale: float = 1.0  # multiplies the initial query and key weights (the attention's initial sharpness)


@dataclass(frozen=True)
class RegressionTaskConfig:
    """In-context linear regression of arXiv 2501.16265 (task.kind = "linear_regression")."""

    kind: str = "linear_regression"
    D: int = 4
    N: int = 31  # context tokens (the query is extra), the paper's N
    spectrum: str = "linear"  # white (I/D) | linear (lambda_d ~ d) | power (lambda_d ~ d^-alpha) | custom
    alpha: float = 2.0
    lambdas: tuple = ()  # the custom spectrum (normalised to trace 1)
    rotate: bool = False  # random eigenvectors (else the coordinate axes)
    cov_seed: int = 0
    P: int = 0  # training sequences; 0 = the population limit (P = infinity)
    center: bool = True  # the reference's centring of x and whitening of task vectors
    whiten: bool = True
    data_seed: int = 1
    per_seed_data: bool = False  # each seed draws its own training set
    path: str = "moments"  # moments (the sufficient-statistics fast path) | tokens
    plateau_frac: float = 0.05  # transition m = loss within this fraction of the gap above L(M_m)
    converged_tol: float = 0.0  # converged = loss below L(M_D) + this; 0 = 1% of the last gap
    icl_fraction: float = 1.0  # < 1: the reference's in-weight mixture (--icl c); 1: all in-context
    test_size: int = 0  # > 0: record iw_loss / ic_loss on fixed in-weight / in-context test sets of this size


@dataclass(frozen=True)
class LinearAttentionConfig:
    """Linear attention with merged (attn_m) or separate rank-R (attn_s) key/query, or the two-layer
    linear network on cubic features (mlp); softmax = true for the softmax variant (token path)."""

    kind: str = "attn_s"
    heads: int = 5
    rank: int = 1
    softmax: bool = False
    temperature: float = 1.0
    init_scheme: str = "balanced"  # balanced | entrywise | aligned
    init_scale: float = 1e-2
    in_weight: bool = False  # token path: also train ṽ_i, ũ_i (k̃_ir), the blocks that allow in-weight learning


@dataclass(frozen=True)
class MemorizationTaskConfig:
    """MLP-only memorization of K items with a fixed balanced label map (Figs A2/A3 of
    arXiv 2412.00104; task.kind = "memorization"). Items come from the classification task's shared pool (pool_seed)."""

    kind: str = "memorization"
    K: int = 1000  # number of items (even: a balanced label map)
    K_max: int = 0  # static pool size; 0 means K. Runs with equal K_max share one compilation.
    D: int = 63
    pool_seed: int = 10
    probe_size: int = 10_000  # c-statistics use the items with id < min(K, probe_size) (a fixed subset)
    input_scale: float = 1.0  # items enter the MLP times this; ~sqrt(D + 2) matches the race's LayerNorm'd query

    @property
    def pool_size(self) -> int:
        return self.K_max or self.K

    @property
    def probe_items(self) -> int:
        """Static number of probed ids (ids >= K among them are masked out)."""
        return min(self.probe_size, self.pool_size)


@dataclass(frozen=True)
class MLPModelConfig:
    """The bare item MLP D -> W -> W -> 1 of the memorization task (model.kind = "mlp")."""

    kind: str = "mlp"
    width: int = 512
    # Train in float64: past ~1e6 steps one float32 SGD update falls below the spacing of the weights
    # and the c1 tail flattens for numerical reasons (experiments/memorization/README.md, item 3).
    float64: bool = False


@dataclass(frozen=True)
class MinimalModelConfig:
    """The minimal model of arXiv 2412.00104 §3 (model.kind = "minimal"):
    logit = phi_MLP(x_q) + w * sum_j softmax_j(beta x_q.x_j) y_j, w(0) = 0, beta(0) = beta0."""

    kind: str = "minimal"
    width: int = 512
    beta0: float = 0.0  # the initial inverse temperature (ignored with beta0_random)
    beta0_random: bool = False  # draw beta0 ~ N(0, 1) per seed (recorded as the probe "beta0")


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
    evals_per_chunk: int = 10  # evaluations per jitted chunk: the host sees the ensemble this often
    eval_spacing: str = "linear"  # linear | log: chunk c evaluates every eval_every * 2^c steps
    # jax_default_matmul_precision for the run: default | highest | tensorfloat32 | bfloat16. TF32 and
    # bf16 act on GPUs only (XLA:CPU computes float32 dots in float32 whatever this says).
    matmul_precision: str = "default"
    checkpoint_every: int = 5  # chunks between checkpoints (0: none); the last 2 are kept
    optimizer: str = "sgd"  # sgd | momentum | adam | adamw (icl_race.optim); weight decays per group as above
    momentum: float = 0.9  # optimizer = "momentum"
    b1: float = 0.9  # adam, adamw
    b2: float = 0.999
    eps: float = 1e-8


@dataclass(frozen=True)
class EnsembleConfig:
    seeds: int = 64
    first_seed: int = 0  # seed ids are first_seed .. first_seed + seeds - 1
    root_seed: int = 0  # key_s = fold_in(key(root_seed), seed_id)
    # Seeds per vmap. A seed's results are bit-identical in any ensemble with the same block; the
    # ensemble is padded with extra seeds to a multiple of it. On a GPU raise it (256-1024) for speed.
    block: int = 16
    devices: int = 0  # local devices to split the seeds over; 0 = all of them


@dataclass(frozen=True)
class Config:
    task: TaskConfig | RegressionTaskConfig | MemorizationTaskConfig = field(default_factory=TaskConfig)
    model: ModelConfig | LinearAttentionConfig | MLPModelConfig | MinimalModelConfig = field(
        default_factory=ModelConfig)
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


MATMUL_PRECISIONS = ("default", "highest", "tensorfloat32", "bfloat16")
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")

# Each task kind has its own [task] fields and allowed model kinds (the first is the default).
TASKS = {"classification": TaskConfig, "linear_regression": RegressionTaskConfig,
         "memorization": MemorizationTaskConfig}
MODELS = {"transformer": ModelConfig, "attn_m": LinearAttentionConfig, "attn_s": LinearAttentionConfig,
          "mlp": LinearAttentionConfig, "minimal": MinimalModelConfig}
MODELS_FOR_TASK = {"classification": ("transformer", "minimal"), "linear_regression": ("attn_s", "attn_m", "mlp"),
                   "memorization": ("mlp",)}
# A model kind whose fields depend on the task kind ("mlp" is the linear network on cubic features with
# linear_regression, the bare item MLP with memorization): (task kind, model kind) -> class.
MODELS_BY_TASK = {("memorization", "mlp"): MLPModelConfig}
SECTIONS = {"task": TaskConfig, "model": ModelConfig, "train": TrainConfig, "ensemble": EnsembleConfig}


def field_names(section: str) -> set[str]:
    """Every key a section may hold, over all kinds."""
    classes = {"task": TASKS.values(), "model": [*MODELS.values(), *MODELS_BY_TASK.values()]}.get(
        section, [SECTIONS[section]])
    return {f.name for cls in classes for f in dataclasses.fields(cls)}


def section_class(section: str, raw: dict) -> type:
    """The dataclass of a section given the raw config (task and model depend on their kinds)."""
    if section == "task":
        kind = raw.get("task", {}).get("kind", "classification")
        if kind not in TASKS:
            raise ConfigError(f"task.kind = {kind!r}: must be one of {', '.join(map(repr, TASKS))}")
        return TASKS[kind]
    if section == "model":
        task_kind = raw.get("task", {}).get("kind", "classification")
        allowed = MODELS_FOR_TASK.get(task_kind, ("transformer",))
        kind = raw.get("model", {}).get("kind", allowed[0])
        if kind not in allowed:
            raise ConfigError(f"model.kind = {kind!r}: must be one of {', '.join(map(repr, allowed))} "
                              f"with task.kind = {task_kind!r}")
        return MODELS_BY_TASK.get((task_kind, kind), MODELS[kind])
    return SECTIONS[section]


# What the engine can hold: sizes, counts, steps and indices are int32 on the device (t_first, item
# ids, step counters), keys take a 32-bit seed (jax.random.key(2**32) is key(0) again), and seed ids
# are folded into the root key as uint32. A value outside these ranges would wrap silently.
INDEX_MAX = 2**31 - 1
KEY_MAX = 2**32 - 1


def _integer_range(name: str) -> tuple[int, int, str]:
    """The range an integer field can hold and what it is, by the field's role."""
    if name.endswith("_seed"):
        return 0, KEY_MAX, "a 32-bit seed id or key"
    return -INDEX_MAX - 1, INDEX_MAX, "what an int32 size, step or index holds"


def _coerce(name: str, value: Any, default: Any) -> Any:
    """Convert a TOML value to the type of the field's default, or fail naming the field. Integers
    and numbers are checked here for every field of every section (finite, and for integers within
    what the engine holds), so a field added later is covered without a validator of its own."""
    kind = type(default)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{name} = {value!r}: expected true or false")
    if kind is int:
        if not number or not math.isfinite(value) or value != int(value):
            raise ConfigError(f"{name} = {value!r}: expected an integer")
        lo, hi, what = _integer_range(name)
        if not lo <= int(value) <= hi:
            raise ConfigError(f"{name} = {value!r}: out of range: must be in [{lo}, {hi}] ({what})")
        return int(value)
    if kind is float:
        if not number or not math.isfinite(value):
            raise ConfigError(f"{name} = {value!r}: expected a finite number")
        return float(value)
    if kind is tuple:
        if not isinstance(value, (list, tuple)) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
            raise ConfigError(f"{name} = {value!r}: expected a list of finite numbers")
        return tuple(float(v) for v in value)
    if not isinstance(value, str):
        raise ConfigError(f"{name} = {value!r}: expected a string")
    return value


def from_dict(raw: dict[str, Any]) -> Config:
    sections = {}
    for sec, value in raw.items():
        if sec not in SECTIONS:
            raise ConfigError(f"unknown section [{sec}]: allowed sections are {', '.join(SECTIONS)}")
        if not isinstance(value, dict):
            raise ConfigError(f"{sec}: expected a table [{sec}]")
    for sec in SECTIONS:
        cls = section_class(sec, raw)
        given = dict(raw.get(sec, {}))
        defaults = cls()
        names = {f.name for f in dataclasses.fields(cls)}
        for key in given:
            if key not in names:
                raise ConfigError(f"unknown key {sec}.{key}: allowed keys are {', '.join(sorted(names))}")
        sections[sec] = cls(**{k: _coerce(f"{sec}.{k}", v, getattr(defaults, k)) for k, v in given.items()})
    cfg = Config(**sections)
    validate(cfg)
    return cfg


def _parse_value(text: str) -> Any:
    """A --set value is a TOML value; a bare word that is not one is taken as a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    raw = {k: dict(v) if isinstance(v, dict) else v for k, v in raw.items()}
    for item in overrides:
        key, sep, text = item.partition("=")
        sec, dot, name = key.strip().partition(".")
        if not sep or not dot or not name:
            raise ConfigError(f"--set {item!r}: expected section.key=value, e.g. task.K=1000")
        raw.setdefault(sec, {})
        if not isinstance(raw[sec], dict):
            raise ConfigError(f"{sec}: expected a table [{sec}]")
        raw[sec][name] = _parse_value(text.strip())
    return raw


def read_toml(path: str | Path, what: str = "config file") -> dict[str, Any]:
    """A TOML file as a dict; a missing, unreadable, non-UTF-8 or malformed file is a ConfigError
    naming the path."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{what} {str(path)!r} not found" if not path.exists()
                          else f"{what} {str(path)!r} is not a file")
    try:
        return tomllib.loads(path.read_bytes().decode("utf-8"))
    except OSError as e:
        raise ConfigError(f"{what} {str(path)!r} cannot be read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not valid UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML ({e})") from None


def load(path: str | Path, overrides: list[str] = ()) -> Config:
    return from_dict(apply_overrides(read_toml(path), list(overrides)))


def _check(ok: bool, name: str, value: Any, allowed: str) -> None:
    if not ok:
        raise ConfigError(f"{name} = {value!r}: must be {allowed}")


def validate(cfg: Config) -> None:
    if isinstance(cfg.task, RegressionTaskConfig):
        _validate_regression(cfg)
    elif isinstance(cfg.task, MemorizationTaskConfig):
        _validate_memorization(cfg)
    else:
        _validate_classification(cfg)
    _validate_common(cfg)


def _validate_regression(cfg: Config) -> None:
    t, m = cfg.task, cfg.model
    _check(t.D >= 1, "task.D", t.D, "an integer >= 1")
    _check(t.N >= 1, "task.N", t.N, "an integer >= 1 (context tokens)")
    _check(t.spectrum in SPECTRA, "task.spectrum", t.spectrum, "one of " + ", ".join(f'"{s}"' for s in SPECTRA))
    _check(math.isfinite(t.alpha), "task.alpha", t.alpha, "a finite number (the power spectrum's exponent)")
    _check(t.spectrum != "custom" or (len(t.lambdas) == t.D and min(t.lambdas) > 0), "task.lambdas", list(t.lambdas),
           f"{t.D} positive numbers with task.spectrum = \"custom\"")
    _check(t.P >= 0, "task.P", t.P, "an integer >= 0 (0: the population limit)")
    _check(not t.whiten or t.P == 0 or t.P > t.D + 1, "task.P", t.P, f"> D + 1 = {t.D + 1} with task.whiten")
    _check(t.path in ("moments", "tokens"), "task.path", t.path, '"moments" or "tokens"')
    _check(t.path == "moments" or t.P > 0, "task.P", t.P, "> 0 with task.path = \"tokens\" (a fixed training set)")
    _check(not t.per_seed_data or t.P > 0, "task.per_seed_data", t.per_seed_data, "false when task.P = 0")
    _check(0 < t.plateau_frac < 1, "task.plateau_frac", t.plateau_frac, "in (0, 1)")
    _check(t.converged_tol >= 0, "task.converged_tol", t.converged_tol, ">= 0 (0: 1% of the last gap)")
    _check(0 <= t.icl_fraction <= 1, "task.icl_fraction", t.icl_fraction, "in [0, 1] (1: in-context task only)")
    _check(t.icl_fraction == 1 or t.P > 0, "task.icl_fraction", t.icl_fraction,
           "1 when task.P = 0 (a mixture needs a fixed training set)")
    _check(t.test_size >= 0, "task.test_size", t.test_size, "an integer >= 0 (0: no test sets)")
    _check(t.test_size == 0 or t.P > 0, "task.test_size", t.test_size, "0 when task.P = 0")
    _check(t.test_size == 0 or not t.whiten or t.test_size > t.D + 1, "task.test_size", t.test_size,
           f"0 or > D + 1 = {t.D + 1} with task.whiten (the test sets are whitened too)")
    _check(m.heads >= 1, "model.heads", m.heads, "an integer >= 1")
    _check(math.isfinite(m.temperature) and m.temperature > 0, "model.temperature", m.temperature,
           "a finite number > 0 (the softmax temperature)")
    _check(m.kind != "attn_s" or 1 <= m.rank <= t.D, "model.rank", m.rank, f"in [1, task.D = {t.D}]")
    _check(not m.softmax or (m.kind != "mlp" and t.path == "tokens"), "model.softmax", m.softmax,
           'false unless model.kind is attn_m/attn_s and task.path = "tokens"')
    _check(not m.in_weight or (m.kind != "mlp" and t.path == "tokens"), "model.in_weight", m.in_weight,
           'false unless model.kind is attn_m/attn_s and task.path = "tokens"')
    _check(m.init_scheme in ("balanced", "entrywise", "aligned"), "model.init_scheme", m.init_scheme,
           'one of "balanced", "entrywise", "aligned"')
    _check(math.isfinite(m.init_scale) and m.init_scale > 0, "model.init_scale", m.init_scale, "a finite number > 0")
    _check(cfg.train.optimizer == "sgd", "train.optimizer", cfg.train.optimizer,
           '"sgd" with task.kind = "linear_regression" (full-batch gradient descent in units of tau)')


def _validate_classification(cfg: Config) -> None:
    t, m, tr = cfg.task, cfg.model, cfg.train
    _check(t.variant in ("standard", "infinite", "balanced"), "task.variant", t.variant,
           'one of "standard", "infinite", "balanced"')
    _check(t.N >= 2, "task.N", t.N, "an integer >= 2 (tokens per sequence, query included)")
    _check(t.D >= 1, "task.D", t.D, "an integer >= 1")
    if t.variant != "infinite":
        _check(t.K >= 2, "task.K", t.K, "an integer >= 2")
        _check(t.K >= t.N, "task.K", t.K, f">= task.N = {t.N} (the IWL test draws N distinct items)")
        _check(t.K_max == 0 or t.K_max >= t.K, "task.K_max", t.K_max, f"0 (= K) or >= task.K = {t.K}")
        _check(t.K < 2**31 and t.pool_size < 2**31, "task.K", t.K, "below 2^31")
    if t.variant == "balanced":
        _check(t.K % 2 == 0, "task.K", t.K, "even with the balanced variant (two equal label classes)")
        _check(t.N % 2 == 0 and t.N >= 4, "task.N", t.N, "even and >= 4 with the balanced variant")
    _check(t.icl_pool >= 2, "task.icl_pool", t.icl_pool, "an integer >= 2")
    _check(0 <= t.infinite_bank < 2**31, "task.infinite_bank", t.infinite_bank,
           "an integer in [0, 2^31) (0: fresh items)")
    _check(t.infinite_bank == 0 or (t.variant == "infinite" and t.infinite_bank >= 2 * t.N), "task.infinite_bank",
           t.infinite_bank, f'0, or >= 2 N = {2 * t.N} with task.variant = "infinite"')
    _validate_distribution(t)
    _check(m.kind in ("transformer", "minimal"), "model.kind", m.kind, '"transformer" or "minimal"')
    _check(m.width >= 1, "model.width", m.width, "an integer >= 1")
    if m.kind == "minimal":
        _check(math.isfinite(m.beta0), "model.beta0", m.beta0, "a finite number")
    else:
        _check(m.layers in (1, 2), "model.layers", m.layers, "1 or 2")
        _check(not m.freeze_readout or m.layers == 2, "model.freeze_readout", m.freeze_readout,
               "false unless model.layers = 2")
        _check(m.freeze in ("none", "attention", "mlp"), "model.freeze", m.freeze,
               'one of "none", "attention", "mlp"')
        _check(math.isfinite(m.qk_init_scale) and m.qk_init_scale > 0, "model.qk_init_scale", m.qk_init_scale,
               "a finite number > 0")
    _validate_train_classification(cfg)


def _validate_distribution(t: TaskConfig) -> None:
    """The data-distribution levers: frequencies and bursts need a finite pool drawn i.i.d. (the standard
    variant); item noise applies to every variant."""
    for name in ("zipf_alpha", "epsilon"):
        v = getattr(t, name)
        _check(math.isfinite(v) and v >= 0, f"task.{name}", v, "a finite number >= 0")
    _check(t.zipf_alpha == 0 or t.variant == "standard", "task.zipf_alpha", t.zipf_alpha,
           '0 unless task.variant = "standard"')
    _check(t.burstiness >= 0, "task.burstiness", t.burstiness, "an integer >= 0 (0: no bursty sequences)")
    _check(t.burstiness == 0 or t.variant == "standard", "task.burstiness", t.burstiness,
           '0 unless task.variant = "standard"')
    _check(t.burstiness == 0 or (t.N - 1) % t.burstiness == 0, "task.burstiness", t.burstiness,
           f"0 or a divisor of task.N - 1 = {t.N - 1} (a bursty context holds (N - 1) / B items, B times each)")
    _check(0 <= t.p_bursty <= 1, "task.p_bursty", t.p_bursty, "in [0, 1]")


def _validate_memorization(cfg: Config) -> None:
    t, m = cfg.task, cfg.model
    _check(t.K >= 2 and t.K % 2 == 0, "task.K", t.K, "an even integer >= 2 (a balanced label map)")
    _check(t.K_max == 0 or t.K_max >= t.K, "task.K_max", t.K_max, f"0 (= K) or >= task.K = {t.K}")
    _check(t.K < 2**31 and t.pool_size < 2**31, "task.K", t.K, "below 2^31")
    _check(t.D >= 1, "task.D", t.D, "an integer >= 1")
    _check(t.probe_size >= 1, "task.probe_size", t.probe_size, "an integer >= 1")
    _check(math.isfinite(t.input_scale) and t.input_scale > 0, "task.input_scale", t.input_scale, "a finite number > 0")
    _check(m.width >= 1, "model.width", m.width, "an integer >= 1")
    _validate_train_classification(cfg)


def _validate_train_classification(cfg: Config) -> None:
    tr = cfg.train
    _check(tr.batch_size >= 1, "train.batch_size", tr.batch_size, "an integer >= 1")
    _check(tr.eval_size >= 1, "train.eval_size", tr.eval_size, "an integer >= 1")
    for name in ("weight_decay_attn", "weight_decay_mlp"):
        v = getattr(tr, name)
        _check(math.isfinite(v) and v >= 0, f"train.{name}", v, "a finite number >= 0")
    _check(0 <= tr.icl_threshold < 1, "train.icl_threshold", tr.icl_threshold, "in [0, 1)")
    _check(0 <= tr.stop_threshold < 1, "train.stop_threshold", tr.stop_threshold, "in [0, 1)")
    _check(tr.eval_batch >= 1, "train.eval_batch", tr.eval_batch, "an integer >= 1 (sequences per forward pass)")
    _check(tr.icl_confirm >= 1, "train.icl_confirm", tr.icl_confirm, "an integer >= 1 (consecutive evaluations)")
    lv = tr.icl_levels
    _check(all(0 < v < 1 and abs(round(100 * v) - 100 * v) < 1e-9 for v in lv) and list(lv) == sorted(set(lv)),
           "train.icl_levels", list(lv), "increasing, distinct levels in (0, 1), whole percents (e.g. [0.6, 0.75, 0.9])")
    _check(tr.optimizer in OPTIMIZERS, "train.optimizer", tr.optimizer, f"one of {', '.join(OPTIMIZERS)}")
    for name in ("momentum", "b1", "b2"):
        v = getattr(tr, name)
        _check(0 <= v < 1, f"train.{name}", v, "in [0, 1)")
    _check(math.isfinite(tr.eps) and tr.eps > 0, "train.eps", tr.eps, "a finite number > 0")


def _validate_common(cfg: Config) -> None:
    tr, e = cfg.train, cfg.ensemble
    _check(math.isfinite(tr.lr) and tr.lr > 0, "train.lr", tr.lr, "a finite number > 0")
    _check(tr.eval_every >= 1, "train.eval_every", tr.eval_every, "an integer >= 1")
    _check(tr.steps >= tr.eval_every and tr.steps % tr.eval_every == 0, "train.steps", tr.steps,
           f"a positive multiple of train.eval_every = {tr.eval_every}")
    _check(tr.early_stop in ("off", "freeze"), "train.early_stop", tr.early_stop, '"off" or "freeze"')
    _check(tr.evals_per_chunk >= 1, "train.evals_per_chunk", tr.evals_per_chunk, "an integer >= 1")
    _check(tr.eval_spacing in ("linear", "log"), "train.eval_spacing", tr.eval_spacing, "linear or log")
    _check(tr.matmul_precision in MATMUL_PRECISIONS, "train.matmul_precision", tr.matmul_precision,
           f"one of {', '.join(MATMUL_PRECISIONS)}")
    _check(tr.checkpoint_every >= 0, "train.checkpoint_every", tr.checkpoint_every, "an integer >= 0 (0: never)")
    _check(e.seeds >= 1, "ensemble.seeds", e.seeds, "an integer >= 1")
    _check(e.block >= 1, "ensemble.block", e.block, "an integer >= 1")
    _check(e.devices >= 0, "ensemble.devices", e.devices, "an integer >= 0 (0: all local devices)")
    _check(e.first_seed + e.seeds - 1 <= KEY_MAX, "ensemble.first_seed", e.first_seed,
           f"<= {KEY_MAX - e.seeds + 1} with ensemble.seeds = {e.seeds} (seed ids are 32-bit: at most {KEY_MAX})")
