"""Orbax checkpoints of a whole ensemble (host copies), with verification and fallback.

A checkpoint holds the carry (parameters, per-seed tables, keys as raw key data, first passages),
the metric history so far and the step, all as numpy arrays: copying to the host before saving
lets the next chunk donate the device buffers while orbax is still writing in the background.
Orbax writes each step to a temporary directory and renames it when complete, so a kill during a
save leaves the previous checkpoints untouched. A SHA-256 of every array and of every metadata field
(the step and the config's digest among them: what steers a resume), stored beside them, catches a
checkpoint that was damaged or edited after it was written; so does a step that is not its directory's,
or, given the run's chunk plan, not one of the plan's boundaries with the plan's evaluations before it.
Such a checkpoint is set aside and the previous one used instead (or the run starts over).

A checkpoint that reads back intact resumes only the run it was written for (`check_resume`: its config,
its seed state's fields), repadded to this process's devices (`repad`); `host_carry` and `device_carry`
are the carry's two forms, on the device and as stored.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import jax
import numpy as np

from icl_race import rundir
from icl_race.configbase import short

if TYPE_CHECKING:
    from icl_race.config import Config
    from icl_race.engine.program import Carry, Consts, Program


def tree_digest(tree) -> str:
    h = hashlib.sha256()
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        a = np.ascontiguousarray(leaf)
        h.update(jax.tree_util.keystr(path).encode())
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def checkpoint_digest(tree, meta: dict) -> str:
    """The SHA-256 a checkpoint stores: its arrays and every field of its metadata but the digest itself
    (compared after a JSON round trip, which is how orbax stores the metadata)."""
    fields = json.dumps({k: v for k, v in meta.items() if k != "sha256"}, sort_keys=True)
    return hashlib.sha256(f"{tree_digest(tree)}\n{fields}".encode()).hexdigest()


def planned_history(plan) -> tuple[list[int], np.ndarray]:
    """The steps a run of `plan` (engine.chunks.ChunkPlan: (first step, period, evaluations) per chunk)
    checkpoints at, the boundaries after step 0, and every step it evaluates at, in order."""
    boundaries = [t0 for t0, _, _ in plan if t0 > 0]
    evals = [t0 + period * np.arange(1, n + 1) for t0, period, n in plan]
    return boundaries, np.concatenate(evals) if evals else np.zeros(0, np.int64)


def _check_step(step: int, tree, meta: dict, plan) -> None:
    """A ValueError saying why a checkpoint that reads back intact cannot resume at its step."""
    if meta.get("step") != step:
        raise ValueError(f"its metadata says step {short(meta.get('step'))}, its directory {step}")
    if plan is None:
        return
    boundaries, evals_T = planned_history(plan)
    if step not in boundaries:
        raise ValueError(f"step {step} is not a chunk boundary of this run's plan")
    seen_T = np.asarray(tree.get("eval_steps", ())) if isinstance(tree, dict) else np.zeros(0)
    if not np.array_equal(seen_T, evals_T[evals_T <= step]):
        raise ValueError(f"its evaluation steps are not this run's up to step {step}")


class CheckpointWarning(UserWarning):
    pass


class CheckpointError(RuntimeError):
    """A checkpoint could not be written; str() is one line: the step, the directory, the cause and
    the last good checkpoint (kept intact), whose step is `last_good` (None if there is none)."""

    def __init__(self, message: str, last_good: int | None):
        super().__init__(message)
        self.last_good = last_good


def _cause(err: BaseException) -> str:
    """The short reason of an orbax/tensorstore write failure (they bury the OS error in a long text)."""
    for e in (err, err.__cause__, err.__context__):
        if isinstance(e, OSError) and e.strerror:
            return e.strerror
    found = re.search(r": ([^:\[\]]+?) \[os_error_code='?\d+'?\]", str(err))
    return found.group(1) if found else f"{type(err).__name__}: {str(err)[:200]}"


class _DropClosedLoopNoise:
    """An unraisable-exception hook that drops the "Event loop is closed" errors that tensorstore's
    callbacks raise after orbax has closed its event loop (on a failed write or a damaged restore:
    the real error reaches us as an exception), and passes everything else on to `hook`."""

    def __init__(self, hook: Callable[[sys.UnraisableHookArgs], object]):
        self.hook = hook

    def __call__(self, u: sys.UnraisableHookArgs) -> None:
        if not (isinstance(u.exc_value, RuntimeError) and str(u.exc_value) == "Event loop is closed"):
            self.hook(u)


class _DropOrphanedTaskErrors(logging.Filter):
    """Drops asyncio's "Task/Future exception was never retrieved" records. On a damaged restore
    tensorstore reads the arrays in concurrent tasks and futures; the first error reaches us as an
    exception, and the siblings' errors (the same damage) would be logged, traceback and all, when they
    are collected (a Future's, not only a Task's: seen once in CI-like runs of the damaged-checkpoint test)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(
            ("Task exception was never retrieved", "Future exception was never retrieved")
        )


