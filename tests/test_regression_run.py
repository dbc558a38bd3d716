"""Linear attention through the config and the runner: float64 by context, staircase results on disk."""

import jax.numpy as jnp
import numpy as np
import pytest

from icl_race import config
from icl_race.config import ConfigError
from icl_race.runner import execute

RAW = {
    "task": {"kind": "linear_regression", "D": 2, "N": 15, "spectrum": "custom", "lambdas": [0.7, 0.3]},
    "model": {"kind": "attn_s", "heads": 2, "rank": 1, "init_scale": 0.05},
    "train": {"lr": 0.5, "steps": 3000, "eval_every": 100, "checkpoint_every": 0},
    "ensemble": {"seeds": 4, "block": 4},
}


def test_run_writes_the_staircase_and_leaves_float32_alone(tmp_path):
    from icl_race.theory.linear_attention import plateau_losses

    res = execute(config.from_dict(RAW), tmp_path / "run", progress=False)
    assert {"t_m1", "t_m2", "t_converged", "loss", "v", "k_align"} <= set(res)
    assert res["loss"].dtype == np.float64 and res["v"].shape == (4, res["eval_steps"].size, 2)
    # Every seed learns the larger eigen-direction first, then the smaller, then converges to L(M_D).
    assert np.all((res["t_m1"] > 0) & (res["t_m1"] < res["t_m2"]) & (res["t_m2"] <= res["t_converged"]))
    levels = plateau_losses(np.array([0.7, 0.3]), 15)
    np.testing.assert_allclose(res["loss"][:, -1], levels[-1], rtol=0.02)
    assert (tmp_path / "run" / "t_converged_hist.png").exists()
    assert jnp.zeros(1).dtype == jnp.float32, "float64 must not leak out of the run"


@pytest.mark.parametrize("key, value, field", [
    ("task.spectrum", "zipf", "task.spectrum"),
    ("model.rank", 5, "model.rank"),
    ("model.kind", "transformer", "model.kind"),
    ("task.K", 100, "task.K"),
])
def test_bad_regression_config_names_the_field(key, value, field):
    sec, k = key.split(".")
    raw = {**RAW, sec: {**RAW[sec], k: value}}
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        config.from_dict(raw)
