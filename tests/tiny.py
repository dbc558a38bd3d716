"""The one tiny config of the tests, and the variants a test needs as overrides of it.

`raw(**sections)` is the conftest fixture `tiny_raw`'s dict with each named section's keys replaced or
added; `regression`, `memorization` and `minimal` the same for the other systems' one tiny config each. Plain
functions (not only a fixture) because several modules need their config at import time, in a sweep file or
in the arguments of a child process. `toml(raw)` writes such a dict as a config file.
"""

import json

# Small enough to train in seconds on one CPU core; ICL is acquired within ~1000 steps. task.variant is
# the default ("standard"): not named, so that a test can add it to the TOML without a duplicate key.
_BASE = {
    "task": {"K": 1000, "N": 8},
    "model": {"width": 32},
    "train": {"lr": 0.1, "batch_size": 64, "steps": 800, "eval_every": 50, "eval_size": 200},
    "ensemble": {"seeds": 4},
}
_SMALL = {"model": {"width": 16}, "train": {"batch_size": 16, "steps": 100, "eval_size": 50}}

# The train fields of a run that a test interrupts and resumes: a checkpoint after every chunk, and every
# step trained (no early end once all seeds acquired), so that the rerun's results compare whole.
RESUMABLE = {"checkpoint_every": 1, "stop_when_all_acquired": False}

# The two runs that the export, compare and runset tests read (conftest's session fixture `lr_runs`): they
# differ in train.lr only; 400 steps, where most seeds reach icl60 (ICL itself not yet).
LR_RUNS = {"a": 0.1, "b": 0.05}
LR_RUN_EVENT = "icl60"


def lr_run(lr: float) -> dict:
    return raw(train={"lr": lr, "steps": 400, "eval_size": 100}, ensemble={"seeds": 4, "block": 4})


# Sizes no machine holds, each refused before any work, naming the field to lower (run and memory tests).
IMPOSSIBLE_SIZES = [
    ["model.width=1e9"],
    ["task.D=1e9"],
    ["task.K=2e9"],
    ["ensemble.seeds=1e9"],
    ["train.batch_size=1e9"],
    ["train.eval_size=1e9"],
    ['task.variant="infinite"', "task.N=1e9"],
]


# Linear regression (linear attention): two directions of a custom spectrum, two rank-1 ATTN_S heads, no
# checkpoints; every seed passes both transitions M_0 -> M_1 -> M_2 within its 3000 steps (test_regression_run).
_REGRESSION = {
    "task": {"kind": "linear_regression", "D": 2, "N": 15, "spectrum": "custom", "lambdas": [0.7, 0.3]},
    "model": {"kind": "attn_s", "heads": 2, "rank": 1, "init_scale": 0.05},
    "train": {"lr": 0.5, "steps": 3000, "eval_every": 100, "checkpoint_every": 0},
    "ensemble": {"seeds": 4, "block": 4},
}
# Undoes the custom spectrum, for a variant with another task.D: the default, linear one.
LINEAR_SPECTRUM = {"spectrum": "linear", "lambdas": []}

# Memorization (the MLP alone): 64 items, memorized by every seed within its 1500 steps, each step trained
# (test_memorization reads the whole c1 curve).
_MEMORIZATION = {
    "task": {"kind": "memorization", "K": 64, "D": 16},
    "model": {"kind": "mlp", "width": 32},
    "train": {
        "lr": 0.1,
        "batch_size": 16,
        "steps": 1500,
        "eval_every": 50,
        "checkpoint_every": 0,
        "stop_when_all_acquired": False,
    },
    "ensemble": {"seeds": 4, "block": 4},
}

# The minimal model on infinite data: every seed acquires ICL (at 0.9) within its 2000 steps at beta0 = 1,
# and at beta0 = -1 too, later (test_memorization's t_ICL against beta0).
_MINIMAL = {
    "task": {"variant": "infinite", "N": 8, "D": 32},
    "model": {"kind": "minimal", "width": 16, "beta0": 1.0},
    "train": {
        "lr": 0.1,
        "batch_size": 32,
        "steps": 2000,
        "eval_every": 20,
        "eval_size": 256,
        "checkpoint_every": 0,
        "icl_threshold": 0.9,
    },
    "ensemble": {"seeds": 4, "block": 4},
}


def raw(**sections: dict) -> dict:
    """A fresh copy of the tiny config, each keyword a section whose keys override (or add to) the base's:
    `raw(train={"steps": 100}, ensemble={"seeds": 2, "block": 2})`."""
    return _merge(_BASE, sections)


def small(**sections: dict) -> dict:
    """The tiny config at a quarter of its sizes (width 16, batches of 16, 100 steps, 50 evaluation
    sequences), for the runs whose numbers no test reads closely; keywords as `raw`'s."""
    return _merge(_merge(_BASE, _SMALL), sections)


def regression(**sections: dict) -> dict:
    """A fresh copy of the tiny linear-regression config, keywords as `raw`'s."""
    return _merge(_REGRESSION, sections)


def memorization(**sections: dict) -> dict:
    """A fresh copy of the tiny memorization config (the MLP alone), keywords as `raw`'s."""
    return _merge(_MEMORIZATION, sections)


def minimal(**sections: dict) -> dict:
    """A fresh copy of the tiny minimal-model config, keywords as `raw`'s."""
    return _merge(_MINIMAL, sections)


def _merge(base: dict, sections: dict) -> dict:
    out = {name: dict(sec) for name, sec in base.items()}
    for name, over in sections.items():
        out[name] = {**out.get(name, {}), **over}
    return out


def toml(raw: dict) -> str:
    """A config dict as a TOML config file (sections of scalars and lists: JSON's spelling is TOML's)."""
    value = lambda v: str(v).lower() if isinstance(v, bool) else json.dumps(v)
    return "".join(f"[{s}]\n" + "".join(f"{k} = {value(v)}\n" for k, v in sec.items()) for s, sec in raw.items())
