"""The registry of systems: every composition of task + model + loss + probes that `icl-race run` can
train, each registered once as a `configbase.System` (its config sections, validation, float64 need,
program and report). A system is selected by (task.kind, model.kind); the loader (`icl_race.config`),
the runner, the sweep and the report all find it here (as `icl_race.systems.NAME`: the package
re-exports every name below). No jax at import: `build` and `precision` import the program and jax when
they are called.

    SYSTEMS            the built-in systems, in the order their kinds are listed in error messages
    register(system)   add one (e.g. a system defined in a notebook or a test: tests/systems/test_registry.py)
    lookup(task_kind, model_kind), of(cfg), build(cfg), precision(cfg)
"""

from __future__ import annotations

import contextlib

from icl_race.configbase import Config, ConfigError, System, resolve, short
from icl_race.systems import classification_spec, linear_attention_spec, memorization_spec, minimal_spec

SYSTEMS: list[System] = [
    classification_spec.SYSTEM,
    minimal_spec.SYSTEM,
    linear_attention_spec.SYSTEM,
    memorization_spec.SYSTEM,
]


def register(system: System) -> System:
    """Add a system; its (task kind, model kind) pairs must be new. Returns it."""
    taken = {(s.task_kind, k) for s in SYSTEMS for k in s.model_kinds}
    clash = sorted(taken & {(system.task_kind, k) for k in system.model_kinds})
    if clash:
        raise ValueError(f"task.kind = {clash[0][0]!r} with model.kind = {clash[0][1]!r} is already registered")
    if any(s.task_kind == system.task_kind and s.task is not system.task for s in SYSTEMS):
        raise ValueError(f"task.kind = {system.task_kind!r} is registered with another [task] section")
    SYSTEMS.append(system)
    return system


def task_kinds() -> list[str]:
    return list(dict.fromkeys(s.task_kind for s in SYSTEMS))


def model_kinds(task_kind: str) -> list[str]:
    """The model kinds allowed with a task kind; the first is the default."""
    return [k for s in SYSTEMS if s.task_kind == task_kind for k in s.model_kinds]


def lookup(task_kind: str, model_kind: str | None = None) -> System:
    """The system of a task kind and a model kind (None: the task's default model)."""
    if task_kind not in task_kinds():
        raise ConfigError(f"task.kind = {short(task_kind)}: must be one of {', '.join(map(repr, task_kinds()))}")
    allowed = model_kinds(task_kind)
    kind = allowed[0] if model_kind is None else model_kind
    if kind not in allowed:
        raise ConfigError(
            f"model.kind = {short(kind)}: must be one of {', '.join(map(repr, allowed))} "
            f"with task.kind = {short(task_kind)}"
        )
    return next(s for s in SYSTEMS if s.task_kind == task_kind and kind in s.model_kinds)


def of(cfg: Config | dict) -> System:
    """The system of a Config, or of a config dict as stored in config.json (defaults filled in)."""
    if isinstance(cfg, Config):
        return lookup(cfg.task.kind, cfg.model.kind)
    task, model = cfg.get("task") or {}, cfg.get("model") or {}
    return lookup(task.get("kind", SYSTEMS[0].task_kind), model.get("kind"))


def system_class(cfg: Config):
    """The program class of a config."""
    return resolve(of(cfg).program)


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
        if of(cfg).needs_x64(cfg):
            stack.enter_context(jax.enable_x64(True))
        if cfg.train.matmul_precision != "default":
            stack.enter_context(jax.default_matmul_precision(cfg.train.matmul_precision))
        yield
