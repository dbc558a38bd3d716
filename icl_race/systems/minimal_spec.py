"""The minimal model of arXiv 2412.00104 §3 on the classification task as a registered system
(task.kind = "classification", model.kind = "minimal"): the race's [task] section and its validation, its
own [model] section, its program (`systems/minimal.py`) and the race's report. No jax."""

from __future__ import annotations

from dataclasses import dataclass

from icl_race.configbase import Config, System, check, validate_minibatch_train
from icl_race.systems import classification_spec as race


@dataclass(frozen=True)
class MinimalModelConfig:
    """logit = phi_MLP(x_q) + w * sum_j softmax_j(beta x_q.x_j) y_j, w(0) = 0, beta(0) = beta0."""

    kind: str = "minimal"
    width: int = 512
    beta0: float = 0.0  # the initial inverse temperature (ignored with beta0_random)
    beta0_random: bool = False  # draw beta0 ~ N(0, 1) per seed (recorded as the probe "beta0")


def validate(cfg: Config) -> None:
    race.validate_task(cfg.task)
    check(cfg.model.width >= 1, "model.width", cfg.model.width, "an integer >= 1")
    validate_minibatch_train(cfg.train)


SYSTEM = System(
    task=race.TaskConfig,
    model=MinimalModelConfig,
    validate=validate,
    program="icl_race.systems.minimal:MinimalRace",
    describe=race.describe,
    report="icl_race.report.classification",
    pool_K=race.pool_K,
)
