"""A new system is one module plus one registration: this module defines a toy system (its [task] and
[model] sections, their validation and a program: a scalar linear model y = w x learning a constant
slope, with the event "learned") and registers it once; the loader, the runner, `icl-race run` and
`icl_race.load` then know it, and nothing else in the package changes."""

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import icl_race
from icl_race import config, systems
from icl_race.cli import main
from icl_race.config import ConfigError
from icl_race.configbase import Config, System, check
from icl_race.engine.program import Program


@dataclass(frozen=True)
class SlopeTask:
    kind: str = "toy_slope"
    slope: float = 2.0  # y = slope * x, x ~ N(0, 1)
    batch: int = 8
    tol: float = 0.05  # learned = |w - slope| < tol


@dataclass(frozen=True)
class ScalarModel:
    kind: str = "scalar"
    init_scale: float = 0.1  # w(0) ~ N(0, init_scale^2)


def validate(cfg: Config) -> None:
    check(cfg.task.batch >= 1, "task.batch", cfg.task.batch, "an integer >= 1")
    check(cfg.task.tol > 0, "task.tol", cfg.task.tol, "a finite number > 0")
    check(cfg.model.init_scale >= 0, "model.init_scale", cfg.model.init_scale, "a finite number >= 0")


@dataclass(frozen=True)
class SlopeProgram(Program):
    batch: int
    event_names = ("learned",)
    stop_event = "learned"
    freeze_event = None

    @classmethod
    def from_config(cls, cfg: Config):
        t = cfg.task
        return cls(t.batch), {
            "slope": jnp.float32(t.slope),
            "lr": jnp.float32(cfg.train.lr),
            "tol": jnp.float32(t.tol),
            "init_scale": jnp.float32(cfg.model.init_scale),
        }

    def init(self, key, consts):
        return {"w": consts["init_scale"] * jax.random.normal(key, (), jnp.float32)}

    def step(self, state, consts, key):
        x_B = jax.random.normal(key, (self.batch,), jnp.float32)
        loss, g = jax.value_and_grad(lambda w: jnp.mean((w * x_B - consts["slope"] * x_B) ** 2))(state["w"])
        return {"w": state["w"] - consts["lr"] * g}, loss

    def probe(self, state, consts, key):
        return {"w": state["w"], "error": jnp.abs(state["w"] - consts["slope"])}

    def events(self, probes, consts):
        return {"learned": probes["error"] < consts["tol"]}


TOY = System(
    task=SlopeTask,
    model=ScalarModel,
    validate=validate,
    program=SlopeProgram,
    describe=lambda cfg: f"slope {cfg.task.slope}",
)

RAW = {
    "task": {"kind": "toy_slope", "slope": 3.0},
    "train": {"lr": 0.05, "steps": 400, "eval_every": 5, "checkpoint_every": 0},
    "ensemble": {"seeds": 3, "block": 2},
}


@pytest.fixture(scope="module", autouse=True)
def registered():
    systems.register(TOY)
    yield
    systems.SYSTEMS.remove(TOY)


def test_the_loader_knows_the_new_system_and_its_validation():
    cfg = config.from_dict(RAW)
    assert isinstance(cfg.task, SlopeTask) and isinstance(cfg.model, ScalarModel)  # model.kind defaults to "scalar"
    assert systems.system_class(cfg) is SlopeProgram
    with pytest.raises(ConfigError, match=r"^task\.tol = -1\.0: must be a finite number > 0$"):
        config.from_dict({**RAW, "task": {**RAW["task"], "tol": -1.0}})
    with pytest.raises(
        ConfigError, match=r"^model\.kind = 'transformer': must be one of 'scalar' with task\.kind = 'toy_slope'"
    ):
        config.from_dict({**RAW, "model": {"kind": "transformer"}})
    with pytest.raises(ConfigError, match=r"^task\.kind = 'nope': must be one of .*'memorization', 'toy_slope'$"):
        config.from_dict({"task": {"kind": "nope"}})
    with pytest.raises(ValueError, match="already registered"):
        systems.register(TOY)


def test_the_new_system_runs_to_a_run_directory_that_load_reads(tmp_path):
    from icl_race.run.runner import execute

    res = execute(config.from_dict(RAW), tmp_path / "run", progress=False)
    run = icl_race.load(tmp_path / "run")
    assert run.headline == "learned" and run.seed_ids.tolist() == [0, 1, 2]
    t = run.t("learned")
    np.testing.assert_array_equal(t, res["t_learned"])
    # GD on E (w - c)^2 x^2 contracts w - c by about 1 - 2 lr = 0.9 a step: from |w - 3| ~ 3 to below 0.05
    # takes ln(60) / 0.105 ~ 40 steps; every seed gets there and stays.
    assert np.all((t >= 15) & (t <= 150)), t
    assert np.all(np.abs(run.curve("w")[:, -1] - 3.0) < 0.05)
    assert run.km_median() == pytest.approx(np.median(t), abs=5)


def test_icl_race_run_trains_the_new_system(tmp_path, capsys):
    toml = tmp_path / "toy.toml"
    toml.write_text(
        '[task]\nkind = "toy_slope"\nslope = -1.5\n[train]\nlr = 0.05\nsteps = 300\neval_every = 5\n'
        "checkpoint_every = 0\n[ensemble]\nseeds = 2\nblock = 2\n"
    )
    assert main(["run", str(toml), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    assert "learned reached in 2/2 seeds" in capsys.readouterr().out
    run = icl_race.load(tmp_path / "run")
    assert run.config["task"]["slope"] == -1.5 and np.all(np.abs(run.curve("w")[:, -1] + 1.5) < 0.05)
