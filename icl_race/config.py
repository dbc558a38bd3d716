"""Run configuration: TOML loading, `--set` overrides, coercion and validation of a `Config`.

A config has four sections: [task] and [model], whose dataclasses belong to the system that the kinds
select (the registry, `icl_race.systems`), and the shared [train] and [ensemble] (`icl_race.configbase`).
Every field is validated on load, so a bad value fails before anything is compiled or written: its type
here for every field of every section (integers within what the engine holds, finite floats), its range
by the system's `validate` and, for [train] and [ensemble], here. Errors name the field as `section.key`
and say what is allowed (`ConfigError`). No jax.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from icl_race import systems
from icl_race.configbase import (
    KEEP_PARAMS,
    MATMUL_PRECISIONS,
    Config,
    ConfigError,
    EnsembleConfig,
    TrainConfig,
    check,
    name_of,
    short,
)

SECTIONS = ("task", "model", "train", "ensemble")
SHARED = {"train": TrainConfig, "ensemble": EnsembleConfig}


def field_names(section: str) -> set[str]:
    """Every key a section may hold, over all registered systems."""
    classes = [getattr(s, section) for s in systems.SYSTEMS] if section in ("task", "model") else [SHARED[section]]
    return {f.name for cls in classes for f in dataclasses.fields(cls)}


def section_class(section: str, raw: dict) -> type:
    """The dataclass of a section given the raw config (task and model: the system's, by their kinds)."""
    if section in SHARED:
        return SHARED[section]
    task_kind = raw.get("task", {}).get("kind", systems.SYSTEMS[0].task_kind)
    if section == "task":  # every system of a task kind shares its [task] section
        return systems.lookup(task_kind).task
    return systems.lookup(task_kind, raw.get("model", {}).get("kind")).model


# What the engine can hold: sizes, counts, steps and indices are int32 on the device (t_first, item
# ids, step counters), keys take a 32-bit seed (jax.random.key(2**32) is key(0) again), and seed ids
# are folded into the root key as uint32. A value outside these ranges would wrap silently.
INDEX_MAX = 2**31 - 1
KEY_MAX = 2**32 - 1
# The bootstrap options of report, compare and analyze: --boot replicates in [1, BOOT_MAX] (each
# replicate costs memory and time per seed: 10^9 asked compare for 15 GiB), --seed a root in [0, KEY_MAX]
# (numpy's SeedSequence takes no negative root). BOOT_DEFAULT is the replicates report, compare and hist
# use when --boot is not given: one number, so that their intervals agree.
BOOT_MAX = 100_000
BOOT_DEFAULT = 2000


def check_bootstrap(n_boot: int | None, seed: int) -> None:
    """Refuse --boot (None: a command's default) and --seed outside their ranges, in one line."""
    check(
        n_boot is None or (isinstance(n_boot, int) and 1 <= n_boot <= BOOT_MAX),
        "--boot",
        n_boot,
        f"an integer in [1, {BOOT_MAX:,}] (bootstrap replicates)",
    )
    check(isinstance(seed, int) and 0 <= seed <= KEY_MAX, "--seed", seed, f"an integer in [0, {KEY_MAX:,}]")


def _integer_range(name: str) -> tuple[int, int, str]:
    """The range an integer field can hold and what it is, by the field's role."""
    if name.endswith("_seed"):
        return 0, KEY_MAX, "a 32-bit seed id or key"
    return -INDEX_MAX - 1, INDEX_MAX, "what an int32 size, step or index holds"


def as_float(value: Any) -> float | None:
    """A TOML number as a finite float, or None for anything else: a bool, a string, inf or nan, an
    integer beyond a float's range (TOML integers are unbounded: math.isfinite(10**400) raises)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        f = float(value)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _coerce(name: str, value: Any, default: Any) -> Any:
    """Convert a TOML value to the type of the field's default, or fail naming the field. Integers
    and numbers are checked here for every field of every section (finite, and for integers within
    what the engine holds), so a field added later is covered without a validator of its own."""
    kind = type(default)
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{name} = {short(value)}: expected true or false")
    if kind is int:
        whole = isinstance(value, int) and not isinstance(value, bool)  # any size: the range says more
        if not whole and (as_float(value) is None or value != int(value)):
            raise ConfigError(f"{name} = {short(value)}: expected an integer")
        lo, hi, what = _integer_range(name)
        if not lo <= int(value) <= hi:  # the bound crossed: a field's own range is its validate's
            bound = f"at most {hi:,}" if int(value) > hi else f"at least {lo:,}"
            raise ConfigError(f"{name} = {short(value)}: out of range: must be {bound} ({what})")
        return int(value)
    if kind is float:
        if (number := as_float(value)) is None:
            raise ConfigError(f"{name} = {short(value)}: expected a finite number")
        return number
    if kind is tuple:
        if not isinstance(value, (list, tuple)) or any(as_float(v) is None for v in value):
            raise ConfigError(f"{name} = {short(value)}: expected a list of finite numbers")
        return tuple(as_float(v) for v in value)
    if not isinstance(value, str):
        raise ConfigError(f"{name} = {short(value)}: expected a string")
    return value


def from_dict(raw: dict[str, Any]) -> Config:
    sections = {}
    for sec, value in raw.items():
        if sec not in SECTIONS:
            raise ConfigError(f"unknown section [{name_of(sec)}]: allowed sections are {', '.join(SECTIONS)}")
        if not isinstance(value, dict):
            raise ConfigError(f"{sec}: expected a table [{sec}]")
    for sec in SECTIONS:
        cls = section_class(sec, raw)
        given = dict(raw.get(sec, {}))
        defaults = cls()
        names = {f.name for f in dataclasses.fields(cls)}
        for key in given:
            if key not in names:
                raise ConfigError(f"unknown key {sec}.{name_of(key)}: allowed keys are {', '.join(sorted(names))}")
        sections[sec] = cls(**{k: _coerce(f"{sec}.{k}", v, getattr(defaults, k)) for k, v in given.items()})
    cfg = Config(**sections)
    validate(cfg)
    return cfg


MAX_DEPTH = 8  # arrays and tables a config may nest (a grid of lists needs 4); deeper ones are refused
# before any code walks them recursively (deepcopy, repr, ==)


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:  # iterative: the point is not to recurse
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            stack += [(c, d + 1) for c in (v.values() if isinstance(v, dict) else v)]
    return deepest


def _loads(text: str, where: str) -> dict[str, Any]:
    """tomllib.loads, refusing (naming `where`) arrays or tables nested beyond MAX_DEPTH: tomllib
    itself recurses, so a few hundred levels are a RecursionError there."""
    try:
        raw = tomllib.loads(text)
    except RecursionError:
        raw = None
    if raw is None or _depth(raw) > MAX_DEPTH:
        raise ConfigError(f"{where}: arrays or tables nested more than {MAX_DEPTH} deep")
    return raw


def _parse_value(text: str, where: str) -> Any:
    """A --set value is a TOML value; a bare word that is not one is taken as a string."""
    try:
        return _loads(f"v = {text}", where)["v"]
    except tomllib.TOMLDecodeError:
        return text


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    raw = {k: dict(v) if isinstance(v, dict) else v for k, v in raw.items()}
    for item in overrides:
        key, sep, text = item.partition("=")
        sec, dot, name = key.strip().partition(".")
        if not sep or not dot or not name:
            raise ConfigError(f"--set {short(item)}: expected section.key=value, e.g. task.K=1000")
        raw.setdefault(sec, {})
        if not isinstance(raw[sec], dict):
            raise ConfigError(f"{name_of(sec)}: expected a table [{name_of(sec)}]")
        raw[sec][name] = _parse_value(text.strip(), f"--set {name_of(sec)}.{name_of(name)}")
    return raw


def read_toml(path: str | Path, what: str = "config file") -> dict[str, Any]:
    """A TOML file as a dict; a missing, unreadable, non-UTF-8 or malformed file is a ConfigError
    naming the path."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(
            f"{what} {str(path)!r} not found" if not path.exists() else f"{what} {str(path)!r} is not a file"
        )
    try:
        return _loads(path.read_bytes().decode("utf-8"), str(path))
    except OSError as e:
        raise ConfigError(f"{what} {str(path)!r} cannot be read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"{path}: not valid UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start})"
        ) from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML ({e})") from None


