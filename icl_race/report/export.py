"""Run and sweep directories as tables for notebooks: `icl-race export DIR... --format F --out OUT`.

    seeds.<ext>   one row per seed of every finished run (a run given twice, or a sweep and one of its
                  cells, is exported once): run (its directory), the values of every config field that
                  differs between the exported runs (a sweep's swept fields first), seed (its id),
                  diverged, retired_at, outcome and fall_step (`analysis.outcome`, systems with ICL
                  accuracy curves), acquired (the headline event, e.g. ICL, reached), per event t_<event>
                  (NaN when not reached; with censored="-1" results.npz's -1), censored_<event> and
                  censor_at_<event> (`Run.censor_at`: the one censoring rule), the per-seed constants
                  recorded as probes (PER_SEED: beta0) and final_<probe> (last finite value) of every
                  other scalar probe. When a run is not finished (training or stopped, rundir/state.py)
                  its values are the last so far, never called final: the columns are last_<probe>
                  instead (for every run of that export), beside state (finished | training | stopped)
                  and as_of_step (the step its values are as of)
    curves.<ext>  every other probe per evaluation as an xarray Dataset over (run, seed, step[, the probe's
                  own axes]), the tell-apart fields as coordinates along run; runs with other seeds or
                  evaluation steps are aligned by an outer join (NaN where a run has no such evaluation)

F = csv | parquet | netcdf (ext csv, parquet, nc). In CSV and Parquet the curves are the long table of the
scalar probes (one row per run, seed and step); a probe with its own axes (linear attention's weights) is
in netCDF only (`Exported.netcdf_only`): its product with the others' axes would not fit in memory. In
netCDF (HDF5 through h5netcdf) the Dataset itself, and the seed table as a Dataset over one `row`
dimension. The tables' size in memory is estimated before they are built and refused beyond what this
process may allocate (`memory_budget`).

Provenance (per run: git commit, device, jax version, config digest, from its meta.json; its state, and for
an unfinished run the step its values are as of; `partial`: one line per unfinished run) is file metadata:
Parquet's key-value metadata and netCDF's attributes (key `icl_race_provenance`, JSON; netCDF also
`commit`, `device`, `jax_version`, `config_digest` when the runs agree, and `partial` when a run is
unfinished), and for CSV the sidecar provenance.json. The files of one export are written as one, into a folder the export owns
(rundir/owner.py): all or none.

The libraries are the optional extra `export` (pandas, pyarrow, xarray, h5netcdf with h5py): imported
here only inside the functions that need them, and a missing one is a one-line `MissingExtra` naming
the extra. `tables(DIR...)` gives both objects in memory for a notebook.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from icl_race import rundir
from icl_race.config import ConfigError
from icl_race.rundir import runset

EXTRA = "export"
# format -> (file extension, the modules it needs)
FORMATS = {
    "csv": ("csv", ("pandas", "xarray")),
    "parquet": ("parquet", ("pandas", "xarray", "pyarrow")),
    "netcdf": ("nc", ("pandas", "xarray", "h5netcdf", "h5py")),
}


class MissingExtra(ConfigError):
    """A library of the optional extra is not installed."""


def require(*modules: str) -> None:
    # Found, not imported: pandas and xarray take seconds, paid after the input is read and said.
    for name in modules:
        if importlib.util.find_spec(name) is None:
            raise MissingExtra(
                f"export needs {name}, which is not installed: it is in the optional extra "
                f"[{EXTRA}] (pip install 'icl-race[{EXTRA}]')"
            )


def _scalar_column(values: list) -> list:
    """One field's values over the runs as one column type: numbers, booleans or strings as they are,
    anything else (lists, None, a mixture) as JSON text, which every format can hold."""
    kinds = {bool if isinstance(v, bool) else (int, float) if isinstance(v, (int, float)) else type(v) for v in values}
    if len(kinds) == 1 and next(iter(kinds)) in (bool, (int, float), str):
        return values
    return [json.dumps(v) for v in values]


def cell_values(rs: runset.RunSet) -> list[dict[str, Any]]:
    """Per run, the values of the fields that tell the runs apart."""
    columns = {f: _scalar_column([runset.value(r.config, f) for r in rs.runs]) for f in rs.fields}
    return [{f: columns[f][i] for f in rs.fields} for i in range(len(rs.runs))]


# Probes that hold one value per seed over the whole run (the attention's initial sharpness): a column of
# the seed table, not a curve.
PER_SEED = ("beta0",)
CENSORED = ("nan", "-1")  # how a time not reached is written: NaN (with its boolean columns) or results.npz's -1


def seed_columns(
    run: rundir.Run, cell: dict[str, Any], censored: str = "nan", partial: bool = False
) -> dict[str, np.ndarray]:
    """The seed table's columns for one run (every live seed, diverged ones included), as numpy arrays;
    `partial` (a run of the export is unfinished): last_<probe> for final_<probe>, with state and as_of_step."""
    # Here, not at the top: the command line imports this module for FORMATS, and scipy (under
    # analysis) would cost `icl-race --help` a second.
    from icl_race.analysis.outcome import last_finite, of_results

    S = run.seed_ids.size
    cols = {
        "run": np.full(S, str(run.dir)),
        **{f: np.full(S, v) for f, v in cell.items()},
        "seed": run.seed_ids,
        "diverged": run.diverged,
        "retired_at": run.retired_at,
    }
    outcomes = of_results(run.times, run.diverged, run.curves, run.eval_steps)
    if outcomes is not None:
        cols |= {"outcome": outcomes.classes_S, "fall_step": outcomes.fall_S}
    cols["acquired"] = run.times[run.headline] >= 0
    for event, t in run.times.items():
        written = t if censored == "-1" else np.where(t >= 0, t, np.nan)
        cols |= {
            f"t_{event}": written,
            f"censored_{event}": t < 0,
            f"censor_at_{event}": np.full(S, run.censor_at(event)),
        }
    cols |= {name: last_finite(c) for name, c in run.curves.items() if name in PER_SEED and c.ndim == 2}
    if partial:
        cols |= {"state": np.full(S, run.state.kind), "as_of_step": np.full(S, run.steps_run)}
    last = "last" if partial else "final"
    return cols | {
        f"{last}_{name}": last_finite(c) for name, c in run.curves.items() if c.ndim == 2 and name not in PER_SEED
    }


def seed_table(rs: runset.RunSet, censored: str = "nan"):
    """The seed table (a pandas DataFrame) of a `runset.RunSet`."""
    require("pandas")
    import pandas as pd

    partial = any(r.partial for r in rs.runs)
    return pd.concat(
        [pd.DataFrame(seed_columns(r, cell, censored, partial)) for r, cell in zip(rs.runs, cell_values(rs))],
        ignore_index=True,
    )


def _probes(run: rundir.Run, scalar_only: bool) -> dict[str, np.ndarray]:
    return {n: c for n, c in run.curves.items() if n not in PER_SEED and (c.ndim == 2 or not scalar_only)}


def curves(rs: runset.RunSet, scalar_only: bool = False):
    """Every probe's curves (an xarray Dataset over run, seed, step) of a `runset.RunSet`; `scalar_only`:
    without the probes that have axes of their own."""
    require("xarray")
    import xarray as xr

    parts = []
    for r, cell in zip(rs.runs, cell_values(rs)):
        data = {
            name: (("seed", "step", *(f"{name}_dim{i}" for i in range(2, c.ndim))), c)
            for name, c in _probes(r, scalar_only).items()
        }
        ds = xr.Dataset(data, coords={"seed": r.seed_ids, "step": r.eval_steps})
        parts.append(ds.expand_dims(run=[str(r.dir)]).assign_coords({f: ("run", [v]) for f, v in cell.items()}))
    return xr.concat(
        parts, dim="run", join="outer", fill_value=np.nan, data_vars="all", coords="different", compat="equals"
    )


def provenance(rs: runset.RunSet) -> dict[str, dict[str, Any]]:
    """Per run (its directory): where its numbers come from, from its meta.json (None where unknown), and
    where it stands (rundir/state.py: finished, or training or stopped as of a step of its budget)."""
    out = {}
    for r in rs.runs:
        meta = r.meta or {}
        versions = meta.get("versions") or {}
        out[str(r.dir)] = {
            "commit": meta.get("git_commit"),
            "device": meta.get("device"),
            "jax_version": versions.get("jax"),
            "icl_race_version": versions.get("icl-race"),
            "config_digest": meta.get("config_digest"),
            **({**r.state.record(), "partial": r.partial_note()} if r.partial else {"state": "finished"}),
        }
    return out


def partial_lines(rs: runset.RunSet) -> list[str]:
    """One line per unfinished run among `rs` (`Run.partial_note`): what the export says of them."""
    return [note for r in rs.runs if (note := r.partial_note())]


def once(rs: runset.RunSet) -> tuple[runset.RunSet, list[str]]:
    """The runs of `rs` each once (`export A A`, or a sweep and one of its cells, would repeat rows), and
    the directories given more than once."""
    seen: set[Path] = set()
    runs, repeated = [], []
    for r in rs.runs:
        key = Path(r.dir).resolve()
        if key in seen:
            repeated.append(str(r.dir))
        else:
            seen.add(key)
            runs.append(r)
    return runset.RunSet(runs, rs.fields, rs.skipped), repeated


def memory_budget() -> int:
    """Bytes this process may still allocate: its address-space limit (ulimit -v, RLIMIT_AS) less what it
    maps now, and never more than the machine's physical memory."""
    import resource

    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return physical
    try:
        with open("/proc/self/status") as status:
            mapped = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    except (OSError, StopIteration):
        mapped = 0
    return min(physical, soft - mapped)