_ORPHANED_TASK_FILTER = _DropOrphanedTaskErrors()


def _debug() -> bool:
    return os.environ.get("ICL_RACE_DEBUG", "") not in ("", "0")


class Checkpointer:
    """Keep the last `keep` checkpoints of a run under `directory`, indexed by training step.

    Saves are asynchronous, so a write error surfaces at the next save or at `wait`; it is raised as
    a CheckpointError naming the step that failed and the last good one, and the failed step's
    temporary directory is removed. Orbax's own logging of such errors (tracebacks from its
    background threads) is silenced unless ICL_RACE_DEBUG is set."""

    def __init__(self, directory: Path, keep: int = 2):
        import orbax.checkpoint as ocp

        self._ocp = ocp
        self.root = Path(directory).absolute()
        if not _debug():
            self._absl_level = logging.getLogger("absl").level
            logging.getLogger("absl").setLevel(logging.CRITICAL)
            logging.getLogger("asyncio").addFilter(_ORPHANED_TASK_FILTER)  # idempotent: one object
            if not isinstance(sys.unraisablehook, _DropClosedLoopNoise):
                sys.unraisablehook = _DropClosedLoopNoise(sys.unraisablehook)
        self.manager = ocp.CheckpointManager(
            self.root, options=ocp.CheckpointManagerOptions(max_to_keep=keep, create=True, cleanup_tmp_directories=True)
        )  # left by a process killed mid-save
        self.last_good = self.manager.latest_step()
        self.pending: int | None = None
        self.broken = False

    def save(self, step: int, tree, meta: dict) -> None:
        """Queue an asynchronous save of `tree` (numpy arrays only) and `meta` (JSON)."""
        ocp = self._ocp
        self.wait()  # so that an earlier save's failure is reported as that step's
        meta = {**meta, "step": int(step)}
        meta["sha256"] = checkpoint_digest(tree, meta)
        self.pending = int(step)
        try:
            self.manager.save(
                int(step), args=ocp.args.Composite(state=ocp.args.StandardSave(tree), meta=ocp.args.JsonSave(meta))
            )
        except Exception as e:  # orbax wraps I/O errors in its own types
            self._failed(e)

    def wait(self) -> None:
        try:
            self.manager.wait_until_finished()
        except Exception as e:
            self._failed(e)
        if self.pending is not None:
            self.last_good, self.pending = self.pending, None

    def _failed(self, err: Exception):
        step, self.pending, self.broken = self.pending, None, True
        for tmp in self.root.glob(f"{step}.orbax-checkpoint-tmp*"):
            shutil.rmtree(tmp, ignore_errors=True)
        kept = (
            f"the last good checkpoint is at step {self.last_good:,}"
            if self.last_good is not None
            else "no checkpoint was written before it"
        )
        raise CheckpointError(
            f"checkpoint at step {step:,} could not be written to {self.root} ({_cause(err)}); {kept}", self.last_good
        ) from err

    def close(self) -> None:
        try:
            self.manager.close()
        except Exception:
            if not self.broken:  # else it is the failure already raised by save or wait
                raise
        finally:
            if hasattr(self, "_absl_level"):
                logging.getLogger("absl").setLevel(self._absl_level)

    def restore_latest(self, report=None, plan=None):
        """(tree, meta) of the newest checkpoint that reads back intact, or None. `plan`: the run's chunk
        plan, which the checkpoint's step and evaluation steps must fit (`_check_step`). A damaged one is
        moved aside to `<directory>.damaged/` (kept for inspection, and so that rotation never deletes
        a good checkpoint in favour of it) and reported: by `report(message)`, or a CheckpointWarning."""
        ocp = self._ocp
        steps = sorted(self.manager.all_steps(), reverse=True)
        for i, step in enumerate(steps):
            try:
                r = self.manager.restore(
                    step, args=ocp.args.Composite(state=ocp.args.StandardRestore(), meta=ocp.args.JsonRestore())
                )
                tree, meta = r.state, r.meta
                if not isinstance(meta, dict) or meta.get("sha256") != checkpoint_digest(tree, meta):
                    raise ValueError("checksum mismatch")
                _check_step(step, tree, meta, plan)
            except Exception as e:  # orbax/tensorstore raise many types for damaged files
                then = (
                    "falling back to the previous one" if i + 1 < len(steps) else "no older one: starting from step 0"
                )
                message = (
                    f"checkpoint at step {step} is damaged ({type(e).__name__}: {str(e)[:200]}); moved to "
                    f"{self.root.name}.damaged/, {then}"
                )
                if report:
                    report(message)
                else:
                    warnings.warn(message, CheckpointWarning, stacklevel=2)
                self._move_aside(step)
                continue
            return tree, meta
        return None

    def resume(self, out: Path, run, program: Program, consts: Consts, log) -> tuple[dict, int] | None:
        """(tree, step) of the newest intact checkpoint that continues `run` (a records.RunPlan, untyped here:
        records imports this module) (`check_resume`), repadded to this process's devices; None when there
        is none: the run starts fresh."""
        restored = self.restore_latest(report=lambda m: log(f"{out}: {m}"), plan=run.chunks)
        if not restored:
            return None
        tree, meta = restored
        check_resume(out, tree, meta, run.cfg, run.digest, program, consts)
        log(f"{out}: resuming from the checkpoint at step {meta['step']:,}")
        return repad(tree, run.layout.unit, run.cfg.ensemble.seeds), meta["step"]

    def _move_aside(self, step: int) -> None:
        root = Path(self.manager.directory)
        aside = root.with_name(root.name + ".damaged")
        aside.mkdir(exist_ok=True)
        (root / str(step)).rename(aside / f"{step}-{len(list(aside.iterdir()))}")
        self.manager.reload()


