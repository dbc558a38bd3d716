"""One run into one directory (`execute`), or several runs of one program into theirs (`execute_pack`),
in three phases under each directory's lock, handing typed records (run/records.py) from one to the next:

    RunPlan.of(cfg)                -> RunPlan   the config and what derives from it (the device layout,
                                                the chunk plan, the digest, the memory estimate), once
    host.check_memory(run)                      the refusal of a run that cannot fit, before any write
    prepare(run, out)              -> Prepared  the program, and the carry (`laid_out`): fresh (engine.ensemble
                                                .start), or the newest intact checkpoint's (a rerun resumes)
    pack.train_phase(prepared,...) -> Trained   the chunks, with the progress line, the checkpoints and
                                                the stop test between them (pack.train_pack for a pack)
    commit.commit(out, prepared, trained) -> Finished  the results arrays, meta.json and the histogram,
                                                committed by rundir.finish; as arrays and as a `rundir.Run`

A rerun of the same config does nothing when the run is done. `execute` returns the results arrays,
`execute_run` the `rundir.Run` (the run's summary is made from it: the process that committed the
results does not read them back). `laid_out`, `train_phase` and `results_arrays` are also what
icl_race/run/retrain.py trains chosen seeds with, writing nothing.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from icl_race import rundir
from icl_race.config import Config
from icl_race.run.commit import Finished, commit
from icl_race.run.host import check_memory
from icl_race.run.live import LiveResults
from icl_race.run.pack import pack_plan, train_pack, train_phase
from icl_race.run.progress import ProgressBar
from icl_race.run.records import Prepared, RunPlan
from icl_race.run.signals import stop_on_signals

if TYPE_CHECKING:
    from icl_race.engine.program import Consts, Program
    from icl_race.run.checkpoint import Checkpointer
    from icl_race.run.compile_stats import Counters


class RunError(RuntimeError):
    """The run could not be completed (e.g. a write failed); str() says what and what is intact."""


def execute(cfg: Config, out: Path, progress: bool = True, log=print, redo: bool = False) -> dict:
    """Train cfg's ensemble and write the run directory; returns the results arrays.

    Skips the work when `out` already holds this config's results; resumes from the newest intact
    checkpoint when it holds this config's unfinished run. Damaged results are an error, or with
    `redo` are moved aside and the run is trained again. SIGINT and SIGTERM stop it at the next chunk
    boundary (icl_race/run/signals.py: `Interrupted`)."""
    return _execute(cfg, Path(out), progress, log, redo).results


def execute_run(
    cfg: Config, out: Path, progress: bool = True, log=print, redo: bool = False, on_chunk=None
) -> rundir.Run:
    """`execute`, returning the finished run as a `rundir.Run`: built from the arrays just committed (or
    read once when the run was already done), for the run's summary (report/summary.py). `on_chunk` also
    sees the engine's `Progress` after each chunk (run/tracking.py's curves)."""
    return _execute(cfg, Path(out), progress, log, redo, on_chunk).run


def _execute(cfg: Config, out: Path, progress: bool, log, redo: bool, on_chunk=None) -> Finished:
    rundir.refuse_links(out)
    if rundir.check(cfg, out) and not redo:
        finished = _finished(out, redo, log)
        assert finished is not None  # without redo, damaged results raise
        log(f"{out}: results for this config already exist; nothing to do")
        rundir.drop_superseded_checkpoints(out)
        return finished
    if progress:  # the first line, before jax's import and the memory check (seconds): the input is checked
        # A notebook's second `icl_race.train` has jax loaded already: the line says only what comes.
        loading = "" if "jax" in sys.modules else "loading jax, then "
        log(f"{out}: config checked; {loading}checking that the ensemble fits this machine's memory")
    run = RunPlan.of(cfg)  # the one derivation of the layout and chunk plan for this run
    check_memory(run, out)
    out.mkdir(parents=True, exist_ok=True)
    with rundir.lock(out):
        # Finished by another process between the check and the lock, or a --redo of intact results.
        if rundir.check(cfg, out) and (finished := _finished(out, redo, log)) is not None:
            return finished
        if notice := rundir.repair_notice(out):
            log(notice)
        from icl_race.run.checkpoint import CheckpointError
        from icl_race.systems import of, precision

        if progress:  # what comes before the first progress line: the compilations and the first chunk
            _, period, n = run.chunks.chunks[0]
            log(
                f"{out}: {of(cfg).describe(cfg)}, {cfg.ensemble.seeds} seeds x {cfg.train.steps:,} steps: compiling, "
                f"then a progress line after each chunk (the first: {period * n:,} steps)"
            )

        try:
            with precision(cfg), stop_on_signals() as stop:
                prepared = prepare(run, out, log)
                bar = ProgressBar(prepared.program.stop_event, plan=run.chunks) if progress else None
                live = LiveResults(out, prepared)  # DIR/live.npz: the results so far, for a reader
                hooks = [h for h in (bar, live, on_chunk) if h]

                def each_chunk(p):
                    for hook in hooks:
                        hook(p)

                trained = train_phase(prepared, stop, each_chunk)
                return commit(out, prepared, trained)
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


def execute_pack(runs: Sequence[tuple[RunPlan, Path]], progress: bool = True, log=print) -> list[Path]:
    """Train runs of one program (run/identity.py) as the members of one ensemble (`train_pack`), each into
    its own directory exactly as `execute` writes it: a run already done is skipped, one locked by
    another process is left to it, each resumes from its own newest checkpoint (runs standing at
    different steps train as separate packs). Returns the directories this call committed."""
    from icl_race.run.checkpoint import CheckpointError
    from icl_race.systems import precision

    todo = []
    for run, out in runs:
        rundir.refuse_links(out)
        if rundir.check(run.cfg, out):
            _finished(out, False, log)  # damaged results raise, naming --redo
            log(f"{out}: results for this config already exist; nothing to do")
        else:
            todo.append((run, Path(out)))
    if not todo:
        return []
    check_memory(pack_plan([run for run, _ in todo]), todo[0][1])
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
    this config (run/checkpoint.py refuses one of another config or version), else fresh."""
    from icl_race import systems
    from icl_race.run import checkpoint, compile_cache, compile_stats

    cfg, e = run.cfg, run.cfg.ensemble
    compile_cache.setup()
    rundir.write_config(out, cfg)
    since = compile_stats.Counters.now()
    program, consts = systems.build(cfg)
    ckpt = checkpoint.Checkpointer(out / rundir.CHECKPOINTS, keep=2) if cfg.train.checkpoint_every else None
    restored = ckpt.resume(out, run, program, consts, log) if ckpt else None
    seed_ids = np.arange(e.first_seed, e.first_seed + e.seeds, dtype=np.int64)
    return laid_out(run, program, consts, seed_ids, since, ckpt, restored)


