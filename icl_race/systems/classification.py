"""The race of arXiv 2412.00104 as an engine program: classification task + transformer + coupled
SGD on the logistic loss + ICL/IWL probes.

Probes per evaluation: icl_loss/icl_acc (novel items, target in context), iwl_loss/iwl_acc (training
items, target absent), and on the IWL test's queries the c-statistics of the in-weights path alone
(the model's `memory_logit`, phi(x_q) with the attention output removed): c1, c2, c3 over label-1
queries (phi+, the reference estimator) and c1_sym, c2_sym, c3_sym over y*phi of all queries
(`systems.memorization.c_statistics`; the theory ties ICL's transience to c3 = <exp(-phi+)>).

model.freeze = "attention" | "mlp" keeps that parameter group (models.transformer.ATTENTION_PATH, or
every other module) exactly at its init: the independence ablation of the two sub-circuits.

Static fields (shapes and variant) select the compiled program; everything in `consts` (K, learning
rate, weight decays, thresholds, item pools) is traced, so a sweep over those compiles once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from icl_race.config import Config
from icl_race.models.transformer import ATTENTION_PATH, Transformer
from icl_race.optim import coupled_sgd
from icl_race.systems.memorization import c_statistics
from icl_race.tasks import classification as task


@dataclass(frozen=True)
class ClassificationRace:
    variant: str
    N: int
    D: int
    pool_size: int
    novel_size: int
    batch_size: int
    eval_size: int
    model: Transformer
    freeze_readout: bool
    freeze: str  # none | attention | mlp
    freeze_event: str | None
    icl_levels: tuple[float, ...] = ()  # extra first passages of ICL accuracy (the rise's shape)
    confirm: tuple[tuple[str, int], ...] = ()  # (("icl", k),): t_icl needs k evaluations in a row
    bank_size: int = 0  # K = infinity: items from a fixed bank of this many (0: fresh draws)
    eval_batch: int = 256  # evaluation sequences per forward pass (train.eval_batch)

    stop_event = "icl"  # the event whose first passage is the run's headline time (t_icl)

    @property
    def event_names(self) -> tuple[str, ...]:
        return ("icl", "converged", *(level_event(v) for v in self.icl_levels))

    # ---- set-up -------------------------------------------------------------------------------

    @classmethod
    def from_config(cls, cfg: Config) -> tuple["ClassificationRace", dict]:
        t, tr = cfg.task, cfg.train
        infinite = t.variant == "infinite"
        program = cls(
            variant=t.variant, N=t.N, D=t.D,
            pool_size=0 if infinite else t.pool_size,
            novel_size=0 if infinite else t.novel_size,
            batch_size=tr.batch_size, eval_size=tr.eval_size,
            model=Transformer(E=t.D + 2, width=cfg.model.width, layers=cfg.model.layers),
            freeze_readout=cfg.model.freeze_readout,
            freeze=cfg.model.freeze,
            freeze_event="converged" if tr.early_stop == "freeze" else None,
            icl_levels=tuple(tr.icl_levels),
            confirm=(("icl", tr.icl_confirm),) if tr.icl_confirm > 1 else (),
            bank_size=t.infinite_bank if infinite else 0,
            eval_batch=tr.eval_batch,
        )
        consts = {
            "K": jnp.int32(0 if infinite else t.K),
            "lr": jnp.float32(tr.lr),
            "wd_attn": jnp.float32(tr.weight_decay_attn),
            "wd_mlp": jnp.float32(tr.weight_decay_mlp),
            "icl_threshold": jnp.float32(tr.icl_threshold),
            "stop_threshold": jnp.float32(tr.stop_threshold),
        }
        if program.bank_size:
            consts["bank"] = task.token_table(task.make_pool(jax.random.key(t.pool_seed), program.bank_size, t.D))
        if not infinite:
            # Stored as token rows (task.token_table): items in the first D columns.
            consts["pool"] = task.token_table(task.make_pool(jax.random.key(t.pool_seed), program.pool_size, t.D))
            consts["novel"] = task.token_table(task.make_pool(jax.random.key(t.novel_seed), program.novel_size, t.D))
        return program, consts

    def init(self, key, consts) -> dict:
        k_model, k_labels, k_novel = jax.random.split(key, 3)
        state = {"params": self.model.init(k_model)}
        if self.variant != "infinite":
            state["labels"], order = task.balanced_label_map(k_labels, consts["K"], self.pool_size)
        if self.variant == "balanced":
            state["order"] = order
            state["novel_labels"], state["novel_order"] = task.balanced_label_map(
                k_novel, self._novel_K(consts), self.novel_size)
        return state

    def work_bytes(self) -> int:
        """One seed's largest live intermediates (engine/memory.py), float32: a training batch or one
        evaluation sub-batch of sequences (tokens N x E, and with two layers the per-token MLP and the
        N x N scores) a few times over for the backward pass and the sampler (more for fresh K = inf
        items), and the margins an evaluation keeps for every one of its eval_size sequences. Checked
        against XLA's memory_analysis of the compiled chunk in tests/test_memory.py."""
        E, N, W = self.D + 2, self.N, self.model.width
        two_layers = getattr(self.model, "layers", 1) == 2  # the minimal model (systems/minimal.py) has one
        per_sequence = N * E + W + (N * (W + N) if two_layers else 0)
        copies = 10 if self.variant == "infinite" else 6
        sequences = max(self.batch_size, min(self.eval_size, self.eval_batch))
        return 4 * (copies * sequences * per_sequence + 3 * self.eval_size)

    def _novel_K(self, consts):
        return jnp.minimum(consts["K"], self.novel_size)

    # ---- data -----------------------------------------------------------------------------------

    def _infinite(self, consts, key, B, query_in_context):
        if self.bank_size:
            return task.bank_sequences(key, consts["bank"], B, self.N, query_in_context)
        return task.fresh_sequences(key, B, self.N, self.D, query_in_context)

    def train_batch(self, state, consts, key, B):
        if self.variant == "infinite":
            return self._infinite(consts, key, B, query_in_context=True)
        if self.variant == "balanced":
            ids = task.balanced_ids(key, state["order"], consts["K"], B, self.N)
        else:
            ids = task.target_present_ids(key, consts["K"], B, self.N)
        return task.pooled_sequences(consts["pool"], state["labels"], ids)

    def icl_batch(self, state, consts, key, B, reference_labels=False):
        """Novel items, target in context: only in-context learning can solve it."""
        if self.variant == "infinite":
            return self._infinite(consts, key, B, query_in_context=True)
        if self.variant == "balanced":
            # The reference labels novel items with the *training* map by id (so contexts lose the
            # balanced construction's label statistics); by default the novel pool has its own map.
            ids = task.balanced_ids(key, state["novel_order"], self._novel_K(consts), B, self.N)
            labels = state["labels"] if reference_labels else state["novel_labels"]
            return task.pooled_sequences(consts["novel"], labels, ids)
        ids = task.target_present_ids(key, self._novel_K(consts), B, self.N)
        return task.pooled_sequences(consts["novel"], state["labels"], ids)

    def iwl_batch(self, state, consts, key, B):
        """Training items, N distinct, so the target is absent from its context: only memory helps."""
        if self.variant == "infinite":
            return self._infinite(consts, key, B, query_in_context=False)
        ids = task.distinct_ids(key, consts["K"], B, self.N)
        return task.pooled_sequences(consts["pool"], state["labels"], ids)

    # ---- training -------------------------------------------------------------------------------

    def loss(self, params, x_BxNxE, y_B):
        return jnp.mean(jax.nn.softplus(-y_B * self.model.apply(params, x_BxNxE)))

    def _is_frozen(self, module: str) -> bool:
        return ((self.freeze_readout and module == "readout")
                or self.freeze == ("attention" if module in ATTENTION_PATH else "mlp"))

    def step(self, state, consts, key):
        x_BxNxE, y_B = self.train_batch(state, consts, key, self.batch_size)
        loss, grads = jax.value_and_grad(self.loss)(state["params"], x_BxNxE, y_B)
        decay = {m: jax.tree.map(lambda _: consts["wd_attn"] if m in ATTENTION_PATH else consts["wd_mlp"], sub)
                 for m, sub in state["params"].items()}
        new = coupled_sgd(state["params"], grads, consts["lr"], decay)
        # A frozen module keeps its old values (not p - lr * 0 * g, which a non-finite g would poison).
        params = {m: state["params"][m] if self._is_frozen(m) else sub for m, sub in new.items()}
        return {**state, "params": params}, loss

    # ---- evaluation -----------------------------------------------------------------------------

    def _evaluate(self, params, make_batch, key, name, memory=False):
        """{name}_loss (mean logistic loss) and {name}_acc (y * f > 0, strict) on eval_size fresh
        sequences, drawn in sub-batches so that memory does not grow with eval_size; with `memory`,
        the c-statistics of the in-weights path on the same queries."""
        n_sub = math.ceil(self.eval_size / self.eval_batch)
        b = math.ceil(self.eval_size / n_sub)

        def one(_, i):
            x_BxNxE, y_B = make_batch(jax.random.fold_in(key, i), b)
            out = {"margin": y_B * self.model.apply(params, x_BxNxE)}
            if memory:
                out |= {"memory_margin": y_B * self.model.memory_logit(params, x_BxNxE), "y": y_B}
            return None, out

        _, out = jax.lax.scan(one, None, jnp.arange(n_sub))
        out = {k: v.reshape(-1) for k, v in out.items()}
        keep = jnp.arange(n_sub * b) < self.eval_size
        m = out["margin"]
        stats = {f"{name}_loss": jnp.sum(jnp.where(keep, jax.nn.softplus(-m), 0.0)) / self.eval_size,
                 f"{name}_acc": jnp.sum(keep & (m > 0)).astype(jnp.float32) / self.eval_size}
        if memory:
            stats |= {**c_statistics(out["memory_margin"], keep & (out["y"] > 0)),
                      **c_statistics(out["memory_margin"], keep, suffix="_sym")}
        return stats

    def probe(self, state, consts, key):
        k_icl, k_iwl = jax.random.split(key)
        p = state["params"]
        out = {**self._evaluate(p, lambda k, b: self.icl_batch(state, consts, k, b), k_icl, "icl"),
               **self._evaluate(p, lambda k, b: self.iwl_batch(state, consts, k, b), k_iwl, "iwl", memory=True)}
        if self.variant == "balanced":
            out |= self._evaluate(p, lambda k, b: self.icl_batch(state, consts, k, b, reference_labels=True),
                                  k_icl, "icl_ref")
        return out

    def events(self, probes, consts):
        acc = probes["icl_acc"]
        return {"icl": acc > consts["icl_threshold"], "converged": acc > consts["stop_threshold"],
                **{level_event(v): acc > v for v in self.icl_levels}}


def level_event(level: float) -> str:
    """The event of ICL accuracy passing `level`: icl60 for 0.6 (its time is results' t_icl60)."""
    return f"icl{round(100 * level):02d}"
