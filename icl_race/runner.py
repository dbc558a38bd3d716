"""One run into one directory: config -> ensemble training -> the run directory (icl_race/rundir.py,
which owns its layout and writes every file). A rerun of the same config does nothing when the run is
done and resumes from the newest intact checkpoint when it is not.
"""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from importlib import metadata
from pathlib import Path

import numpy as np

from icl_race import rundir
from icl_race.config import Config, ConfigError


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("icl-race", "jax", "jaxlib", "flax", "numpy", "scipy", "matplotlib"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def git_commit() -> str | None:
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                           text=True, timeout=5)
        return r.stdout.strip() if r.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def device_description() -> str:
    import jax

    devs = jax.devices()
    return f"{len(devs)} x {devs[0].platform}:{devs[0].device_kind}"


class ProgressBar:
    """One line per chunk: progress, seed-steps/s, the fraction of seeds that have reached the headline
    event, the time elapsed and an estimate of the time left. Redrawn in place on a terminal; on a pipe,
    a line at most every `every` seconds (and the last). The estimate is the steps left at the training
    rate since the first chunk (which carries the compilation); an early stop only shortens it."""

    def __init__(self, event: str = "icl", stream=sys.stderr, every: float = 10.0, clock=time.monotonic):
        self.event, self.stream, self.every, self.clock, self.last = event, stream, every, clock, -1e9
        self.label = "ICL acquired" if event == "icl" else event
        self.tty = stream.isatty()
        self.start = clock()
        self.first: tuple[float, int] | None = None  # (time, step) at the end of the first chunk

    def __call__(self, p) -> None:
        now = self.clock()
        frac = p.step / p.steps
        acquired = int(np.sum(p.t_first[self.event] >= 0))
        rate = p.seeds * p.chunk_steps / max(p.chunk_seconds, 1e-9)
        if self.first is None:
            self.first = (now, p.step)
            steps_per_s = p.chunk_steps / max(p.chunk_seconds, 1e-9)
        else:
            steps_per_s = (p.step - self.first[1]) / max(now - self.first[0], 1e-9)
        left = (p.steps - p.step) / max(steps_per_s, 1e-9)
        bar = "#" * int(24 * frac) + "-" * (24 - int(24 * frac))
        line = (f"[{bar}] step {p.step:,}/{p.steps:,} | {rate:,.0f} seed-steps/s | "
                f"{self.label} {acquired}/{p.seeds} ({acquired / p.seeds:.0%}) | "
                + (f"{p.chunk_seeds} live | " if p.chunk_seeds < p.seeds else "") +
                f"{hms(now - self.start)} elapsed, <= {hms(left)} left")
        done = p.step >= p.steps or acquired == p.seeds
        if self.tty:
            self.stream.write("\r" + line + ("\n" if done else ""))
        elif done or now - self.last >= self.every:
            self.stream.write(line + "\n")
            self.last = now
        self.stream.flush()


def hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s"


class RunError(RuntimeError):
    """The run could not be completed (e.g. a write failed); str() says what and what is intact."""


