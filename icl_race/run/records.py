"""The records a run hands from phase to phase (run/runner.py): `RunPlan` -> `Prepared` -> `Trained`, which
run/commit.py turns into results. Frozen, typed, built by keyword; importing them imports no jax."""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from icl_race.config import Config, ConfigError

if TYPE_CHECKING:
    from icl_race.engine.chunks import ChunkPlan
    from icl_race.engine.ensemble import Layout
    from icl_race.engine.memory import Estimate
    from icl_race.engine.program import Carry, Consts, Program
    from icl_race.run.checkpoint import Checkpointer
    from icl_race.run.compile_stats import Counters


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """A run's config and what derives from it, computed once per run (`RunPlan.of`) and carried through
    the memory check, prepare, the training (the engine's chunks, the progress line, the checkpoints)
    and the commit, so that no phase derives them again. Each is a function of the config and of this
    process's devices only, so a resumed run computes the same."""

    cfg: Config
    layout: Layout  # the seed axis over the local devices (`layout`)
    chunks: ChunkPlan  # the engine's chunks (`chunks`)
    digest: str  # cfg.digest(): what each checkpoint and meta.json store, and a resume checks

    @classmethod
    def of(cls, cfg: Config) -> RunPlan:
        """cfg's plan: the one derivation of its layout and chunks, which every phase then takes."""
        return cls(cfg=cfg, layout=layout(cfg), chunks=chunks(cfg), digest=cfg.digest())

    @functools.cached_property
    def estimate(self) -> Estimate:
        """The memory this run needs (engine/memory.py), on first use: from the shapes of the system built
        abstractly, nothing computed or allocated however absurd the sizes (host.check_memory's refusal)."""
        import jax

        from icl_race import systems
        from icl_race.engine import memory

        cfg, tr = self.cfg, self.cfg.train
        with systems.precision(cfg):
            program, consts = memory.abstract_build(lambda: systems.build(cfg))
            return memory.estimate(
                program,
                consts,
                layout=self.layout,
                seeds=cfg.ensemble.seeds,
                evals=sum(n for _, _, n in self.chunks),
                checkpoints=tr.checkpoint_every > 0,
                on_cpu=jax.local_devices()[0].platform == "cpu",
                kept=tr.kept,
            )


def layout(cfg: Config) -> Layout:
    """The ensemble's layout over the local devices; ensemble.devices beyond them is a ConfigError."""
    from icl_race.engine.ensemble import Layout
    from icl_race.engine.sharding import local_device_count

    e, available = cfg.ensemble, local_device_count()
    if e.devices > available:
        raise ConfigError(f"ensemble.devices = {e.devices}: must be 0 (all) or <= {available}, the local device count")
    return Layout(e.block, e.devices or available)


def chunks(cfg: Config) -> ChunkPlan:
    """The run's chunks: (first step, evaluation period, evaluations) each, and the chunk program's size."""
    from icl_race.engine.chunks import chunk_plan

    tr = cfg.train
    return chunk_plan(tr.steps, tr.eval_every, tr.evals_per_chunk, tr.eval_spacing)


@dataclasses.dataclass(frozen=True)
class Prepared:
    """What the training starts from."""

    run: RunPlan
    program: Program
    consts: Consts
    seed_ids: np.ndarray  # [S] the seeds trained; the carry holds them first, then the padding
    carry: Carry  # the device carry of the padded ensemble
    start: int  # the step the carry stands at: 0, or the restored checkpoint's
    history: tuple[dict[str, np.ndarray], np.ndarray] | None  # the curves and evaluation steps up to start
    checkpointer: Checkpointer | None  # None without checkpoints
    since: Counters  # the clock and compile counters before the build

    @property
    def cfg(self) -> Config:
        return self.run.cfg


@dataclasses.dataclass(frozen=True)
class Trained:
    """What the training computed, for the seeds trained only (the padding dropped)."""

    t_first: dict[str, np.ndarray]  # event -> [S] first-passage step, -1 = not reached
    curves: dict[str, np.ndarray]  # probe -> [S, T, ...]
    eval_steps: np.ndarray  # [T]
    seed_steps_computed: int = 0  # by this process (fewer than seeds x steps when seeds retire)
    run_seconds: float = 0.0
    compiles: int = 0
    compile_seconds: float = 0.0
    compile_cache_hits: int = 0  # of `compiles`, loaded from the persistent cache
    pack: tuple[int, int] | None = None  # trained packed: (runs in the pack, seed-steps the pack computed)
    # train.keep_params: "final" and/or "at_t_icl" -> every seed's parameters (host arrays, leading axis S)
    params: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def steps_run(self) -> int:
        """The step of the last evaluation: the budget, or where the early stop ended the training."""
        return int(self.eval_steps[-1]) if self.eval_steps.size else 0