# Bytes per value held while a table is built and encoded: the float64 array, the pandas frame built from
# it and the encoded file (CSV text: ~20 characters a number), with margin.
BYTES_PER_VALUE = {"csv": 64, "parquet": 40, "netcdf": 32}


def estimate(rs: runset.RunSet, fmt: str) -> tuple[int, str]:
    """(bytes the tables of `rs` take while exported as `fmt`, what they are): from the shapes alone,
    before anything is allocated. The curves are aligned over the union of the runs' seeds and steps."""
    seeds = {int(s) for r in rs.runs for s in r.seed_ids}
    steps = {int(s) for r in rs.runs for s in r.eval_steps}
    probes: dict[str, int] = {}
    for r in rs.runs:
        for name, c in _probes(r, scalar_only=fmt != "netcdf").items():
            probes[name] = max(probes.get(name, 1), int(np.prod(c.shape[2:], dtype=np.int64)))
    cells = len(rs.runs) * len(seeds) * len(steps)
    values = cells * (sum(probes.values()) + len(rs.fields) + 3) + sum(r.seed_ids.size for r in rs.runs) * 64
    what = f"{len(rs.runs)} runs x {len(seeds)} seeds x {len(steps)} steps x {sum(probes.values())} probe values"
    return values * BYTES_PER_VALUE[fmt], what


