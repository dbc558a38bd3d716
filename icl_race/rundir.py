"""The run directory: the one module that writes it and reads it back.

    DIR/config.json        the resolved config, written first (a different config is refused)
    DIR/results.npz        seed_ids[S]; t_<event>[S] per event of the system (steps, -1 = not reached
                           within what the run observed: censored); diverged[S]; eval_steps[T]; every
                           probe as [S, T, ...]; steps_run, budget
    DIR/meta.json          config, versions, device, compile/run seconds, seed_steps_per_s, stop_event
    DIR/t_<stop>_hist.png  histogram of the headline time
    DIR/checkpoints/       orbax checkpoints of the unfinished run (engine/checkpoint.py)
    DIR/.lock              held (flock) by the process running in DIR

Finishing is one commit: results, histogram and meta are written to temporary names and fsynced, the
histogram and meta renamed into place, and results.npz renamed last. A run is done when results.npz and
meta.json are both there (`is_done`, the one test the runner and sweeps use), so a kill at any instant
leaves either a finished run or one that resumes from its checkpoints, which are deleted only after the
commit. results.npz without meta.json (written by versions that renamed results first) is repaired by
redoing the tail from the checkpoints, or the whole run when there are none.

Reading: `load(DIR)` gives a `Run` (one run directory) or a `SweepDir` (a directory with cells/), also
as `icl_race.load`. Padding seeds (the ensemble rounded up to a multiple of ensemble.block) never reach
results.npz, so a `Run` holds live seeds only; `diverged` masks the seeds the statistics exclude.
A file that cannot be read back (truncated, garbage, not UTF-8), results.npz arrays that are not the
layout the runner writes (`check_results`) and a config.json that is no longer the config in meta.json
(`check_provenance`) are each a `DamagedFileError` naming the file and the array or fields;
`icl-race run --redo` sets a finished run's damaged final files aside (`set_aside_final_files`).
Nothing is written through a symbolic link: `refuse_links` checks every name icl-race writes before any
work, and temporary files and the lock are opened with O_NOFOLLOW.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import io
import json
import os
import shutil
import time
import tomllib
import zipfile
import zlib
from pathlib import Path
from typing import Any, Callable

import numpy as np

from icl_race import config
from icl_race.config import Config, ConfigError

CONFIG, RESULTS, META, LOCK, CHECKPOINTS = "config.json", "results.npz", "meta.json", ".lock", "checkpoints"
SCALARS = ("steps_run", "budget")
# Every name icl-race writes, moves or deletes inside a run directory (the histograms and damaged-*
# folders are matched by pattern in `refuse_links`), and inside a sweep directory.
RUN_NAMES = (CONFIG, RESULTS, META, LOCK, CHECKPOINTS, f"{CHECKPOINTS}.damaged", "figures", "report.md",
             "report.json")
SWEEP_NAMES = ("cells", "sweep.toml", "summary.csv", "submitit", "figures", "report.md", "report.json")

# Called with the name of each step of `finish` right after it: a test kills the run there.
fault_hook: Callable[[str], None] | None = None


class RunDirError(ConfigError):
    """The directory holds another run, or is locked by another process (`Locked`)."""


class Locked(RunDirError):
    """Another icl-race process is running in the directory."""


class DamagedFileError(ConfigError):
    """A file of a run directory cannot be read back (truncated, overwritten, not what it should be)."""


# ---- writing ---------------------------------------------------------------------------------------


def refuse_links(d: Path, names=RUN_NAMES) -> None:
    """Refuse a directory where a path icl-race would write through is a symbolic link (or, for
    checkpoints/, not a directory): a link would lead the write, the move or orbax's checkpoints out of
    the directory. Checked before any work, so a refused directory is left exactly as it is."""
    d = Path(d)
    found = [d / n for n in names] + sorted(d.glob("t_*_hist.png")) + sorted(d.glob("damaged-*"))
    found += sorted(d.glob(".*.tmp*"))
    for path in found:
        if path.is_symlink():
            raise RunDirError(f"{path}: is a symbolic link; icl-race writes only inside {d}, never through a link: "
                              "remove it (or choose another directory)")
    ckpts = d / CHECKPOINTS
    if ckpts.exists() and not ckpts.is_dir():
        raise RunDirError(f"{ckpts}: is not a directory; move it aside (checkpoints are written there)")


def _tmp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


def _write_synced(path: Path, data: bytes) -> None:
    path.unlink(missing_ok=True)  # a temporary name is ours: one left behind (or planted as a link) goes
    try:
        # O_EXCL | O_NOFOLLOW: the file is created here, never reached through a link.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with open(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that a reader sees the old file or the whole new one, never a part."""
    path = Path(path)
    tmp = _tmp_name(path)
    _write_synced(tmp, data)  # removes tmp itself when the write fails (a full disk)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def json_bytes(obj) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _step(name: str) -> None:
    if fault_hook is not None:
        fault_hook(name)


def is_done(d: Path) -> bool:
    """The run in `d` is finished: its final commit (results.npz renamed last) happened."""
    return (Path(d) / RESULTS).exists() and (Path(d) / META).exists()


