"""Chosen seeds of a program trained through `engine.ensemble.train` as a run trains them, for the tests
that compare trajectories (a seed alone and inside an ensemble, one optimizer against another, retirement
on and off)."""

import jax
import numpy as np

from icl_race.engine.chunks import chunk_plan
from icl_race.engine.ensemble import Layout, start, train


def train_seeds(program, consts, cfg, seed_ids, block: int, evals_per_chunk: int | None = None, **kw):
    """`seed_ids` (keys under root seed 0), padded to vmaps of `block` seeds, trained for cfg.train's
    steps, evaluation period and chunking (or a test's own `evals_per_chunk`); `kw` goes to `train`
    (stop_event, live_seeds, retire, ...). Returns train's (carry, curves, eval_steps): per-seed arrays
    hold the padding seeds after `seed_ids`."""
    layout = Layout(block)
    carry, consts = start(program, layout, 0, np.asarray(seed_ids), consts)
    tr = cfg.train
    plan = chunk_plan(tr.steps, tr.eval_every, evals_per_chunk or tr.evals_per_chunk)
    return train(program, consts, carry, layout=layout, plan=plan, **kw)


def first_seeds(n: int, carry, curves) -> tuple[dict, dict]:
    """The first passages (event -> per-seed step) and the curves of the first `n` seeds of train's
    carry and curves, without the padding seeds after them, as host arrays."""
    return (
        {k: np.asarray(v)[:n] for k, v in jax.device_get(carry["t_first"]).items()},
        {k: np.asarray(v)[:n] for k, v in curves.items()},
    )
