"""One run into one directory, in three phases under the directory's lock (`execute`):

    RunPlan.of(cfg)            -> RunPlan   the config and what derives from it (the device layout, the
                                            chunk plan, the digest), computed once and carried by all
    prepare(run, out)          -> Prepared  the program, and the ensemble's carry: fresh, or restored from
                                            the newest intact checkpoint (a rerun resumes)
    train_phase(prepared, ...) -> Trained   the chunks, with the progress line, the checkpoints and the
                                            stop test between them
    commit(out, prepared, trained) -> Finished  the results arrays, meta.json and the histogram, committed
                                            by rundir.finish; returned as arrays and as a `rundir.Run`

A rerun of the same config does nothing when the run is done. `execute` returns the results arrays,
`execute_run` the `rundir.Run` (the run's summary is made from it: the process that committed the
results does not read them back). `start_fresh`, `train_phase` and `results_arrays` are also what
icl_race/run/retrain.py trains chosen seeds with, writing nothing.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from icl_race import rundir
from icl_race.config import Config, ConfigError
from icl_race.run.live import LiveResults
from icl_race.run.progress import ProgressBar
from icl_race.run.signals import Stop, stop_on_signals
from icl_race.rundir.provenance import provenance


class RunError(RuntimeError):
    """The run could not be completed (e.g. a write failed); str() says what and what is intact."""


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """A run's config and what derives from it, computed once per run (`RunPlan.of`, in `execute`) and
    carried through the memory check, prepare, train_phase (the engine's chunks, the progress line,
    the checkpoints) and commit, so that no phase derives them again. Each is a function of the
    config and of this process's devices only, so a resumed run computes the same."""

    cfg: Config
    layout: Any  # engine.ensemble.Layout over the local devices (`layout`)
    chunks: tuple[tuple[int, int, int], ...]  # engine.ensemble.chunk_plan: (first step, period, evaluations)
    digest: str  # cfg.digest(): what each checkpoint and meta.json store, and a resume checks

    @classmethod
    def of(cls, cfg: Config | RunPlan) -> RunPlan:
        """cfg's plan; a RunPlan is returned as it is, so that every phase takes either."""
        if isinstance(cfg, RunPlan):
            return cfg
        return cls(cfg, layout(cfg), tuple(plan(cfg)), cfg.digest())


@dataclasses.dataclass(frozen=True)
class Prepared:
    """What the training starts from."""

    run: RunPlan
    program: Any
    consts: Any
    seed_ids: np.ndarray  # [S] the seeds trained; the carry holds them first, then the padding
    carry: Any  # the device carry of the padded ensemble
    start: int  # the step the carry stands at: 0, or the restored checkpoint's
    history: tuple[dict[str, np.ndarray], np.ndarray] | None  # the curves and evaluation steps up to start
    checkpointer: Any  # engine.checkpoint.Checkpointer; None without checkpoints
    since: tuple[float, int, float, int]  # (perf_counter, compiles, compile seconds, cache hits) before the build

    @property
    def cfg(self) -> Config:
        return self.run.cfg

    @property
    def layout(self):
        return self.run.layout


@dataclasses.dataclass(frozen=True)
class Trained:
    """What the training computed, for the seeds trained only (the padding dropped)."""

    t_first: dict[str, np.ndarray]  # event -> [S] first-passage step, -1 = not reached
    curves: dict[str, np.ndarray]  # probe -> [S, T, ...]
    eval_steps: np.ndarray  # [T]
    seed_steps_computed: int  # by this process (fewer than seeds x steps when seeds retire)
    run_seconds: float
    compiles: int
    compile_seconds: float
    compile_cache_hits: int  # of `compiles`, loaded from the persistent cache


@dataclasses.dataclass(frozen=True)
class Finished:
    """A finished run: results.npz's arrays, and the same as the `rundir.Run` that `rundir.load_run`
    gives (from memory when this process committed them, else read once from the directory)."""

    results: dict[str, np.ndarray]
    run: rundir.Run


def execute(cfg: Config, out: Path, progress: bool = True, log=print, redo: bool = False) -> dict:
    """Train cfg's ensemble and write the run directory; returns the results arrays.

    Skips the work when `out` already holds this config's results; resumes from the newest intact
    checkpoint when it holds this config's unfinished run. Damaged results are an error, or with
    `redo` are moved aside and the run is trained again. SIGINT and SIGTERM stop it at the next chunk
    boundary (icl_race/run/signals.py: `Interrupted`)."""
    return _execute(cfg, Path(out), progress, log, redo).results