def load(path: str | Path, overrides: Sequence[str] = ()) -> Config:
    return load_logged(path, overrides)[0]


# A config file's [log] table: where `icl-race run` sends the run's curves (run/tracking.py), each key as its
# flag. Not part of the run's config (not in config.json, nor its digest): logging elsewhere is the same run.
LOG, LOG_KEYS = "log", ("tensorboard", "wandb")


def load_logged(path: str | Path, overrides: Sequence[str] = ()) -> tuple[Config, dict[str, str]]:
    """`load`, and the file's [log] table (after --set log.KEY=VALUE), checked: {key: destination}."""
    raw = apply_overrides(read_toml(path), list(overrides))
    log = raw.pop(LOG, {})
    if not isinstance(log, dict):
        raise ConfigError(f"{LOG}: expected a table [{LOG}]")
    for key, value in log.items():
        if key not in LOG_KEYS:
            raise ConfigError(f"unknown key {LOG}.{name_of(key)}: allowed keys are {', '.join(LOG_KEYS)}")
        check(isinstance(value, str) and value != "", f"{LOG}.{key}", value, "a non-empty string")
    return from_dict(raw), log


def validate(cfg: Config) -> None:
    """The system's fields (its `validate`), then the [train] and [ensemble] fields every system uses."""
    systems.of(cfg).validate(cfg)
    _validate_common(cfg)


