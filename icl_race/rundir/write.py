"""The run directory written: every file icl-race puts there, and the commit that finishes a run.

Finishing is one commit (`finish`): the kept parameters (train.keep_params, orbax), results, histogram and
meta are written to temporary names and fsynced, the parameters, histogram and meta renamed into place,
and results.npz renamed last, so a kill at any
instant leaves either a finished run (rundir/layout.py: `is_done`) or one that resumes from its
checkpoints, which are deleted only after the commit. results.npz without meta.json (written by versions
that renamed results first) is repaired by redoing the tail from the checkpoints, or the whole run when
there are none (`repair_notice`).

Nothing is written through a symbolic link: `refuse_links` checks every name icl-race writes before any
work, and temporary files and the lock are opened with O_NOFOLLOW.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import shutil
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from icl_race.config import Config
from icl_race.rundir import layout  # the file names, as layout.RESULTS
from icl_race.rundir.files import differing_fields, stored_config
from icl_race.rundir.layout import Locked, RunDirError, checkpoint_steps, half_finished, holds_others, is_done

# Called with the name of each step of `finish` right after it: a test kills the run there.
fault_hook: Callable[[str], None] | None = None


def refuse_links(d: Path, names=layout.RUN_NAMES) -> None:
    """Refuse a directory where a path icl-race would write through, or any folder on its way below `d`,
    is a symbolic link (or, for checkpoints/ and checkpoints.damaged/, not a directory): a link would lead
    the write, the move or orbax's checkpoints out of the directory. Checked before any work, so a refused
    directory is left exactly as it is."""
    d = Path(d)
    # Every folder on the way counts, not only the last component: figures/ linked elsewhere would lead
    # figures/km.png there.
    found = [d.joinpath(*Path(n).parts[:i]) for n in names for i in range(1, len(Path(n).parts) + 1)]
    found += sorted(d.glob("t_*_hist.png")) + sorted(d.glob("damaged-*")) + sorted(d.glob(".*.tmp*"))
    for path in found:
        if path.is_symlink():
            raise RunDirError(
                f"{path}: is a symbolic link; icl-race writes only inside {d}, never through a link: "
                "remove it (or choose another directory)"
            )
    for name, why in (
        (layout.CHECKPOINTS, "checkpoints are written"),
        (f"{layout.CHECKPOINTS}.damaged", "damaged checkpoints are moved"),
    ):
        if (d / name).exists() and not (d / name).is_dir():
            raise RunDirError(f"{d / name}: is not a directory; move it aside ({why} there)")


def _tmp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


def _write_synced(path: Path, data: bytes, final: Path | None = None) -> None:
    """`data` whole and fsynced at the temporary name `path`; a failure names `final`, the file it is
    for (a full disk: "OUT/seeds.nc: No space left on device", not a bare errno)."""
    path.unlink(missing_ok=True)  # a temporary name is ours: one left behind (or planted as a link) goes
    try:
        # O_EXCL | O_NOFOLLOW: the file is created here, never reached through a link.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with open(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        path.unlink(missing_ok=True)
        if e.filename is None and e.errno is not None:  # write(2) and fsync(2) errors carry no path
            raise OSError(e.errno, e.strerror, str(final or path)) from e
        raise
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _fsync(path: Path) -> None:
    """A file's data, or a directory's entries (a rename in it), on disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that a reader sees the old file or the whole new one, never a part."""
    path = Path(path)
    tmp = _tmp_name(path)
    _write_synced(tmp, data, path)  # removes tmp itself when the write fails (a full disk)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def json_bytes(obj) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """np.savez's file (one stored .npy member per array, read by np.load), with a fixed timestamp on
    every member: np.savez stamps the time of writing, so the same arrays would not be the same bytes, and
    a resumed run could not be compared byte for byte with an uninterrupted one."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, a in arrays.items():
            with zf.open(zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0)), "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(a), allow_pickle=False)
    return buf.getvalue()


def _step(name: str) -> None:
    if fault_hook is not None:
        fault_hook(name)


def write_config(d: Path, cfg: Config) -> None:
    if not (Path(d) / layout.CONFIG).exists():
        atomic_write(Path(d) / layout.CONFIG, json_bytes(cfg.to_dict()))


def _write_params(tmp: Path, params: dict[str, Any], final: Path) -> None:
    """Each kept set of parameters (name -> a pytree of host arrays, leading seed axis) saved by orbax in
    `tmp`/<name>/, every file and folder fsynced; a failure names `final`, the folder it is for."""
    import orbax.checkpoint as ocp

    tmp.mkdir()
    try:
        with ocp.StandardCheckpointer() as writer:
            for name, tree in params.items():
                writer.save(tmp.absolute() / name, tree)
            writer.wait_until_finished()
    except Exception as e:  # orbax wraps I/O errors (a full disk) in its own types
        raise OSError(getattr(e, "errno", None) or 5, f"orbax: {str(e)[:200]}", str(final)) from e
    for root, _, names in os.walk(tmp, topdown=False):
        for path in [*(Path(root) / name for name in names), Path(root)]:
            _fsync(path)


