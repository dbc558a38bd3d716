"""The minimal model of arXiv 2412.00104 §3 on the classification task:
ClassificationRace with the transformer replaced by `models.minimal.MinimalModel`, so the samplers
(standard, infinite, balanced), the ICL/IWL probes, the events and the optimizer are the race's own.

beta(0) = model.beta0, or ~ N(0, 1) per seed with model.beta0_random (both traced: one compilation).
Extra probes: beta0 (constant per seed, so results.npz holds it as [S, T]), beta and w.
w and beta take train.weight_decay_attn, phi's MLP train.weight_decay_mlp.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from icl_race.configbase import Config
from icl_race.models.minimal import MinimalModel
from icl_race.systems.classification import ClassificationRace
from icl_race.systems.classification_spec import ModelConfig


@dataclass(frozen=True)
class MinimalRace(ClassificationRace):
    @classmethod
    def from_config(cls, cfg: Config) -> tuple[MinimalRace, dict]:
        # The race's set-up with a stand-in transformer config, then the model swapped in.
        stand_in = dataclasses.replace(cfg, model=ModelConfig(width=cfg.model.width))
        program, consts = super().from_config(stand_in)
        program = dataclasses.replace(program, model=MinimalModel(D=cfg.task.D, width=cfg.model.width))
        consts["beta0"] = jnp.float32(cfg.model.beta0)
        consts["beta0_random"] = jnp.bool_(cfg.model.beta0_random)
        return program, consts

    def init(self, key, consts) -> dict:
        state = super().init(key, consts)
        k_beta = jax.random.fold_in(key, 7)
        beta0 = jnp.where(consts["beta0_random"], jax.random.normal(k_beta, (), jnp.float32), consts["beta0"])
        state["params"]["attn"]["beta"] = beta0
        state["beta0"] = beta0
        return state

    def probe(self, state, consts, key):
        attn = state["params"]["attn"]
        return {**super().probe(state, consts, key), "beta0": state["beta0"], "beta": attn["beta"], "w": attn["w"]}
