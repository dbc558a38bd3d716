"""Live curves where researchers already look: per evaluation, the ensemble's aggregate curves (the fraction
of seeds past each event, quantiles across seeds of every accuracy and loss, the live seeds, seed-steps/s)
logged to TensorBoard event files (tensorboardX) and to Weights & Biases, from the host between chunks only
(the runner's `on_chunk`, which sees the chunk's evaluations at once): nothing is added inside a chunk.

Optional: `pip install 'icl-race[tracking]'`; `icl-race run --tensorboard DIR --wandb PROJECT`. W&B follows
its own settings (WANDB_MODE=offline, WANDB_DIR, an API key); its files go to its folder, never the run's.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from icl_race.config import Config, ConfigError

QUANTILES = (0.1, 0.5, 0.9)


def aggregates(p) -> Iterator[tuple[int, dict[str, float]]]:
    """(step, {tag: value}) per evaluation of the chunk the engine's `Progress` `p` has just finished:
    acquired/<event> (the fraction of the run's seeds whose first passage is at or before the step),
    <metric>/q10, q50, q90 across the seeds (every *_acc and *_loss probe, and train_loss; NaN seeds
    left out), live_seeds and seed_steps_per_s (the chunk's computed seed-steps over its seconds, the first chunk's
    compilation included)."""
    from icl_race.engine.ensemble import DIVERGED  # here: checking the flags imports no jax

    metrics, steps = p.history[-1], p.eval_steps[-1]
    rate = p.chunk_seeds * p.chunk_steps / max(p.chunk_seconds, 1e-9)
    curves = {k: v[: p.seeds] for k, v in metrics.items() if v.ndim == 2 and k.endswith(("_acc", "_loss"))}
    for j, step in enumerate(steps):
        row = {f"acquired/{e}": float(np.mean((t >= 0) & (t <= step))) for e, t in p.t_first.items() if e != DIVERGED}
        for name, v in curves.items():
            if np.isfinite(v[:, j]).any():
                row |= {
                    f"{name}/q{round(100 * q)}": float(x) for q, x in zip(QUANTILES, np.nanquantile(v[:, j], QUANTILES))
                }
        yield int(step), row | {"live_seeds": float(p.chunk_seeds), "seed_steps_per_s": float(rate)}


def check(tensorboard: str | None, wandb: str | None) -> None:
    """Refuse, before any work, a destination whose library is not installed (one line naming the flag)."""
    for flag, value, module in (("--tensorboard", tensorboard, "tensorboardX"), ("--wandb", wandb, "wandb")):
        if value is not None and importlib.util.find_spec(module) is None:
            raise ConfigError(f"{flag} {value}: needs {module}: pip install 'icl-race[tracking]'")


@dataclass
class Tracker:
    """The run's curves to `tensorboard` (a folder of event files) and/or the W&B project `wandb`; the
    writers open at the first chunk (a run refused before training leaves no trace) and `close` ends them."""

    cfg: Config
    out: Path
    tensorboard: str | None = None
    wandb: str | None = None
    _tb: Any = None
    _wb: Any = None

    def __call__(self, p) -> None:
        if self._tb is None and self.tensorboard is not None:
            from tensorboardX import SummaryWriter

            self._tb = SummaryWriter(self.tensorboard)
        if self._wb is None and self.wandb is not None:
            import wandb

            self._wb = wandb.init(project=self.wandb, name=self.out.name, config=self.cfg.to_dict())
        for step, row in aggregates(p):
            if self._tb is not None:
                for tag, value in row.items():
                    self._tb.add_scalar(tag, value, step)
            if self._wb is not None:
                self._wb.log(row, step=step)
        if self._tb is not None:
            self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wb is not None:
            self._wb.finish()
