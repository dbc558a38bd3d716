"""Chosen seeds of a program trained through `engine.ensemble.train` as a run trains them, for the tests
that compare trajectories (a seed alone and inside an ensemble, one optimizer against another)."""

import numpy as np

from icl_race.engine.ensemble import Layout, init_ensemble, padded_seed_ids, seed_keys, train


def train_seeds(program, consts, cfg, seed_ids, block: int, **kw):
    """`seed_ids` (keys under root seed 0), padded to vmaps of `block` seeds, trained for cfg.train's
    steps, evaluation period and chunking; `kw` goes to `train` (stop_event, live_seeds, retire, ...).
    Returns train's (carry, curves, eval_steps): per-seed arrays hold the padding seeds after `seed_ids`."""
    layout = Layout(block)
    carry = init_ensemble(program, layout, seed_keys(0, padded_seed_ids(np.asarray(seed_ids), layout)), consts)
    tr = cfg.train
    return train(
        program,
        consts,
        carry,
        layout=layout,
        steps=tr.steps,
        eval_every=tr.eval_every,
        evals_per_chunk=tr.evals_per_chunk,
        **kw,
    )