def half_finished(d: Path) -> bool:
    """results.npz without meta.json: a run killed while finishing, by a version that renamed results first."""
    return (Path(d) / RESULTS).exists() and not (Path(d) / META).exists()


def checkpoint_steps(d: Path) -> list[int]:
    ckpts = Path(d) / CHECKPOINTS
    return sorted(int(p.name) for p in ckpts.iterdir() if p.name.isdigit()) if ckpts.is_dir() else []


def write_config(d: Path, cfg: Config) -> None:
    if not (Path(d) / CONFIG).exists():
        atomic_write(Path(d) / CONFIG, json_bytes(cfg.to_dict()))


def finish(d: Path, results: dict[str, np.ndarray], meta: dict, files: dict[str, bytes]) -> None:
    """Commit a finished run: `files` (e.g. the histogram) and meta.json, then results.npz, each whole
    and fsynced before any is renamed; then the checkpoints go."""
    d = Path(d)
    for stale in d.glob(".*.tmp*"):  # left by a run killed inside an earlier finish
        stale.unlink(missing_ok=True)
    staged = [(d / name, data) for name, data in files.items()]
    staged += [(d / META, json_bytes(meta)), (d / RESULTS, npz_bytes(results))]
    try:
        for path, data in staged:
            _write_synced(_tmp_name(path), data)
            _step(f"staged {path.name}")
    except OSError:  # a failed write (a full disk) leaves no temporary file behind
        for path, _ in staged:
            _tmp_name(path).unlink(missing_ok=True)
        raise
    for path, _ in staged:  # results.npz last: its rename is the commit
        os.replace(_tmp_name(path), path)
        _step(f"renamed {path.name}")
    _fsync_dir(d)
    shutil.rmtree(d / CHECKPOINTS, ignore_errors=True)
    _step("removed checkpoints")


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
        raise RunDirError(f"--out {d}: holds a run whose config this version cannot read ({e}); "
                          "choose another directory") from None


def differing_fields(a: dict, b: dict) -> list[str]:
    """`section.field` of every field whose value differs between two config dicts (one absent counts)."""
    return sorted(f"{s}.{k}" for s in set(a) | set(b) for k in set(a.get(s) or {}) | set(b.get(s) or {})
                  if (a.get(s) or {}).get(k) != (b.get(s) or {}).get(k))


def check(cfg: Config, d: Path) -> bool:
    """True if `d` already holds this config's finished run (nothing to do); raises if it holds a
    different run. Reads only: a refused directory is left untouched."""
    d = Path(d)
    stored = stored_config(d)
    if stored is None:
        if d.exists() and any(p.name != LOCK for p in d.iterdir()):
            raise RunDirError(f"--out {d}: directory is not empty and holds no icl-race run; choose another")
        return False
    if stored != cfg:
        raise RunDirError(f"--out {d}: holds a run with a different config (differs in "
                          f"{', '.join(differing_fields(stored.to_dict(), cfg.to_dict()))}); choose another directory")
    return is_done(d)


def drop_superseded_checkpoints(d: Path) -> None:
    """Checkpoints left beside a committed run (killed right after its commit) are no longer needed."""
    d = Path(d)
    if (d / CHECKPOINTS).exists():
        with contextlib.suppress(Locked), lock(d):
            shutil.rmtree(d / CHECKPOINTS, ignore_errors=True)


def repair_notice(d: Path) -> str | None:
    """Make a half-finished directory resumable (drop its results.npz, which the redo rewrites
    identically) and say how; None when there is nothing to repair."""
    d = Path(d)
    if not half_finished(d):
        return None
    steps = checkpoint_steps(d)
    (d / RESULTS).unlink()
    how = f"redoing the tail from the checkpoint at step {steps[-1]:,}" if steps else "redoing the run (no checkpoint)"
    return f"{d}: results.npz without meta.json (a run interrupted while finishing); {how}"


def set_aside_final_files(d: Path) -> Path:
    """Move a finished run's final files (results, meta, histograms) to `d/damaged-<time>/`, never
    deleting them, so that the run can be trained again; returns that directory."""
    d = Path(d)
    aside = d / f"damaged-{time.strftime('%Y%m%dT%H%M%S')}"
    aside.mkdir()
    for f in [d / RESULTS, d / META, *d.glob("t_*_hist.png")]:
        if f.exists():
            f.rename(aside / f.name)
    return aside