def host_carry(carry: Carry) -> dict:
    """The carry as host arrays, its keys as their raw data: what a checkpoint stores."""
    return jax.device_get({**carry, "key": jax.random.key_data(carry["key"])})


def device_carry(tree: dict) -> Carry:
    """A stored carry as device arrays, its keys as typed keys again (placed on the devices by the caller:
    the engine reads the layout from any leaf)."""
    return jax.device_put({**tree, "key": jax.random.wrap_key_data(tree["key"])})


def check_resume(out: Path, tree: dict, meta: dict, cfg: Config, digest: str, program: Program, consts: Consts):
    """Refuse in one line, leaving the directory as it is, a checkpoint that would continue another run
    under this one's name: written for another config (config.json edited between the kill and the
    rerun: the fields that differ are named when the checkpoint stores its config), or with a seed state
    of other fields than this version's program makes (one written before the optimizer state joined
    it, say), which would otherwise fail inside the compiled step."""
    step, stored = int(meta.get("step", 0)), meta.get("config")
    if meta.get("config_digest") != digest:
        fields = (
            rundir.differing_fields(rundir.with_defaults(stored), cfg.to_dict()) if isinstance(stored, dict) else []
        )
        changed = f": it differs in {', '.join(fields)}" if fields else ""
        raise rundir.RunDirError(
            f"--out {out}: the checkpoint at step {step:,} was written for another config (digest "
            f"{str(meta.get('config_digest'))[:16]}, this config's {digest}){changed}; rerun with the config it was "
            f"written for, or move {out / rundir.CHECKPOINTS} aside to start this one over"
        )

    def paths(tree):  # every leaf's path, and the top-level fields (an optimizer state may hold no leaf)
        return {jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]} | {
            f"[{k!r}]" for k in (tree if isinstance(tree, dict) else ())
        }

    want, have = paths(jax.eval_shape(program.init, jax.random.key(0), consts)), paths(tree["carry"]["state"])
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


def repad(tree: dict, unit: int, live: int) -> dict:
    """A checkpoint saved with another padding (another device count): keep the live seeds and pad
    to whole units of this layout with copies of the first one, discarded like any padding seed."""
    padded = -(-live // unit) * unit

    def fix(a):
        a = np.asarray(a)
        if a.ndim == 0 or a.shape[0] == padded:
            return a
        return np.concatenate([a[:live], np.repeat(a[:1], padded - live, axis=0)])

    return {**tree, "carry": jax.tree.map(fix, tree["carry"]), "curves": jax.tree.map(fix, tree["curves"])}
