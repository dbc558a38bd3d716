"""The run directory read back: `load(DIR)` gives a `Run` (one run directory) or a `SweepDir` (a directory
with cells/), also as `icl_race.load`. Padding seeds (the ensemble rounded up to a multiple of
ensemble.block) never reach results.npz, so a `Run` holds live seeds only; `diverged` masks the seeds
the statistics exclude.

A file that cannot be read back (truncated, garbage, not UTF-8), results.npz arrays that are not the
layout the runner writes (`check_results`) and a config.json that is no longer the config in meta.json
(`check_provenance`) are each a `DamagedFileError` naming the file and the array or fields;
`icl-race run --redo` sets a finished run's damaged final files aside (rundir/write.py).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import tomllib
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from icl_race import config
from icl_race.config import Config, ConfigError
from icl_race.rundir.layout import (
    CONFIG,
    LIVE,
    LIVE_HEADLINE,
    META,
    RESULTS,
    SCALARS,
    DamagedFileError,
    RunDirError,
    checkpoint_steps,
    is_done,
)


def _damaged(path: Path, e: BaseException) -> DamagedFileError:
    return DamagedFileError(f"{path}: damaged, cannot be read ({type(e).__name__}: {e})")


def _regular(path: Path) -> None:
    """Refuse a path that exists but is not a regular file before opening it: opening a FIFO (a named
    pipe) waits for a writer forever, a device may never end."""
    if Path(path).exists() and not Path(path).is_file():
        raise DamagedFileError(f"{path}: damaged, not a regular file")


def _read_json(path: Path) -> dict:
    """A JSON object file; a damaged one is a DamagedFileError naming it (a missing file stays a
    FileNotFoundError, an unreadable one an OSError)."""
    _regular(path)
    try:
        obj = json.loads(Path(path).read_bytes().decode("utf-8"))
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise _damaged(path, e) from None
    if not isinstance(obj, dict):
        raise DamagedFileError(f"{path}: damaged, expected a JSON object")
    return obj


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of an npz file; one that cannot be read back is a DamagedFileError naming it (a
    missing file stays a FileNotFoundError)."""
    _regular(path)
    try:
        z = np.load(path, allow_pickle=False)
        if not isinstance(z, np.lib.npyio.NpzFile):
            raise ValueError("a single array, not an npz archive")
        with z:
            return {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise _damaged(path, e) from None


def with_defaults(cfg: dict) -> dict:
    """A stored config with the fields added since it was written at their defaults, so old and new
    cells pool; one written by a version with fields this one lacks is returned as it is."""
    try:
        return config.from_dict(cfg).to_dict()
    except ConfigError:
        return cfg


def differing_fields(a: dict, b: dict) -> list[str]:
    """`section.field` of every field whose value differs between two config dicts (one absent counts)."""
    return sorted(
        f"{s}.{k}"
        for s in set(a) | set(b)
        for k in set(a.get(s) or {}) | set(b.get(s) or {})
        if (a.get(s) or {}).get(k) != (b.get(s) or {}).get(k)
    )


def stored_config(d: Path) -> Config | None:
    """The typed config stored in `d`, None when there is none; raises when it is unreadable."""
    path = Path(d) / CONFIG
    if not path.exists():
        return None
    try:
        stored = _read_json(path)
    except (OSError, DamagedFileError) as e:
        raise RunDirError(f"--out {d}: unreadable config.json ({e}); choose another directory") from None
    try:
        return config.from_dict(stored)  # a field added since fills in with its default
    except ConfigError as e:
        raise RunDirError(
            f"--out {d}: holds a run whose config this version cannot read ({e}); choose another directory"
        ) from None


def read_config(d: Path) -> dict:
    """The run's config as a dict, every field present (`with_defaults`): config.json, or the copy in
    meta.json when a directory has no config.json."""
    d = Path(d)
    try:
        raw = _read_json(d / CONFIG)
    except FileNotFoundError:
        raw = (read_meta(d) or {}).get("config")
        if raw is None:
            raise ConfigError(f"{d}: no config.json (not an icl-race run directory)") from None
    except OSError as e:
        raise ConfigError(f"{d}/config.json: unreadable ({e})") from None
    cfg = with_defaults(raw) if isinstance(raw, dict) else raw
    if not isinstance(cfg, dict) or not all(isinstance(cfg.get(s), dict) for s in ("task", "train")):
        raise ConfigError(f"{d}/config.json: expected sections task and train")
    return cfg


def read_meta(d: Path) -> dict | None:
    try:
        return _read_json(Path(d) / META)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConfigError(f"{d}/meta.json: unreadable ({e})") from None


def read_results(d: Path) -> dict[str, np.ndarray]:
    """results.npz's arrays; a damaged file is a DamagedFileError naming it."""
    d = Path(d)
    try:
        return _read_npz(d / RESULTS)
    except FileNotFoundError:
        raise ConfigError(f"{d}: no results.npz (run not finished)") from None


@dataclasses.dataclass(frozen=True, eq=False)
class Run:
    """One run directory, read back: finished, or still training (`partial`). Per-seed arrays hold every
    live seed; `kept` (not diverged) selects the seeds the statistics use."""

    dir: Path
    config: dict  # resolved: every field of this version present
    seed_ids: np.ndarray  # [S]
    times: dict[str, np.ndarray]  # event -> [S] first-passage step, -1 = not reached (censored)
    headline: str  # the event the run is summarised by (the system's stop event): t_<headline>
    diverged: np.ndarray  # [S] bool
    # [S] the step of a retired seed's last evaluation (ensemble.retire: its curves hold that value
    # after it), -1 for a seed evaluated to the end (and for every seed of a run written without it)
    retired_at: np.ndarray
    eval_steps: np.ndarray  # [T]
    curves: dict[str, np.ndarray]  # probe -> [S, T, ...]
    budget: int
    steps_run: int
    meta: dict | None  # None only for directories written without one (older versions, tests), and partial runs
    # a run still training, read from its live.npz (`load_live`): its curves and first passages up to
    # steps_run, the seeds that have not reached an event censored there
    partial: bool = False

    def partial_note(self) -> str | None:
        """One line saying that these are the results so far of a run still training; None when finished."""
        if not self.partial:
            return None
        return (
            f"partial: {self.dir} is still training; these are its results as of step {self.steps_run:,} of "
            f"{self.budget:,} (its last chunk written, {LIVE}), the seeds not yet at an event censored there"
        )

    @property
    def kept(self) -> np.ndarray:
        return ~self.diverged

    @functools.cached_property
    def cfg(self) -> Config:
        """The typed config, parsed once per Run (a run the runner just committed carries its own: `run_of`)."""
        return config.from_dict(self.config)

    def t(self, event: str | None = None) -> np.ndarray:
        """First-passage steps of the kept seeds (-1 = censored) for `event` (default: the headline)."""
        return self.times[event or self.headline][self.kept].astype(np.int64)

    def censor_at(self, *events: str) -> int:
        """When a kept seed that has not reached one of `events` (default: the headline) stopped being
        observed: steps_run if the run stopped before the budget with such a seed, else the budget."""
        from icl_race.analysis.survival import censor_time

        unreached = any(np.any(self.t(e) < 0) for e in (events or (self.headline,)))
        return censor_time(self.budget, self.steps_run, unreached)

    def censored(self, event: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(times, observed) of the kept seeds for Kaplan-Meier, censored at `censor_at(event)`."""
        from icl_race.analysis.survival import censored_times

        event = event or self.headline
        return censored_times(self.t(event), self.censor_at(event))

    def km_median(self, event: str | None = None) -> float | None:
        """Kaplan-Meier median of `event`'s time over the kept seeds; None when not reached by half."""
        from icl_race.analysis.survival import km_median

        times, observed = self.censored(event)
        m = km_median(times, observed) if times.size else float("nan")
        return None if not np.isfinite(m) else float(m)

    def curve(self, name: str) -> np.ndarray:
        """A probe's [S_kept, T, ...] curve."""
        return self.curves[name][self.kept]


def _bad(d: Path, name: str, what: str) -> DamagedFileError:
    return DamagedFileError(
        f"{Path(d) / RESULTS}: array {name}: {what}; not results icl-race wrote "
        "(rerun with --redo to set the run aside and train it again)"
    )


def _integers(a: np.ndarray) -> bool:
    return a.dtype.kind in "iu"


def check_results(d: Path, res: dict[str, np.ndarray]) -> None:
    """results.npz's arrays against the layout the runner writes: per-seed arrays [S], curves
    [S, T, ...] over the T evaluation steps, integer event steps in [-1, budget], boolean masks. A
    crafted or damaged file is a DamagedFileError naming the array, never a wrong statistic."""
    events = [k for k in res if k.startswith("t_")]
    if not events or "eval_steps" not in res:
        raise DamagedFileError(f"{Path(d) / RESULTS}: missing t_<event> or eval_steps")
    anchor = "seed_ids" if "seed_ids" in res else events[0]  # the seed count every per-seed array follows
    if res[anchor].ndim != 1 or res[anchor].size == 0:
        raise _bad(d, anchor, f"shape {res[anchor].shape}, expected one value per seed")
    S = res[anchor].shape[0]
    steps = res["eval_steps"]
    if not _integers(steps) or steps.ndim != 1 or steps.size == 0 or np.any(np.diff(steps) <= 0) or steps[0] < 0:
        raise _bad(d, "eval_steps", f"{steps.dtype} {steps.shape}, expected increasing steps >= 0, at least one")
    for name in SCALARS:
        if name in res and (res[name].shape != () or not _integers(res[name]) or res[name] < 0):
            raise _bad(d, name, f"{res[name].dtype} {res[name].shape}, expected one integer >= 0")
    budget = int(res["budget"]) if "budget" in res else int(steps[-1])
    for name, a in res.items():
        if name in SCALARS or name == "eval_steps":
            continue
        per_seed = name.startswith("t_") or name in ("seed_ids", "diverged", "retired_at")
        if a.shape[: 1 if per_seed else 2] != ((S,) if per_seed else (S, steps.size)) or (per_seed and a.ndim != 1):
            want = f"[{S}]" if per_seed else f"[{S}, {steps.size}, ...]"
            raise _bad(d, name, f"shape {a.shape}, expected {want} ({S} seeds, {steps.size} evaluations)")
        steps_or_unset = name.startswith("t_") or name == "retired_at"
        if steps_or_unset and (not _integers(a) or np.any(a < -1) or np.any(a > budget)):
            raise _bad(d, name, f"expected integer steps in [-1, {budget:,}] (-1 = not reached)")
        if name == "seed_ids" and not _integers(a):
            raise _bad(d, name, f"dtype {a.dtype}, expected integers")
        if name == "diverged" and a.dtype != bool:
            raise _bad(d, name, f"dtype {a.dtype}, expected booleans")
        if not per_seed and a.dtype.kind not in "fiub":
            raise _bad(d, name, f"dtype {a.dtype}, expected numbers")


def check_provenance(d: Path, cfg: dict, meta: dict | None) -> None:
    """The results were computed from this config.json: meta.json, written in the same commit, holds
    the config they came from. An edited config.json would relabel them: a DamagedFileError naming the
    fields that differ."""
    if not meta or not isinstance(meta.get("config"), dict):
        return  # hand-made or old directories without one: nothing to compare
    made = with_defaults(meta["config"])
    if made != cfg:
        changed = differing_fields(made, cfg)
        raise DamagedFileError(
            f"{Path(d) / CONFIG}: no longer the config the results were computed from (meta.json "
            f"differs in {', '.join(changed) or 'its sections'}); restore it, or rerun with --redo "
            "to set the results aside and train again"
        )


def load_run(d: Path) -> Run:
    """A run directory with config.json and results.npz (meta.json is read when there), checked as data
    (`check_results`, `check_provenance`): what it returns is what the run computed."""
    return load_run_results(d)[0]


def load_run_results(d: Path) -> tuple[Run, dict[str, np.ndarray]]:
    """`load_run`, and results.npz's arrays as read: one read of the file serves both (the runner's
    rerun of a finished run returns them)."""
    d = Path(d)
    cfg = read_config(d)
    res = read_results(d)
    meta = read_meta(d)
    check_results(d, res)
    check_provenance(d, cfg, meta)
    return run_of(d, cfg, res, meta), res


def load_live(d: Path) -> Run:
    """A run still training, from its live.npz (run/live.py: results.npz's arrays as of its last chunk
    written), checked as results are: a `Run` with `partial` set. No live.npz is the ConfigError of a run
    without results."""
    d = Path(d)
    cfg = read_config(d)
    try:
        res = _read_npz(d / LIVE)
    except FileNotFoundError:
        raise ConfigError(f"{d}: no results.npz (run not finished) and no {LIVE} (no chunk written yet)") from None
    headline = res.pop(LIVE_HEADLINE, None)
    check_results(d, res)
    meta = None if headline is None else {"stop_event": str(headline)}
    return dataclasses.replace(run_of(d, cfg, res, meta), meta=None, partial=True)


def run_of(d: Path, cfg: dict, res: dict[str, np.ndarray], meta: dict | None, parsed: Config | None = None) -> Run:
    """The `Run` of results arrays, config and meta already in memory: what `load_run` makes of the
    files, and what the runner makes of the arrays it has just committed (with its `parsed` config,
    which `Run.cfg` then returns instead of parsing `cfg` again)."""
    d = Path(d)
    events = {k[2:]: np.asarray(v) for k, v in res.items() if k.startswith("t_")}
    S = next(iter(events.values())).shape[0]
    steps = np.asarray(res["eval_steps"])
    # steps_run and budget are absent only from hand-made directories: the last evaluation stands in.
    budget = int(res.get("budget", steps[-1]))
    steps_run = int(res.get("steps_run", budget))
    headline = (meta or {}).get("stop_event") or ("icl" if "icl" in events else next(iter(events)))
    if not isinstance(headline, str) or headline not in events:
        raise DamagedFileError(f"{d}/results.npz: missing t_{str(headline)[:80]} (meta.json's stop_event)")
    fixed = {"seed_ids", "diverged", "retired_at", "eval_steps", *SCALARS, *(f"t_{e}" for e in events)}
    run = Run(
        dir=d,
        config=cfg,
        seed_ids=np.asarray(res.get("seed_ids", np.arange(S))),
        times=events,
        headline=headline,
        diverged=np.asarray(res.get("diverged", np.zeros(S, bool)), bool),
        retired_at=np.asarray(res.get("retired_at", np.full(S, -1)), np.int64),
        eval_steps=steps,
        curves={k: v for k, v in res.items() if k not in fixed},
        budget=budget,
        steps_run=steps_run,
        meta=meta,
    )
    if parsed is not None:
        vars(run)["cfg"] = parsed  # Run.cfg's cache (a cached_property): no second parse of the same config
    return run


@dataclasses.dataclass(frozen=True)
class CellEntry:
    """One cell of a sweep directory: its swept values and, when finished, its run."""

    name: str
    dir: Path
    values: dict[str, Any]
    status: str  # done | partial | pending | unreadable | foreign | outside (not a cell of the grid)
    run: Run | None
    config: dict | None
    reason: str = ""  # why there is no run


@dataclasses.dataclass(frozen=True)
class SweepDir:
    dir: Path
    fields: list[str]  # the swept fields ([grid] and [zip] of sweep.toml; else those that vary over cells)
    cells: list[CellEntry]
    spec: str | None  # sweep.toml's text

    @property
    def runs(self) -> list[Run]:
        return [c.run for c in self.cells if c.run is not None]


def is_sweep(d: Path) -> bool:
    return (Path(d) / "cells").is_dir()


def skipped_cells(dirs) -> list[str]:
    """One line per sweep among `dirs` that has cells no analysis can read (damaged, foreign, off the grid):
    what `load_runs` leaves out, said rather than skipped silently. Unfinished cells are not listed."""
    lines = []
    for d in dirs:
        if is_sweep(Path(d)):
            bad = [c for c in load_sweep(Path(d)).cells if c.status in ("unreadable", "foreign", "outside")]
            if bad:
                what = ", ".join(f"{c.name} ({c.status})" for c in bad[:5]) + (", ..." if len(bad) > 5 else "")
                lines.append(f"{d}: {len(bad)} cell{'s' if len(bad) > 1 else ''} left out: {what}")
    return lines


def cell_status(d: Path) -> str:
    if is_done(d):
        return "done"
    return "partial" if checkpoint_steps(d) else "pending"


def _flat(cfg: dict) -> dict:
    return {f"{s}.{k}": v for s, sec in cfg.items() if isinstance(sec, dict) for k, v in sec.items()}


def _grid_fields(spec: str | None, configs: list[dict]) -> list[str]:
    """The [grid] and [zip] fields of sweep.toml; without a readable one, the fields whose values differ."""
    try:
        if spec is None:
            return _varying(configs)
        table = tomllib.loads(spec)
        axes = [table.get("grid", {}), table.get("zip", {})]
        if not all(isinstance(a, dict) for a in axes):  # refused by `icl-race sweep`; here, not a reason to fail
            return _varying(configs)
        return [*axes[0], *axes[1]]
    except (tomllib.TOMLDecodeError, RecursionError):
        return _varying(configs)


def _varying(configs: list[dict]) -> list[str]:
    flats = [_flat(c) for c in configs]
    keys = sorted({k for f in flats for k in f})
    return [k for k in keys if len({json.dumps(f.get(k), default=str) for f in flats}) > 1]


def _plain(value):
    """A config value as TOML reads it (tuples as lists), to compare a stored config with sweep.toml."""
    return [_plain(v) for v in value] if isinstance(value, tuple | list) else value


def _not_a_cell(name: str, cfg: dict, spec: dict | None) -> str:
    """Why the folder cells/<name> holding `cfg` is not a cell of the sweep `spec` (sweep.toml parsed),
    "" when it is: a folder named by a config digest (as `icl-race sweep` names them) that holds another
    config (a swapped or copied cell), or a config off the grid (a cell of an earlier grid, or of
    another sweep). A hand-made sweep's own names (no digest) are taken as they are."""
    try:
        digest = config.from_dict(cfg).digest()
    except ConfigError:
        digest = None
    if digest and len(name) == len(digest) and all(ch in "0123456789abcdef" for ch in name) and name != digest:
        return f"foreign: holds the run of another config (digest {digest}), not the cell its name says"
    if not isinstance(spec, dict):
        return ""
    flat = {k: _plain(v) for k, v in _flat(cfg).items()}
    grid: dict = g if isinstance(g := spec.get("grid"), dict) else {}
    for field, values in grid.items():
        if isinstance(values, list) and field in flat and flat[field] not in values:
            return f"not in this sweep's grid ({field} = {flat[field]!r}; sweep.toml lists {values})"
    zipped: dict = z if isinstance(z := spec.get("zip"), dict) else {}
    if zipped and all(isinstance(v, list) and f in flat for f, v in zipped.items()):
        if tuple(flat[f] for f in zipped) not in list(zip(*zipped.values())):
            return f"not in this sweep's grid (its {', '.join(zipped)} are no row of sweep.toml's [zip])"
    for sec, table in spec.items():
        if sec in config.SECTIONS and isinstance(table, dict):
            for key, value in table.items():
                swept = f"{sec}.{key}" in zipped or f"{sec}.{key}" in grid
                if f"{sec}.{key}" in flat and flat[f"{sec}.{key}"] != value and not swept:
                    return (
                        f"not in this sweep's grid ({sec}.{key} = {flat[f'{sec}.{key}']!r}; sweep.toml says {value!r})"
                    )
    return ""


def load_sweep(d: Path) -> SweepDir:
    """Every cell of a sweep directory; a finished one (results.npz there) is read as a `Run`. Only the
    grid's cells are read: a folder that is not one (`_not_a_cell`) is listed with its reason, no run."""
    d = Path(d)
    entries: list[tuple[Path, dict | None, str, Run | None, str]] = []
    spec_text = (d / "sweep.toml").read_text() if (d / "sweep.toml").is_file() else None
    try:
        spec = tomllib.loads(spec_text) if spec_text is not None else None
    except (tomllib.TOMLDecodeError, RecursionError):
        spec = None
    for c in sorted(p for p in (d / "cells").iterdir() if p.is_dir()):
        try:
            cfg = read_config(c)
        except ConfigError as e:
            entries.append((c, None, "unreadable", None, str(e)))
            continue
        if why := _not_a_cell(c.name, cfg, spec):
            entries.append((c, cfg, "foreign" if why.startswith("foreign") else "outside", None, why))
            continue
        if not (c / RESULTS).exists():
            entries.append((c, cfg, cell_status(c), None, "no results.npz (not finished)"))
            continue
        try:
            entries.append((c, cfg, "done", load_run(c), ""))
        except ConfigError as e:
            entries.append((c, cfg, "unreadable", None, str(e)))
    fields = _grid_fields(spec_text, [cfg for _, cfg, *_ in entries if cfg is not None])
    cells = [
        CellEntry(c.name, c, {f: _flat(cfg).get(f) for f in fields} if cfg else {}, st, run, cfg, why)
        for c, cfg, st, run, why in entries
    ]
    return SweepDir(d, fields, cells, spec_text)


def load_runs(*dirs: str | Path) -> list[Run]:
    """Every finished run in `dirs` (run or sweep directories, a sweep's cells in order) that the runner
    committed (a meta.json): what the studies' analyses read (icl_race.studies)."""
    runs = []
    for d in dirs:
        found = load(d)
        runs += found.runs if isinstance(found, SweepDir) else [found]
    return [r for r in runs if r.meta is not None]


def load(d: str | Path | Run) -> Run | SweepDir:
    """A run directory as a `Run` (a run still training as its results so far: `load_live`), a sweep
    directory (one with cells/) as a `SweepDir`; a `Run` (one trained in memory: `icl_race.train`) as it
    is, so that every reader of directories takes it too."""
    if isinstance(d, Run):
        return d
    d = Path(d)
    if not d.is_dir():
        raise ConfigError(f"{d}: no such directory")
    if is_sweep(d):
        return load_sweep(d)
    if not (d / RESULTS).exists() and (d / LIVE).exists():
        return load_live(d)
    if (d / CONFIG).exists() or (d / RESULTS).exists():
        return load_run(d)
    raise ConfigError(f"{d}: neither a run directory (config.json, results.npz) nor a sweep directory (cells/)")
