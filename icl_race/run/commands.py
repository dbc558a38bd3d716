"""The commands that train, `icl-race run`, `demo`, `sweep` and `bench`, and their arguments (`*_args`, in
cli.py's table).

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
from icl_race.report.arguments import flag, force_arg, json_arg, positive_int
from icl_race.report.commands import out_dir
from icl_race.run.cost import GPUS


def _log(message: str) -> None:
    print(message, file=sys.stderr)


def _run(args: argparse.Namespace, cfg_path) -> int:
    """One run (`run`, `demo`): the config at `cfg_path` parsed once (with --seeds and --set), trained into
    --out (its curves logged to TensorBoard and W&B as asked: run/tracking.py), its summary printed."""
    from icl_race.report.warnings import budget
    from icl_race.run import tracking
    from icl_race.run.runner import execute_run

    overrides = [*args.overrides, *([] if args.seeds is None else [f"ensemble.seeds={args.seeds}"])]
    cfg, log = config.load_logged(cfg_path, overrides)
    tensorboard, wandb = args.tensorboard or log.get("tensorboard"), args.wandb or log.get("wandb")  # a flag wins
    tracking.check(tensorboard, wandb)
    if short := budget(cfg):
        _log(short)
    track = tracking.Tracker(cfg, out_dir(args.out), tensorboard, wandb) if tensorboard or wandb else None
    try:
        run = execute_run(cfg, out_dir(args.out), progress=not args.quiet, log=_log, redo=args.redo, on_chunk=track)
    finally:
        if track:
            track.close()
    from icl_race.report.summary import run_summary  # scipy: after the run's first line, not before

    summary = run_summary(run)  # the committed run in memory: nothing read back
    print(json.dumps(dataclasses.asdict(summary), indent=1) if args.json else summary.text())
    return 0


def run(args: argparse.Namespace) -> int:
    return _run(args, args.config)


def demo(args: argparse.Namespace) -> int:
    with resources.as_file(resources.files("icl_race") / "presets" / "demo.toml") as path:
        return _run(args, path)


def sweep(args: argparse.Namespace) -> int:
    """The sweep file expanded (spec), then either its plan printed (--dry-run) or its cells run (execute);
    the warnings (report/warnings.py) of its budgets before, of its finished cells after."""
    from icl_race.report.warnings import budget
    from icl_race.run import sweep

    spec = sweep.load(args.sweep, args.overrides)
    out = out_dir(args.out)
    if not isinstance(spec, sweep.Sweep):  # a [design] (sweep.Design, whose module needs scipy)
        return _design(args, spec, out)
    sweep.refuse_links(out, spec)
    for cell in spec.cells:
        if short := budget(cell.cfg, f"cell {cell.values}: "):
            _log(short)
    if stale := sweep.unreusable(out, spec):
        _log(stale)
    if args.dry_run:
        from icl_race.run.signals import exit_on_signals

        say = (lambda line: None) if args.quiet else (lambda line: _log(f"dry run: {line}"))
        how = (
            f"projected for one {args.device.upper()} at its measured rate, nothing measured"
            if args.device
            else "not measured"
            if args.no_measure
            else "each program measured on this machine (or read from an earlier measurement)"
        )
        say(f"{len(spec.cells)} cells of {args.sweep} in {out}: their state on disk, {how}")
        # At once: a dry run writes nothing but the costs it measured, each whole (run/cost.py).
        with exit_on_signals("the dry run (nothing is lost: it trains nothing, and a cost measured is kept whole)"):
            # Its text line by line as it is made (a large grid's rows as its cells are planned); JSON at the end.
            show = (lambda line: None) if args.json else (lambda line: print(line, flush=True))
            plan = sweep.dry_run(
                out, spec, not args.no_measure, args.executor, args.remeasure, args.device, say=say, show=show
            )
        if args.json:
            print(json.dumps(dataclasses.asdict(plan), indent=2))
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
    from icl_race.report.summary import dir_warnings  # scipy: after the sweep, not before its first line

    for w in dir_warnings(out):
        _log(w)
    return 0


def _design(args: argparse.Namespace, design, out) -> int:
    """A sweep file with a [design]: its rounds in this process (each depends on the last), or its projection."""
    from icl_race.report.warnings import budget
    from icl_race.rundir import SWEEP_NAMES, refuse_links

    if args.executor != "local":
        raise config.ConfigError(
            f"--executor {args.executor}: a design runs its rounds in this process (each round is chosen from the "
            "last one's outcomes); use --executor local"
        )
    refuse_links(out, SWEEP_NAMES)
    if short := budget(design.cfg):
        _log(short)
    if not args.quiet:  # before jax's import (seconds): what the design does next
        _log(f"{out}: design checked; loading jax, then " + ("its projection" if args.dry_run else "its rounds"))
    from icl_race.run.sweep.design_cost import design_dry_run
    from icl_race.run.sweep.design_run import run_design

    if args.dry_run:
        plan = design_dry_run(out, design, not args.no_measure, args.remeasure, args.device, log=_log)
        print(json.dumps(dataclasses.asdict(plan), indent=2) if args.json else plan.text())
        return 0
    print(run_design(out, design, _log, not args.quiet, force=args.force, redo=args.redo))
    from icl_race.report.summary import dir_warnings

    for w in dir_warnings(out):
        _log(w)
    return 0


def bench(args: argparse.Namespace) -> int:
    from icl_race.run.bench import main

    return main(args)


# ---- the commands' arguments (the `arguments` of cli.py's table) ----------------------------------------


def _overrides_arg(p: argparse.ArgumentParser, help: str) -> None:
    """--set SECTION.KEY=VALUE, repeatable, into args.overrides (config.apply_overrides' list): the one way
    run, demo, sweep and bench change a config; only the help differs, by what each changes."""
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE", help=help)


def run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="TOML file with sections [task], [model], [train], [ensemble]")
    p.add_argument(
        "--out",
        required=True,
        help="run directory (created; an existing run of the same config is skipped, of another config refused)",
    )
    p.add_argument("--seeds", type=positive_int, help="override ensemble.seeds")
    _overrides_arg(p, "override one config value (repeatable), e.g. --set task.K=20000")
    flag(p, "--quiet", "no progress bar")
    json_arg(p, "the summary as JSON (docs/report-json.md)")
    flag(
        p,
        "--redo",
        "train again a finished run whose results file is damaged (the damaged files are "
        "moved aside; intact results are never redone)",
    )
    p.add_argument(
        "--tensorboard",
        metavar="DIR",
        help="log the ensemble's curves per evaluation to TensorBoard event files in DIR (extra [tracking])",
    )
    p.add_argument(
        "--wandb", metavar="PROJECT", help="log the same curves to the Weights & Biases project (extra [tracking])"
    )


def demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="runs/demo", help="run directory (default: runs/demo)")
    p.add_argument("--seeds", type=positive_int, help="override ensemble.seeds")
    _overrides_arg(p, "override one config value of the preset (repeatable), e.g. --set train.steps=400")
    json_arg(p, "the summary as JSON (docs/report-json.md)")
    p.set_defaults(quiet=False, redo=False, tensorboard=None, wandb=None)  # run's other options, as a demo takes them


def sweep_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "sweep",
        help='TOML with config sections (optionally base = "file.toml") and a [grid] of "section.key" = [values]',
    )
    p.add_argument("--out", required=True, help="sweep directory")
    _overrides_arg(p, "override a value in every cell (repeatable)")
    flag(
        p,
        "--dry-run",
        "list the cells, which are done, and the projected wall time; run nothing",
    )
    flag(
        p,
        "--no-measure",
        "with --dry-run: list the cells without measuring their programs (no projection; the "
        "measurement trains one block for two evaluation periods per program)",
    )
    flag(
        p,
        "--remeasure",
        "with --dry-run: measure the programs again rather than read the costs an earlier dry run or "
        "bench kept (costs.json beside the compile cache; none kept with ICL_RACE_COMPILE_CACHE=off)",
    )
    p.add_argument(
        "--device",
        choices=GPUS,
        help="with --dry-run: project one GPU's hours from its measured rate (H100: the H200's scaled by "
        "HBM bandwidth, an estimate) instead of measuring on this machine",
    )
    flag(
        p,
        "--json",
        "with --dry-run: print the cells and the projection as JSON (schema: docs/sweeps.md)",
    )
    flag(
        p,
        "--redo",
        "train again the cells whose results are damaged (moved aside first, never deleted)",
    )
    p.add_argument(
        "--executor",
        choices=("local", "slurm", "submitit-local"),
        default="local",
        help="local: cells one after another in this process (default); slurm: one job array "
        "through submitit; submitit-local: the same job array as local subprocesses",
    )
    p.add_argument("--partition", help="slurm partition")
    p.add_argument("--time", type=positive_int, default=24 * 60, help="slurm time limit per cell, minutes")
    p.add_argument("--gpus", type=int, default=1, help="GPUs per slurm job (default 1)")
    p.add_argument("--array-parallelism", type=positive_int, help="at most this many cells at once")
    p.add_argument(
        "--slurm",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="slurm: any sbatch option, repeatable: account=proj, qos=high, mem=32G (docs/gpu.md)",
    )
    flag(p, "--no-wait", "slurm: return after submitting")
    flag(p, "--quiet", "no progress bar")
    force_arg(p)


def bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "config",
        nargs="?",
        help="a TOML config: time its own program (evaluations included) and project its run's wall time; "
        "without it, the paper-shape benchmark of the training step",
    )
    p.add_argument("--seeds", help="without CONFIG: comma-separated ensemble sizes (default 1,8,64,256; on a CPU 1,8)")
    p.add_argument("--steps", type=positive_int, help="without CONFIG: timed steps per repeat (default 3)")
    p.add_argument("--repeats", type=positive_int, help="without CONFIG: timed repeats; the best is kept (default 3)")
    p.add_argument(
        "--block",
        type=positive_int,
        default=None,
        help="seeds per vmap, one block after another (default: without CONFIG all in one vmap, with CONFIG "
        "its ensemble.block; on a CPU 1 is fastest)",
    )
    _overrides_arg(p, "change the benchmarked config, e.g. --set task.K=100000")
    p.add_argument(
        "--remeasure",
        action="store_true",
        help="with CONFIG: measure again rather than read the cost kept by an earlier bench or dry run",
    )
    json_arg(p, "JSON instead of a table")
