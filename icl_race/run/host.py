"""What the machine running a run can hold: the host's available memory and one device's limit (the
engine reads no files, so the host's figures live here), and `check_memory`, the refusal of a run whose
estimate (engine/memory.py) exceeds them, before anything is written or allocated."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from icl_race.config import ConfigError

if TYPE_CHECKING:
    from icl_race.run.records import RunPlan


def host_available() -> int:
    """Bytes the host can still give (MemAvailable), or its physical memory when that is unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def device_limit(device) -> tuple[int, str]:
    """(bytes one device can hold, what it is): the allocator's limit on an accelerator, the host's
    available memory on a CPU."""
    stats = device.memory_stats() if device.platform != "cpu" else None
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"]), f"{device.device_kind} memory"
    return host_available(), "available host memory"


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1024 or unit == "PB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.3g} EB"


def disk_free(path: Path) -> int:
    """Bytes free on the disk that holds `path` (or would: its nearest existing folder)."""
    path = Path(path).absolute()
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free


# orbax's own files beside each kept set of parameters (metadata, the manifest), rounded up
KEPT_OVERHEAD = 1 << 20


def check_memory(run: RunPlan, out: Path | None = None) -> None:
    """Refuse, before anything is written or allocated, a config whose ensemble cannot fit in the
    device's memory (engine/memory.py: an estimate from the shapes alone), or whose kept parameters
    (train.keep_params) cannot fit on the disk of `out`, the run's directory."""
    import jax

    cfg, est = run.cfg, run.estimate
    e, tr = cfg.ensemble, cfg.train
    device = jax.local_devices()[0]
    checks = [(est.parts(), *device_limit(device))]
    if device.platform != "cpu":
        checks.append((est.host_parts(), host_available(), "available host memory"))
    for parts, limit, what in checks:
        need = sum(parts.values())
        if need > limit:
            top = max(parts, key=lambda k: parts[k])
            detail = ", ".join(f"{k} {human(v)}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]))
            raise ConfigError(
                f"memory: this run needs about {human(need)} but {what} is {human(limit)} ({detail}); lower {_LOWER[top]}"
            )
    if tr.kept and out is not None and (need := est.kept + len(tr.kept) * KEPT_OVERHEAD) > (free := disk_free(out)):
        raise ConfigError(
            f"train.keep_params = {tr.keep_params!r}: keeps about {human(need)} ({e.seeds} seeds x "
            f"{len(tr.kept)} x {human(est.params)} of parameters) but the disk of {out} has {human(free)} free; "
            'free space there, choose another directory, or set train.keep_params = "none"'
        )


# What to lower when one kind of memory dominates a refused run.
_STATE_SIZES = (
    "ensemble.seeds (run the seeds in parts with ensemble.first_seed) or the model and task sizes "
    "(model.width, task.D, task.K_max)"
)
_LOWER = {
    "seed states": _STATE_SIZES,
    "shared constants": "the task's sizes (task.K, task.K_max, task.icl_pool, task.D, task.P)",
    "one block's work": "ensemble.block, train.batch_size, train.eval_size or the sequence and model sizes "
    "(task.N, task.D, model.width)",
    "probe history": "the number of evaluations (train.steps / train.eval_every) or ensemble.seeds",
    "checkpoint copies": f"{_STATE_SIZES}, or set train.checkpoint_every = 0",
    "kept parameters": f'{_STATE_SIZES}, or set train.keep_params = "none"',
}