@contextlib.contextmanager
def lock(d: Path):
    """An exclusive lock on the run directory, held for the whole run; the kernel drops it when the
    process dies, even by SIGKILL, so a stale lock never blocks a resume."""
    try:
        fd = os.open(Path(d) / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as e:
        if Path(d, LOCK).is_symlink():  # ELOOP: refused like any link (refuse_links says the same first)
            raise RunDirError(f"{Path(d) / LOCK}: is a symbolic link; remove it") from None
        raise
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            raise Locked(f"--out {d}: another icl-race process (pid {holder}) is running in this "
                         "directory; wait for it or choose another") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


# ---- reading ---------------------------------------------------------------------------------------


def _damaged(path: Path, e: BaseException) -> DamagedFileError:
    return DamagedFileError(f"{path}: damaged, cannot be read ({type(e).__name__}: {e})")


def _read_json(path: Path) -> dict:
    """A JSON object file; a damaged one is a DamagedFileError naming it (a missing file stays a
    FileNotFoundError, an unreadable one an OSError)."""
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
    """One finished run directory, read back. Per-seed arrays hold every live seed; `kept` (not
    diverged) selects the seeds the statistics use."""

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
    meta: dict | None  # None only for directories written without one (older versions, tests)

    @property
    def kept(self) -> np.ndarray:
        return ~self.diverged

    @property
    def cfg(self) -> Config:
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

    def kept_arrays(self) -> dict[str, np.ndarray]:
        """results.npz's arrays over the kept seeds, with `n_diverged`: no statistic averages a NaN curve."""
        keep = self.kept
        return {"seed_ids": self.seed_ids[keep], **{f"t_{e}": v[keep] for e, v in self.times.items()},
                "diverged": self.diverged[keep], "eval_steps": self.eval_steps,
                **{k: v[keep] for k, v in self.curves.items()}, "steps_run": np.int64(self.steps_run),
                "budget": np.int64(self.budget), "n_diverged": int((~keep).sum())}


def _bad(d: Path, name: str, what: str) -> DamagedFileError:
    return DamagedFileError(f"{Path(d) / RESULTS}: array {name}: {what}; not results icl-race wrote "
                            "(rerun with --redo to set the run aside and train it again)")


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
        raise DamagedFileError(f"{Path(d) / CONFIG}: no longer the config the results were computed from (meta.json "
                               f"differs in {', '.join(changed) or 'its sections'}); restore it, or rerun with --redo "
                               "to set the results aside and train again")


def load_run(d: Path) -> Run:
    """A run directory with config.json and results.npz (meta.json is read when there), checked as data
    (`check_results`, `check_provenance`): what it returns is what the run computed."""
    d = Path(d)
    cfg = read_config(d)
    res = read_results(d)
    meta = read_meta(d)
    check_results(d, res)
    check_provenance(d, cfg, meta)
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
    return Run(dir=d, config=cfg, seed_ids=np.asarray(res.get("seed_ids", np.arange(S))), times=events,
               headline=headline, diverged=np.asarray(res.get("diverged", np.zeros(S, bool)), bool),
               retired_at=np.asarray(res.get("retired_at", np.full(S, -1)), np.int64),
               eval_steps=steps, curves={k: v for k, v in res.items() if k not in fixed}, budget=budget,
               steps_run=steps_run, meta=meta)


@dataclasses.dataclass(frozen=True)
class CellEntry:
    """One cell of a sweep directory: its swept values and, when finished, its run."""

    name: str
    dir: Path
    values: dict[str, Any]
    status: str  # done | partial | pending | unreadable
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


def load_sweep(d: Path) -> SweepDir:
    """Every cell of a sweep directory; a finished one (results.npz there) is read as a `Run`."""
    d = Path(d)
    entries = []
    for c in sorted(p for p in (d / "cells").iterdir() if p.is_dir()):
        try:
            cfg = read_config(c)
        except ConfigError as e:
            entries.append((c, None, "unreadable", None, str(e)))
            continue
        if not (c / RESULTS).exists():
            entries.append((c, cfg, cell_status(c), None, "no results.npz (not finished)"))
            continue
        try:
            entries.append((c, cfg, "done", load_run(c), ""))
        except ConfigError as e:
            entries.append((c, cfg, "unreadable", None, str(e)))
    spec = (d / "sweep.toml").read_text() if (d / "sweep.toml").is_file() else None
    fields = _grid_fields(spec, [cfg for _, cfg, *_ in entries if cfg is not None])
    cells = [CellEntry(c.name, c, {f: _flat(cfg).get(f) for f in fields} if cfg else {}, st, run, cfg, why)
             for c, cfg, st, run, why in entries]
    return SweepDir(d, fields, cells, spec)


def load_cells(*dirs: str | Path) -> list[tuple[dict, dict]]:
    """(config dict, `Run.kept_arrays()`) of every finished run in `dirs` (run or sweep directories), the
    input of the analysis summaries (icl_race.analysis.memorization, .race)."""
    runs = []
    for d in dirs:
        found = load(d)
        runs += found.runs if isinstance(found, SweepDir) else [found]
    return [(r.config, r.kept_arrays()) for r in runs if r.meta is not None]


def load(d: str | Path) -> Run | SweepDir:
    """A run directory as a `Run`, a sweep directory (one with cells/) as a `SweepDir`."""
    d = Path(d)
    if not d.is_dir():
        raise ConfigError(f"{d}: no such directory")
    if is_sweep(d):
        return load_sweep(d)
    if (d / CONFIG).exists() or (d / RESULTS).exists():
        return load_run(d)
    raise ConfigError(f"{d}: neither a run directory (config.json, results.npz) nor a sweep directory (cells/)")
