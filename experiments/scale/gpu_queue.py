"""The small Python side of gpu_pieces.sh (the GPU queue of issue 58): three jobs, one subcommand each.

gpu_queue.py done SWEEP_TOML OUT_DIR       exit 0 when the sweep is finished in OUT_DIR: every cell of a
                                           grid done; a design's design.json records why it stopped
gpu_queue.py tiny SWEEP_TOML NEW_TOML      a CPU-sized copy (QUEUE_TINY=1): every N, budget and width
                                           shrunk, the same grid shape (one cell per cell); a design
                                           keeps its [design], with tiny rounds and a tiny prior
gpu_queue.py pack RUNS_DIR OUT_DIR MIB     results in one tgz; the newest checkpoint of each
                                           unfinished cell (a design's unfinished round's cells too)
                                           in <= 15 MiB parts, at most MIB in all
"""

import sys
import tarfile
import tomllib
from pathlib import Path

from icl_race.run.sweep import spec
from icl_race.run.sweep.design_spec import Design
from icl_race.run.sweep.plan import status
from icl_race.rundir import CHECKPOINTS, LOCK, checkpoint_steps, is_done
from icl_race.rundir.sweepdir import read_design

# A tiny cell: the paper's task at width 16, a few N, a budget a loaded 2-core CPU runs in a minute or two;
# long enough (TINY_STEPS) that a short limit stops it in mid-run. A file of one N takes the tiny N of its
# place in the paper's N (so the five K = infinity designs stay five programs).
TINY_N = (8, 10, 12, 14, 16)
PAPER_N = (50, 100, 150, 200, 250)
TINY = {
    "model": {"width": 16},
    "train": {"eval_size": 64, "eval_batch": 32, "checkpoint_every": 1},
    "ensemble": {"seeds": 2, "block": 2},
}
# A tiny design: two rounds of two seeds at most, so a dry run sees a round end and the next one start;
# a K* prior over 64-4,096 (K_max 4,096: a small item pool), where width 16 at N = 8-16 has its threshold.
TINY_DESIGN = {
    "median": {"block": 2, "max_seeds": 4},
    "kstar": {"k_lo": 64, "k_hi": 4096, "seeds_per_round": 2, "max_seeds": 4},
}


def done(toml: str, out: str) -> int:
    sweep = spec.load(toml)
    if isinstance(sweep, Design):
        # rundir's own reader of design.json: finished when it is this design's record and names a stop
        doc, why = read_design(Path(out))
        stop = doc.get("stop") if doc is not None and doc["kind"] == sweep.kind else None
        if doc is None:
            said = why or "no design.json"
        else:
            said = (
                f"stopped ({stop}) after {doc['seeds']} seeds"
                if stop
                else f"{len(doc['rounds'])} rounds recorded, not stopped"
            )
        print(f"{Path(toml).stem}: {said}")
        return 0 if stop else 1
    left = [c.name for c in sweep.cells if status(Path(out), c) != "done"]
    print(f"{Path(toml).stem}: {len(sweep.cells) - len(left)}/{len(sweep.cells)} cells done")
    return 0 if not left else 1


def tiny(toml: str, new: str, steps: int = 1500, every: int = 25) -> int:
    import tomli_w  # here only: the GPU image needs nothing beyond what `icl-race sweep` imports

    loaded = spec.load(toml)  # the resolved config: a file of one N may take it from its base
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
    if not any("task.N" in raw.get(table, {}) for table in ("grid", "zip")):
        n = loaded.cfg.task.N if isinstance(loaded, Design) else loaded.cells[0].cfg.task.N
        raw.setdefault("task", {})["N"] = TINY_N[PAPER_N.index(n)] if n in PAPER_N else TINY_N[0]
    if "design" in raw:
        raw["design"].update(TINY_DESIGN[raw["design"]["kind"]])
        if raw["design"]["kind"] == "kstar":
            raw["task"]["K_max"] = TINY_DESIGN["kstar"]["k_hi"]
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
    # MIB (the device tool brings back 64 MiB in all): a cell left out is named, never silently lost. A
    # design's round is cells like a grid's (design.json, in the results, replays its proposal).
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
