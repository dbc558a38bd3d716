"""`icl-race` command line: run, demo, sweep, bench, report, hist, export, compare, analyze.

Heavy imports (jax, matplotlib) happen inside the commands, so `--help` and input errors are instant.
Exit codes: 0 success; 2 bad input (a config field, a path, a damaged input file: one line on stderr
naming it, nothing written); 1 the environment failed (a full or read-only disk: one line naming the
path and the cause); 130 / 143 stopped by SIGINT / SIGTERM (resumable). Tracebacks are shown only
with --debug or ICL_RACE_DEBUG=1.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from importlib import resources
from pathlib import Path

from icl_race import config
from icl_race.config import ConfigError
from icl_race.report.export import FORMATS
from icl_race.run.runner import RunError
from icl_race.run.signals import Interrupted


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1")
    return value


def _bootstrap_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--boot", type=_positive_int, default=2000, help="bootstrap replicates (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="root of the bootstrap's SeedSequence (default 0)")


def _overrides_arg(p: argparse.ArgumentParser, help: str) -> None:
    """--set SECTION.KEY=VALUE, repeatable, into args.overrides (config.apply_overrides' list): the one way
    run, demo, sweep and bench change a config; only the help differs, by what each changes."""
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE", help=help)


def _json_arg(p: argparse.ArgumentParser, what: str) -> None:
    """--json: print WHAT instead of the human-readable output (schemas: docs/report-json.md). sweep's
    --json, which only qualifies --dry-run, is its own."""
    p.add_argument("--json", action="store_true", help=f"print {what}")


def _dir_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="a run directory (results.npz) or a sweep directory (cells/)")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, like every other input error
        self.exit(2, f"{self.prog}: error: {message}\n")


ANALYZE_EPILOG = """studies, subcommands, directories and --set options:
  scale lr DIR...                       the lr rescaling and the bridge lr of one width
  scale kinf DIR...                     t_ICL(N) at K = infinity per width and lr over the abrupt N; + PNG
  race transience DIR                   ICL's rise and fall per weight decay (level=0.9); + PNG
  race loss DIR...                      L_ICL vs -1/2 log L_IWL per cell (min_x=0.5); + PNG per cell
  race independence MEM T_ICL MLP...    one sub-circuit frozen at init (level=0.9); + PNG
  race settle DIR...                    train.settle_iwl's bet, on runs trained without it (level=0.9)
  memorization mlp DIR                  tail fits, I_K(T), nu (T=STEPS[,STEPS...])
  memorization minimal DIR...           minimal model: t_ICL against N sqrt(2 pi) e^-beta0
  memorization race MLP KINF...         predicted K*(N), one K = inf run per N (T=STEPS; kstar=REPORT_JSON)
  levers beta0 DIR...                   ln t_ICL against beta0
  levers pair DIR OTHER                 Spearman of t_ICL over the same seeds
  levers race KINF...                   K* each lever value predicts (field=, values=, mlp=DIR,DIR...;
                                        N=32, T=10000, t_fixed=)
  levers transience DIR...              rise and fall per optimizer and L2 (level=0.9, lasting=10)
  levers kstar [DIR...]                 measured K* per lever value (field=; counts=PRIOR_JSON, N=32)
  levers ceiling                        copy-rule accuracy under item noise (epsilon=0,0.5,1; D=63,
                                        N=32, sequences=20000)
  levers collapse DIR                   one seed retrained, its network read (seed_id=0, at=3000,...,30000)
  linear_attention single_head          the single-active-head test, its own seeds by gradient flow (seeds=20,
                                        scales=1e-2,1e-3, checks=1, horizon=1e9); + .md; 3-5 min
e.g. icl-race analyze levers kstar runs/levers/epsilon --set field=task.epsilon \\
         --set counts=experiments/levers/results/kstar_epsilon.json --out experiments/levers/results/kstar_epsilon.json
"""


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="icl-race",
        description="Seed-ensemble simulator of the race between in-context "
        "and in-weights learning (arXiv 2412.00104, 2501.16265).",
    )
    p.add_argument("--debug", action="store_true", help="show the traceback of a failure (also ICL_RACE_DEBUG=1)")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser(
        "run",
        help="train one ensemble from a TOML config",
        description="Train every seed of CONFIG in one jitted, vmapped pass and write "
        "results.npz, meta.json and t_icl_hist.png to --out.",
    )
    run.add_argument("config", help="TOML file with sections [task], [model], [train], [ensemble]")
    run.add_argument(
        "--out",
        required=True,
        help="run directory (created; an existing run of the same config is skipped, of another config refused)",
    )
    run.add_argument("--seeds", type=_positive_int, help="override ensemble.seeds")
    _overrides_arg(run, "override one config value (repeatable), e.g. --set task.K=20000")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    _json_arg(run, "the summary as JSON (docs/report-json.md)")
    run.add_argument(
        "--redo",
        action="store_true",
        help="train again a finished run whose results file is damaged (the damaged files are "
        "moved aside; intact results are never redone)",
    )

    demo = sub.add_parser(
        "demo",
        help="the CPU-sized demo (experiments/demo.toml)",
        description="Run the CPU-sized preset experiments/demo.toml: a few minutes on "
        "2 cores, then print where its histogram is.",
    )
    demo.add_argument("--out", default="runs/demo", help="run directory (default: runs/demo)")
    demo.add_argument("--seeds", type=_positive_int, help="override ensemble.seeds")
    _overrides_arg(demo, "override one config value of the preset (repeatable), e.g. --set train.steps=400")
    _json_arg(demo, "the summary as JSON (docs/report-json.md)")

    sweep = sub.add_parser(
        "sweep",
        help="run the grid of a sweep file, one run directory per cell",
        description="Run every cell of SWEEP.toml's [grid] (the Cartesian product of its "
        "lists) into DIR/cells/<config hash>/; finished cells are skipped, "
        "partial ones resumed; DIR/summary.csv has one row per cell.",
    )
    sweep.add_argument(
        "sweep",
        help='TOML with config sections (optionally base = "file.toml") and a [grid] of "section.key" = [values]',
    )
    sweep.add_argument("--out", required=True, help="sweep directory")
    _overrides_arg(sweep, "override a value in every cell (repeatable)")
    sweep.add_argument(
        "--dry-run",
        action="store_true",
        help="list the cells, which are done, and the projected wall time; run nothing",
    )
    sweep.add_argument(
        "--no-measure",
        action="store_true",
        help="with --dry-run: list the cells without measuring their programs (no projection; the "
        "measurement trains one block for two evaluation periods per program)",
    )
    sweep.add_argument(
        "--json",
        action="store_true",
        help="with --dry-run: print the cells and the projection as JSON (schema: README, Outputs)",
    )
    sweep.add_argument(
        "--executor",
        choices=("local", "slurm", "submitit-local"),
        default="local",
        help="local: cells one after another in this process (default); slurm: one job array "
        "through submitit; submitit-local: the same job array as local subprocesses",
    )
    sweep.add_argument("--partition", help="slurm partition")
    sweep.add_argument("--time", type=_positive_int, default=24 * 60, help="slurm time limit per cell, minutes")
    sweep.add_argument("--gpus", type=int, default=1, help="GPUs per slurm job (default 1)")
    sweep.add_argument("--array-parallelism", type=_positive_int, help="at most this many cells at once")
    sweep.add_argument("--no-wait", action="store_true", help="slurm: return after submitting")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")

    bench = sub.add_parser(
        "bench",
        help="seed-steps/s of the ensemble at the paper configuration",
        description="Compile seconds and steady-state seed-steps/s of training steps "
        "at N = 100, K = 10^4, batch 128 for several ensemble sizes.",
    )
    bench.add_argument("--seeds", default="1,8,64,256", help="comma-separated ensemble sizes (default 1,8,64,256)")
    bench.add_argument("--steps", type=_positive_int, default=3, help="timed steps per repeat (default 3)")
    bench.add_argument("--repeats", type=_positive_int, default=3, help="timed repeats; the best is kept")
    bench.add_argument(
        "--block",
        type=_positive_int,
        default=None,
        help="seeds per vmap, one block after another (default: all in one vmap; on a CPU 1 is fastest)",
    )
    _overrides_arg(bench, "change the benchmarked config, e.g. --set task.K=100000")
    _json_arg(bench, "JSON instead of a table")

    report = sub.add_parser(
        "report",
        help="statistics report of a run or sweep directory",
        description="Write DIR/report.md, DIR/report.json and DIR/figures/*.png|pdf: "
        "t_ICL distribution with censored seeds (Kaplan-Meier), tail fits, "
        "every seed's outcome, bimodality; for a sweep also K*(N), t_ICL vs N "
        "and balanced vs standard contexts, each with CIs and beside the "
        "paper's values.",
    )
    _dir_arg(report)
    _bootstrap_args(report)
    _json_arg(report, "report.json (docs/report-json.md) instead of where the files are")

    hist = sub.add_parser(
        "hist",
        help="terminal histogram of t_ICL and a summary line",
        description="Print a text histogram of t_ICL on log bins with the never-acquired "
        "count, and n seeds, acquired, KM median with CI and never-acquired "
        "fraction with CI (one summary line per cell for a sweep).",
    )
    _dir_arg(hist)
    _json_arg(hist, "the bins and statistics as JSON (docs/report-json.md)")
    hist.add_argument("--bins", type=_positive_int, default=12, help="histogram bins (default 12)")

    export = sub.add_parser(
        "export",
        help="per-seed table and curves of runs or sweeps, for notebooks",
        description="Write OUT/seeds.<ext> (one row per seed: the values that tell the runs "
        "apart, seed id, every event time with its censoring, outcome class, "
        "final values) and OUT/curves.<ext> (every probe per evaluation as an "
        "xarray Dataset over run, seed and step). Needs the optional extra: "
        "pip install 'icl-race[export]'.",
    )
    export.add_argument("dirs", nargs="+", metavar="DIR", help="run directories or sweep directories (finished cells)")
    export.add_argument(
        "--format",
        choices=tuple(FORMATS),
        default="csv",
        help="csv (default), parquet or netcdf (the Dataset itself; HDF5 through h5netcdf)",
    )
    export.add_argument("--out", required=True, help="directory for seeds.<ext> and curves.<ext> (created)")

    analyze = sub.add_parser(
        "analyze",
        help="a study's analysis of run or sweep directories (or of its own seeds)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the analysis SUBCOMMAND of STUDY (icl_race/studies/<study>.py) on "
        "run or sweep directories (none for a subcommand that trains its own "
        "seeds or samples its own data): print its summary and write its JSON to "
        "experiments/<study>/results/<subcommand>.json (or --out), its tables "
        "(markdown) or figures (PNG) beside it.",
        epilog=ANALYZE_EPILOG,
    )
    analyze.add_argument("study", help="the study: scale, race, memorization, levers or linear_attention")
    analyze.add_argument("subcommand", help="the study's analysis, e.g. lr")
    analyze.add_argument(
        "dirs",
        nargs="*",
        metavar="DIR",
        help="run directories or sweep directories (finished cells), as the subcommand takes",
    )
    analyze.add_argument(
        "--set",
        dest="options",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an option of the subcommand (below): a number, a string or a comma-separated list",
    )
    analyze.add_argument("--out", help="JSON file to write (default experiments/<study>/results/<subcommand>.json)")
    _json_arg(analyze, "the JSON instead of the summary")
    analyze.add_argument(
        "--boot",
        type=_positive_int,
        default=None,
        help="bootstrap replicates (default: the study's, 2000 for scale and linear_attention, 1000 for the others)",
    )
    analyze.add_argument("--seed", type=int, default=0, help="root of the bootstrap's generator (default 0)")

    compare = sub.add_parser(
        "compare",
        help="Kaplan-Meier comparison of two or more runs",
        description="Overlaid Kaplan-Meier curves with bands, each run's median against the "
        "first's (ratio with a seed-bootstrap CI), the log-rank test, outcome "
        "counts and the config fields that differ: OUT/compare.md, "
        "OUT/compare.json, OUT/figures/km.png|pdf.",
    )
    compare.add_argument(
        "dirs",
        nargs="+",
        metavar="DIR",
        help="two or more run directories (a sweep's cells/<name> too); the first is the reference",
    )
    compare.add_argument("--out", required=True, help="directory for the comparison (created)")
    compare.add_argument(
        "--event", help="the event whose time is compared (default: the first run's headline, e.g. icl)"
    )
    _bootstrap_args(compare)
    return p


def _out_dir(text: str) -> Path:
    out = Path(text)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory; choose a directory")
    return out


def _run(cfg_path, out: str, seeds, overrides, quiet: bool, redo: bool = False, as_json: bool = False) -> int:
    from icl_race.report.summary import run_summary
    from icl_race.run.runner import execute

    if seeds is not None:
        overrides = [*overrides, f"ensemble.seeds={seeds}"]
    cfg = config.load(cfg_path, overrides)
    execute(cfg, _out_dir(out), progress=not quiet, log=lambda m: print(m, file=sys.stderr), redo=redo)
    summary = run_summary(out)
    print(json.dumps(dataclasses.asdict(summary), indent=1) if as_json else summary.text())
    return 0


def _sweep(args) -> int:
    from icl_race.run import sweep

    spec = sweep.load(args.sweep, args.overrides)
    out = _out_dir(args.out)
    sweep.refuse_links(out, spec)
    if args.dry_run:
        plan = sweep.dry_run(out, spec, measure=not args.no_measure, executor=args.executor)
        print(json.dumps(dataclasses.asdict(plan), indent=2) if args.json else plan.text())
        return 0
    from icl_race.run.runner import check_memory

    for cell in spec.cells:  # every cell's size, before the first one starts
        if sweep.status(out, cell) != "done":
            try:
                check_memory(cell.cfg)
            except ConfigError as e:
                raise ConfigError(f"cell {', '.join(f'{k}={v}' for k, v in cell.values.items())}: {e}") from None
    log = lambda m: print(m, file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    sweep.store_spec(out, spec, log)
    if args.executor == "local":
        from icl_race.run.signals import stop_on_signals

        with stop_on_signals():  # a signal between two cells stops the sweep too
            sweep.run_local(out, spec, log=log, progress=not args.quiet)
    else:
        params = {
            "timeout_min": args.time,
            "slurm_partition": args.partition,
            "gpus_per_node": args.gpus,
            "slurm_array_parallelism": args.array_parallelism,
        }
        if args.executor == "submitit-local":
            params = {"timeout_min": args.time}
        sweep.run_submitit(
            out, spec, "slurm" if args.executor == "slurm" else "local", params, wait=not args.no_wait, log=log
        )
    print(sweep.write_summary(out, spec))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    debug = args.debug or os.environ.get("ICL_RACE_DEBUG", "") not in ("", "0")
    try:
        if args.command == "run":
            return _run(args.config, args.out, args.seeds, args.overrides, args.quiet, args.redo, args.json)
        if args.command == "demo":
            with resources.as_file(resources.files("icl_race") / "presets" / "demo.toml") as path:
                return _run(path, args.out, args.seeds, args.overrides, quiet=False, as_json=args.json)
        if args.command == "sweep":
            return _sweep(args)
        if args.command == "bench":
            from icl_race.run.bench import main as bench_main

            return bench_main(args)
        if args.command == "report":
            from icl_race.report import write_report

            written = write_report(args.dir, n_boot=args.boot, seed=args.seed)
            if args.json:
                print((Path(args.dir) / "report.json").read_text(), end="")
                return 0
            n_fig = sum(f.endswith(".png") for f in written)
            print(
                f"{Path(args.dir) / 'report.md'} (and report.json; {n_fig} figures as PNG and PDF in "
                f"{Path(args.dir) / 'figures'})"
            )
            return 0
        if args.command == "export":
            from icl_race.report.export import export

            out = _out_dir(args.out)
            done = export(args.dirs, args.format, out)
            for why in done.skipped:
                print(f"icl-race: skipped {why}", file=sys.stderr)
            print(f"{', '.join(str(out / f) for f in done.files)} ({done.runs} runs, {done.seeds} seeds)")
            return 0
        if args.command == "analyze":
            from icl_race import studies

            options = dict(studies.parse_option(o) for o in args.options)
            result, written = studies.run(
                args.study, args.subcommand, args.dirs, args.out, args.boot, args.seed, options
            )
            print(
                json.dumps(studies.payload(result), indent=1)
                if args.json
                else "\n".join([result.text(), *map(str, written)])
            )
            return 0
        if args.command == "compare":
            from icl_race.report.compare import compare, summary, write

            out = _out_dir(args.out)
            c = compare(args.dirs, event=args.event, n_boot=args.boot, seed=args.seed)
            written = write(c, out)
            print(f"{summary(c)}\n{out / written[0]} (and {', '.join(written[1:])})")
            return 0
        if args.command == "hist":
            if args.json:
                from icl_race.report import hist_json

                print(json.dumps(hist_json(args.dir, bins=args.bins), indent=1, allow_nan=False))
                return 0
            from icl_race.report import hist_text

            print(hist_text(args.dir, bins=args.bins))
            return 0
    except ConfigError as e:
        if debug:
            raise
        print(f"icl-race: error: {e}", file=sys.stderr)
        return 2
    except RunError as e:
        if debug:
            raise
        print(f"icl-race: error: {e}", file=sys.stderr)
        return 1
    except Interrupted as e:
        print(f"icl-race: {e}", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt:  # before a run installed its own handling (e.g. while importing jax)
        print("icl-race: interrupted", file=sys.stderr)
        return 130
    except OSError as e:  # outside a run's own handling: creating or locking a directory, reading a file
        if debug:
            raise
        print(f"icl-race: error: {f'{e.filename}: ' if e.filename else ''}{e.strerror or e}", file=sys.stderr)
        return 1
    return 1


if __name__ == "__main__":
    sys.exit(main())
