"""Who may write where: the one rule of every command that writes files (sweep, report, export, compare,
analyze; a run's own directory is held by `write.check`, on the same test of a folder holding files it
did not write: `layout.holds_others`).

A writer of kind K (its name: "export", "report", ...)
  - writes only into a folder it creates, or one whose marker `.icl-race-K` says it is its own (a folder
    written before markers existed is recognised by the writer's `adopt` test, e.g. a sweep's sweep.toml);
  - writes only the files it names;
  - never replaces a file it did not write: the marker records the sha256 of every file K wrote, and a
    named file on disk whose digest is not recorded (the user's, or one edited since) is refused.
`force` (the commands' --force) lets K take a folder that is not its own and replace its named files
there; it still touches no other file.

`check` is read-only (a refusal before any work leaves everything as it was); `write` checks again and
writes a set of files as one: each is written whole and fsynced under a temporary name before any is
renamed, so a failure (a full disk, named in the error) leaves every old file and no temporary one, and
a pair such as export's seeds and curves is never mismatched. The marker is renamed first and records
the old and the new digests, so that a kill between two renames leaves every file recognised as K's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from icl_race.rundir.files import stored_config
from icl_race.rundir.layout import (
    CONFIG,
    RESULTS,
    SWEEP_NAMES,
    DamagedFileError,
    RunDirError,
    holds_others,
    temporary_of,
)
from icl_race.rundir.write import _fsync, _tmp_name, _write_synced, refuse_links


def marker(kind: str) -> str:
    return f".icl-race-{kind}"


# A marker records a digest or two per file a writer names: a few KiB. Larger is not one of icl-race's.
MARKER_MAX_BYTES = 1 << 20


def _small_file(path: Path, limit: int = MARKER_MAX_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, read without following a link or waiting on a
    FIFO; ValueError naming what it is instead (an OSError when it cannot be opened)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with open(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if st.st_size > limit:
            raise ValueError(f"{st.st_size:,} bytes, more than the {limit:,} one of icl-race's holds")
        return f.read(limit + 1)


def _icl_race_json(path: Path, key: str) -> dict | None:
    """The JSON object in `path` when it is one of icl-race's (it has `key`), else None."""
    try:
        obj = json.loads(_small_file(path, 16 * MARKER_MAX_BYTES))
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) and key in obj else None


def _sweep_before_markers(d: Path) -> list[str] | None:
    """A sweep folder written before markers, recognised by what only a sweep writes, never by file names:
    nothing but a sweep's own names, and a cells/ folder holding at least one icl-race run (a config.json
    this version reads as a Config). Its sweep.toml and summary.csv are then the sweep's. Files merely named
    sweep.toml and summary.csv are the user's (a pre-marker sweep killed before its first cell: --force)."""
    own = (*SWEEP_NAMES, "analyze")  # and other writers' markers, a changed spec's backups
    if any(p.name not in own and not p.name.startswith((".icl-race-", "sweep.previous-")) for p in d.iterdir()):
        return None
    cells = d / "cells"
    if not cells.is_dir() or not any(_holds_icl_race_run(c) for c in cells.iterdir()):
        return None
    return [n for n in ("sweep.toml", "summary.csv") if (d / n).is_file()]


def _holds_icl_race_run(d: Path) -> bool:
    try:
        return d.is_dir() and not d.is_symlink() and stored_config(d) is not None
    except RunDirError:  # unreadable, or not a config of this version: not evidence
        return False


def _report_before_markers(d: Path) -> list[str]:
    """A report's files in a run or sweep folder (the caller checked which) from before markers: those
    its report.json (an icl-race report: it has a schema) lists; none when there is no such report.json."""
    report = _icl_race_json(d / "report.json", "schema")
    figures = report.get("figures") if report else None
    if not report or not str(report["schema"]).startswith("icl-race/report/"):
        return []
    return ["report.md", "report.json", *(f for f in figures or [] if isinstance(f, str))]


