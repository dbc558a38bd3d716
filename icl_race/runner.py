"""One run into one directory: config -> ensemble training -> results.npz, meta.json, t_icl_hist.png.

The directory contract (stable; later tools read it):
  config.json        the full resolved config, written first; a different config in the same
                     directory is refused, the same one with results present is skipped
  results.npz        seed_ids[S], t_icl[S] (steps, -1 = not acquired within the budget: censored),
                     t_converged[S], eval_steps[T], icl_acc/iwl_acc/icl_loss/iwl_loss/train_loss[S, T],
                     steps_run, budget
  meta.json          config, package versions, device, compile/run seconds, seed_steps_per_s
  t_icl_hist.png     the t_ICL histogram with the censored seeds as their own bar
Every file is written under a temporary name and renamed, so none is ever half-written.
"""

from __future__ import annotations

import io
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np

from icl_race.config import Config, ConfigError


class RunDirError(ConfigError):
    """The output directory holds another run."""


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _json_bytes(obj) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()


def check_run_dir(cfg: Config, out: Path) -> bool:
    """True if `out` already holds this config's finished results (nothing to do); raises if it holds
    a different run. Reads only: a refused directory is left untouched."""
    cfg_file = out / "config.json"
    if not cfg_file.exists():
        if out.exists() and any(out.iterdir()):
            raise RunDirError(f"--out {out}: directory is not empty and holds no icl-race run; choose another")
        return False
    try:
        stored = json.loads(cfg_file.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise RunDirError(f"--out {out}: unreadable config.json ({e}); choose another directory") from None
    if stored != cfg.to_dict():
        changed = [f"{s}.{k}" for s in stored | cfg.to_dict()
                   for k in set(stored.get(s, {})) | set(cfg.to_dict().get(s, {}))
                   if stored.get(s, {}).get(k) != cfg.to_dict().get(s, {}).get(k)]
        raise RunDirError(f"--out {out}: holds a run with a different config (differs in "
                          f"{', '.join(sorted(changed))}); choose another directory")
    return (out / "results.npz").exists()


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
    """One line per chunk: progress, seed-steps/s and the fraction of seeds that have acquired ICL.
    Redrawn in place on a terminal; on a pipe, a line at most every `every` seconds (and the last)."""

    def __init__(self, stream=sys.stderr, every: float = 10.0):
        self.stream, self.every, self.last = stream, every, -1e9
        self.tty = stream.isatty()

    def __call__(self, p) -> None:
        frac = p.step / p.steps
        acquired = int(np.sum(p.t_first["icl"] >= 0))
        rate = p.seeds * p.chunk_steps / max(p.chunk_seconds, 1e-9)
        bar = "#" * int(24 * frac) + "-" * (24 - int(24 * frac))
        line = (f"[{bar}] step {p.step:,}/{p.steps:,} | {rate:,.0f} seed-steps/s | "
                f"ICL acquired {acquired}/{p.seeds} ({acquired / p.seeds:.0%})")
        done = p.step >= p.steps or acquired == p.seeds
        now = time.monotonic()
        if self.tty:
            self.stream.write("\r" + line + ("\n" if done else ""))
        elif done or now - self.last >= self.every:
            self.stream.write(line + "\n")
            self.last = now
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")


def execute(cfg: Config, out: Path, progress: bool = True, log=print) -> dict:
    """Train cfg's ensemble and write the run directory; returns the results arrays.

    Skips the work when `out` already holds this config's results."""
    out = Path(out)
    if check_run_dir(cfg, out):
        log(f"{out}: results for this config already exist; nothing to do")
        return dict(np.load(out / "results.npz"))

    import jax

    from icl_race.engine import compile_stats
    from icl_race.engine.ensemble import init_ensemble, padded_seed_ids, seed_keys, train
    from icl_race.plots import t_icl_histogram
    from icl_race.systems import build

    out.mkdir(parents=True, exist_ok=True)
    _atomic_write(out / "config.json", _json_bytes(cfg.to_dict()))

    e, tr = cfg.ensemble, cfg.train
    seed_ids = np.arange(e.first_seed, e.first_seed + e.seeds, dtype=np.int64)
    compiles0, compile_s0 = compile_stats.snapshot()
    tic = time.perf_counter()
    program, consts = build(cfg)
    carry = init_ensemble(program, e.block, seed_keys(e.root_seed, padded_seed_ids(seed_ids, e.block)), consts)
    bar = ProgressBar() if progress else None
    carry, curves, eval_steps = train(
        program, consts, carry, block=e.block, steps=tr.steps, eval_every=tr.eval_every,
        evals_per_chunk=tr.evals_per_chunk, live_seeds=e.seeds,
        stop_event="icl" if tr.stop_when_all_acquired else None, on_chunk=bar)
    t_first = {k: v[: e.seeds] for k, v in jax.device_get(carry["t_first"]).items()}
    curves = {k: v[: e.seeds] for k, v in curves.items()}
    run_s = time.perf_counter() - tic
    compiles, compile_s = (a - b for a, b in zip(compile_stats.snapshot(), (compiles0, compile_s0)))
    steps_run = int(eval_steps[-1]) if eval_steps.size else 0

    results = {
        "seed_ids": seed_ids,
        "t_icl": t_first["icl"].astype(np.int64),
        "t_converged": t_first["converged"].astype(np.int64),
        "eval_steps": eval_steps.astype(np.int64),
        **{k: v.astype(np.float32) for k, v in curves.items()},
        "steps_run": np.int64(steps_run),
        "budget": np.int64(tr.steps),
    }
    buf = io.BytesIO()
    np.savez(buf, **results)
    _atomic_write(out / "results.npz", buf.getvalue())

    fig = t_icl_histogram(results["t_icl"], tr.steps,
                          title=f"t_ICL, {cfg.task.variant} K={cfg.task.K if cfg.task.variant != 'infinite' else 'inf'}, "
                                f"N={cfg.task.N}, {e.seeds} seeds")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    _atomic_write(out / "t_icl_hist.png", buf.getvalue())

    train_s = max(run_s - compile_s, 1e-9)
    meta = {
        "config": cfg.to_dict(),
        "config_digest": cfg.digest(),
        "versions": versions(),
        "git_commit": git_commit(),
        "device": device_description(),
        "compiles": compiles,
        "compile_seconds": round(compile_s, 3),
        "run_seconds": round(run_s, 3),
        "seed_steps_per_s": round(e.seeds * steps_run / train_s, 1),
        "steps_run": steps_run,
        "acquired": int(np.sum(results["t_icl"] >= 0)),
        "seeds": e.seeds,
    }
    _atomic_write(out / "meta.json", _json_bytes(meta))
    return results