@dataclasses.dataclass(frozen=True)
class Tables:
    seeds: Any  # pandas.DataFrame
    curves: Any  # xarray.Dataset
    skipped: list[str]  # sweep cells without a finished run
    # run -> commit, device, jax_version, icl_race_version, config_digest, state (and as_of_step, budget)
    provenance: dict[str, dict[str, Any]]
    repeated: list[str]  # directories given more than once, exported once
    partial: list[str]  # one line per unfinished run: its values are as of a step (last_<probe>, not final_)


def _tables(rs: runset.RunSet, repeated: list[str], censored: str, scalar_only: bool) -> Tables:
    if censored not in CENSORED:
        raise ConfigError(f"--censored {censored}: unknown; one of {', '.join(CENSORED)}")
    tables = seed_table(rs, censored), curves(rs, scalar_only)
    return Tables(*tables, rs.skipped, provenance(rs), repeated, partial_lines(rs))


def tables(*dirs: str | Path, censored: str = "nan") -> Tables:
    """Both tables of run or sweep directories, in memory (the notebook entry point)."""
    require("pandas", "xarray")
    rs, repeated = once(runset.load(list(dirs)))
    return _tables(rs, repeated, censored, scalar_only=False)


@dataclasses.dataclass(frozen=True)
class Exported:
    out: Path
    files: list[str]  # written, relative to out
    runs: int
    seeds: int
    skipped: list[str]
    repeated: list[str]  # directories given more than once, exported once
    netcdf_only: list[str]  # probes with axes of their own, left out of CSV and Parquet: "name (axes)"
    partial: list[str]  # one line per unfinished run (`Tables.partial`)


def names(fmt: str) -> list[str]:
    """The files an export in `fmt` writes: the pair, and CSV's provenance sidecar."""
    ext = FORMATS[fmt][0]
    return [f"seeds.{ext}", f"curves.{ext}", *(["provenance.json"] if fmt == "csv" else [])]


