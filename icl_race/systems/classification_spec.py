"""The classification race (arXiv 2412.00104) as a registered system: its [task] section (the in-context
classification task, shared with the minimal model), its [model] section (the transformer), their
validation, and its program (`systems/classification.py`) and report (`report/classification.py`).
No jax: the loader and the report import this."""

from __future__ import annotations

from dataclasses import dataclass

from icl_race.configbase import Config, ItemPool, System, check, validate_minibatch_train

ATTENTION_KERNELS = ("xla", "pallas")


@dataclass(frozen=True)
class TaskConfig(ItemPool):
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
    # Data-distribution levers (docs/config.md; Reddy 2023's bursty generator), in the N&R token format:
    zipf_alpha: float = 0.0  # item k drawn with P(k) ~ (k + 1)^-alpha wherever items are drawn i.i.d.; 0 = uniform
    epsilon: float = 0.0  # every occurrence of an item is (mu_k + epsilon * eta) / sqrt(1 + epsilon^2), fresh eta
    # With epsilon > 0: P > 0 draws each occurrence's eta as a uniform row of a fixed bank of P N(0, I/D)
    # vectors (noise_seed) instead of fresh: B N ids instead of B N D Gaussians (docs/config.md).
    noise_bank: int = 0
    noise_seed: int = 1000  # fixed key of the noise bank, shared by every seed (as the item pools)
    burstiness: int = 0  # B > 0: training contexts of (N - 1) / B items each repeated B times; 0 = the standard sampler
    p_bursty: float = 1.0  # with burstiness: the fraction of bursty training sequences (the rest i.i.d.)

    @property
    def novel_size(self) -> int:
        return min(self.icl_pool, self.pool_size)


@dataclass(frozen=True)
class ModelConfig:
    """The one- or two-layer transformer of arXiv 2412.00104 (`models/transformer.py`), its ablations
    (frozen parts, the initial query and key scale)."""

    kind: str = "transformer"
    layers: int = 1  # 1: the paper's model; 2: the two-layer variant of its appendix
    width: int = 512  # hidden width of every MLP
    freeze_readout: bool = False  # two-layer only: reproduce the reference's untrained readout MLP
    freeze: str = "none"  # none | attention (LayerNorm + q/k/v) | mlp (every MLP): kept at init (ablation)
    qk_init_scale: float = 1.0  # multiplies the initial query and key weights (the attention's initial sharpness)
    # xla | pallas: what computes the one-layer model's query-only attention (models/attention_kernel.py);
    # "pallas" runs its kernels with interpret=True (slow) on any backend but a GPU
    attention_kernel: str = "xla"


