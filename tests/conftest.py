import jax
import pytest

# Implicit rank promotion hides shape bugs (nanodo's practice): make it an error in every test.
jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture
def tiny_raw():
    """A config small enough to train in seconds on one CPU core; ICL is acquired within ~1000 steps."""
    return {
        "task": {"variant": "standard", "K": 1000, "N": 8},
        "model": {"width": 32},
        "train": {"lr": 0.1, "batch_size": 64, "steps": 800, "eval_every": 50, "eval_size": 200},
        "ensemble": {"seeds": 4},
    }