def execute_run(cfg: Config, out: Path, progress: bool = True, log=print, redo: bool = False) -> rundir.Run:
    """`execute`, returning the finished run as a `rundir.Run`: built from the arrays just committed (or
    read once when the run was already done), for the run's summary (report/summary.py)."""
    return _execute(cfg, Path(out), progress, log, redo).run


def _execute(cfg: Config, out: Path, progress: bool, log, redo: bool) -> Finished:
    rundir.refuse_links(out)
    if rundir.check(cfg, out) and not redo:
        finished = _finished(out, redo, log)
        assert finished is not None  # without redo, damaged results raise
        log(f"{out}: results for this config already exist; nothing to do")
        rundir.drop_superseded_checkpoints(out)
        return finished
    run = RunPlan.of(cfg)  # the one derivation of the layout and chunk plan for this run
    check_memory(run)
    out.mkdir(parents=True, exist_ok=True)
    with rundir.lock(out):
        # Finished by another process between the check and the lock, or a --redo of intact results.
        if rundir.check(cfg, out) and (finished := _finished(out, redo, log)) is not None:
            return finished
        notice = rundir.repair_notice(out)
        if notice:
            log(notice)
        from icl_race.run.checkpoint import CheckpointError
        from icl_race.systems import precision

        try:
            with precision(cfg), stop_on_signals() as stop:
                prepared = prepare(run, out, log)
                bar = ProgressBar(prepared.program.stop_event, plan=run.chunks) if progress else None
                live = LiveResults(out, prepared, results_arrays)  # DIR/live.npz: the results so far, for a reader

                def each_chunk(p):
                    if bar:
                        bar(p)
                    live(p)

                return commit(out, prepared, train_phase(prepared, stop, each_chunk))
        except CheckpointError as e:
            raise RunError(
                f"{e}: rerun the same command to resume from it"
                if e.last_good is not None
                else f"{e}: a rerun starts from step 0"
            ) from e
        except OSError as e:
            step = max(rundir.checkpoint_steps(out), default=None)
            kept = (
                f"the last good checkpoint is at step {step:,}: rerun the same command to resume from it"
                if step is not None
                else "there is no checkpoint: a rerun starts from step 0"
            )
            raise RunError(f"cannot write {e.filename or out}: {e.strerror or e}; {kept}") from e


def _finished(out: Path, redo: bool, log) -> Finished | None:
    """A finished run, read once; None when its results (or its meta.json) are damaged and `redo` asks
    to train again (the damaged files are moved aside first, never deleted)."""
    try:
        # read as data: the schema and config.json against meta.json
        run, results = rundir.load_run_results(out)
        return Finished(results, run)
    except rundir.DamagedFileError as e:
        if not redo:
            raise rundir.DamagedFileError(
                f"{e}; rerun with --redo to train this run again (from its checkpoints "
                "if any, else from the config), keeping the damaged files aside"
            ) from None
    aside = rundir.set_aside_final_files(out)
    log(f"{out}: damaged results moved to {aside.name}/; training again")
    return None


def prepare(cfg: Config | RunPlan, out: Path, log) -> Prepared:
    """config.json (first), the program, and the carry: restored from the newest intact checkpoint of
    this config, else fresh."""
    from icl_race import systems
    from icl_race.engine.ensemble import padded_seed_ids
    from icl_race.engine.sharding import place
    from icl_race.run import compile_cache

    run = RunPlan.of(cfg)
    cfg, lay = run.cfg, run.layout
    compile_cache.setup()
    rundir.write_config(out, cfg)
    since = _counters()
    program, consts = systems.build(cfg)
    e = cfg.ensemble
    seed_ids = np.arange(e.first_seed, e.first_seed + e.seeds, dtype=np.int64)
    if not cfg.train.checkpoint_every:
        return start_fresh(run, program, consts, seed_ids, since)
    from icl_race.run.checkpoint import Checkpointer

    ckpt = Checkpointer(out / rundir.CHECKPOINTS, keep=2)
    restored = ckpt.restore_latest(report=lambda m: log(f"{out}: {m}"))
    if not restored:
        return start_fresh(run, program, consts, seed_ids, since, ckpt)
    tree, meta = restored
    _check_provenance(out, run, meta)
    _check_state_layout(out, program, consts, tree["carry"]["state"], meta["step"])
    tree = _repad(tree, len(padded_seed_ids(seed_ids, lay)), e.seeds)
    carry, consts = place(_device_carry(tree["carry"]), consts, _mesh(lay))
    log(f"{out}: resuming from the checkpoint at step {meta['step']:,}")
    return Prepared(
        run, program, consts, seed_ids, carry, meta["step"], (tree["curves"], tree["eval_steps"]), ckpt, since
    )


