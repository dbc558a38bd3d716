"""Orbax checkpoints of a whole ensemble (host copies), with verification and fallback.

A checkpoint holds the carry (parameters, per-seed tables, keys as raw key data, first passages),
the metric history so far and the step, all as numpy arrays: copying to the host before saving
lets the next chunk donate the device buffers while orbax is still writing in the background.
Orbax writes each step to a temporary directory and renames it when complete, so a kill during a
save leaves the previous checkpoints untouched; a SHA-256 of every array, stored beside them,
catches a checkpoint that was damaged after it was written, and the previous one is used instead.
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path

import jax
import numpy as np


def tree_digest(tree) -> str:
    h = hashlib.sha256()
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        a = np.ascontiguousarray(leaf)
        h.update(jax.tree_util.keystr(path).encode())
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


class CheckpointWarning(UserWarning):
    pass


class Checkpointer:
    """Keep the last `keep` checkpoints of a run under `directory`, indexed by training step."""

    def __init__(self, directory: Path, keep: int = 2):
        import orbax.checkpoint as ocp

        self._ocp = ocp
        self.manager = ocp.CheckpointManager(
            Path(directory).absolute(), options=ocp.CheckpointManagerOptions(
                max_to_keep=keep, create=True, cleanup_tmp_directories=True))  # left by a process killed mid-save

    def save(self, step: int, tree, meta: dict) -> None:
        """Queue an asynchronous save of `tree` (numpy arrays only) and `meta` (JSON)."""
        ocp = self._ocp
        meta = {**meta, "step": int(step), "sha256": tree_digest(tree)}
        self.manager.save(int(step), args=ocp.args.Composite(
            state=ocp.args.StandardSave(tree), meta=ocp.args.JsonSave(meta)))

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.close()

    def restore_latest(self):
        """(tree, meta) of the newest checkpoint that reads back intact, or None. A damaged one is
        moved aside to `<directory>.damaged/` (kept for inspection, and so that rotation never deletes
        a good checkpoint in favour of it) with a warning."""
        ocp = self._ocp
        for step in sorted(self.manager.all_steps(), reverse=True):
            try:
                r = self.manager.restore(step, args=ocp.args.Composite(
                    state=ocp.args.StandardRestore(), meta=ocp.args.JsonRestore()))
                tree, meta = r.state, r.meta
                if meta.get("sha256") != tree_digest(tree):
                    raise ValueError("checksum mismatch")
            except Exception as e:  # orbax/tensorstore raise many types for damaged files
                warnings.warn(f"checkpoint at step {step} is damaged ({type(e).__name__}: {str(e)[:200]}); "
                              "falling back to the previous one", CheckpointWarning, stacklevel=2)
                self._move_aside(step)
                continue
            return tree, meta
        return None

    def _move_aside(self, step: int) -> None:
        root = Path(self.manager.directory)
        aside = root.with_name(root.name + ".damaged")
        aside.mkdir(exist_ok=True)
        (root / str(step)).rename(aside / f"{step}-{len(list(aside.iterdir()))}")
        self.manager.reload()
