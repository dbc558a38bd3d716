"""The small Python side of gpu_pieces.sh (the GPU queue of issue 45): three jobs, one subcommand each.

gpu_queue.py done SWEEP_TOML OUT_DIR       exit 0 when every cell of the sweep is done in OUT_DIR
gpu_queue.py tiny SWEEP_TOML NEW_TOML      a CPU-sized copy (QUEUE_TINY=1): every N, budget and
                                           width shrunk, the same grid shape (one cell per cell)
gpu_queue.py pack RUNS_DIR OUT_DIR MIB     results in one tgz; the newest checkpoint of each
                                           unfinished cell in <= 15 MiB parts, at most MIB in all
"""

import sys
import tarfile
import tomllib
from pathlib import Path

from icl_race.run.sweep import spec
from icl_race.run.sweep.plan import status
from icl_race.rundir import CHECKPOINTS, LOCK, checkpoint_steps, is_done

# A tiny cell: the paper's task at width 16, a few N, a budget a loaded 2-core CPU runs in a minute or two;
# long enough (TINY_STEPS) that a short limit stops it in mid-run.
TINY_N = (8, 10, 12, 14, 16)
TINY = {
    "model": {"width": 16},
    "train": {"eval_size": 64, "eval_batch": 32, "checkpoint_every": 1},
    "ensemble": {"seeds": 2, "block": 2},
}


def done(toml: str, out: str) -> int:
    sweep = spec.load(toml)
    left = [c.name for c in sweep.cells if status(Path(out), c) != "done"]
    print(f"{Path(toml).stem}: {len(sweep.cells) - len(left)}/{len(sweep.cells)} cells done")
    return 0 if not left else 1


def tiny(toml: str, new: str, steps: int = 1500, every: int = 25) -> int:
    import tomli_w  # here only: the GPU image needs nothing beyond what `icl-race sweep` imports

    raw = tomllib.loads(Path(toml).read_text())
    raw["base"] = str((Path(toml).parent / raw["base"]).resolve()) if "base" in raw else None
    if raw["base"] is None:
        del raw["base"]
    for table in ("grid", "zip"):
        fields = raw.get(table, {})
        if "task.N" in fields:
            fields["task.N"] = [TINY_N[sorted(set(fields["task.N"])).index(n)] for n in fields["task.N"]]
        for key, value in (("train.steps", steps), ("train.eval_every", every)):
            if key in fields:
                fields[key] = [value] * len(fields[key])
    for sec, values in TINY.items():
        raw.setdefault(sec, {}).update(values)
    if "N" in raw.get("task", {}):
        raw["task"]["N"] = TINY_N[0]
    raw["train"].update(steps=steps, eval_every=every)
    Path(new).write_text(tomli_w.dumps(raw))
    return 0


def pack(runs: str, out: str, mib: float) -> int:
    root, dest = Path(runs), Path(out)
    with tarfile.open(dest / "gpu_results.tgz", "w:gz") as tar:
        for p in sorted(root.rglob("*")):
            if p.is_file() and p.name != LOCK and CHECKPOINTS not in p.relative_to(root).parts:
                tar.add(p, arcname=str(p))
    # The newest checkpoint of each unfinished cell, the most advanced first, while the parts stay under
    # MIB (the device tool brings back 64 MiB in all): a cell left out is named, never silently lost.
    cells = [c for c in sorted(root.glob("*/cells/*")) if checkpoint_steps(c) and not is_done(c)]
    cells.sort(key=lambda c: -checkpoint_steps(c)[-1])
    budget = mib * 2**20 - (dest / "gpu_results.tgz").stat().st_size
    with tarfile.open(dest / "gpu_ckpt.tgz", "w:gz") as tar:
        for cell in cells:
            newest = cell / CHECKPOINTS / str(checkpoint_steps(cell)[-1])
            size = sum(f.stat().st_size for f in newest.rglob("*") if f.is_file())
            if size > budget:
                print(f"pack: left out {newest} ({size / 2**20:.1f} MiB; {budget / 2**20:.1f} MiB left)")
                continue
            tar.add(newest, arcname=str(newest))
            budget -= size
            print(f"pack: {newest} ({size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    job, *args = sys.argv[1:]
    sys.exit({"done": done, "tiny": tiny, "pack": lambda r, o, m: pack(r, o, float(m))}[job](*args))
