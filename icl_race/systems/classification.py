"""The race of arXiv 2412.00104 as an engine program: classification task + transformer + an optax
optimizer (`train.optimizer`, default the reference's coupled-decay SGD) on the logistic loss + ICL/IWL
probes.

Probes per evaluation: icl_loss/icl_acc (novel items, target in context), iwl_loss/iwl_acc (training
items, target absent), and on the IWL test's queries the c-statistics of the in-weights path alone
(the model's `memory_logit`, phi(x_q) with the attention output removed): c1, c2, c3 over label-1
queries (phi+, the reference estimator) and c1_sym, c2_sym, c3_sym over y*phi of all queries
(`systems.memorization.c_statistics`; the theory ties ICL's transience to c3 = <exp(-phi+)>).

model.freeze = "attention" | "mlp" keeps that parameter group (models.transformer.ATTENTION_PATH, or
every other module) exactly at its init: the independence ablation of the two sub-circuits.

beta0, the attention's initial sharpness, is measured per seed at init and recorded as a probe (constant
in time): the mean over fresh K = infinity sequences of the log-odds of the query attending to its copy
rather than to another context item, s_copy - mean_j s_j (the readout attention's logits). In the
minimal model (s_j = beta x_q . x_j, |x|^2 ~ 1) this is its beta at init, so the theory's
t_ICL ~ N sqrt(2 pi) e^-beta0 applies to it in the same units. model.qk_init_scale c multiplies the
initial W_q and W_k, so beta0 scales as c^2.

Data-distribution levers (task.zipf_alpha, task.epsilon, task.burstiness, task.p_bursty; see
tasks.classification): Zipf frequencies apply wherever items are drawn i.i.d. (training contexts and
targets, the ICL test's contexts), bursts to training sequences only, item noise to every sequence. The
ICL and IWL tests keep their constructions, so runs with different levers are measured alike; under
Zipf the IWL test also reports iwl_acc_frequent and iwl_acc_rare (targets with P(k) >= 1/K, and the rest).

Static fields (shapes and variant) select the compiled program; everything in `consts` (K, learning
rate, weight decays, thresholds, item pools) is traced, so a sweep over those compiles once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Self

import jax
import jax.numpy as jnp

from icl_race.analysis import events
from icl_race.analysis.events import level_event
from icl_race.configbase import Config
from icl_race.engine.program import Program
from icl_race.models.minimal import MinimalModel
from icl_race.models.transformer import ATTENTION_PATH, Transformer, scale_qk
from icl_race.systems import optim
from icl_race.systems.memorization import c_statistics
from icl_race.tasks import classification as task

# Fresh sequences beta0 is averaged over, in passes of SHARPNESS_BATCH: at the PyTorch init its sampling
# sd is ~0.03 (measured at N = 8 and 100) against a spread of 0.25 between seeds; the cost is about one
# evaluation's.
SHARPNESS_BATCH = 256
SHARPNESS_SEQUENCES = 16 * SHARPNESS_BATCH
# split(key, n)[i] is fold_in(key, i): side streams take indices that no split of the same key reaches.
SHARPNESS_KEY, NOISE_KEY = 100, 101


@dataclass(frozen=True)
class ClassificationRace(Program):
    variant: str
    N: int
    D: int
    pool_size: int
    novel_size: int
    batch_size: int
    eval_size: int
    model: Transformer | MinimalModel  # MinimalModel: systems/minimal.py's MinimalRace
    freeze_readout: bool
    freeze: str  # none | attention | mlp
    freeze_event: str | None
    icl_levels: tuple[float, ...] = ()  # extra first passages of ICL accuracy (the rise's shape)
    confirm: tuple[tuple[str, int], ...] = ()  # (("icl", k),): t_icl needs k evaluations in a row
    bank_size: int = 0  # K = infinity: items from a fixed bank of this many (0: fresh draws)
    eval_batch: int = 256  # evaluation sequences per forward pass (train.eval_batch)
    optimizer: str = "sgd"
    zipf: bool = False  # static switches of the data levers; their strengths are traced in consts
    item_noise: bool = False
    burstiness: int = 0
    settle: bool = False  # train.settle_iwl > 0: the "settled" event ends a seed's race (IWL won)
    fall: bool = False  # train.retire_at_fall: the "fell" event (ICL lost after t_icl) ends a seed's run

    stop_event = "icl"  # the event whose first passage is the run's headline time (t_icl)

    @property
    def event_names(self) -> tuple[str, ...]:
        # "settled" and "fell" only when asked for, so that other runs' results and checkpoints keep their keys
        asked = (("settled",) if self.settle else ()) + (("fell",) if self.fall else ())
        return ("icl", "converged", *(level_event(v) for v in self.icl_levels), *asked)

    @property
    def settle_event(self) -> str | None:
        return "settled" if self.settle else None

    @property
    def fall_event(self) -> str | None:
        return "fell" if self.fall else None

    # ---- set-up -------------------------------------------------------------------------------

    @classmethod
    def from_config(cls, cfg: Config) -> tuple[Self, dict]:
        t, tr = cfg.task, cfg.train
        infinite = t.variant == "infinite"
        program = cls(
            variant=t.variant,
            N=t.N,
            D=t.D,
            pool_size=0 if infinite else t.pool_size,
            novel_size=0 if infinite else t.novel_size,
            batch_size=tr.batch_size,
            eval_size=tr.eval_size,
            model=Transformer(
                E=t.D + 2, width=cfg.model.width, layers=cfg.model.layers, attention_kernel=cfg.model.attention_kernel
            ),
            freeze_readout=cfg.model.freeze_readout,
            freeze=cfg.model.freeze,
            freeze_event="converged" if tr.early_stop == "freeze" else None,
            icl_levels=tuple(tr.icl_levels),
            # The fall is analysis/outcome.py's lasting one: LASTING evaluations in a row below LEVEL (analysis/events.py).
            confirm=((("icl", tr.icl_confirm),) if tr.icl_confirm > 1 else ())
            + ((("fell", events.LASTING),) if tr.retire_at_fall else ()),
            bank_size=t.infinite_bank if infinite else 0,
            eval_batch=tr.eval_batch,
            optimizer=tr.optimizer,
            zipf=t.zipf_alpha > 0,
            item_noise=t.epsilon > 0,
            burstiness=t.burstiness,
            settle=tr.settle_iwl > 0,
            fall=tr.retire_at_fall,
        )
        consts = {
            "K": jnp.int32(0 if infinite else t.K),
            **optim.hyperparams(tr),
            "wd_attn": jnp.float32(tr.weight_decay_attn),
            "wd_mlp": jnp.float32(tr.weight_decay_mlp),
            "icl_threshold": jnp.float32(tr.icl_threshold),
            "stop_threshold": jnp.float32(tr.stop_threshold),
            "settle_iwl": jnp.float32(tr.settle_iwl),
            "qk_init_scale": jnp.float32(cfg.model.qk_init_scale),
            "epsilon": jnp.float32(t.epsilon),
            "p_bursty": jnp.float32(t.p_bursty),
        }
        if program.bank_size:
            consts["bank"] = task.fixed_pool(t.pool_seed, program.bank_size, t.D, tokens=True)
        if not infinite:
            # Stored as token rows (task.token_table): items in the first D columns.
            consts["pool"] = task.fixed_pool(t.pool_seed, program.pool_size, t.D, tokens=True)
            consts["novel"] = task.fixed_pool(t.novel_seed, program.novel_size, t.D, tokens=True)
        if t.noise_bank:
            consts["noise"] = task.fixed_pool(t.noise_seed, t.noise_bank, t.D, tokens=False)
        if program.zipf:
            consts["cdf"] = task.zipf_cdf(t.zipf_alpha, t.K, program.pool_size)
            consts["n_frequent"] = jnp.int32(task.frequent_count(t.zipf_alpha, t.K))
        return program, consts

    def init(self, key, consts) -> dict:
        k_model, k_labels, k_novel = jax.random.split(key, 3)
        params = scale_qk(self.model.init(k_model), consts["qk_init_scale"])
        state = {
            "params": params,
            "opt": optim.init(self._optimizer(consts), params),
            "beta0": self.initial_sharpness(params, jax.random.fold_in(key, SHARPNESS_KEY)),
        }
        if self.variant != "infinite":
            state["labels"], order = task.balanced_label_map(k_labels, consts["K"], self.pool_size)
        if self.variant == "balanced":
            state["order"] = order
            state["novel_labels"], state["novel_order"] = task.balanced_label_map(
                k_novel, self._novel_K(consts), self.novel_size
            )
        return state

    def work_bytes(self) -> int:
        """One seed's largest live intermediates (engine/memory.py), float32: a training batch or one
        evaluation sub-batch of sequences (tokens N x E, and with two layers the per-token MLP and the
        N x N scores) a few times over for the backward pass and the sampler (more for fresh K = inf
        items), and the margins an evaluation keeps for every one of its eval_size sequences. Checked
        against XLA's memory_analysis of the compiled chunk in tests/engine/test_memory.py."""
        E, N, W = self.D + 2, self.N, self.model.width
        two_layers = isinstance(self.model, Transformer) and self.model.layers == 2  # the minimal model has one
        per_sequence = N * E + W + (N * (W + N) if two_layers else 0)
        copies = 10 if self.variant == "infinite" else 6
        sequences = max(self.batch_size, min(self.eval_size, self.eval_batch))
        return 4 * (copies * sequences * per_sequence + 3 * self.eval_size)

    def _novel_K(self, consts):
        return jnp.minimum(consts["K"], self.novel_size)

    def initial_sharpness(self, params, key):
        """beta0 (module docstring): the mean log-odds of attending to the query's copy rather than to
        another context item, on fresh noiseless sequences (NaN at N = 2, where there is no other)."""

        def one(total, i):  # in sub-batches, so that memory stays that of an evaluation
            x_BxNxE, _ = task.fresh_sequences(
                jax.random.fold_in(key, i), SHARPNESS_BATCH, self.N, self.D, query_in_context=True
            )
            s_BxM = self.model.query_scores(params, x_BxNxE)[:, :-1]
            copy_BxM = jnp.all(x_BxNxE[:, :-1, : self.D] == x_BxNxE[:, -1:, : self.D], axis=-1)
            s_copy_B = jnp.sum(jnp.where(copy_BxM, s_BxM, 0.0), axis=1)
            s_other_B = jnp.sum(jnp.where(copy_BxM, 0.0, s_BxM), axis=1) / (self.N - 2)
            return total + jnp.sum(s_copy_B - s_other_B), None

        total, _ = jax.lax.scan(one, jnp.float32(0.0), jnp.arange(SHARPNESS_SEQUENCES // SHARPNESS_BATCH))
        return total / SHARPNESS_SEQUENCES

    # ---- data -----------------------------------------------------------------------------------

    def _infinite(self, consts, key, B, query_in_context):
        if self.bank_size:
            return task.bank_sequences(key, consts["bank"], B, self.N, query_in_context)
        return task.fresh_sequences(key, B, self.N, self.D, query_in_context)

    def _noisy(self, consts, key, batch):
        """task.epsilon's item noise on every token of a batch, from its own stream of the batch's key
        (fresh, or rows of task.noise_bank's bank)."""
        if not self.item_noise:
            return batch
        x_BxNxE, y_B = batch
        return task.item_noise(
            jax.random.fold_in(key, NOISE_KEY), x_BxNxE, consts["epsilon"], self.D, consts.get("noise")
        ), y_B

    def train_batch(self, state, consts, key, B):
        if self.variant == "infinite":
            batch = self._infinite(consts, key, B, query_in_context=True)
        else:
            cdf = consts["cdf"] if self.zipf else None
            if self.variant == "balanced":
                ids = task.balanced_ids(key, state["order"], consts["K"], B, self.N)
            elif self.burstiness:
                ids = task.bursty_ids(key, consts["K"], B, self.N, self.burstiness, consts["p_bursty"], cdf)
            else:
                ids = task.target_present_ids(key, consts["K"], B, self.N, cdf)
            batch = task.pooled_sequences(consts["pool"], state["labels"], ids)
        return self._noisy(consts, key, batch)

    def icl_batch(self, state, consts, key, B, reference_labels=False):
        """Novel items, target in context: only in-context learning can solve it."""
        if self.variant == "infinite":
            batch = self._infinite(consts, key, B, query_in_context=True)
        elif self.variant == "balanced":
            # The reference labels novel items with the *training* map by id (so contexts lose the
            # balanced construction's label statistics); by default the novel pool has its own map.
            ids = task.balanced_ids(key, state["novel_order"], self._novel_K(consts), B, self.N)
            labels = state["labels"] if reference_labels else state["novel_labels"]
            batch = task.pooled_sequences(consts["novel"], labels, ids)
        else:
            # Uniform under Zipf too: novel items carry the training map's labels by id, so a Zipf law
            # over them makes the few frequent ids most queries and a constant output score anywhere in
            # 0.1-0.9 (measured at step 50, alpha = 1.5): the test would time the output bias, not ICL.
            ids = task.target_present_ids(key, self._novel_K(consts), B, self.N)
            batch = task.pooled_sequences(consts["novel"], state["labels"], ids)
        return self._noisy(consts, key, batch)

    def iwl_batch(self, state, consts, key, B, bands=False):
        """Training items, N distinct, so the target is absent from its context: only memory helps.
        With `bands` (Zipf), also whether each target is a frequent item (P(k) >= 1/K)."""
        if self.variant == "infinite":
            return self._noisy(consts, key, self._infinite(consts, key, B, query_in_context=False))
        ids = task.distinct_ids(key, consts["K"], B, self.N)
        batch = self._noisy(consts, key, task.pooled_sequences(consts["pool"], state["labels"], ids))
        return (*batch, ids[:, -1] < consts["n_frequent"]) if bands else batch

    # ---- training -------------------------------------------------------------------------------

    def loss(self, params, x_BxNxE, y_B):
        return jnp.mean(jax.nn.softplus(-y_B * self.model.apply(params, x_BxNxE)))

    def _is_frozen(self, module: str) -> bool:
        return (self.freeze_readout and module == "readout") or self.freeze == (
            "attention" if module in ATTENTION_PATH else "mlp"
        )

    def _groups(self, params):
        """Each parameter's optimizer group: frozen, attention (LayerNorm + q/k/v) or mlp."""
        group = lambda m: optim.FROZEN if self._is_frozen(m) else "attention" if m in ATTENTION_PATH else "mlp"
        return {m: jax.tree.map(lambda _: group(m), sub) for m, sub in params.items()}

    def _optimizer(self, consts):
        return optim.transform(
            self.optimizer, consts, {"attention": consts["wd_attn"], "mlp": consts["wd_mlp"]}, self._groups
        )

    def step(self, state, consts, key):
        x_BxNxE, y_B = self.train_batch(state, consts, key, self.batch_size)
        loss, grads = jax.value_and_grad(self.loss)(state["params"], x_BxNxE, y_B)
        params, opt = optim.update(self._optimizer(consts), grads, state["opt"], state["params"])
        return {**state, "params": params, "opt": opt}, loss

    # ---- evaluation -----------------------------------------------------------------------------

    def _evaluate(self, params, make_batch, key, name, memory=False):
        """{name}_loss (mean logistic loss) and {name}_acc (y * f > 0, strict) on eval_size fresh
        sequences, drawn in sub-batches so that memory does not grow with eval_size; with `memory`,
        the c-statistics of the in-weights path on the same queries."""
        n_sub = math.ceil(self.eval_size / self.eval_batch)
        b = math.ceil(self.eval_size / n_sub)

        def one(_, i):
            x_BxNxE, y_B, *band = make_batch(jax.random.fold_in(key, i), b)
            out = {"margin": y_B * self.model.apply(params, x_BxNxE)}
            if memory:
                out |= {"memory_margin": y_B * self.model.memory_logit(params, x_BxNxE), "y": y_B}
            if band:
                out["frequent"] = band[0]
            return None, out

        _, out = jax.lax.scan(one, None, jnp.arange(n_sub))
        out = {k: v.reshape(-1) for k, v in out.items()}
        keep = jnp.arange(n_sub * b) < self.eval_size
        m = out["margin"]
        stats = {
            f"{name}_loss": jnp.sum(jnp.where(keep, jax.nn.softplus(-m), 0.0)) / self.eval_size,
            f"{name}_acc": jnp.sum(keep & (m > 0)).astype(jnp.float32) / self.eval_size,
        }
        if memory:
            stats |= {
                **c_statistics(out["memory_margin"], keep & (out["y"] > 0)),
                **c_statistics(out["memory_margin"], keep, suffix="_sym"),
            }
        if "frequent" in out:
            for band, in_band in (("frequent", out["frequent"]), ("rare", ~out["frequent"])):
                n = jnp.sum(keep & in_band)  # NaN when the test drew no target of the band
                stats[f"{name}_acc_{band}"] = jnp.sum(keep & in_band & (m > 0)) / jnp.where(n > 0, n, jnp.nan)
        return stats

    def probe(self, state, consts, key):
        k_icl, k_iwl = jax.random.split(key)
        p = state["params"]
        out = {
            **self._evaluate(p, lambda k, b: self.icl_batch(state, consts, k, b), k_icl, "icl"),
            **self._evaluate(
                p, lambda k, b: self.iwl_batch(state, consts, k, b, bands=self.zipf), k_iwl, "iwl", memory=True
            ),
            "beta0": state["beta0"],
        }
        if self.variant == "balanced":
            out |= self._evaluate(
                p, lambda k, b: self.icl_batch(state, consts, k, b, reference_labels=True), k_icl, "icl_ref"
            )
        return out

    def events(self, probes, consts):
        acc = probes["icl_acc"]
        # "settled" is IWL's side of the race; the engine lets it fire only while ICL has not
        return {
            "icl": acc > consts["icl_threshold"],
            "converged": acc > consts["stop_threshold"],
            **{level_event(v): acc > v for v in self.icl_levels},
            **({"settled": probes["iwl_acc"] > consts["settle_iwl"]} if self.settle else {}),
            # ICL lost; the engine counts it only after t_icl, confirmed over LASTING evaluations
            **({"fell": acc < events.LEVEL} if self.fall else {}),
        }