def validate_task(t: TaskConfig) -> None:
    """The classification task's fields (with any model that reads it)."""
    check(
        t.variant in ("standard", "infinite", "balanced"),
        "task.variant",
        t.variant,
        'one of "standard", "infinite", "balanced"',
    )
    check(t.N >= 2, "task.N", t.N, "an integer >= 2 (tokens per sequence, query included)")
    check(t.D >= 1, "task.D", t.D, "an integer >= 1")
    if t.variant != "infinite":
        check(t.K >= 2, "task.K", t.K, "an integer >= 2")
        check(t.K >= t.N, "task.K", t.K, f">= task.N = {t.N} (the IWL test draws N distinct items)")
        check(t.K_max == 0 or t.K_max >= t.K, "task.K_max", t.K_max, f"0 (= K) or >= task.K = {t.K}")
    if t.variant == "balanced":
        check(t.K % 2 == 0, "task.K", t.K, "even with the balanced variant (two equal label classes)")
        check(t.N % 2 == 0 and t.N >= 4, "task.N", t.N, "even and >= 4 with the balanced variant")
    check(t.icl_pool >= 2, "task.icl_pool", t.icl_pool, "an integer >= 2")
    check(t.infinite_bank >= 0, "task.infinite_bank", t.infinite_bank, "an integer in [0, 2^31) (0: fresh items)")
    check(
        t.infinite_bank == 0 or (t.variant == "infinite" and t.infinite_bank >= 2 * t.N),
        "task.infinite_bank",
        t.infinite_bank,
        f'0, or >= 2 N = {2 * t.N} with task.variant = "infinite"',
    )
    # The data-distribution levers: frequencies and bursts need a finite pool drawn i.i.d. (the standard
    # variant); item noise applies to every variant.
    for name in ("zipf_alpha", "epsilon"):
        v = getattr(t, name)
        check(v >= 0, f"task.{name}", v, "a finite number >= 0")
    check(t.noise_bank >= 0, "task.noise_bank", t.noise_bank, "an integer in [0, 2^31) (0: fresh noise)")
    check(t.noise_bank == 0 or t.epsilon > 0, "task.noise_bank", t.noise_bank, "0 unless task.epsilon > 0")
    check(
        t.zipf_alpha == 0 or t.variant == "standard",
        "task.zipf_alpha",
        t.zipf_alpha,
        '0 unless task.variant = "standard"',
    )
    check(t.burstiness >= 0, "task.burstiness", t.burstiness, "an integer >= 0 (0: no bursty sequences)")
    check(
        t.burstiness == 0 or t.variant == "standard",
        "task.burstiness",
        t.burstiness,
        '0 unless task.variant = "standard"',
    )
    check(
        t.burstiness == 0 or (t.N - 1) % t.burstiness == 0,
        "task.burstiness",
        t.burstiness,
        f"0 or a divisor of task.N - 1 = {t.N - 1} (a bursty context holds (N - 1) / B items, B times each)",
    )
    check(0 <= t.p_bursty <= 1, "task.p_bursty", t.p_bursty, "in [0, 1]")


def validate(cfg: Config) -> None:
    m = cfg.model
    validate_task(cfg.task)
    check(m.width >= 1, "model.width", m.width, "an integer >= 1")
    check(m.layers in (1, 2), "model.layers", m.layers, "1 or 2")
    check(
        not m.freeze_readout or m.layers == 2, "model.freeze_readout", m.freeze_readout, "false unless model.layers = 2"
    )
    check(m.freeze in ("none", "attention", "mlp"), "model.freeze", m.freeze, 'one of "none", "attention", "mlp"')
    check(m.qk_init_scale > 0, "model.qk_init_scale", m.qk_init_scale, "a finite number > 0")
    check(
        m.attention_kernel in ATTENTION_KERNELS,
        "model.attention_kernel",
        m.attention_kernel,
        "one of " + ", ".join(f'"{k}"' for k in ATTENTION_KERNELS),
    )
    check(
        m.attention_kernel == "xla" or m.layers == 1,
        "model.attention_kernel",
        m.attention_kernel,
        '"xla" unless model.layers = 1 (the Pallas kernels are the one-layer model\'s)',
    )
    validate_minibatch_train(cfg.train)
    s = cfg.train.settle_iwl
    check(s == 0 or 0.5 < s < 1, "train.settle_iwl", s, "0 (off) or in (0.5, 1): the IWL accuracy that settles a seed")
    check(
        not cfg.train.retire_at_fall or cfg.train.early_stop == "off",
        "train.retire_at_fall",
        cfg.train.retire_at_fall,
        'false unless train.early_stop = "off" (a frozen seed cannot lose ICL)',
    )


def describe(cfg: Config) -> str:
    t = cfg.task
    return f"{t.variant} K={'inf' if t.variant == 'infinite' else t.K}, N={t.N}"


def pool_K(task: dict):
    """The K of a sweep cell's item pool: none with the infinite variant (fresh items)."""
    return None if task.get("variant", "standard") == "infinite" else task.get("K", TaskConfig.K)


SYSTEM = System(
    task=TaskConfig,
    model=ModelConfig,
    validate=validate,
    program="icl_race.systems.classification:ClassificationRace",
    describe=describe,
    report="icl_race.report.classification",
    pool_K=pool_K,
)