def start_fresh(
    cfg: Config | RunPlan, program, consts, seed_ids: np.ndarray, since=None, checkpointer=None
) -> Prepared:
    """The carry at step 0 of `seed_ids`, padded to cfg's layout (engine.ensemble.padded_seed_ids): each
    seed's key is fold_in(root_seed, its id) and its vmap is cfg's block wide, so each seed trains
    bit-identically to its run, whatever seeds are trained beside it."""
    from icl_race.engine.ensemble import init_ensemble, padded_seed_ids, seed_keys
    from icl_race.engine.sharding import place

    run = RunPlan.of(cfg)
    lay = run.layout
    keys, consts = place(seed_keys(run.cfg.ensemble.root_seed, padded_seed_ids(seed_ids, lay)), consts, _mesh(lay))
    return Prepared(
        run,
        program,
        consts,
        seed_ids,
        init_ensemble(program, lay, keys, consts),
        0,
        None,
        checkpointer,
        since or _counters(),
    )


def train_phase(prep: Prepared, stop: Stop, on_chunk: Callable[[Any], None] | None = None) -> Trained:
    """The chunks from the prepared carry to the budget (or the early stop), checkpointing every
    train.checkpoint_every chunks and where a stop signal ends the run; `on_chunk` (the progress line,
    or a retraining's hook) sees the engine's `Progress` after each chunk."""
    import jax

    from icl_race.engine.ensemble import concat_history, train

    cfg, ckpt = prep.cfg, prep.checkpointer
    tr, seeds = cfg.train, len(prep.seed_ids)
    saved = [prep.start]  # the step of the newest checkpoint
    computed = [0]  # seed-steps this process computed (fewer than seeds x steps when seeds retire)

    def each_chunk(p):
        computed[0] += p.chunk_seeds * p.chunk_steps
        if on_chunk:
            on_chunk(p)
        stopping = p.step < tr.steps and stop.requested
        if ckpt and p.step < tr.steps and (p.chunks_done % tr.checkpoint_every == 0 or stopping):
            curves, steps_seen = concat_history(p.history, p.eval_steps)
            ckpt.save(
                p.step,
                {"carry": host_carry(p.carry), "curves": curves, "eval_steps": steps_seen},
                {"config_digest": prep.run.digest, "config": cfg.to_dict()},
            )
            saved[0] = p.step
        if stopping:
            stop.check(p.step, saved[0])

    stop.check(prep.start, prep.start)  # a signal that arrived before training (or between a sweep's cells)
    try:
        carry, curves, eval_steps = train(
            prep.program,
            prep.consts,
            prep.carry,
            layout=prep.layout,
            steps=tr.steps,
            eval_every=tr.eval_every,
            evals_per_chunk=tr.evals_per_chunk,
            spacing=tr.eval_spacing,
            live_seeds=seeds,
            start_step=prep.start,
            history=prep.history,
            retire=cfg.ensemble.retire,
            stop_event=prep.program.stop_event if tr.stop_when_all_acquired else None,
            on_chunk=each_chunk,
            plan=prep.run.chunks,
        )
    finally:
        if ckpt:
            try:
                ckpt.wait()
            finally:
                ckpt.close()
    now, compiles, compile_s, hits = _counters()
    return Trained(
        t_first={k: v[:seeds] for k, v in jax.device_get(carry["t_first"]).items()},
        curves={k: v[:seeds] for k, v in curves.items()},
        eval_steps=eval_steps,
        seed_steps_computed=computed[0],
        run_seconds=now - prep.since[0],
        compiles=compiles - prep.since[1],
        compile_seconds=compile_s - prep.since[2],
        compile_cache_hits=hits - prep.since[3],
    )


def results_arrays(prepared: Prepared, trained: Trained) -> dict[str, np.ndarray]:
    """results.npz's arrays (rundir/layout.py) of what was trained."""
    from icl_race.engine.ensemble import DIVERGED, retirement_steps

    program, tr, t_first = prepared.program, prepared.cfg.train, trained.t_first
    steps_run = int(trained.eval_steps[-1]) if trained.eval_steps.size else 0
    results = {
        "seed_ids": prepared.seed_ids,
        **{f"t_{ev}": t_first[ev].astype(np.int64) for ev in program.event_names},
        "diverged": t_first[DIVERGED] >= 0,
        "eval_steps": trained.eval_steps.astype(np.int64),
        **{k: v.astype(np.float64 if v.dtype == np.float64 else np.float32) for k, v in trained.curves.items()},
        "steps_run": np.int64(steps_run),
        "budget": np.int64(tr.steps),
    }
    if prepared.cfg.ensemble.retire:
        results["retired_at"] = retirement_steps(program, t_first, list(prepared.run.chunks), steps_run)
    return results


