"""Chosen seeds trained again, in memory: what a seed's network did along its training, which its run
keeps only as curves and first passages. Nothing is written.

    retrain(DIR, [3], on_chunk=hook)   seed 3 of the run in DIR, from its config.json
    train_seeds(cfg, [0, 1])           seeds of any config, without a run directory

Both go through the runner's own phases (`runner.laid_out`, `pack.train_phase`), so a seed's key is
fold_in(root_seed, its id) and it trains in a vmap of the config's block width (padded with seeds that
are discarded): its trajectory is bit-identical to the one it had in its run, whatever seeds are asked
for beside it. `on_chunk` sees the engine's `Progress` after each chunk; its carry holds the seeds in
the order asked, then the padding. They return results.npz's arrays for those seeds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from icl_race import config, rundir
from icl_race.config import Config, ConfigError
from icl_race.run.signals import Stop


def retrain(
    run_dir: str | Path,
    seed_ids: Sequence[int],
    *,
    steps: int | None = None,
    overrides: Sequence[str] = (),
    on_chunk: Callable[[Any], None] | None = None,
) -> dict[str, np.ndarray]:
    """The seeds `seed_ids` of the run in `run_dir` trained again from its config, to `steps` (default
    the run's budget) with `overrides` ("section.field=value", as `--set`) on top. The budget, the
    chunking (train.evals_per_chunk: where `on_chunk` looks) and the early stop change only what is
    observed; a field of the training itself or the block width changes the trajectory."""
    raw = rundir.read_config(Path(run_dir))
    run_cfg = config.from_dict(raw)
    e = run_cfg.ensemble
    strays = sorted({int(s) for s in seed_ids} - set(range(e.first_seed, e.first_seed + e.seeds)))
    if strays:
        raise ConfigError(
            f"{run_dir}: seed {strays[0]} is not one of the run's seeds ({e.first_seed}..{e.first_seed + e.seeds - 1})"
        )
    changes = [*overrides, *([] if steps is None else [f"train.steps={steps}"])]
    # parsed again only when something changes: the run's own config otherwise
    cfg = config.from_dict(config.apply_overrides(raw, changes)) if changes else run_cfg
    return train_seeds(cfg, seed_ids, on_chunk=on_chunk)


def train_seeds(
    cfg: Config, seed_ids: Sequence[int], *, on_chunk: Callable[[Any], None] | None = None
) -> dict[str, np.ndarray]:
    """The seeds `seed_ids` (not cfg.ensemble's) trained under cfg; results.npz's arrays for them."""
    from icl_race import systems
    from icl_race.run.commit import results_arrays
    from icl_race.run.pack import train_phase
    from icl_race.run.records import RunPlan
    from icl_race.run.runner import laid_out

    ids = np.asarray(seed_ids, np.int64)
    if ids.ndim != 1 or ids.size == 0 or np.unique(ids).size != ids.size or np.any(ids < 0):
        raise ConfigError(f"seed ids {config.short(list(seed_ids))}: expected distinct integers >= 0, at least one")
    with systems.precision(cfg):
        program, consts = systems.build(cfg)
        prepared = laid_out(RunPlan.of(cfg), program, consts, ids)
        return results_arrays(prepared, train_phase(prepared, Stop(), on_chunk))  # a stop no signal reaches
