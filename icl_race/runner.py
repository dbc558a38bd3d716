"""One run into one directory: config -> ensemble training -> the run directory (icl_race/rundir.py,
which owns its layout and writes every file). A rerun of the same config does nothing when the run is
done and resumes from the newest intact checkpoint when it is not.
"""

from __future__ import annotations

import platform
import subprocess
import sys
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


def _host_carry(carry):
    import jax

    return jax.device_get({**carry, "key": jax.random.key_data(carry["key"])})


def _device_carry(tree):
    import jax

    return {**tree, "key": jax.random.wrap_key_data(tree["key"])}


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


def _describe(cfg: Config) -> str:
    t = cfg.task
    if t.kind == "linear_regression":
        return f"{cfg.model.kind} D={t.D} N={t.N} P={t.P or 'inf'}"
    if t.kind == "memorization":
        return f"MLP width {cfg.model.width}, K={t.K}"
    return f"{t.variant} K={'inf' if t.variant == 'infinite' else t.K}, N={t.N}"


def execute(cfg: Config, out: Path, progress: bool = True, log=print) -> dict:
    """Train cfg's ensemble and write the run directory; returns the results arrays.

    Skips the work when `out` already holds this config's results; resumes from the newest intact
    checkpoint when it holds this config's unfinished run."""
    out = Path(out)
    if rundir.check(cfg, out):
        log(f"{out}: results for this config already exist; nothing to do")
        rundir.drop_superseded_checkpoints(out)
        return rundir.read_results(out)
    out.mkdir(parents=True, exist_ok=True)
    with rundir.lock(out):
        if rundir.check(cfg, out):  # finished by another process between the check and the lock
            return rundir.read_results(out)
        notice = rundir.repair_notice(out)
        if notice:
            log(notice)
        from icl_race.systems import precision

        try:
            with precision(cfg):
                return _execute_locked(cfg, out, progress, log)
        except OSError as e:
            raise RunError(f"cannot write in {out}: {e.strerror or e}"
                           f"{f' ({e.filename})' if e.filename else ''}; the last good checkpoint, if any, "
                           "is intact and the run resumes from it") from e


def _execute_locked(cfg: Config, out: Path, progress: bool, log) -> dict:
    import jax

    from icl_race.engine import compile_stats
    from icl_race.engine.ensemble import (DIVERGED, Layout, concat_history, init_ensemble, padded_seed_ids,
                                          seed_keys, train)
    from icl_race.engine.sharding import local_device_count, place, seed_mesh
    from icl_race.analysis.survival import censor_time
    from icl_race.plots import histogram, png_bytes
    from icl_race.systems import build

    rundir.write_config(out, cfg)
    e, tr = cfg.ensemble, cfg.train
    seed_ids = np.arange(e.first_seed, e.first_seed + e.seeds, dtype=np.int64)
    compiles0, compile_s0 = compile_stats.snapshot()
    tic = time.perf_counter()
    program, consts = build(cfg)

    ckpt = restored = None
    if tr.checkpoint_every:
        from icl_race.engine.checkpoint import Checkpointer

        ckpt = Checkpointer(out / rundir.CHECKPOINTS, keep=2)
        restored = ckpt.restore_latest()
    available = local_device_count()
    if e.devices > available:
        raise ConfigError(f"ensemble.devices = {e.devices}: must be 0 (all) or <= {available}, the local device count")
    layout = Layout(e.block, e.devices or available)
    mesh = seed_mesh(layout.shards) if layout.shards > 1 else None
    padded_ids = padded_seed_ids(seed_ids, layout)
    if restored:
        tree, meta = restored
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

    def on_chunk(p):
        if bar:
            bar(p)
        if ckpt and p.chunks_done % tr.checkpoint_every == 0 and p.step < tr.steps:
            curves, steps_seen = concat_history(p.history, p.eval_steps)
            try:
                ckpt.save(p.step, {"carry": _host_carry(p.carry), "curves": curves, "eval_steps": steps_seen},
                          {"config_digest": cfg.digest()})
            except Exception as err:  # orbax wraps I/O errors in its own types
                raise RunError(f"checkpoint at step {p.step:,} in {out} failed ({err}); the previous "
                               "checkpoint is intact and the run resumes from it") from err

    try:
        carry, curves, eval_steps = train(
            program, consts, carry, layout=layout, steps=tr.steps, eval_every=tr.eval_every,
            evals_per_chunk=tr.evals_per_chunk, spacing=tr.eval_spacing, live_seeds=e.seeds, start_step=start,
            history=history,
            stop_event=stop if tr.stop_when_all_acquired else None, on_chunk=on_chunk)
    finally:
        if ckpt:
            ckpt.wait()
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
    t_kept = results[f"t_{stop}"][~results["diverged"]]
    fig = histogram(t_kept, censor_time(tr.steps, steps_run, bool(np.any(t_kept < 0))),
                    title=f"t_{stop}, {_describe(cfg)}, {e.seeds} seeds", xlabel=f"t_{stop} (steps)")
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
        "run_seconds": round(run_s, 3),
        "resumed_from_step": start or None,
        "seed_steps_per_s": round(e.seeds * (steps_run - start) / trained_s, 1),
        "steps_run": steps_run,
        "seeds": e.seeds,
        "stop_event": stop,
        "acquired": int(np.sum(results[f"t_{stop}"] >= 0)),
        "diverged": int(np.sum(results["diverged"])),
    }
    rundir.finish(out, results, meta, {f"t_{stop}_hist.png": hist})
    return results