def commit(out: Path, prepared: Prepared, trained: Trained) -> Finished:
    """The run's results, meta.json and histogram, committed as one step (rundir.finish); returns the
    results, also as the `rundir.Run` that loading the directory gives, without reading it back."""
    from icl_race import systems
    from icl_race.analysis.survival import censor_time
    from icl_race.plots import histogram, png_bytes

    cfg, stop, start = prepared.cfg, prepared.program.stop_event, prepared.start
    e = cfg.ensemble
    results = results_arrays(prepared, trained)
    steps_run = int(results["steps_run"])
    t_kept = results[f"t_{stop}"][~results["diverged"]]
    fig = histogram(
        t_kept,
        censor_time(cfg.train.steps, steps_run, bool(np.any(t_kept < 0))),
        title=f"t_{stop}, {systems.of(cfg).describe(cfg)}, {e.seeds} seeds",
        xlabel=f"t_{stop} (steps)",
    )
    hist = png_bytes(fig, dpi=120)

    trained_s = max(trained.run_seconds - trained.compile_seconds, 1e-9)
    meta = {
        "config": cfg.to_dict(),
        "config_digest": prepared.run.digest,
        **provenance(),
        "compiles": trained.compiles,
        "compile_seconds": round(trained.compile_seconds, 3),
        "compile_cache_hits": trained.compile_cache_hits,
        "run_seconds": round(trained.run_seconds, 3),
        "resumed_from_step": start or None,
        # computed seed-steps per second of training: the machine's throughput (a retired seed costs nothing)
        "seed_steps_per_s": round(trained.seed_steps_computed / trained_s, 1),
        "seed_steps_computed": trained.seed_steps_computed,
        "steps_run": steps_run,
        "seeds": e.seeds,
        "stop_event": stop,
        "acquired": int(np.sum(results[f"t_{stop}"] >= 0)),
        "diverged": int(np.sum(results["diverged"])),
    }
    rundir.finish(out, results, meta, {f"t_{stop}_hist.png": hist})
    # meta as written (JSON: tuples are lists there) and config.json's dict, so that this Run equals the
    # one rundir.load_run(out) reads; it carries the parsed config, which Run.cfg returns.
    written = json.loads(rundir.json_bytes(meta))
    return Finished(results, rundir.run_of(out, meta["config"], results, written, parsed=cfg))


def layout(cfg: Config):
    """The ensemble's layout over the local devices; ensemble.devices beyond them is a ConfigError."""
    from icl_race.engine.ensemble import Layout
    from icl_race.engine.sharding import local_device_count

    e, available = cfg.ensemble, local_device_count()
    if e.devices > available:
        raise ConfigError(f"ensemble.devices = {e.devices}: must be 0 (all) or <= {available}, the local device count")
    return Layout(e.block, e.devices or available)


def plan(cfg: Config) -> list[tuple[int, int, int]]:
    """The run's chunks: (first step, evaluation period, evaluations) each."""
    from icl_race.engine.ensemble import chunk_plan

    tr = cfg.train
    return chunk_plan(tr.steps, tr.eval_every, tr.evals_per_chunk, tr.eval_spacing)


def _mesh(lay):
    """The device mesh the seed axis is split over; None on one device."""
    from icl_race.engine.sharding import seed_mesh

    return seed_mesh(lay.shards) if lay.shards > 1 else None


def _counters() -> tuple[float, int, float, int]:
    from icl_race.run import compile_stats

    return (time.perf_counter(), *compile_stats.snapshot(), compile_stats.cache_hits())


def host_carry(carry):
    """The carry as host arrays, its keys as their raw data: what a checkpoint stores."""
    import jax

    return jax.device_get({**carry, "key": jax.random.key_data(carry["key"])})


def _device_carry(tree):
    import jax

    return {**tree, "key": jax.random.wrap_key_data(tree["key"])}


