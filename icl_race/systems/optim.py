"""The optimizers of `train.optimizer`, each a named composition of optax transforms.

    optimizer = chain(partition({group: decay and direction of that group, "frozen": zero}),
                      scale_by_learning_rate(lr))

  sgd       direction = the gradient plus coupled L2:   theta -= lr (g + wd theta)  (the reference's)
  momentum  coupled L2, then optax.trace:               v = g + wd theta + m v;  theta -= lr v  (PyTorch SGD)
  adam      coupled L2, then scale_by_adam:             PyTorch Adam's weight_decay
  adamw     scale_by_adam, then decoupled decay:        theta -= lr (adam(g) + wd theta)

Every group has its own decay coefficient; a frozen group gets a zero update (no state, and its
parameters stay bit-identical whatever its gradient holds). The hyperparameters are the run's traced
constants (`hyperparams`), passed in when the transform is built inside the traced step, so one
compilation serves a sweep over learning rate, decays, momentum or Adam's b1, b2, eps (the effect
optax.inject_hyperparams has, without copying them into every seed's state).

The state is kept in the seed state as the flat list of its leaves (`init`, `update`): checkpoints are
restored without a target tree, and lists of arrays come back as they were saved, optax's named tuples
do not.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

FROZEN = "frozen"  # the group label of parameters that never change


def hyperparams(train) -> dict:
    """The traced constants every optimizer reads, from a TrainConfig."""
    return {name: jnp.float32(getattr(train, name)) for name in ("lr", "momentum", "b1", "b2", "eps")}


def transform(name: str, hp: dict, decays: dict, labels) -> optax.GradientTransformation:
    """`decays` maps each group to its decay coefficient; `labels` is a pytree like the parameters
    holding each leaf's group (or FROZEN), or a function of the parameters that returns one."""

    def group(wd):
        decay = optax.add_decayed_weights(wd)
        if name == "sgd":
            return decay
        if name == "momentum":
            return optax.chain(decay, optax.trace(decay=hp["momentum"]))
        if name not in ("adam", "adamw"):
            raise ValueError(f"unknown optimizer {name!r}")
        adam = optax.scale_by_adam(b1=hp["b1"], b2=hp["b2"], eps=hp["eps"])
        return optax.chain(decay, adam) if name == "adam" else optax.chain(adam, decay)

    groups = {g: group(wd) for g, wd in decays.items()} | {FROZEN: optax.set_to_zero()}
    return optax.chain(optax.partition(groups, labels), optax.scale_by_learning_rate(hp["lr"]))


def init(tx: optax.GradientTransformation, params) -> list:
    return jax.tree.leaves(tx.init(params))


def _matrices_before_updates(grads):
    """The gradients, with every weight matrix's made to wait for all of them (an identity). Otherwise
    nothing orders the backward pass's last read of a matrix (dx = g W^T, which no update needs) before
    the matrix's update in place, and XLA copies each matrix every step: 2.4 MB per seed-step at the
    paper shape (benchmarks/RESULTS.md). Matrices only: the barrier also stops XLA fusing a gradient
    into its update, which changed Adam's rounding when the vectors' gradients were held too; with
    matrices only, sgd, momentum, adam and adamw trajectories were bit for bit the same as without it
    (CPU compile). Left: the attention's query kernel (E x E, 17 KB), whose last read feeds only the
    LayerNorm's vectors."""
    leaves, treedef = jax.tree.flatten(grads)
    at = [i for i, g in enumerate(leaves) if g.ndim >= 2]
    for i, held in zip(at, jax.lax.optimization_barrier([leaves[i] for i in at])):
        leaves[i] = held
    return jax.tree.unflatten(treedef, leaves)


def update(tx: optax.GradientTransformation, grads, opt_leaves: list, params) -> tuple[dict, list]:
    """(new parameters, new state leaves) after one step."""
    structure = jax.tree.structure(jax.eval_shape(tx.init, params))
    grads = _matrices_before_updates(grads)
    updates, state = tx.update(grads, jax.tree.unflatten(structure, opt_leaves), params)
    return optax.apply_updates(params, updates), jax.tree.leaves(state)