class Interrupted(Exception):
    """SIGINT or SIGTERM stopped the run at a chunk boundary; str() says how to resume."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.signum = signum


_signals_received: list[int] | None = None  # while stop_on_signals is active: the signals so far


@contextlib.contextmanager
def stop_on_signals():
    """SIGINT and SIGTERM ask the run to stop at the next chunk boundary (see `check_stop`); a second
    one exits at once (exit 128 + signal, the last checkpoint left as it is).

    The second signal is acted on by a thread reading the interpreter's wake-up fd, not by the Python
    handler: that runs only when the main thread returns from a device computation, which may take a
    whole chunk. Re-entrant (a sweep holds it across its cells); off the main thread it does nothing."""
    global _signals_received
    if _signals_received is not None or threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    wanted = (signal.SIGINT, signal.SIGTERM)
    r, w = os.pipe()
    os.set_blocking(w, False)

    def watch():
        while data := os.read(r, 64):
            for signum in data:
                if signum not in wanted:
                    continue
                received.append(signum)
                if len(received) > 1:
                    os.write(2, b"icl-race: interrupted again: exiting at once; rerun the same command to resume "
                                b"from the last checkpoint\n")
                    os._exit(128 + signum)

    previous = {s: signal.signal(s, lambda *_: None) for s in wanted}  # the watcher acts on them
    previous_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    watcher = threading.Thread(target=watch, name="icl-race-signals", daemon=True)
    watcher.start()
    _signals_received = received
    try:
        yield
    finally:
        _signals_received = None
        signal.set_wakeup_fd(previous_fd)
        for s, h in previous.items():
            signal.signal(s, h)
        os.close(w)
        watcher.join()
        os.close(r)


def check_stop(step: int, checkpoint_step: int | None) -> None:
    """Raise Interrupted if a stop signal arrived; `checkpoint_step` is where a rerun resumes."""
    if not _signals_received:
        return
    signum = _signals_received[0]
    where = (f"rerun the same command to resume from the checkpoint at step {checkpoint_step:,}"
             if checkpoint_step else "no checkpoint (train.checkpoint_every = 0 or none yet): a rerun starts "
             "from step 0")
    raise Interrupted(signum, f"stopped by {signal.Signals(signum).name} at step {step:,}; {where}")


def _host_carry(carry):
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
        return ({jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]}
                | {f"[{k!r}]" for k in (tree if isinstance(tree, dict) else ())})

    want, have = paths(jax.eval_shape(program.init, jax.random.key(0), consts)), paths(state)
    if want != have:
        diff = [f"{what} {', '.join(sorted(ps)[:3])}{' ...' if len(ps) > 3 else ''}"
                for what, ps in (("lacks", want - have), ("has extra", have - want)) if ps]
        raise rundir.RunDirError(
            f"--out {out}: the checkpoint at step {step:,} was written by another icl-race version (its seed state "
            f"{'; '.join(diff)}); resume it with the version that wrote it (meta of its cells / git log), or move "
            f"{out / rundir.CHECKPOINTS} aside to start the run over")


def _check_provenance(out: Path, cfg: Config, meta: dict) -> None:
    """A checkpoint resumes only the config it was written for: one of another config (config.json
    edited between the kill and the rerun) would continue another run under this one's name. Refused in
    one line, naming the fields that differ when the checkpoint stores its config (written since)."""
    digest = meta.get("config_digest")
    if digest == cfg.digest():
        return
    stored = meta.get("config")
    fields = rundir.differing_fields(rundir.with_defaults(stored), cfg.to_dict()) if isinstance(stored, dict) else []
    changed = f": it differs in {', '.join(fields)}" if fields else ""
    raise rundir.RunDirError(
        f"--out {out}: the checkpoint at step {int(meta.get('step', 0)):,} was written for another config (digest {str(digest)[:16]}, this "
        f"config's {cfg.digest()}){changed}; rerun with the config it was written for, or move "
        f"{out / rundir.CHECKPOINTS} aside to start this one over")


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


# What to lower when one kind of memory dominates a refused run.
_STATE_SIZES = "ensemble.seeds (run the seeds in parts with ensemble.first_seed) or the model and task sizes " \
               "(model.width, task.D, task.K_max)"
_LOWER = {"seed states": _STATE_SIZES,
          "shared constants": "the task's sizes (task.K, task.K_max, task.icl_pool, task.D, task.P)",
          "one block's work": "ensemble.block, train.batch_size, train.eval_size or the sequence and model sizes "
                              "(task.N, task.D, model.width)",
          "probe history": "the number of evaluations (train.steps / train.eval_every) or ensemble.seeds",
          "checkpoint copies": f"{_STATE_SIZES}, or set train.checkpoint_every = 0"}


def _layout(cfg: Config):
    """The ensemble's layout over the local devices; ensemble.devices beyond them is a ConfigError."""
    from icl_race.engine.ensemble import Layout
    from icl_race.engine.sharding import local_device_count

    e, available = cfg.ensemble, local_device_count()
    if e.devices > available:
        raise ConfigError(f"ensemble.devices = {e.devices}: must be 0 (all) or <= {available}, the local device count")
    return Layout(e.block, e.devices or available)


