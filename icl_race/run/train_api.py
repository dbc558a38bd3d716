"""The notebook API: `train` an ensemble into a `Run` (in memory, or into a run directory), `load` a run or
sweep directory (a run still training as its partial results so far). A `Run` is the same object either
way: its arrays, `censored`, `km_median`, and every reader (`report.summary.run_summary`,
`report.export.tables`, `report.compare.compare`) takes it where they take a directory. Used as the
package's own names, `icl_race.train`, `icl_race.load`, `icl_race.IN_MEMORY`: no jax, numpy or run directory
is imported until they are called."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

# The `dir` of a run trained in memory: what its summary and exported rows name as its directory.
IN_MEMORY = Path("<in memory>")


def load(d):
    """A run directory as an `icl_race.rundir.Run`, a sweep directory as an `icl_race.rundir.SweepDir`
    (its cells with their swept values and, when finished, their runs); a run still training as its
    last committed chunk (`Run.partial`)."""
    from icl_race import rundir

    return rundir.load(d)


def train(
    config_or_path,
    seeds: int | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    out: str | Path | None = None,
    progress: bool = True,
):
    """Train an ensemble and return its `rundir.Run`.

    `config_or_path`: a TOML file, a config dict (sections of fields, as the TOML) or a `config.Config`;
    `seeds` sets ensemble.seeds; `overrides` maps "section.key" to a value (typed: 0.05, "adam", true),
    as `--set` does on the command line. Every value is checked as the command line checks it (a
    ConfigError naming the field). Without `out` the run is trained in a temporary directory that is
    removed once it is committed, and the Run's arrays are the ones the runner committed, in memory
    (its `dir` is `IN_MEMORY`; no file of it is left, so its summary names no histogram); with `out` it
    is `icl-race run CONFIG --out OUT` (resumable, kept).

    `progress` (default): what `icl-race run` prints while it trains, the progress line redrawn in place
    (in a notebook too) and its notices; False: nothing. In the Run, `run.first_passage(event)` gives
    every seed's step as floats with NaN where the event was not reached (as `export` writes it);
    `run.times` keeps results.npz's integers, -1 for not reached, which the readers take."""
    import dataclasses
    import tempfile

    from icl_race import config
    from icl_race.run.runner import execute_run

    if isinstance(config_or_path, config.Config):
        raw = config_or_path.to_dict()
    elif isinstance(config_or_path, Mapping):
        raw = {s: dict(v) if isinstance(v, Mapping) else v for s, v in config_or_path.items()}
    else:
        raw = config.read_toml(config_or_path)
    changes = dict(overrides or {})
    if seeds is not None:
        changes["ensemble.seeds"] = seeds
    for key, value in changes.items():
        section, dot, name = str(key).partition(".")
        if not dot or not name:
            raise config.ConfigError(f"overrides key {key!r}: expected 'section.key', e.g. 'task.K'")
        raw.setdefault(section, {})[name] = value
    cfg = config.from_dict(raw)
    say = print if progress else (lambda message: None)
    if out is not None:
        return execute_run(cfg, Path(out), progress=progress, log=say)
    with tempfile.TemporaryDirectory(prefix="icl-race-train-") as d:
        # The runner's lines name the run by its directory: this one's is gone once the run is committed.
        where = str(Path(d) / "run")
        run = execute_run(cfg, Path(where), progress=progress, log=lambda m: say(m.replace(where, str(IN_MEMORY))))
    kept = dataclasses.replace(run, dir=IN_MEMORY)
    vars(kept)["cfg"] = cfg  # Run.cfg's cache, as the runner's own Run carries it
    return kept
