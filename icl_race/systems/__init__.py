"""Registered compositions of task + model + objective + probes, selected by `task.kind`."""

from icl_race.config import Config
from icl_race.systems.classification import ClassificationRace
from icl_race.systems.linear_attention import LinearAttentionRegression

SYSTEMS = {"classification": ClassificationRace, "linear_regression": LinearAttentionRegression}


def build(cfg: Config):
    """(program, consts) for a validated config (call inside `precision(cfg)`)."""
    return SYSTEMS[cfg.task.kind].from_config(cfg)


def precision(cfg: Config):
    """The context a system must be built, initialised and trained in: float64 for the systems that
    need it (set by context, never globally, so float32 systems in the same process are unaffected)."""
    import contextlib

    import jax

    return jax.enable_x64(True) if getattr(SYSTEMS[cfg.task.kind], "needs_x64", False) else contextlib.nullcontext()
