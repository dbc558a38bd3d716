"""MLP-only memorization (Figs A2/A3 of arXiv 2412.00104; task.kind = "memorization") as a registered
system: its [task] and [model] sections, their validation, float64 on request, and its program
(`systems/memorization.py`). It has no report of its own: `icl-race analyze memorization`
summarises its kinetics. No jax."""

from __future__ import annotations

from dataclasses import dataclass

from icl_race.configbase import Config, ItemPool, System, check, validate_minibatch_train


@dataclass(frozen=True)
class MemorizationTaskConfig(ItemPool):
    """K items with a fixed balanced label map; items come from the classification task's shared pool
    (pool_seed)."""

    kind: str = "memorization"
    K: int = 1000  # number of items (even: a balanced label map)
    K_max: int = 0  # static pool size; 0 means K. Runs with equal K_max share one compilation.
    D: int = 63
    pool_seed: int = 10
    probe_size: int = 10_000  # c-statistics use the items with id < min(K, probe_size) (a fixed subset)
    input_scale: float = 1.0  # items enter the MLP times this; ~sqrt(D + 2) matches the race's LayerNorm'd query
    # The classification task's data levers, for nu and C under them (experiments/levers/): training items
    # drawn with P(k) ~ (k + 1)^-alpha (0: uniform), and each occurrence (mu_k + epsilon eta) / sqrt(1 + epsilon^2)
    # with eta ~ N(0, I/D) fresh; the probes read the clean items, every item weighted equally.
    zipf_alpha: float = 0.0
    epsilon: float = 0.0

    @property
    def probe_items(self) -> int:
        """Static number of probed ids (ids >= K among them are masked out)."""
        return min(self.probe_size, self.pool_size)


@dataclass(frozen=True)
class MLPModelConfig:
    """The bare item MLP D -> W -> W -> 1."""

    kind: str = "mlp"
    width: int = 512
    # Train in float64: past ~1e6 steps one float32 SGD update falls below the spacing of the weights
    # and the c1 tail flattens for numerical reasons (experiments/memorization/README.md, item 3).
    float64: bool = False


def validate(cfg: Config) -> None:
    t, m = cfg.task, cfg.model
    check(t.K >= 2 and t.K % 2 == 0, "task.K", t.K, "an even integer >= 2 (a balanced label map)")
    check(t.K_max == 0 or t.K_max >= t.K, "task.K_max", t.K_max, f"0 (= K) or >= task.K = {t.K}")
    check(t.D >= 1, "task.D", t.D, "an integer >= 1")
    check(t.probe_size >= 1, "task.probe_size", t.probe_size, "an integer >= 1")
    check(t.input_scale > 0, "task.input_scale", t.input_scale, "a finite number > 0")
    for name in ("zipf_alpha", "epsilon"):
        check(getattr(t, name) >= 0, f"task.{name}", getattr(t, name), "a finite number >= 0")
    check(m.width >= 1, "model.width", m.width, "an integer >= 1")
    validate_minibatch_train(cfg.train)


SYSTEM = System(
    task=MemorizationTaskConfig,
    model=MLPModelConfig,
    validate=validate,
    program="icl_race.systems.memorization:MemorizationRun",
    describe=lambda cfg: f"MLP width {cfg.model.width}, K={cfg.task.K}",
    # model.float64 runs the system in `jax.enable_x64` (systems.precision), parameters float64.
    needs_x64=lambda cfg: cfg.model.float64,
    no_report="memorization runs have no t_ICL report; summarise them with `icl-race analyze memorization mlp DIR`",
    pool_K=lambda task: task.get("K", MemorizationTaskConfig.K),
)
