"""Run and sweep directories as tables for notebooks: `icl-race export DIR... --format F --out OUT`.

    seeds.<ext>   one row per seed of every finished run: run (its directory), the values of the fields
                  that tell the runs apart (a sweep's swept fields, any field that differs between the
                  runs), seed (its id), diverged, retired_at, outcome and fall_step (`analysis.outcome`,
                  systems with ICL accuracy curves), per event t_<event> exactly as in results.npz
                  (-1 = not reached), censored_<event> (t < 0) and censor_at_<event> (`Run.censor_at`:
                  the one censoring rule), and final_<probe> (last finite value) of every scalar probe
    curves.<ext>  every probe per evaluation as an xarray Dataset over (run, seed, step[, the probe's own
                  axes]), the tell-apart fields as coordinates along run; runs with other seeds or
                  evaluation steps are aligned by an outer join (NaN where a run has no such evaluation)

F = csv | parquet | netcdf (ext csv, parquet, nc). In CSV and Parquet the curves are the Dataset's long
table (`Dataset.to_dataframe`, one row per run, seed and step); in netCDF (HDF5 through h5netcdf) the
Dataset itself, and the seed table as a Dataset over one `row` dimension.

The libraries are the optional extra `export` (pandas, pyarrow, xarray, h5netcdf with h5py): imported
here only inside the functions that need them, and a missing one is a one-line `MissingExtra` naming
the extra. `tables(DIR...)` gives both objects in memory for a notebook.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
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
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            raise MissingExtra(
                f"export needs {name}, which is not installed: it is in the optional extra "
                f"[{EXTRA}] (pip install 'icl-race[{EXTRA}]')"
            ) from None


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


def seed_columns(run: rundir.Run, cell: dict[str, Any]) -> dict[str, np.ndarray]:
    """The seed table's columns for one run (every live seed, diverged ones included), as numpy arrays."""
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
    for event, t in run.times.items():
        cols |= {f"t_{event}": t, f"censored_{event}": t < 0, f"censor_at_{event}": np.full(S, run.censor_at(event))}
    return cols | {f"final_{name}": last_finite(c) for name, c in run.curves.items() if c.ndim == 2}


def seed_table(rs: runset.RunSet):
    """The seed table (a pandas DataFrame) of a `runset.RunSet`."""
    require("pandas")
    import pandas as pd

    return pd.concat(
        [pd.DataFrame(seed_columns(r, cell)) for r, cell in zip(rs.runs, cell_values(rs))], ignore_index=True
    )


def curves(rs: runset.RunSet):
    """Every probe's curves (an xarray Dataset over run, seed, step) of a `runset.RunSet`."""
    require("xarray")
    import xarray as xr

    parts = []
    for r, cell in zip(rs.runs, cell_values(rs)):
        data = {
            name: (("seed", "step", *(f"{name}_dim{i}" for i in range(2, c.ndim))), c) for name, c in r.curves.items()
        }
        ds = xr.Dataset(data, coords={"seed": r.seed_ids, "step": r.eval_steps})
        parts.append(ds.expand_dims(run=[str(r.dir)]).assign_coords({f: ("run", [v]) for f, v in cell.items()}))
    return xr.concat(
        parts, dim="run", join="outer", fill_value=np.nan, data_vars="all", coords="different", compat="equals"
    )


@dataclasses.dataclass(frozen=True)
class Tables:
    seeds: Any  # pandas.DataFrame
    curves: Any  # xarray.Dataset
    skipped: list[str]  # sweep cells without a finished run


def tables(*dirs: str | Path) -> Tables:
    """Both tables of run or sweep directories, in memory (the notebook entry point)."""
    require("pandas", "xarray")
    rs = runset.load(list(dirs))
    return Tables(seed_table(rs), curves(rs), rs.skipped)


@dataclasses.dataclass(frozen=True)
class Exported:
    out: Path
    files: list[str]  # written, relative to out
    runs: int
    seeds: int
    skipped: list[str]


def _encode(t: Tables, fmt: str) -> dict[str, bytes]:
    ext = FORMATS[fmt][0]
    if fmt == "netcdf":
        import xarray as xr

        seeds = xr.Dataset.from_dataframe(t.seeds.rename_axis("row"))
        return {
            f"seeds.{ext}": bytes(seeds.to_netcdf(engine="h5netcdf")),
            f"curves.{ext}": bytes(t.curves.to_netcdf(engine="h5netcdf")),
        }
    long = t.curves.to_dataframe().reset_index()
    if fmt == "csv":
        return {
            f"seeds.{ext}": t.seeds.to_csv(index=False).encode(),
            f"curves.{ext}": long.to_csv(index=False).encode(),
        }
    return {f"seeds.{ext}": t.seeds.to_parquet(index=False), f"curves.{ext}": long.to_parquet(index=False)}


def export(dirs: list[str | Path], fmt: str, out: str | Path) -> Exported:
    """Write the seed table and the curves of `dirs` to OUT/seeds.<ext> and OUT/curves.<ext>. Every
    input is read and encoded before OUT is created, so a refusal writes nothing."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt}: unknown; one of {', '.join(FORMATS)}")
    require(*FORMATS[fmt][1])
    out = Path(out)
    t = tables(*dirs)
    files = _encode(t, fmt)
    out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        rundir.atomic_write(out / name, data)
    return Exported(out, list(files), int(t.curves.sizes["run"]), len(t.seeds), t.skipped)