def _check_state_layout(out: Path, program, consts, state, step: int) -> None:
    """A checkpoint whose seed state has other fields than this version's program makes (one written
    before the optimizer state joined it, say) cannot resume: refuse in one line, leaving the directory
    as it is, instead of failing inside the compiled step."""
    import jax

    def paths(tree):  # every leaf's path, and the top-level fields (an optimizer state may hold no leaf)
        return {jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]} | {
            f"[{k!r}]" for k in (tree if isinstance(tree, dict) else ())
        }

    want, have = paths(jax.eval_shape(program.init, jax.random.key(0), consts)), paths(state)
    if want != have:
        diff = [
            f"{what} {', '.join(sorted(ps)[:3])}{' ...' if len(ps) > 3 else ''}"
            for what, ps in (("lacks", want - have), ("has extra", have - want))
            if ps
        ]
        raise rundir.RunDirError(
            f"--out {out}: the checkpoint at step {step:,} was written by another icl-race version (its seed state "
            f"{'; '.join(diff)}); resume it with the version that wrote it (meta of its cells / git log), or move "
            f"{out / rundir.CHECKPOINTS} aside to start the run over"
        )


def _check_provenance(out: Path, run: RunPlan, meta: dict) -> None:
    """A checkpoint resumes only the config it was written for: one of another config (config.json
    edited between the kill and the rerun) would continue another run under this one's name. Refused in
    one line, naming the fields that differ when the checkpoint stores its config (written since)."""
    cfg, digest = run.cfg, meta.get("config_digest")
    if digest == run.digest:
        return
    stored = meta.get("config")
    fields = rundir.differing_fields(rundir.with_defaults(stored), cfg.to_dict()) if isinstance(stored, dict) else []
    changed = f": it differs in {', '.join(fields)}" if fields else ""
    raise rundir.RunDirError(
        f"--out {out}: the checkpoint at step {int(meta.get('step', 0)):,} was written for another config (digest {str(digest)[:16]}, this "
        f"config's {run.digest}){changed}; rerun with the config it was written for, or move "
        f"{out / rundir.CHECKPOINTS} aside to start this one over"
    )


def _repad(tree, padded: int, live: int):
    """A checkpoint saved with another padding (another device count): keep the live seeds and pad
    with copies of the first one, which are discarded like any padding seed."""
    import jax

    def fix(a):
        a = np.asarray(a)
        if a.ndim == 0 or a.shape[0] == padded:
            return a
        return np.concatenate([a[:live], np.repeat(a[:1], padded - live, axis=0)])

    return {**tree, "carry": jax.tree.map(fix, tree["carry"]), "curves": jax.tree.map(fix, tree["curves"])}


def check_memory(cfg: Config | RunPlan) -> None:
    """Refuse, before anything is written or allocated, a config whose ensemble cannot fit in the
    device's memory (engine/memory.py: an estimate from the shapes alone)."""
    import jax

    from icl_race.engine import memory
    from icl_race.run import host
    from icl_race.systems import build, precision

    run = RunPlan.of(cfg)
    cfg, lay = run.cfg, run.layout
    e, tr = cfg.ensemble, cfg.train
    padded = -(-e.seeds // lay.unit) * lay.unit
    evals = tr.steps // tr.eval_every if tr.eval_spacing == "linear" else sum(n for _, _, n in run.chunks)
    device = jax.local_devices()[0]
    with precision(cfg):
        program, consts = memory.abstract_build(lambda: build(cfg))
        est = memory.estimate(
            program,
            consts,
            seeds_per_device=padded // lay.shards,
            shards=lay.shards,
            block=e.block,
            total_seeds=e.seeds,
            evals=evals,
            checkpoints=tr.checkpoint_every > 0,
            on_cpu=device.platform == "cpu",
        )
    checks = [(est.parts(), *host.device_limit(device))]
    if device.platform != "cpu":
        checks.append((est.host_parts(), host.host_available(), "available host memory"))
    for parts, limit, what in checks:
        need = sum(parts.values())
        if need > limit:
            top = max(parts, key=parts.get)
            detail = ", ".join(f"{k} {host.human(v)}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]))
            raise ConfigError(
                f"memory: this run needs about {host.human(need)} but {what} is "
                f"{host.human(limit)} ({detail}); lower {_LOWER[top]}"
            )


# What to lower when one kind of memory dominates a refused run.
_STATE_SIZES = (
    "ensemble.seeds (run the seeds in parts with ensemble.first_seed) or the model and task sizes "
    "(model.width, task.D, task.K_max)"
)
_LOWER = {
    "seed states": _STATE_SIZES,
    "shared constants": "the task's sizes (task.K, task.K_max, task.icl_pool, task.D, task.P)",
    "one block's work": "ensemble.block, train.batch_size, train.eval_size or the sequence and model sizes "
    "(task.N, task.D, model.width)",
    "probe history": "the number of evaluations (train.steps / train.eval_every) or ensemble.seeds",
    "checkpoint copies": f"{_STATE_SIZES}, or set train.checkpoint_every = 0",
}