def _validate_common(cfg: Config) -> None:
    tr, e = cfg.train, cfg.ensemble
    check(tr.lr > 0, "train.lr", tr.lr, "a finite number > 0")
    check(tr.eval_every >= 1, "train.eval_every", tr.eval_every, "an integer >= 1")
    check(
        tr.steps >= tr.eval_every and tr.steps % tr.eval_every == 0,
        "train.steps",
        tr.steps,
        f"a positive multiple of train.eval_every = {tr.eval_every}",
    )
    check(tr.early_stop in ("off", "freeze"), "train.early_stop", tr.early_stop, '"off" or "freeze"')
    check(
        tr.settle_iwl == 0 or cfg.task.kind == "classification",
        "train.settle_iwl",
        tr.settle_iwl,
        '0 unless task.kind = "classification" (the race it settles)',
    )
    check(
        not tr.retire_at_fall or cfg.task.kind == "classification",
        "train.retire_at_fall",
        tr.retire_at_fall,
        'false unless task.kind = "classification" (the ICL it watches fall)',
    )
    check(tr.evals_per_chunk >= 1, "train.evals_per_chunk", tr.evals_per_chunk, "an integer >= 1")
    check(tr.eval_spacing in ("linear", "log"), "train.eval_spacing", tr.eval_spacing, "linear or log")
    check(
        tr.matmul_precision in MATMUL_PRECISIONS,
        "train.matmul_precision",
        tr.matmul_precision,
        f"one of {', '.join(MATMUL_PRECISIONS)}",
    )
    check(tr.keep_params in KEEP_PARAMS, "train.keep_params", tr.keep_params, f"one of {', '.join(KEEP_PARAMS)}")
    check(tr.checkpoint_every >= 0, "train.checkpoint_every", tr.checkpoint_every, "an integer >= 0 (0: never)")
    check(e.seeds >= 1, "ensemble.seeds", e.seeds, "an integer >= 1")
    check(e.block >= 1, "ensemble.block", e.block, "an integer >= 1")
    check(e.devices >= 0, "ensemble.devices", e.devices, "an integer >= 0 (0: all local devices)")
    check(
        e.first_seed + e.seeds - 1 <= KEY_MAX,
        "ensemble.first_seed",
        e.first_seed,
        f"<= {KEY_MAX - e.seeds + 1} with ensemble.seeds = {e.seeds} (seed ids are 32-bit: at most {KEY_MAX})",
    )
