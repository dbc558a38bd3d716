"""Registered compositions of task + model + objective + probes, selected by `task.kind`."""

import contextlib

from icl_race.config import Config
from icl_race.systems.classification import ClassificationRace
from icl_race.systems.linear_attention import LinearAttentionRegression
from icl_race.systems.memorization import MemorizationRun
from icl_race.systems.minimal import MinimalRace

SYSTEMS = {"classification": ClassificationRace, "linear_regression": LinearAttentionRegression,
           "memorization": MemorizationRun}
# A model kind that replaces a task's default system: (task kind, model kind) -> program class.
SYSTEMS_BY_MODEL = {("classification", "minimal"): MinimalRace}


def system_class(cfg: Config):
    return SYSTEMS_BY_MODEL.get((cfg.task.kind, cfg.model.kind), SYSTEMS[cfg.task.kind])


def build(cfg: Config):
    """(program, consts) for a validated config (call inside `precision(cfg)`)."""
    return system_class(cfg).from_config(cfg)


@contextlib.contextmanager
def precision(cfg: Config):
    """The context a system must be built, initialised and trained in: float64 for the systems that
    need it, and train.matmul_precision (both set by context, never globally, so other runs in the same
    process are unaffected; jit keys its cache on them, so each setting compiles its own program)."""
    import jax

    with contextlib.ExitStack() as stack:
        needs_x64 = getattr(system_class(cfg), "needs_x64", None)  # optional in the system protocol
        if needs_x64 and needs_x64(cfg):
            stack.enter_context(jax.enable_x64(True))
        if cfg.train.matmul_precision != "default":
            stack.enter_context(jax.default_matmul_precision(cfg.train.matmul_precision))
        yield