def _flat_attrs(prov: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The provenance keys on which every run agrees, as netCDF attributes (strings)."""
    keys = ("commit", "device", "jax_version", "config_digest")
    agreed = {k: {p[k] for p in prov.values()} for k in keys}
    return {k: str(next(iter(v))) for k, v in agreed.items() if len(v) == 1 and None not in v}


def _parquet(df, prov_json: str) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    table = table.replace_schema_metadata(
        {**(table.schema.metadata or {}), PROVENANCE_KEY.encode(): prov_json.encode()}
    )
    buf = pa.BufferOutputStream()
    pq.write_table(table, buf)
    return buf.getvalue().to_pybytes()


PROVENANCE_KEY = "icl_race_provenance"


def _encode(t: Tables, fmt: str) -> dict[str, bytes]:
    from icl_race.rundir.provenance import icl_race_version

    seeds_name, curves_name, *_ = names(fmt)
    prov = {"exported_by": f"icl-race {icl_race_version()}", "runs": t.provenance}
    prov |= {"partial": t.partial} if t.partial else {}  # the file says so, not only the command's stderr
    prov_json = json.dumps(prov, sort_keys=True)
    if fmt == "netcdf":
        import xarray as xr

        attrs = {PROVENANCE_KEY: prov_json, **_flat_attrs(t.provenance)}
        attrs |= {"partial": json.dumps(t.partial)} if t.partial else {}
        seeds = xr.Dataset.from_dataframe(t.seeds.rename_axis("row")).assign_attrs(attrs)
        return {
            seeds_name: bytes(seeds.to_netcdf(engine="h5netcdf")),
            curves_name: bytes(t.curves.assign_attrs(attrs).to_netcdf(engine="h5netcdf")),
        }
    long = t.curves.to_dataframe().reset_index()
    if fmt == "csv":
        return {
            seeds_name: t.seeds.to_csv(index=False).encode(),
            curves_name: long.to_csv(index=False).encode(),
            "provenance.json": (json.dumps(prov, indent=1, sort_keys=True) + "\n").encode(),
        }
    return {seeds_name: _parquet(t.seeds, prov_json), curves_name: _parquet(long, prov_json)}


def export(
    dirs: list[str | Path],
    fmt: str,
    out: str | Path,
    force: bool = False,
    censored: str = "nan",
    say: Callable[[str], None] = lambda line: None,
) -> Exported:
    """Write the seed table and the curves of `dirs` to OUT/seeds.<ext> and OUT/curves.<ext>, as one
    (rundir/owner.py: a folder the export owns, no file it did not write replaced unless `force`). Every
    input is read, its size checked and the files encoded before anything is written: a refusal or a
    failure writes nothing. `say` hears what it does once the input is read and checked (the tables'
    libraries, pandas and xarray, take seconds to import)."""
    from icl_race.rundir import owner

    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt}: unknown; one of {', '.join(FORMATS)}")
    if censored not in CENSORED:
        raise ConfigError(f"--censored {censored}: unknown; one of {', '.join(CENSORED)}")
    require(*FORMATS[fmt][1])
    out = Path(out)
    owner.check(out, "export", names(fmt), force=force)  # before reading anything: a refusal is instant
    rs, repeated = once(runset.load(list(dirs)))
    need, what = estimate(rs, fmt)
    budget = memory_budget()
    if need > budget:
        raise ConfigError(
            f"export: {what} take ~{need / 2**30:.3g} GiB to export as {fmt}, more than the "
            f"{max(budget, 0) / 2**30:.3g} GiB this process may allocate; export fewer runs at a time"
        )
    netcdf_only = sorted(
        {
            f"{n} ({' x '.join(map(str, c.shape[2:]))})"
            for r in rs.runs
            for n, c in _probes(r, False).items()
            if c.ndim > 2
        }
    )
    say(f"read {len(rs.runs):,} run{'' if len(rs.runs) == 1 else 's'}; writing their tables as {fmt} to {out}")
    try:
        t = _tables(rs, repeated, censored, scalar_only=fmt != "netcdf")
        files = _encode(t, fmt)
    except MemoryError:
        raise ConfigError(
            f"export: {what} did not fit in memory (estimated ~{need / 2**30:.3g} GiB); export fewer runs"
        ) from None
    written = owner.write_files(out, "export", files, force=force)
    only = netcdf_only if fmt != "netcdf" else []
    return Exported(out, written, len(rs.runs), len(t.seeds), t.skipped, repeated, only, t.partial)