def check_memory(cfg: Config) -> None:
    """Refuse, before anything is written or allocated, a config whose ensemble cannot fit in the
    device's memory (engine/memory.py: an estimate from the shapes alone)."""
    import jax

    from icl_race.engine import memory
    from icl_race.engine.ensemble import chunk_plan
    from icl_race.systems import build, precision

    e, tr = cfg.ensemble, cfg.train
    layout = _layout(cfg)
    padded = -(-e.seeds // layout.unit) * layout.unit
    evals = (tr.steps // tr.eval_every if tr.eval_spacing == "linear"
             else sum(n for _, _, n in chunk_plan(tr.steps, tr.eval_every, tr.evals_per_chunk, tr.eval_spacing)))
    device = jax.local_devices()[0]
    with precision(cfg):
        program, consts = memory.abstract_build(lambda: build(cfg))
        est = memory.estimate(program, consts, seeds_per_device=padded // layout.shards, shards=layout.shards,
                              block=e.block, total_seeds=e.seeds, evals=evals, checkpoints=tr.checkpoint_every > 0,
                              on_cpu=device.platform == "cpu")
    checks = [(est.parts(), *memory.device_limit(device))]
    if device.platform != "cpu":
        checks.append((est.host_parts(), memory.host_available(), "available host memory"))
    for parts, limit, what in checks:
        need = sum(parts.values())
        if need > limit:
            top = max(parts, key=parts.get)
            detail = ", ".join(f"{k} {memory.human(v)}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]))
            raise ConfigError(f"memory: this run needs about {memory.human(need)} but {what} is "
                              f"{memory.human(limit)} ({detail}); lower {_LOWER[top]}")


def _finished_results(out: Path, redo: bool, log) -> dict | None:
    """The results of a finished run; None when they (or its meta.json) are damaged and `redo` asks to
    train again (the damaged files are moved aside first, never deleted)."""
    try:
        rundir.load_run(out)  # read as data: the schema and config.json against meta.json
        return rundir.read_results(out)
    except rundir.DamagedFileError as e:
        if not redo:
            raise rundir.DamagedFileError(f"{e}; rerun with --redo to train this run again (from its checkpoints "
                                          "if any, else from the config), keeping the damaged files aside") from None
    aside = rundir.set_aside_final_files(out)
    log(f"{out}: damaged results moved to {aside.name}/; training again")
    return None


def execute(cfg: Config, out: Path, progress: bool = True, log=print, redo: bool = False) -> dict:
    """Train cfg's ensemble and write the run directory; returns the results arrays.

    Skips the work when `out` already holds this config's results; resumes from the newest intact
    checkpoint when it holds this config's unfinished run. Damaged results are an error, or with
    `redo` are moved aside and the run is trained again."""
    out = Path(out)
    rundir.refuse_links(out)
    if rundir.check(cfg, out) and not redo:
        results = _finished_results(out, redo, log)
        log(f"{out}: results for this config already exist; nothing to do")
        rundir.drop_superseded_checkpoints(out)
        return results
    check_memory(cfg)
    out.mkdir(parents=True, exist_ok=True)
    with rundir.lock(out):
        # Finished by another process between the check and the lock, or a --redo of intact results.
        if rundir.check(cfg, out) and (results := _finished_results(out, redo, log)) is not None:
            return results
        notice = rundir.repair_notice(out)
        if notice:
            log(notice)
        from icl_race.engine.checkpoint import CheckpointError
        from icl_race.systems import precision

        try:
            with precision(cfg), stop_on_signals():
                return _execute_locked(cfg, out, progress, log)
        except CheckpointError as e:
            raise RunError(f"{e}: rerun the same command to resume from it" if e.last_good is not None
                           else f"{e}: a rerun starts from step 0") from e
        except OSError as e:
            step = max(rundir.checkpoint_steps(out), default=None)
            kept = (f"the last good checkpoint is at step {step:,}: rerun the same command to resume from it"
                    if step is not None else "there is no checkpoint: a rerun starts from step 0")
            raise RunError(f"cannot write {e.filename or out}: {e.strerror or e}; {kept}") from e


def _execute_locked(cfg: Config, out: Path, progress: bool, log) -> dict:
    import jax

    from icl_race.engine import compile_stats
    from icl_race.engine.ensemble import (DIVERGED, chunk_plan, concat_history, init_ensemble, padded_seed_ids,
                                          retirement_steps, seed_keys, train)
    from icl_race.engine.sharding import place, seed_mesh
    from icl_race.analysis.survival import censor_time
    from icl_race.plots import histogram, png_bytes
    from icl_race import compile_cache, systems

    compile_cache.setup()
    rundir.write_config(out, cfg)
    e, tr = cfg.ensemble, cfg.train
    seed_ids = np.arange(e.first_seed, e.first_seed + e.seeds, dtype=np.int64)
    compiles0, compile_s0 = compile_stats.snapshot()
    hits0 = compile_stats.cache_hits()
    tic = time.perf_counter()
    program, consts = systems.build(cfg)

    ckpt = restored = None
    if tr.checkpoint_every:
        from icl_race.engine.checkpoint import Checkpointer

        ckpt = Checkpointer(out / rundir.CHECKPOINTS, keep=2)
        restored = ckpt.restore_latest(report=lambda m: log(f"{out}: {m}"))
    layout = _layout(cfg)
    mesh = seed_mesh(layout.shards) if layout.shards > 1 else None
    padded_ids = padded_seed_ids(seed_ids, layout)
    if restored:
        tree, meta = restored
        _check_provenance(out, cfg, meta)
        _check_state_layout(out, program, consts, tree["carry"]["state"], meta["step"])
        tree = _repad(tree, len(padded_ids), e.seeds)
        carry, start, history = _device_carry(tree["carry"]), meta["step"], (tree["curves"], tree["eval_steps"])
        carry, consts = place(carry, consts, mesh)
        log(f"{out}: resuming from the checkpoint at step {start:,}")
    else:
        keys, consts = place(seed_keys(e.root_seed, padded_ids), consts, mesh)
        carry = init_ensemble(program, layout, keys, consts)
        start, history = 0, None

    stop = program.stop_event
    bar = ProgressBar(stop) if progress else None

    saved = [start]  # the step of the newest checkpoint
    computed = [0]  # seed-steps this process computed (fewer than seeds x steps when seeds retire)

    def on_chunk(p):
        computed[0] += p.chunk_seeds * p.chunk_steps
        if bar:
            bar(p)
        stopping = p.step < tr.steps and _signals_received
        if ckpt and p.step < tr.steps and (p.chunks_done % tr.checkpoint_every == 0 or stopping):
            curves, steps_seen = concat_history(p.history, p.eval_steps)
            ckpt.save(p.step, {"carry": _host_carry(p.carry), "curves": curves, "eval_steps": steps_seen},
                      {"config_digest": cfg.digest(), "config": cfg.to_dict()})
            saved[0] = p.step
        if stopping:
            check_stop(p.step, saved[0])

    check_stop(start, start)  # a signal that arrived before training (or between a sweep's cells)
    try:
        carry, curves, eval_steps = train(
            program, consts, carry, layout=layout, steps=tr.steps, eval_every=tr.eval_every,
            evals_per_chunk=tr.evals_per_chunk, spacing=tr.eval_spacing, live_seeds=e.seeds, start_step=start,
            history=history, retire=e.retire,
            stop_event=stop if tr.stop_when_all_acquired else None, on_chunk=on_chunk)
    finally:
        if ckpt:
            try:
                ckpt.wait()
            finally:
                ckpt.close()
    t_first = {k: v[: e.seeds] for k, v in jax.device_get(carry["t_first"]).items()}
    curves = {k: v[: e.seeds] for k, v in curves.items()}
    run_s = time.perf_counter() - tic
    compiles, compile_s = (a - b for a, b in zip(compile_stats.snapshot(), (compiles0, compile_s0)))
    steps_run = int(eval_steps[-1]) if eval_steps.size else 0

    results = {
        "seed_ids": seed_ids,
        **{f"t_{ev}": t_first[ev].astype(np.int64) for ev in program.event_names},
        "diverged": t_first[DIVERGED] >= 0,
        "eval_steps": eval_steps.astype(np.int64),
        **{k: v.astype(np.float64 if v.dtype == np.float64 else np.float32) for k, v in curves.items()},
        "steps_run": np.int64(steps_run),
        "budget": np.int64(tr.steps),
    }
    if e.retire:
        results["retired_at"] = retirement_steps(program, t_first, chunk_plan(tr.steps, tr.eval_every,
                                                 tr.evals_per_chunk, tr.eval_spacing), steps_run)
    t_kept = results[f"t_{stop}"][~results["diverged"]]
    fig = histogram(t_kept, censor_time(tr.steps, steps_run, bool(np.any(t_kept < 0))),
                    title=f"t_{stop}, {systems.of(cfg).describe(cfg)}, {e.seeds} seeds", xlabel=f"t_{stop} (steps)")
    hist = png_bytes(fig, dpi=120)

    trained_s = max(run_s - compile_s, 1e-9)
    meta = {
        "config": cfg.to_dict(),
        "config_digest": cfg.digest(),
        "versions": versions(),
        "git_commit": git_commit(),
        "device": device_description(),
        "compiles": compiles,
        "compile_seconds": round(compile_s, 3),
        "compile_cache_hits": compile_stats.cache_hits() - hits0,  # of `compiles`, loaded from the persistent cache
        "run_seconds": round(run_s, 3),
        "resumed_from_step": start or None,
        "seed_steps_per_s": round(e.seeds * (steps_run - start) / trained_s, 1),
        "seed_steps_computed": computed[0],
        "steps_run": steps_run,
        "seeds": e.seeds,
        "stop_event": stop,
        "acquired": int(np.sum(results[f"t_{stop}"] >= 0)),
        "diverged": int(np.sum(results["diverged"])),
    }
    rundir.finish(out, results, meta, {f"t_{stop}_hist.png": hist})
    return results
