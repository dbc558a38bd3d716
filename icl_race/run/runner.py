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

import contextlib
import dataclasses
import json
import time
from collections.abc import Callable, Sequence
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
    def of(cls, cfg: Config) -> RunPlan:
        """cfg's plan: the one derivation of its layout and chunks, which every phase then takes."""
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
    pack: tuple[int, int] | None = None  # trained packed: (runs in the pack, seed-steps the pack computed)


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


def execute_pack(runs: Sequence[tuple[Config, Path]], progress: bool = True, log=print) -> list[Path]:
    """Train runs of one program (`pack_key`) as the members of one ensemble (`train_pack`), each into
    its own directory exactly as `execute` writes it: a run already done is skipped, one locked by
    another process is left to it, each resumes from its own newest checkpoint (runs standing at
    different steps train as separate packs). Returns the directories this call committed."""
    from icl_race.run.checkpoint import CheckpointError
    from icl_race.systems import precision

    todo = []
    for cfg, out in runs:
        rundir.refuse_links(out)
        if rundir.check(cfg, out):
            _finished(out, False, log)  # damaged results raise, naming --redo
            log(f"{out}: results for this config already exist; nothing to do")
        else:
            todo.append((RunPlan.of(cfg), Path(out)))
    if not todo:
        return []
    check_memory(pack_plan([run for run, _ in todo]))
    committed: list[Path] = []
    with contextlib.ExitStack() as locks:
        held = []
        for run, out in todo:
            out.mkdir(parents=True, exist_ok=True)
            try:
                locks.enter_context(rundir.lock(out))
            except rundir.Locked:
                log(f"{out}: running in another process, left to it")
                continue
            if rundir.check(run.cfg, out):  # finished by another process between the check and the lock
                continue
            if notice := rundir.repair_notice(out):
                log(notice)
            held.append((run, out))
        if not held:
            return []
        try:
            with precision(held[0][0].cfg), stop_on_signals() as stop:
                prepared = [(prepare(run, out, log), out) for run, out in held]
                for start in sorted({p.start for p, _ in prepared}):
                    pack = [(p, out) for p, out in prepared if p.start == start]
                    bar = ProgressBar(pack[0][0].program.stop_event, plan=pack[0][0].run.chunks) if progress else None
                    trained = train_pack([p for p, _ in pack], stop, bar)
                    for (p, out), t in zip(pack, trained):
                        commit(out, p, t)
                        committed.append(out)
        except CheckpointError as e:
            raise RunError(f"{e}: rerun the same command to resume from it") from e
        except OSError as e:
            raise RunError(
                f"cannot write {e.filename or held[0][1]}: {e.strerror or e}; each run keeps its last good "
                "checkpoint: rerun the same command to resume from them"
            ) from e
    return committed


def pack_key(run: RunPlan) -> tuple:
    """What runs must share to train as one ensemble (`train_pack`): the program (its static fields,
    the shapes), every array constant (item pools, a Zipf law's cdf...), the names and types of the
    scalar ones (which may differ: K, lr, decays, thresholds, traced per seed), the device layout,
    the chunk plan, retirement, the early stop and the precision. Builds the system (its pools)."""
    import hashlib

    import jax

    from icl_race import systems

    cfg = run.cfg
    with systems.precision(cfg):
        program, consts = systems.build(cfg)
    arrays, scalars = hashlib.sha256(), []
    for name, value in sorted(jax.device_get(consts).items()):
        leaves = jax.tree.leaves(value)
        if isinstance(value, dict) or np.ndim(value):
            for a in map(np.asarray, leaves):
                arrays.update(f"{name}:{a.dtype}:{a.shape}".encode())
                arrays.update(np.ascontiguousarray(a))  # its buffer, not a copy (a pool is up to 100 MB)
        else:
            scalars.append((name, str(np.asarray(value).dtype)))
    tr = cfg.train
    precision = (tr.matmul_precision, systems.of(cfg).needs_x64(cfg))
    return (
        program,
        arrays.hexdigest(),
        tuple(scalars),
        run.layout,
        run.chunks,
        cfg.ensemble.retire,
        tr.stop_when_all_acquired,
        precision,
    )


def pack_plan(runs: Sequence[RunPlan]) -> RunPlan:
    """The plan of a pack as one run: the first run's, with the pack's seeds (for the memory check and
    the dry run's projection); a lone run's own."""
    if len(runs) == 1:
        return runs[0]
    first = runs[0]
    e = dataclasses.replace(first.cfg.ensemble, seeds=sum(r.cfg.ensemble.seeds for r in runs))
    return dataclasses.replace(first, cfg=dataclasses.replace(first.cfg, ensemble=e))


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


