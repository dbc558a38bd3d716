"""The commands that train: `icl-race run`, `demo`, `sweep` and `bench` (their arguments: cli.py's table).

Each takes the parsed arguments and returns the exit code; errors are raised (ConfigError, RunError,
Interrupted, OSError) for cli.py to turn into one line. jax is imported only once the input is checked.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from importlib import resources

from icl_race import config
from icl_race.report.commands import out_dir


def _log(message: str) -> None:
    print(message, file=sys.stderr)


def _run(cfg_path, out: str, seeds, overrides, quiet: bool, redo: bool = False, as_json: bool = False) -> int:
    """One run: the config parsed once (with --seeds and --set), trained into `out`, its summary printed."""
    from icl_race.report.summary import run_summary
    from icl_race.report.warnings import budget
    from icl_race.run.runner import execute_run

    if seeds is not None:
        overrides = [*overrides, f"ensemble.seeds={seeds}"]
    cfg = config.load(cfg_path, overrides)
    if short := budget(cfg):
        _log(short)
    run = execute_run(cfg, out_dir(out), progress=not quiet, log=_log, redo=redo)
    summary = run_summary(run)  # the committed run in memory: nothing read back
    print(json.dumps(dataclasses.asdict(summary), indent=1) if as_json else summary.text())
    return 0


def run(args: argparse.Namespace) -> int:
    return _run(args.config, args.out, args.seeds, args.overrides, args.quiet, args.redo, args.json)


def demo(args: argparse.Namespace) -> int:
    with resources.as_file(resources.files("icl_race") / "presets" / "demo.toml") as path:
        return _run(path, args.out, args.seeds, args.overrides, quiet=False, as_json=args.json)


def sweep(args: argparse.Namespace) -> int:
    """The sweep file expanded (spec), then either its plan printed (--dry-run) or its cells run (execute);
    the warnings (report/warnings.py) of its budgets before, of its finished cells after."""
    from icl_race.report.summary import dir_warnings
    from icl_race.report.warnings import budget
    from icl_race.run import sweep

    spec = sweep.load(args.sweep, args.overrides)
    out = out_dir(args.out)
    sweep.refuse_links(out, spec)
    for cell in spec.cells:
        if short := budget(cell.cfg, f"cell {cell.values}: "):
            _log(short)
    if stale := sweep.unreusable(out, spec):
        _log(stale)
    if args.dry_run:
        plan = sweep.dry_run(
            out, spec, not args.no_measure, args.executor, remeasure=args.remeasure, device=args.device
        )
        print(json.dumps(dataclasses.asdict(plan), indent=2) if args.json else plan.text())
        return 0
    slurm = {
        "minutes": args.time,
        "partition": args.partition,
        "gpus": args.gpus,
        "parallelism": args.array_parallelism,
        "options": args.slurm,
    }
    print(
        sweep.run_sweep(
            out,
            spec,
            args.executor,
            _log,
            not args.quiet,
            slurm,
            wait=not args.no_wait,
            force=args.force,
            redo=args.redo,
        )
    )
    for w in dir_warnings(out):
        _log(w)
    return 0


def bench(args: argparse.Namespace) -> int:
    from icl_race.run.bench import main

    return main(args)
