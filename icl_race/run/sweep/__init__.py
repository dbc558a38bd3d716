"""Sweeps: the Cartesian grid over any config fields, one hash-named run directory per cell.

A sweep file is a config (the same [task]/[model]/[train]/[ensemble] sections, optionally on top of
`base = "other.toml"`) plus a [grid] table mapping "section.key" to a list of values:

    base = "demo.toml"
    [grid]
    "task.K" = [500, 1000, 2000]
    "task.N" = [8, 16]

An optional [zip] table holds fields that vary together (equal-length lists, taken row by row), e.g. a
budget and an evaluation period that scale with N; its rows are crossed with the [grid]:

    [zip]
    "task.N" = [16, 64]
    "train.steps" = [8000, 32000]

Layout of DIR: sweep.toml (the resolved spec, written by tomli-w), cells/<config digest>/ (one run
directory each, see rundir/layout.py), summary.csv (one row per cell, rewritten after every cell).
Finished cells are skipped and partial ones resume from their checkpoints, so rerunning the command is
always safe; cells locked by another process are left to it, so several workers can share one DIR.

Cells that differ only in traced values (K, learning rate, weight decay, thresholds) reuse one
compilation: K_max is set to the largest K of the grid unless the spec sets it. With the local executor
they also train together, as the members of one ensemble (plan.packs, pack.train_pack): each seed with
its cell's values, each cell written to its own directory as it is alone; `[sweep] pack = false` runs
them one after another instead. A cell is identified by the config its folder records, not by the
folder's name: a folder that holds another config is foreign, never run over, counted or reported.

Three jobs, one module each, data flowing one way:
  spec.py     the sweep file -> Sweep (its cells: a Config each, hash-named); pure, no jax, writes nothing
  plan.py     the cells' state on disk, which share one program, the sizes and the dry run's projection
  execute.py  sweep.toml stored, the executors (local, submitit), summary.csv
"""

from icl_race.run.sweep.execute import (
    refuse_links,
    run_local,
    run_submitit,
    run_sweep,
    store_spec,
    summary_row,
    write_summary,
)
from icl_race.run.sweep.plan import DryRun, cell_dir, dry_run, packs, planned, status, unreusable
from icl_race.run.sweep.spec import Sweep, expand, load, same_spec, spec_toml
