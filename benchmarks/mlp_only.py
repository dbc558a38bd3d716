"""Benchmark-local MLP-only memorization model (classification-task.md §3.3), as an engine program.

NOT part of the icl_race package: a minimal JAX version for benchmarking only. 63 -> 512 -> ReLU -> 512 ->
ReLU -> 1 with PyTorch's default init, logistic loss, plain SGD (coupled weight decay) at batch 128, items
drawn uniformly (with replacement) from a fixed table of K items shared by every seed, each seed with its
own balanced label map. No probes beyond the training loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from icl_race.tasks import classification as task


def _linear(key, fan_in, fan_out):
    kw, kb = jax.random.split(key)
    b = fan_in ** -0.5
    return {"w": jax.random.uniform(kw, (fan_in, fan_out), jnp.float32, -b, b),
            "b": jax.random.uniform(kb, (fan_out,), jnp.float32, -b, b)}


@dataclass(frozen=True)
class MLPMemorization:
    D: int = 63
    width: int = 512
    pool_size: int = 10_000
    batch_size: int = 128

    event_names = ()
    freeze_event = None

    @staticmethod
    def consts(K: int, D: int = 63, lr: float = 0.01, wd: float = 1e-10, pool_seed: int = 10) -> dict:
        return {"K": jnp.int32(K), "lr": jnp.float32(lr), "wd": jnp.float32(wd),
                "pool": task.make_pool(jax.random.key(pool_seed), K, D)}

    def init(self, key, consts):
        k1, k2, k3, kl = jax.random.split(key, 4)
        params = {"fc1": _linear(k1, self.D, self.width), "fc2": _linear(k2, self.width, self.width),
                  "fc3": _linear(k3, self.width, 1)}
        labels, _ = task.balanced_label_map(kl, consts["K"], self.pool_size)
        return {"params": params, "labels": labels}

    @staticmethod
    def apply(params, x_BxD):
        h = jax.nn.relu(x_BxD @ params["fc1"]["w"] + params["fc1"]["b"])
        h = jax.nn.relu(h @ params["fc2"]["w"] + params["fc2"]["b"])
        return (h @ params["fc3"]["w"] + params["fc3"]["b"])[:, 0]

    def batch(self, state, consts, key):
        ids_B = jax.random.randint(key, (self.batch_size,), 0, consts["K"])
        return consts["pool"][ids_B], 2.0 * state["labels"][ids_B].astype(jnp.float32) - 1.0

    def step(self, state, consts, key):
        x, y = self.batch(state, consts, key)
        loss_fn = lambda p: jnp.mean(jax.nn.softplus(-y * self.apply(p, x)))
        loss, g = jax.value_and_grad(loss_fn)(state["params"])
        params = jax.tree.map(lambda p, gi: p - consts["lr"] * (gi + consts["wd"] * p), state["params"], g)
        return {**state, "params": params}, loss

    def probe(self, state, consts, key):
        return {}

    def events(self, probes, consts):
        return {}


def analytic_flops(D: int = 63, W: int = 512, B: int = 128) -> float:
    """Forward 2 B (D W + W W + W); backward twice the forward for the matmuls (weight and input grads),
    less the first layer's input gradient; plus the elementwise update (~3 per parameter)."""
    fwd = 2 * B * (D * W + W * W + W)
    bwd = 2 * fwd - 2 * B * D * W
    n_params = D * W + W + W * W + W + W + 1
    return float(fwd + bwd + 3 * n_params)
