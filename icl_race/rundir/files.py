"""Each file of a run directory read back: config.json (with the fields added since at their defaults),
meta.json, results.npz, the kept parameters (params/<at>/, orbax). A file that cannot be read back (truncated, garbage, not UTF-8, not a regular
file) is a `DamagedFileError` naming it; a missing one a ConfigError saying what the directory lacks."""

from __future__ import annotations

import json
import zipfile
import zlib
from pathlib import Path

import numpy as np

from icl_race import config
from icl_race.config import Config, ConfigError
from icl_race.rundir.layout import CONFIG, META, PARAMS, RESULTS, DamagedFileError, RunDirError


def _damaged(path: Path, e: BaseException) -> DamagedFileError:
    return DamagedFileError(f"{path}: damaged, cannot be read ({type(e).__name__}: {e})")


def _regular(path: Path) -> None:
    """Refuse a path that exists but is not a regular file before opening it: opening a FIFO (a named
    pipe) waits for a writer forever, a device may never end."""
    if Path(path).exists() and not Path(path).is_file():
        raise DamagedFileError(f"{path}: damaged, not a regular file")


def read_json(path: Path) -> dict:
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


def read_npz(path: Path) -> dict[str, np.ndarray]:
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
    return _parsed(cfg)[0]


def _parsed(cfg: dict) -> tuple[dict, Config | None]:
    """`with_defaults`, and the typed Config it parsed (None: one this version cannot parse)."""
    try:
        typed = config.from_dict(cfg)
    except ConfigError:
        return cfg, None
    return typed.to_dict(), typed


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
        stored = read_json(path)
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
    return read_config_parsed(d)[0]


def read_config_parsed(d: Path) -> tuple[dict, Config | None]:
    """`read_config`, and the typed Config its one parse made (None: one this version cannot parse), which
    a reader of the run carries (`Run.cfg`, a cell's digest) instead of parsing the dict again."""
    d = Path(d)
    raw: object  # meta.json's copy may be anything
    try:
        raw = read_json(d / CONFIG)
    except FileNotFoundError:
        raw = (read_meta(d) or {}).get("config")
        if raw is None:
            raise ConfigError(f"{d}: no config.json (not an icl-race run directory)") from None
    except OSError as e:
        raise ConfigError(f"{d}/config.json: unreadable ({e})") from None
    cfg, typed = _parsed(raw) if isinstance(raw, dict) else (raw, None)
    if not isinstance(cfg, dict) or not all(isinstance(cfg.get(s), dict) for s in ("task", "train")):
        raise ConfigError(f"{d}/config.json: expected sections task and train")
    return cfg, typed


def read_meta(d: Path) -> dict | None:
    try:
        return read_json(Path(d) / META)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConfigError(f"{d}/meta.json: unreadable ({e})") from None


def read_results(d: Path) -> dict[str, np.ndarray]:
    """results.npz's arrays; a damaged file is a DamagedFileError naming it."""
    d = Path(d)
    try:
        return read_npz(d / RESULTS)
    except FileNotFoundError:
        raise ConfigError(f"{d}: no results.npz (run not finished)") from None


def read_params(d: Path, at: str):
    """The parameters a run kept at `at` ("final" or "at_t_icl": DIR/params/<at>/, train.keep_params), every
    seed's as numpy arrays with a leading seed axis (results.npz's seed_ids order); a run that kept none
    there is a ConfigError, a damaged one a DamagedFileError."""
    path = Path(d).absolute() / PARAMS / at
    if not path.is_dir():
        raise ConfigError(
            f"{d}: no kept parameters {PARAMS}/{at}/ (a run keeps them when trained into a directory with "
            f'train.keep_params = "{at}" or "both": icl-race run, or icl_race.train(..., out=DIR))'
        )
    import orbax.checkpoint as ocp

    try:
        with ocp.StandardCheckpointer() as reader:
            return reader.restore(path)
    except Exception as e:  # orbax and tensorstore raise many types for damaged files
        raise _damaged(path, e) from None
