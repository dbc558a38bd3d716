import atexit
import fcntl
import os
import shutil
import tempfile

# The tests compile hundreds of tiny programs and run each briefly, so compiling is most of the suite's
# time, and LLVM's optimisation passes are most of a CPU compile. The tests run them at level 1, for
# themselves and every process they start (XLA_FLAGS is read when the CPU backend starts, after this):
# tests/models/test_transformer.py (compiling) took 32 s without the flag (XLA's default level), 21 s at 0 and 24 s at
# 1; tests/systems/test_classification.py's test_infinite_variant (training) 33 s, 50 s and 24 s (level 0's
# code runs slowly), each alone on 2 cores at load ~4. What the tests assert holds at any level: XLA's
# CPU code never uses fast math, and the tests that compare with stored numbers pass with each stored float
# moved by one ulp (make test-stored-ulp). The product compiles at XLA's default level.
os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=1".strip()

import jax
import pytest
import tiny

from icl_race.run import compile_cache

# Implicit rank promotion hides shape bugs (nanodo's practice): make it an error in every test.
jax.config.update("jax_numpy_rank_promotion", "raise")

# One persistent compilation cache for the whole session: both xdist workers and every process they start
# (signals, kills, faults, other device counts, the CLI) load a tiny program that any of them compiled
# before, where each test module would otherwise compile it again (the jit caches are dropped after each
# module, below). The controller makes the directory and its workers inherit it through the environment.
# A loaded program still counts as a compilation (run/compile_stats.py), so the tests that count
# compilations see every one. The processes the tests start store every program (the signal and
# durability tests: 1m53s -> 1m11s, side by side); this one only those that took as long to compile as the product stores (0.5 s):
# most of its hundreds of small programs serve one module, and storing one costs about what compiling it
# does (tests/models/test_transformer.py alone: 39 CPU s without the cache, 58 storing every program, 12 loading
# them). Entries are written and read under a file lock (a cache size bound, far above what the suite
# writes, is what turns JAX's lock on): without it, one process could read an entry that another is
# still writing.
_CACHE_OWNER = "ICL_RACE_TESTS_XLA_CACHE"
if _CACHE_OWNER not in os.environ:
    os.environ[_CACHE_OWNER] = tempfile.mkdtemp(prefix="icl-race-tests-xla-cache-")
    atexit.register(shutil.rmtree, os.environ[_CACHE_OWNER], True)
XLA_CACHE_ENV = {
    "JAX_COMPILATION_CACHE_DIR": os.environ[_CACHE_OWNER],
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1",
    "JAX_COMPILATION_CACHE_MAX_SIZE": str(1 << 40),
}
os.environ.update(XLA_CACHE_ENV)
jax.config.update("jax_compilation_cache_dir", XLA_CACHE_ENV["JAX_COMPILATION_CACHE_DIR"])
jax.config.update("jax_persistent_cache_min_compile_time_secs", compile_cache.MIN_COMPILE_SECONDS)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
jax.config.update("jax_compilation_cache_max_size", 1 << 40)


@pytest.fixture
def tiny_raw():
    """The tests' one tiny config (tests/tiny.py: trains in seconds on one CPU core), a fresh copy per test."""
    return tiny.raw()


@pytest.fixture(scope="session")
def lr_runs(tmp_path_factory):
    """tiny.LR_RUNS as run directories a/ and b/ (400 steps of 4 seeds, ~25 s each on 2 cores), and sweep/,
    a sweep directory over train.lr holding both as cells: made once for every module that reads them
    (read only), also across xdist's workers. A session fixture is made once per worker, and the modules
    that read it (five) land on both workers: the first worker to need it makes it in the session's
    shared directory under a lock, the other waits for it and reads the same directories."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        return _make_lr_runs(tmp_path_factory.mktemp("across"))
    shared = tmp_path_factory.getbasetemp().parent  # this session's directory, above every worker's own
    root = shared / "across"
    with open(shared / "across.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "made").exists():
            shutil.rmtree(root, ignore_errors=True)  # a worker that failed halfway
            _make_lr_runs(root)
            (root / "made").touch()
    return root


def _make_lr_runs(root):
    from icl_race import config
    from icl_race.run.runner import execute

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
    Dropping them between modules bounds it (programs are rarely shared across modules, and one that is
    loads from the session's persistent cache, above)."""
    yield
    jax.clear_caches()
