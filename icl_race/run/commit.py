"""The last phase of a run: what was trained as results.npz's arrays (`results_arrays`), meta.json's record
of how (`meta`), the histogram and the kept parameters (train.keep_params), committed as one step by
rundir.finish (`commit`), which removes a report of the run's results so far, and its sweep's when it is a
cell (report/partial.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from icl_race import rundir
from icl_race.run.records import Prepared, Trained


@dataclasses.dataclass(frozen=True)
class Finished:
    """A finished run: results.npz's arrays, and the same as the `rundir.Run` that `rundir.load_run`
    gives (from memory when this process committed them, else read once from the directory)."""

    results: dict[str, np.ndarray]
    run: rundir.Run


def results_arrays(prepared: Prepared, trained: Trained) -> dict[str, np.ndarray]:
    """results.npz's arrays (rundir/layout.py) of what was trained."""
    from icl_race.engine.ensemble import DIVERGED, retirement_steps

    program, tr, t_first, steps_run = prepared.program, prepared.cfg.train, trained.t_first, trained.steps_run
    results: dict[str, Any] = {  # arrays, and two int64 scalars
        "seed_ids": prepared.seed_ids,
        **{f"t_{ev}": t_first[ev].astype(np.int64) for ev in program.event_names},
        "diverged": t_first[DIVERGED] >= 0,
        "eval_steps": trained.eval_steps.astype(np.int64),
        **{k: v.astype(np.float64 if v.dtype == np.float64 else np.float32) for k, v in trained.curves.items()},
        "steps_run": np.int64(steps_run),
        "budget": np.int64(tr.steps),
    }
    if prepared.cfg.ensemble.retire:
        results["retired_at"] = retirement_steps(program, t_first, prepared.run.chunks, steps_run)
    return results


def meta(prepared: Prepared, trained: Trained) -> dict:
    """meta.json's record: the config and its digest, the versions and the machine (rundir/provenance.py),
    the compiled programs' provenance and counts, the training's time and throughput, and the headline
    counts of the results."""
    from icl_race.engine.ensemble import DIVERGED
    from icl_race.run import compile_cache
    from icl_race.rundir.provenance import provenance

    cfg, stop, t_first = prepared.cfg, prepared.program.stop_event, trained.t_first
    trained_s = max(trained.run_seconds - trained.compile_seconds, 1e-9)
    # packed: the pack's seed-steps over its time, the machine's throughput as for a lone run
    pack_cells, seed_steps = trained.pack or (1, trained.seed_steps_computed)
    return {
        "config": cfg.to_dict(),
        "config_digest": prepared.run.digest,
        **provenance(),
        "xla": compile_cache.record(),  # the kernels' provenance: caches and XLA_FLAGS (run/compile_cache.py)
        "compiles": trained.compiles,
        "compile_seconds": round(trained.compile_seconds, 3),
        "compile_cache_hits": trained.compile_cache_hits,
        "run_seconds": round(trained.run_seconds, 3),
        "resumed_from_step": prepared.start or None,
        # computed seed-steps per second of training: the machine's throughput (a retired seed costs nothing)
        "seed_steps_per_s": round(seed_steps / trained_s, 1),
        "seed_steps_computed": trained.seed_steps_computed,
        **({"packed_with": pack_cells - 1} if trained.pack else {}),  # runs trained in one ensemble with it
        "steps_run": trained.steps_run,
        "seeds": cfg.ensemble.seeds,
        "stop_event": stop,
        "acquired": int(np.sum(t_first[stop] >= 0)),
        "diverged": int(np.sum(t_first[DIVERGED] >= 0)),
    }


def commit(out: Path, prepared: Prepared, trained: Trained) -> Finished:
    """The run's results, meta.json and histogram, committed as one step (rundir.finish); returns the
    results, also as the `rundir.Run` that loading the directory gives, without reading it back."""
    from icl_race import systems
    from icl_race.plots import histogram, png_bytes

    cfg, stop = prepared.cfg, prepared.program.stop_event
    record = meta(prepared, trained)
    results = results_arrays(prepared, trained)
    # meta as written (JSON: tuples are lists there) and config.json's dict, so that this Run equals the
    # one rundir.load_run(out) reads; it carries the parsed config, which Run.cfg returns.
    run = rundir.run_of(out, record["config"], results, json.loads(rundir.json_bytes(record)), parsed=cfg)
    title = f"t_{stop}, {systems.of(cfg).describe(cfg)}, {cfg.ensemble.seeds} seeds"
    hist = png_bytes(histogram(run.t(), run.censor_at(), title=title, xlabel=f"t_{stop} (steps)"), dpi=120)
    from icl_race.report.partial import reports_of, retire

    # a report of the results so far would outlive them (the run's, and its sweep's of fewer finished cells):
    # removed before the commit (a kill then leaves an unfinished run without it) and after (one a `report`
    # wrote meanwhile); `report` then writes the final one
    for d in reports_of(out):
        retire(d)
    rundir.finish(out, results, record, {f"t_{stop}_hist.png": hist}, trained.params)
    for d in reports_of(out):
        retire(d)
    return Finished(results, run)