def prepare(run: RunPlan, out: Path, log) -> Prepared:
    """config.json (first), the program, and the carry: restored from the newest intact checkpoint of
    this config, else fresh."""
    from icl_race import systems
    from icl_race.engine.ensemble import padded_seed_ids
    from icl_race.engine.sharding import place
    from icl_race.run import compile_cache

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
    restored = ckpt.restore_latest(report=lambda m: log(f"{out}: {m}"), plan=run.chunks)
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


def start_fresh(run: RunPlan, program, consts, seed_ids: np.ndarray, since=None, checkpointer=None) -> Prepared:
    """The carry at step 0 of `seed_ids`, padded to cfg's layout (engine.ensemble.padded_seed_ids): each
    seed's key is fold_in(root_seed, its id) and its vmap is cfg's block wide, so each seed trains
    bit-identically to its run, whatever seeds are trained beside it."""
    from icl_race.engine.ensemble import init_ensemble, padded_seed_ids, seed_keys
    from icl_race.engine.sharding import place

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
    or a retraining's hook) sees the engine's `Progress` after each chunk. A lone run is a pack of one
    (`train_pack`)."""
    return train_pack([prep], stop, on_chunk)[0]


def train_pack(cells: Sequence[Prepared], stop: Stop, on_chunk: Callable[[Any], None] | None = None) -> list[Trained]:
    """Several runs of one program (`pack_key`: the same shapes and chunk plan, differing only in
    traced values: K, lr, decays, thresholds, seeds), each prepared in its own directory at the same
    step, trained as the members of one ensemble: their seeds one after another in one carry, each
    seed with its run's constants (`engine.ensemble.MEMBER`), in vmaps of the runs' common block, so
    that each seed computes exactly what it does in its run alone. Each member stops on its own test
    (engine `train`'s members) and checkpoints into its own directory, as it would alone; returns each
    run's `Trained`. One run is trained on its own carry, as it always was."""
    import jax

    from icl_race.engine.ensemble import MEMBER, concat_history, finished_members, member_rows, train

    first, lone = cells[0], len(cells) == 1
    cfg, tr = first.cfg, first.cfg.train
    members = [len(p.seed_ids) for p in cells]
    seeds = sum(members)
    rows = [slice(None)] if lone else member_rows(members)
    consts, carry, history = (first.consts, first.carry, first.history) if lone else _packed(cells)
    stop_event = first.program.stop_event if tr.stop_when_all_acquired else None
    t_first0 = jax.device_get(carry["t_first"])
    done = list(finished_members({k: v[:seeds] for k, v in t_first0.items()}, members, stop_event))
    columns = [len(history[1]) if history and d else None for d in done]  # a member's evaluations, once done
    saved = [p.start for p in cells]  # the step of each run's newest checkpoint
    computed = [0] * len(cells)  # seed-steps this process computed per run

    def each_chunk(p):
        for i, n in enumerate(p.member_seeds):
            computed[i] += int(n) * p.chunk_steps
        if on_chunk:
            on_chunk(p)
        stopping = p.step < tr.steps and stop.requested
        host = None
        for i, prep in enumerate(cells):
            ckpt, every = prep.checkpointer, prep.cfg.train.checkpoint_every
            if ckpt and not done[i] and p.step < tr.steps and (p.chunks_done % every == 0 or stopping):
                host = host if host is not None else host_carry(p.carry)
                curves, steps_seen = concat_history(p.history, p.eval_steps)
                ckpt.save(
                    p.step,
                    {
                        "carry": _rows({k: v for k, v in host.items() if k != MEMBER}, rows[i]),
                        "curves": _rows(curves, rows[i]),
                        "eval_steps": steps_seen,
                    },
                    {"config_digest": prep.run.digest, "config": prep.cfg.to_dict()},
                )
                saved[i] = p.step
        for i, d in enumerate(p.finished):
            if d and not done[i]:
                done[i], columns[i] = True, sum(len(s) for s in p.eval_steps)
        if stopping:
            stop.check(p.step, min(saved))

    stop.check(first.start, first.start)  # a signal that arrived before training (or between a sweep's cells)
    try:
        carry, curves, eval_steps = train(
            first.program,
            consts,
            carry,
            layout=first.layout,
            steps=tr.steps,
            eval_every=tr.eval_every,
            evals_per_chunk=tr.evals_per_chunk,
            spacing=tr.eval_spacing,
            live_seeds=seeds,
            start_step=first.start,
            history=history,
            retire=cfg.ensemble.retire,
            stop_event=stop_event,
            on_chunk=each_chunk,
            plan=first.run.chunks,
            members=members,
        )
    finally:
        for prep in cells:
            if prep.checkpointer:
                try:
                    prep.checkpointer.wait()
                finally:
                    prep.checkpointer.close()
    now, compiles, compile_s, hits = _counters()
    t_first = jax.device_get(carry["t_first"])
    return [
        Trained(
            t_first={k: v[r] for k, v in t_first.items()},
            curves={k: v[r, :T] for k, v in curves.items()},
            eval_steps=eval_steps[:T],
            seed_steps_computed=computed[i],
            run_seconds=now - first.since[0],
            compiles=compiles - first.since[1],
            compile_seconds=compile_s - first.since[2],
            compile_cache_hits=hits - first.since[3],
            pack=None if lone else (len(cells), sum(computed)),
        )
        for i, (r, T) in enumerate(
            zip(member_rows(members), [c if c is not None else len(eval_steps) for c in columns])
        )
    ]


def _rows(tree, r: slice):
    """The rows `r` of every leaf of a host tree (a packed carry's or curves' part of one member)."""
    import jax

    return tree if r == slice(None) else jax.tree.map(lambda a: a if np.ndim(a) == 0 else a[r], tree)


def _packed(cells: Sequence[Prepared]):
    """(consts, carry, history) of a pack: the constants the runs share, and their seeds one after
    another (each run's padding dropped; the pack padded to a whole number of its layout's units with
    copies of its last seed, discarded like any padding), each seed carrying the constants in which the
    runs differ. Only scalars may differ (`pack_key`): an array constant is one program's input."""
    import jax

    from icl_race.engine.ensemble import MEMBER
    from icl_race.engine.sharding import place

    first = cells[0]
    sizes = [len(p.seed_ids) for p in cells]
    padded = -(-sum(sizes) // first.layout.unit) * first.layout.unit
    fill = lambda a: np.concatenate([a, np.repeat(a[-1:], padded - len(a), axis=0)])
    values = [jax.device_get(p.consts) for p in cells]
    differ = [k for k in values[0] if any(not np.array_equal(v[k], values[0][k]) for v in values[1:])]
    if any(np.ndim(values[0][k]) for k in differ):
        raise ValueError(f"runs that differ in the array constants {differ} do not share one program")
    consts = {k: v for k, v in first.consts.items() if k not in differ}
    member = {k: fill(np.concatenate([np.full(n, v[k]) for v, n in zip(values, sizes)])) for k in differ}
    hosts = [host_carry(p.carry) for p in cells]
    carry = jax.tree.map(lambda *a: fill(np.concatenate([x[:n] for x, n in zip(a, sizes)])), *hosts)
    carry, consts = place(_device_carry({**carry, MEMBER: member}), consts, _mesh(first.layout))
    history = None
    if first.history is not None:  # all or none: the runs stand at one step
        curves = jax.tree.map(
            lambda *a: fill(np.concatenate([x[:n] for x, n in zip(a, sizes)])),
            *[p.history[0] for p in cells if p.history is not None],
        )
        history = (curves, first.history[1])
    return consts, carry, history


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
    from icl_race.run import compile_cache

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
    # packed: the pack's seed-steps over its time, the machine's throughput as for a lone run
    pack_cells, seed_steps = trained.pack or (1, trained.seed_steps_computed)
    meta = {
        "config": cfg.to_dict(),
        "config_digest": prepared.run.digest,
        **provenance(),
        "xla": compile_cache.record(),  # the kernels' provenance: caches and XLA_FLAGS (run/compile_cache.py)
        "compiles": trained.compiles,
        "compile_seconds": round(trained.compile_seconds, 3),
        "compile_cache_hits": trained.compile_cache_hits,
        "run_seconds": round(trained.run_seconds, 3),
        "resumed_from_step": start or None,
        # computed seed-steps per second of training: the machine's throughput (a retired seed costs nothing)
        "seed_steps_per_s": round(seed_steps / trained_s, 1),
        "seed_steps_computed": trained.seed_steps_computed,
        **({"packed_with": pack_cells - 1} if trained.pack else {}),  # runs trained in one ensemble with it
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


def check_memory(run: RunPlan) -> None:
    """Refuse, before anything is written or allocated, a config whose ensemble cannot fit in the
    device's memory (engine/memory.py: an estimate from the shapes alone)."""
    import jax

    from icl_race.engine import memory
    from icl_race.run import host
    from icl_race.systems import build, precision

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
