"""The systems: the registry (registry.py: `SYSTEMS`, `register`, `lookup`, `of`, `build`, `precision`) and
per system <name>_spec.py (its config sections, no jax) and <name>.py (its program). Every registry name
is here too, as `icl_race.systems.NAME`."""

from icl_race.systems.registry import (
    SYSTEMS,
    build,
    lookup,
    model_kinds,
    of,
    precision,
    register,
    system_class,
    task_kinds,
)