# Per writer kind, how a folder it wrote before markers existed is recognised: the names it holds that are
# the writer's (None: the folder is not its). Export, compare and analyze folders of earlier versions have
# no such sign: --force takes them once.
BEFORE_MARKERS: dict[str, Callable[[Path], Iterable[str] | None]] = {
    "sweep": _sweep_before_markers,
    "report": _report_before_markers,
}


def _holds_run(d: Path) -> bool:
    """`d` holds a run's config.json or results.npz: a run directory (finished or not)."""
    return (d / CONFIG).is_file() or (d / RESULTS).is_file()


def _digest(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


@dataclasses.dataclass(frozen=True)
class Owned:
    """A folder `check` found writable by `kind` for `names`: `ours` the digests of the files that are
    `kind`'s (name -> digests: its marker's record, the files of an earlier version's folder, the files
    --force takes)."""

    dir: Path
    kind: str
    names: tuple[str, ...]
    ours: dict[str, list[str]]


def _is_digest(v: object) -> bool:
    return isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdef" for c in v)


def _marker_files(path: Path, kind: str) -> dict[str, list[str]]:
    """The record of the marker at `path`, validated: a regular file of at most MARKER_MAX_BYTES, the JSON
    object `write` writes ({"kind": kind, "files": {name: [sha256 hex digest, ...]}}); ValueError saying
    what is wrong otherwise."""
    try:
        obj = json.loads(_small_file(path))
    except OSError as e:
        raise ValueError(e.strerror or str(e)) from None
    except ValueError as e:
        raise ValueError(str(e) if "bytes" in str(e) or "regular" in str(e) else "not JSON") from None
    if not isinstance(obj, dict) or obj.get("kind") != kind or not isinstance(obj.get("files"), dict):
        raise ValueError(f'expected an object with "kind": "{kind}" and "files"')
    files = obj["files"]
    for name, digests in files.items():
        if not isinstance(digests, list) or not all(_is_digest(v) for v in digests):
            raise ValueError(f"files[{json.dumps(name)[:80]}]: expected a list of sha256 digests")
    return files


def _read_marker(path: Path, kind: str, force: bool) -> dict[str, list[str]]:
    try:
        return _marker_files(path, kind)
    except ValueError as e:
        if force:  # a damaged marker records nothing: --force takes the folder again
            return {}
        raise DamagedFileError(
            f"{path}: damaged, not icl-race {kind}'s record of the files it wrote ({e}); move it aside or pass --force"
        ) from None


def check(
    d: str | Path,
    kind: str,
    names: Iterable[str],
    *,
    force: bool = False,
    what: str = "--out",
) -> Owned:
    """May `kind` write `names` (paths relative to `d`) into `d`? Raises a one-line RunDirError naming
    the folder or the file when not; reads only. With `force`, the named files on disk are recorded as
    `kind`'s (so that later writes without it replace them)."""
    d, names = Path(d), tuple(names)
    adopt = BEFORE_MARKERS.get(kind)
    if d.exists() and not d.is_dir():
        raise RunDirError(f"{what} {d}: exists and is not a directory; choose a directory")
    refuse_links(d, (marker(kind), lock_name(kind), *names))
    mark = d / marker(kind)
    adopted = adopt(d) if adopt is not None and d.is_dir() and not _exists(mark) else None
    if _exists(mark):
        ours = _read_marker(mark, kind, force)
    elif adopted is not None:
        ours = {n: [_digest(d / n)] for n in adopted if (d / n).is_file()}
    elif holds_others(d, (marker(kind), lock_name(kind), *names)) and not force:
        # A run directory is named as such: the user most likely gave a run's folder for another's --out.
        held = (
            f"an icl-race run, not icl-race {kind}'s files" if _holds_run(d) else f"files icl-race {kind} did not write"
        )
        raise RunDirError(
            f"{what} {d}: the folder holds {held} (it has no {marker(kind)}); "
            "choose a new or empty folder, or pass --force to write its files there"
        )
    else:
        ours = {}
    for n in names:
        path = d / n
        if path.is_dir():
            raise RunDirError(f"{path}: is a directory where icl-race {kind} writes a file; move it away")
        if not path.exists() or (digest := _digest(path)) in ours.get(n, ()):
            continue
        if force:
            ours[n] = [*ours.get(n, []), digest]
        else:
            raise RunDirError(
                f"{path}: exists and was not written by icl-race {kind} (or was changed since); "
                "move it away or pass --force to replace it"
            )
    return Owned(d, kind, names, ours)


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def lock_name(kind: str) -> str:
    return f"{marker(kind)}.lock"


@contextlib.contextmanager
def _exclusive(d: Path, kind: str):
    """Held while `kind`'s marker in `d` is read, merged and written: two sweep workers writing summary.csv
    at once would otherwise each write back a record without the other's entries. An flock on
    `.icl-race-<kind>.lock` (rundir/write.py's `lock` takes the run's the same way), waited for: another
    writer holds it for the few milliseconds of its write, and the kernel drops it if that writer dies."""
    fd = os.open(d / lock_name(kind), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _record(owned: Owned, files: dict[str, bytes]) -> dict[str, list[str]]:
    """The marker's new record, under `_exclusive`: what is on disk now (another writer of the same kind may
    have written since `check`) merged with `owned.ours`, each file written recorded by its old and new
    digests. A named file changed since `check` by a writer of no record is refused as `check` refuses it."""
    d, kind = owned.dir, owned.kind
    mark = d / marker(kind)
    on_disk = _read_marker(mark, kind, force=True) if _exists(mark) else {}
    record = {n: list(dict.fromkeys([*on_disk.get(n, []), *owned.ours.get(n, [])])) for n in {*on_disk, *owned.ours}}
    for n, data in files.items():
        path = d / n
        old = _digest(path) if path.is_file() else None
        if old is not None and old not in record.get(n, ()):
            raise RunDirError(
                f"{path}: changed since icl-race {kind} checked it, by a writer that is not icl-race {kind}; "
                "move it away or pass --force to replace it"
            )
        record[n] = [*([old] if old is not None else []), hashlib.sha256(data).hexdigest()]
    return record


def write(owned: Owned, files: dict[str, bytes]) -> list[str]:
    """Write `files` (name -> bytes, each among `owned.names`) into the folder, as one; returns the names.
    With no files it creates the folder and its marker: a writer that writes its files one by one over a
    long job (a sweep's summary.csv after each cell, by `write_files` without force) takes it so. The
    marker is read, merged and written under `_exclusive`: concurrent writers of one kind keep each
    other's entries."""
    unnamed = sorted(set(files) - set(owned.names))
    if unnamed:
        raise ValueError(f"icl-race {owned.kind} writes only the files it named: not {', '.join(unnamed)}")
    d = owned.dir
    d.mkdir(parents=True, exist_ok=True)
    with _exclusive(d, owned.kind):
        _write_locked(owned, files, _record(owned, files))
    return list(files)


def _write_locked(owned: Owned, files: dict[str, bytes], record: dict[str, list[str]]) -> None:
    d = owned.dir
    body = json.dumps({"kind": owned.kind, "files": record}, indent=1, sort_keys=True) + "\n"
    staged = [(d / marker(owned.kind), body.encode()), *((d / n, data) for n, data in files.items())]
    for path, _ in staged:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        for path, data in staged:
            _write_synced(_tmp_name(path), data, path)
    except OSError:  # nothing renamed yet: every old file is there, no temporary one
        for path, _ in staged:
            _tmp_name(path).unlink(missing_ok=True)
        raise
    for path, _ in staged:  # the marker first: every file is recognised as ours at every instant
        os.replace(_tmp_name(path), path)
    for folder in {path.parent for path, _ in staged}:
        _fsync(folder)
    for path, _ in staged:  # a killed writer's temporaries of these names: replaced now, so dropped
        for stale in path.parent.glob(f".{path.name}.tmp*"):
            if temporary_of(stale.name) == path.name and stale.is_file() and not stale.is_symlink():
                stale.unlink(missing_ok=True)


def write_files(
    d: str | Path, kind: str, files: dict[str, bytes], *, force: bool = False, what: str = "--out"
) -> list[str]:
    """`check` then `write`: the one call of a writer that writes all its files at once."""
    return write(check(d, kind, files, force=force, what=what), files)
