"""Plain SGD with PyTorch-style coupled weight decay: theta <- theta - lr * (g + decay * theta).

Written out rather than chained from optax so that lr and the per-group decays are traced scalars
(one compilation serves a sweep over them) and the update is visibly the reference's.
"""

import jax


def coupled_sgd(params, grads, lr, decay):
    """`decay` is a pytree like `params` holding each leaf's coefficient (scalars, traced or not)."""
    return jax.tree.map(lambda p, g, wd: p - lr * (g + wd * p), params, grads, decay)
