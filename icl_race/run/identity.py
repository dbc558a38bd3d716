"""A run's program identity, the one answer to "the same program": what the local sweep keeps compiled
between packs (sweep.execute.run_local clears jit's caches when it changes), what a measured cost is kept
under (cost.key) and what runs must share to train as one ensemble (sweep.plan.packs, pack.train_pack).

It is derived from the built program, not listed by hand: the program's static fields (its repr: a
frozen dataclass), the tree, shapes and dtypes of its constants (`jax.eval_shape` of the build: no pool
is computed), and what the engine compiles around it (the layout, the chunk plan, retirement, the early
stop, the parameters kept at t_icl, the precision). A constant the engine traces (K, lr, decays,
thresholds) is a scalar whose shape does not change with its value, so cells that differ only in one
share the identity; nothing names them here.

Packing asks one thing more: an array constant (an item pool, a Zipf law's cdf) is one input of the
packed ensemble, not one per member, so runs pack only when those hold equal values (`arrays`: their
digest, from a concrete build, made only when packs are formed).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from icl_race.run.records import RunPlan


@dataclass(frozen=True)
class Identity:
    program: str  # what compiles: equal for runs that share every compilation
    arrays: str  # the array constants' values ("" without any, or not asked for): equal too for runs that pack

    @property
    def pack(self) -> tuple[str, str]:
        return self.program, self.arrays


def of(run: RunPlan, pack: bool = True) -> Identity:
    """`run`'s identity (the module's docstring), from one build: abstract (`jax.eval_shape`), or with
    `pack` (runs to group into packs) concrete, for the array constants' values."""
    import jax

    from icl_race import systems
    from icl_race.engine.memory import abstract_build

    cfg, tr = run.cfg, run.cfg.train
    with systems.precision(cfg):  # one build: concrete when its values are asked for, else its shapes only
        program, consts = systems.build(cfg) if pack else abstract_build(lambda: systems.build(cfg))
        shapes = jax.eval_shape(lambda: consts) if pack else consts
    leaves = jax.tree_util.tree_leaves_with_path(shapes)
    parts = [
        repr(program),
        [(jax.tree_util.keystr(p), str(a.dtype), a.shape) for p, a in leaves],
        repr(run.layout),
        repr(run.chunks),
        cfg.ensemble.retire,
        tr.stop_when_all_acquired,
        "at_t_icl" in tr.kept,
        tr.matmul_precision,
        systems.of(cfg).needs_x64(cfg),
    ]
    arrays = ""
    if pack and any(isinstance(v, dict) or np.ndim(v) for v in shapes.values()):
        digest = hashlib.sha256()
        for name, value in sorted(consts.items()):
            if isinstance(value, dict) or np.ndim(value):
                for a in jax.tree.leaves(value):
                    digest.update(f"{name}:{a.dtype}:{a.shape}:{_digest(a)}".encode())
        arrays = digest.hexdigest()
    return Identity(hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16], arrays)


# The digests of the last few arrays, by object, each kept alive beside its digest so that its id is not
# reused: the cells of a sweep share their item pools' array objects (tasks.classification.fixed_pool),
# and hashing a paper grid's pool (up to 100 MB) for each of fig6a.toml's 150 cells was 9 of the dry
# run's 23 s.
_DIGESTS: dict[int, tuple[object, str]] = {}


def _digest(a) -> str:
    if (hit := _DIGESTS.get(id(a))) is not None and hit[0] is a:
        return hit[1]
    value = hashlib.sha256(np.ascontiguousarray(np.asarray(a))).hexdigest()  # its buffer, not a copy
    while len(_DIGESTS) >= 8:
        del _DIGESTS[next(iter(_DIGESTS))]
    _DIGESTS[id(a)] = (a, value)
    return value
