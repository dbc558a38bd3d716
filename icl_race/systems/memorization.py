"""MLP-only memorization (Figs A2/A3 of arXiv 2412.00104) as an engine
program: K items of the classification task's shared pool, a per-seed balanced label map, a bare
MLP D -> W -> W -> 1 trained on the logistic loss by train.optimizer (default coupled-decay SGD; the
decay train.weight_decay_mlp on every parameter), items sampled on the device: uniformly, or by the
Zipf law of task.zipf_alpha, each occurrence with the item noise of task.epsilon if set.
Items enter the MLP times task.input_scale: the race's MLP reads the LayerNorm'd query (norm ~sqrt(D + 2),
not ~1), and its memorization speed at a given lr depends on that scale.

Probes (every train.eval_every SGD steps, on the items with id < min(K, task.probe_size), a fixed
subset because pool items are i.i.d.), with phi+ the logits of label-1 items and m = y*phi the margins:
    c1 = <sigmoid(-phi+)>,  c2 = 1 - <sigmoid(-phi+)^2> / c1,  c3 = <exp(-phi+)>      (reference estimator)
    c1_sym, c2_sym, c3_sym: the same with y*phi over all probed items               (symmetric estimator)
    iwl_acc = <m > 0>, iwl_loss = <softplus(-m)>.
Events: memorized (iwl_acc > train.icl_threshold), converged (iwl_acc > train.stop_threshold).

Time: the engine's clock is SGD steps (eval_steps). I_K(t) = 2 * int_0^t c1 dt is computed afterwards by
`icl_race.theory.kinetics.memorization_budget` as a cumulative trapezoid over the eval grid in SGD steps
(multiply by train.lr for eta * steps); pick eval_every small relative to the earliest times of interest.

K is traced (consts), the pool has the static size K_max, so one compilation serves every K <= K_max.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from icl_race.configbase import Config
from icl_race.engine.program import Program
from icl_race.models.minimal import ItemMLP
from icl_race.systems import optim
from icl_race.tasks import classification as task

PROBE_CHUNK = 2048  # probed items per forward pass: bounds memory at large ensembles
NOISE_KEY = 101  # the item noise's stream of a step's key (the ids use the key itself, as without noise)


@dataclass(frozen=True)
class MemorizationRun(Program):
    pool_size: int
    probe_items: int
    batch_size: int
    model: ItemMLP
    freeze_event: str | None
    optimizer: str = "sgd"
    zipf: bool = False  # static switches of the data levers; their strengths are traced in consts
    item_noise: bool = False

    event_names = ("memorized", "converged")
    stop_event = "memorized"

    @classmethod
    def from_config(cls, cfg: Config) -> tuple[MemorizationRun, dict]:
        t, tr = cfg.task, cfg.train
        program = cls(
            pool_size=t.pool_size,
            probe_items=t.probe_items,
            batch_size=tr.batch_size,
            model=ItemMLP(t.D, cfg.model.width, "float64" if cfg.model.float64 else "float32"),
            freeze_event="converged" if tr.early_stop == "freeze" else None,
            optimizer=tr.optimizer,
            zipf=t.zipf_alpha > 0,
            item_noise=t.epsilon > 0,
        )
        consts = {
            "K": jnp.int32(t.K),
            **optim.hyperparams(tr),
            "wd": jnp.float32(tr.weight_decay_mlp),  # L2 on every parameter
            "icl_threshold": jnp.float32(tr.icl_threshold),
            "stop_threshold": jnp.float32(tr.stop_threshold),
            "pool": t.input_scale * task.make_pool(jax.random.key(t.pool_seed), t.pool_size, t.D),
            "epsilon": jnp.float32(t.epsilon),
            "input_scale": jnp.float32(t.input_scale),
        }
        if program.zipf:
            consts["cdf"] = task.zipf_cdf(t.zipf_alpha, t.K, t.pool_size)
        return program, consts

    def init(self, key, consts) -> dict:
        k_model, k_labels = jax.random.split(key)
        labels, _ = task.balanced_label_map(k_labels, consts["K"], self.pool_size)
        params = self.model.init(k_model)
        return {"params": params, "opt": optim.init(self._optimizer(consts), params), "labels": labels}

    def _optimizer(self, consts):
        return optim.transform(
            self.optimizer, consts, {"mlp": consts["wd"]}, lambda p: jax.tree.map(lambda _: "mlp", p)
        )

    def work_bytes(self) -> int:
        """One seed's largest live intermediates (engine/memory.py): the hidden activations of a
        training batch or of one chunk of probed items, twice over for the backward pass."""
        items = max(self.batch_size, min(self.probe_items, PROBE_CHUNK))
        itemsize = 8 if self.model.dtype == "float64" else 4
        return itemsize * 2 * items * (self.model.D + 2 * self.model.width)

    def loss(self, params, x_BxD, y_B):
        return jnp.mean(jax.nn.softplus(-y_B * self.model.apply(params, x_BxD)))

    def batch(self, state, consts, key):
        """(x_BxD, y_B, ids_B) of one training step."""
        ids_B = task.iid_ids(key, consts["K"], (self.batch_size,), consts["cdf"] if self.zipf else None)
        x_BxD = consts["pool"][ids_B]
        if self.item_noise:
            x_BxD = task.noisy_items(
                jax.random.fold_in(key, NOISE_KEY), x_BxD, consts["epsilon"], consts["input_scale"]
            )
        return x_BxD, 2.0 * state["labels"][ids_B].astype(x_BxD.dtype) - 1.0, ids_B

    def step(self, state, consts, key):
        x_BxD, y_B, _ = self.batch(state, consts, key)
        loss, grads = jax.value_and_grad(self.loss)(state["params"], x_BxD, y_B)
        params, opt = optim.update(self._optimizer(consts), grads, state["opt"], state["params"])
        return {**state, "params": params, "opt": opt}, loss

    def logits(self, params, consts):
        """phi on the probed ids 0..probe_items-1, in chunks (padded to a whole number of them)."""
        P = self.probe_items
        n = math.ceil(P / PROBE_CHUNK)
        b = math.ceil(P / n)
        x = consts["pool"][:P]
        x = jnp.concatenate([x, jnp.zeros((n * b - P, x.shape[1]), x.dtype)]).reshape(n, b, -1)
        return jax.lax.map(lambda xb: self.model.apply(params, xb), x).reshape(-1)[:P]

    def probe(self, state, consts, key):
        del key  # deterministic: the probe set is fixed
        phi_P = self.logits(state["params"], consts)
        ids_P = jnp.arange(self.probe_items)
        valid_P = ids_P < consts["K"]
        lab_P = state["labels"][: self.probe_items]
        y_P = 2.0 * lab_P.astype(phi_P.dtype) - 1.0
        return {
            **c_statistics(phi_P, valid_P & (lab_P == 1), suffix=""),
            **c_statistics(y_P * phi_P, valid_P, suffix="_sym"),
            "iwl_acc": _mean(y_P * phi_P > 0, valid_P),
            "iwl_loss": _mean(jax.nn.softplus(-y_P * phi_P), valid_P),
        }

    def events(self, probes, consts):
        return {
            "memorized": probes["iwl_acc"] > consts["icl_threshold"],
            "converged": probes["iwl_acc"] > consts["stop_threshold"],
        }


def _mean(v, mask):
    return jnp.sum(jnp.where(mask, v, 0.0)) / jnp.maximum(jnp.sum(mask), 1)


def c_statistics(margin, mask, suffix=""):
    """c1 = <sigmoid(-m)>, c2 = 1 - <sigmoid(-m)^2>/c1, c3 = <exp(-m)> over the masked margins m."""
    s = jax.nn.sigmoid(-margin)
    c1 = _mean(s, mask)
    return {
        f"c1{suffix}": c1,
        f"c2{suffix}": 1.0 - _mean(s * s, mask) / c1,
        f"c3{suffix}": _mean(jnp.exp(-margin), mask),
    }
