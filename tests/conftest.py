import atexit
import os
import shutil
import tempfile

import jax
import pytest
import tiny

# Implicit rank promotion hides shape bugs (nanodo's practice): make it an error in every test.
jax.config.update("jax_numpy_rank_promotion", "raise")

# The tests that start runs in fresh processes (signals, kills, faults, other device counts, the CLI)
# compile the same tiny programs again in every process; a compilation cache shared by those child
# processes compiles each once (the signal and durability tests: 1m53s -> 1m11s, side by side). This
# process keeps it off, so that the tests counting compilations here still see every one.
_XLA_CACHE = tempfile.mkdtemp(prefix="icl-race-tests-xla-cache-")
atexit.register(shutil.rmtree, _XLA_CACHE, True)
CHILD_XLA_CACHE_ENV = {
    "JAX_COMPILATION_CACHE_DIR": _XLA_CACHE,
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1",
}
os.environ.update(CHILD_XLA_CACHE_ENV)
jax.config.update("jax_enable_compilation_cache", False)


@pytest.fixture
def tiny_raw():
    """The tests' one tiny config (tests/tiny.py: trains in seconds on one CPU core), a fresh copy per test."""
    return tiny.raw()


@pytest.fixture(scope="session")
def lr_runs(tmp_path_factory):
    """tiny.LR_RUNS as run directories a/ and b/ (400 steps of 4 seeds, ~25 s each on 2 cores), and sweep/,
    a sweep directory over train.lr holding both as cells: made once for every module that reads them."""
    from icl_race import config
    from icl_race.run.runner import execute

    root = tmp_path_factory.mktemp("across")
    for name, lr in tiny.LR_RUNS.items():
        execute(config.from_dict(tiny.lr_run(lr)), root / name, progress=False)
    sweep = root / "sweep"
    for name in tiny.LR_RUNS:
        shutil.copytree(root / name, sweep / "cells" / name)
    (sweep / "sweep.toml").write_text('[grid]\n"train.lr" = [0.1, 0.05]\n')
    return root


@pytest.fixture(autouse=True, scope="module")
def _drop_compilations_after_each_module():
    """jit keeps every compiled program for the life of the process, ~44 MB a new shape, never released
    (benchmarks/compile_memory.py); a worker running hundreds of tests of distinct shapes grew by GBs.
    Dropping them between modules bounds it (programs are rarely shared across modules)."""
    yield
    jax.clear_caches()