def finish(
    d: Path, results: dict[str, np.ndarray], meta: dict, files: dict[str, bytes], params: dict[str, Any] | None = None
) -> None:
    """Commit a finished run: the kept `params` (name -> every seed's parameters: DIR/params/<name>/),
    `files` (e.g. the histogram) and meta.json, then results.npz, each whole and fsynced before any is
    renamed; then the checkpoints go."""
    d = Path(d)
    for stale in d.glob(".*.tmp*"):  # left by a run killed inside an earlier finish
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale)
        else:
            stale.unlink(missing_ok=True)
    staged = [(d / name, data) for name, data in files.items()]
    staged += [(d / layout.META, json_bytes(meta)), (d / layout.RESULTS, npz_bytes(results))]
    kept = _tmp_name(d / layout.PARAMS)
    try:
        if params:
            _write_params(kept, params, d / layout.PARAMS)
            _step(f"staged {layout.PARAMS}")
        for path, data in staged:
            _write_synced(_tmp_name(path), data, path)
            _step(f"staged {path.name}")
    except OSError:  # a failed write (a full disk) leaves no temporary file behind
        shutil.rmtree(kept, ignore_errors=True)
        for path, _ in staged:
            _tmp_name(path).unlink(missing_ok=True)
        raise
    if params:  # an older params/ is a killed commit's (or --redo's, set aside): the run is not done
        shutil.rmtree(d / layout.PARAMS, ignore_errors=True)
        os.replace(kept, d / layout.PARAMS)
        _step(f"renamed {layout.PARAMS}")
    for path, _ in staged:  # results.npz last: its rename is the commit
        os.replace(_tmp_name(path), path)
        _step(f"renamed {path.name}")
    _fsync(d)
    shutil.rmtree(d / layout.CHECKPOINTS, ignore_errors=True)
    (d / layout.LIVE).unlink(missing_ok=True)  # the partial results of the run, superseded like its checkpoints
    _step("removed checkpoints")


def check(cfg: Config, d: Path) -> bool:
    """True if `d` already holds this config's finished run (nothing to do); raises if it holds a
    different run. Reads only: a refused directory is left untouched."""
    d = Path(d)
    stored = stored_config(d)
    if stored is None:
        if holds_others(d):
            raise RunDirError(f"--out {d}: directory is not empty and holds no icl-race run; choose another")
        return False
    if stored != cfg:
        raise RunDirError(
            f"--out {d}: holds a run with a different config (differs in "
            f"{', '.join(differing_fields(stored.to_dict(), cfg.to_dict()))}); choose another directory"
        )
    return is_done(d)


def drop_superseded_checkpoints(d: Path) -> None:
    """Checkpoints (and live.npz) left beside a committed run (killed right after its commit) are no
    longer needed."""
    d = Path(d)
    if (d / layout.CHECKPOINTS).exists() or (d / layout.LIVE).exists():
        with contextlib.suppress(Locked), lock(d):
            shutil.rmtree(d / layout.CHECKPOINTS, ignore_errors=True)
            (d / layout.LIVE).unlink(missing_ok=True)


def repair_notice(d: Path) -> str | None:
    """Make a half-finished directory resumable (drop its results.npz, which the redo rewrites
    identically) and say how; None when there is nothing to repair."""
    d = Path(d)
    if not half_finished(d):
        return None
    steps = checkpoint_steps(d)
    (d / layout.RESULTS).unlink()
    how = f"redoing the tail from the checkpoint at step {steps[-1]:,}" if steps else "redoing the run (no checkpoint)"
    return f"{d}: results.npz without meta.json (a run interrupted while finishing); {how}"


def set_aside_final_files(d: Path) -> Path:
    """Move a finished run's final files (results, meta, kept parameters, histograms) to `d/damaged-<time>/`, never
    deleting them, so that the run can be trained again; returns that directory."""
    d = Path(d)
    aside = d / f"damaged-{time.strftime('%Y%m%dT%H%M%S')}"
    aside.mkdir()
    for f in [d / layout.RESULTS, d / layout.META, d / layout.PARAMS, *d.glob("t_*_hist.png")]:
        if f.exists():
            f.rename(aside / f.name)
    return aside


# A reader's liveness probe (rundir/state.py) holds a shared lock for an instant: a run starting then waits
# this long for it rather than refusing its own directory as taken.
PROBE_WAIT_S = 0.2


def _flock_soon(fd: int) -> None:
    """An exclusive flock on `fd` within PROBE_WAIT_S; BlockingIOError when another process keeps it."""
    deadline = time.monotonic() + PROBE_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


@contextlib.contextmanager
def lock(d: Path):
    """An exclusive lock on the run directory, held for the whole run; the kernel drops it when the
    process dies, even by SIGKILL, so a stale lock never blocks a resume."""
    try:
        fd = os.open(Path(d) / layout.LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError:
        if Path(d, layout.LOCK).is_symlink():  # ELOOP: refused like any link (refuse_links says the same first)
            raise RunDirError(f"{Path(d) / layout.LOCK}: is a symbolic link; remove it") from None
        raise
    try:
        try:
            _flock_soon(fd)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            raise Locked(
                f"--out {d}: another icl-race process (pid {holder}) is running in this "
                "directory; wait for it or choose another"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)