def laid_out(
    run: RunPlan,
    program: Program,
    consts: Consts,
    seed_ids: np.ndarray,
    since: Counters | None = None,
    checkpointer: Checkpointer | None = None,
    restored: tuple[dict, int] | None = None,
) -> Prepared:
    """The carry of `seed_ids` over the run's devices: at the step of `restored` (Checkpointer.resume's), else
    at step 0 (engine.ensemble.start: a seed's key is fold_in(root_seed, its id), its vmap cfg's block wide,
    so each seed trains bit-identically to its run, whatever seeds are trained beside it)."""
    from icl_race.engine.ensemble import start
    from icl_race.engine.kept import with_kept
    from icl_race.engine.sharding import place
    from icl_race.run import compile_stats
    from icl_race.run.checkpoint import device_carry

    if not restored:
        carry, consts = start(program, run.layout, run.cfg.ensemble.root_seed, seed_ids, consts)
        step, history = 0, None
        if "at_t_icl" in run.cfg.train.kept:  # captured on the device at each seed's first passage
            carry = with_kept(program, carry)
    else:
        tree, step = restored
        carry, consts = place(device_carry(tree["carry"]), consts, run.layout.shards)
        history = (tree["curves"], tree["eval_steps"])
    return Prepared(
        run=run,
        program=program,
        consts=consts,
        seed_ids=seed_ids,
        carry=carry,
        start=step,
        history=history,
        checkpointer=checkpointer,
        since=since or compile_stats.Counters.now(),
    )
