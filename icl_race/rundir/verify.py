"""results.npz and config.json checked as data after they were read: the arrays are the layout the
runner writes (`check_results`), the config is the one the results came from (`check_provenance`). A
crafted, damaged or edited file is a `DamagedFileError` naming the array or the fields, never a wrong
statistic; `icl-race run --redo` sets a finished run's damaged final files aside (rundir/write.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from icl_race.rundir.files import differing_fields, with_defaults
from icl_race.rundir.layout import CONFIG, RESULTS, SCALARS, DamagedFileError


def _bad(d: Path, name: str, what: str, file: str = RESULTS) -> DamagedFileError:
    redo = "rerun with --redo to set the run aside and train it again" if file == RESULTS else "rerun to resume"
    return DamagedFileError(f"{Path(d) / file}: array {name}: {what}; not results icl-race wrote ({redo})")


def _integers(a: np.ndarray) -> bool:
    return a.dtype.kind in "iu"


def check_results(d: Path, res: dict[str, np.ndarray], cfg: dict | None = None, file: str = RESULTS) -> None:
    """results.npz's arrays (or live.npz's: `file`) against the layout the runner writes: per-seed arrays
    [S], curves [S, T, ...] over the T evaluation steps, integer event steps in [-1, budget], boolean
    masks, and against the run's config (`cfg`, when given): its ensemble.seeds seeds, ids from ensemble.first_seed,
    its train.steps budget. A crafted or damaged file is a DamagedFileError naming the array, never a
    wrong statistic."""
    _bad_here = lambda name, what: _bad(d, name, what, file)
    events = [k for k in res if k.startswith("t_")]
    if not events or "eval_steps" not in res:
        raise DamagedFileError(f"{Path(d) / file}: missing t_<event> or eval_steps")
    anchor = "seed_ids" if "seed_ids" in res else events[0]  # the seed count every per-seed array follows
    if res[anchor].ndim != 1 or res[anchor].size == 0:
        raise _bad_here(anchor, f"shape {res[anchor].shape}, expected one value per seed")
    S = res[anchor].shape[0]
    steps = res["eval_steps"]
    if not _integers(steps) or steps.ndim != 1 or steps.size == 0 or np.any(np.diff(steps) <= 0) or steps[0] < 0:
        raise _bad_here("eval_steps", f"{steps.dtype} {steps.shape}, expected increasing steps >= 0, at least one")
    for name in SCALARS:
        if name in res and (res[name].shape != () or not _integers(res[name]) or res[name] < 0):
            raise _bad_here(name, f"{res[name].dtype} {res[name].shape}, expected one integer >= 0")
    budget = int(res["budget"]) if "budget" in res else int(steps[-1])
    for name, a in res.items():
        if name in SCALARS or name == "eval_steps":
            continue
        per_seed = name.startswith("t_") or name in ("seed_ids", "diverged", "retired_at")
        if a.shape[: 1 if per_seed else 2] != ((S,) if per_seed else (S, steps.size)) or (per_seed and a.ndim != 1):
            want = f"[{S}]" if per_seed else f"[{S}, {steps.size}, ...]"
            raise _bad_here(name, f"shape {a.shape}, expected {want} ({S} seeds, {steps.size} evaluations)")
        steps_or_unset = name.startswith("t_") or name == "retired_at"
        if steps_or_unset and (not _integers(a) or np.any(a < -1) or np.any(a > budget)):
            raise _bad_here(name, f"expected integer steps in [-1, {budget:,}] (-1 = not reached)")
        if name == "seed_ids" and not _integers(a):
            raise _bad_here(name, f"dtype {a.dtype}, expected integers")
        if name == "diverged" and a.dtype != bool:
            raise _bad_here(name, f"dtype {a.dtype}, expected booleans")
        if not per_seed and a.dtype.kind not in "fiub":
            raise _bad_here(name, f"dtype {a.dtype}, expected numbers")
    if cfg is not None:
        _check_layout(res, cfg, S, budget, _bad_here)


def _check_layout(res: dict[str, np.ndarray], cfg: dict, S: int, budget: int, bad) -> None:
    """The arrays are this config's run: one value per seed of ensemble.seeds (a file cut to fewer seeds
    would be reported as a smaller run), the ids the runner gives them, the budget of train.steps."""
    e, tr = cfg.get("ensemble") or {}, cfg.get("train") or {}
    seeds, first, steps = e.get("seeds"), e.get("first_seed", 0), tr.get("steps")
    if isinstance(seeds, int) and S != seeds:
        raise bad(
            "seed_ids" if "seed_ids" in res else "t_*", f"{S} seeds, expected the config's ensemble.seeds = {seeds}"
        )
    if isinstance(seeds, int) and isinstance(first, int) and "seed_ids" in res:
        if not np.array_equal(res["seed_ids"], np.arange(first, first + seeds)):
            raise bad("seed_ids", f"expected {first}..{first + seeds - 1} (ensemble.first_seed, ensemble.seeds)")
    if isinstance(steps, int) and "budget" in res and budget != steps:
        raise bad("budget", f"{budget:,}, expected the config's train.steps = {steps:,}")
    for name, last in (("steps_run", res.get("steps_run")), ("eval_steps", res["eval_steps"][-1])):
        if last is not None and int(last) > budget:
            raise bad(name, f"step {int(last):,}, beyond the budget {budget:,}")


def check_provenance(d: Path, cfg: dict, meta: dict | None) -> None:
    """The results were computed from this config.json: meta.json, written in the same commit, holds
    the config they came from. An edited config.json would relabel them: a DamagedFileError naming the
    fields that differ."""
    if not meta or not isinstance(meta.get("config"), dict):
        return  # hand-made or old directories without one: nothing to compare
    if meta["config"] == json.loads(json.dumps(cfg)):  # the same config as JSON holds it: nothing to parse
        return
    made = with_defaults(meta["config"])
    if made != cfg:
        changed = differing_fields(made, cfg)
        raise DamagedFileError(
            f"{Path(d) / CONFIG}: no longer the config the results were computed from (meta.json "
            f"differs in {', '.join(changed) or 'its sections'}); restore it, or rerun with --redo "
            "to set the results aside and train again"
        )
