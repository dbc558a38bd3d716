"""`icl-race` command line: run, demo, sweep, bench, report, hist, export, compare, analyze.

One table, COMMANDS, makes the parser (each row: name, help, description, an argument builder, the
handler); the handlers live with what they drive: run/commands.py (run, demo, sweep, bench),
report/commands.py (report, hist, export, compare), studies/command.py (analyze, whose help lists the
studies' registry). This module only builds the parser, dispatches, and turns the known errors into one
line and an exit code. Heavy imports (jax, matplotlib) happen inside the commands, so `--help` and
input errors are instant.
Exit codes: 0 success; 2 bad input (a config field, a path, a damaged input file: one line on stderr
naming it, nothing written); 1 the environment failed (a full or read-only disk: one line naming the
path and the cause); 130 / 143 stopped by SIGINT / SIGTERM (resumable). Tracebacks are shown only
with --debug or ICL_RACE_DEBUG=1.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import os
import sys
import warnings
from collections.abc import Callable

from icl_race import studies
from icl_race.config import BOOT_MAX, ConfigError, check_bootstrap
from icl_race.report import commands as report_commands
from icl_race.report.export import FORMATS
from icl_race.run import commands as run_commands
from icl_race.run.cost import GPUS
from icl_race.run.runner import RunError
from icl_race.run.signals import Interrupted
from icl_race.studies.command import analyze


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1")
    return value


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def _boot(text: str) -> int:
    """--boot of report, compare and analyze, within config.check_bootstrap's range."""
    value = _integer(text)
    _check_bootstrap(value, 0)
    return value


def _seed(text: str) -> int:
    """--seed of report, compare and analyze, within config.check_bootstrap's range."""
    value = _integer(text)
    _check_bootstrap(None, value)
    return value


def _check_bootstrap(n_boot: int | None, seed: int) -> None:
    try:
        check_bootstrap(n_boot, seed)
    except ConfigError as e:  # argparse prints "argument --boot: " before the rest of the line
        raise argparse.ArgumentTypeError(str(e).partition(": ")[2]) from None


def _bootstrap_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--boot", type=_boot, default=2000, help=f"bootstrap replicates (default 2000, at most {BOOT_MAX:,})"
    )
    p.add_argument("--seed", type=_seed, default=0, help="root of the bootstrap's SeedSequence (default 0)")


def _overrides_arg(p: argparse.ArgumentParser, help: str) -> None:
    """--set SECTION.KEY=VALUE, repeatable, into args.overrides (config.apply_overrides' list): the one way
    run, demo, sweep and bench change a config; only the help differs, by what each changes."""
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE", help=help)


def _json_arg(p: argparse.ArgumentParser, what: str) -> None:
    """--json: print WHAT instead of the human-readable output (schemas: docs/report-json.md). sweep's
    --json, which only qualifies --dry-run, is its own."""
    _flag(p, "--json", f"print {what}")


def _flag(p: argparse.ArgumentParser, name: str, help: str) -> None:
    """An on/off option (argparse's store_true)."""
    p.add_argument(name, action="store_true", help=help)


def _force_arg(p: argparse.ArgumentParser) -> None:
    """--force: the one way past rundir/owner.py's rule (a command writes only into its own folder and
    replaces only files it wrote), for every command that writes files but run."""
    _flag(
        p,
        "--force",
        "write into a folder this command did not create, replacing the files it names there (never any other file)",
    )


def _dir_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="a run directory (results.npz) or a sweep directory (cells/)")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, like every other input error
        self.exit(2, f"{self.prog}: error: {message}\n")

    make_epilog: Callable[[], str] | None = None

    def format_help(self) -> str:
        # A generated epilog (analyze's list of the studies' subcommands) is made only when the help is
        # shown: it imports every study module, which running a command must not pay for.
        if self.make_epilog is not None:
            self.epilog, self.make_epilog = self.make_epilog(), None
        return super().format_help()


# Each command's arguments (the table's `arguments`), in the order of COMMANDS.


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="TOML file with sections [task], [model], [train], [ensemble]")
    p.add_argument(
        "--out",
        required=True,
        help="run directory (created; an existing run of the same config is skipped, of another config refused)",
    )
    p.add_argument("--seeds", type=_positive_int, help="override ensemble.seeds")
    _overrides_arg(p, "override one config value (repeatable), e.g. --set task.K=20000")
    _flag(p, "--quiet", "no progress bar")
    _json_arg(p, "the summary as JSON (docs/report-json.md)")
    _flag(
        p,
        "--redo",
        "train again a finished run whose results file is damaged (the damaged files are "
        "moved aside; intact results are never redone)",
    )


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="runs/demo", help="run directory (default: runs/demo)")
    p.add_argument("--seeds", type=_positive_int, help="override ensemble.seeds")
    _overrides_arg(p, "override one config value of the preset (repeatable), e.g. --set train.steps=400")
    _json_arg(p, "the summary as JSON (docs/report-json.md)")


def _sweep_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "sweep",
        help='TOML with config sections (optionally base = "file.toml") and a [grid] of "section.key" = [values]',
    )
    p.add_argument("--out", required=True, help="sweep directory")
    _overrides_arg(p, "override a value in every cell (repeatable)")
    _flag(
        p,
        "--dry-run",
        "list the cells, which are done, and the projected wall time; run nothing",
    )
    _flag(
        p,
        "--no-measure",
        "with --dry-run: list the cells without measuring their programs (no projection; the "
        "measurement trains one block for two evaluation periods per program)",
    )
    _flag(
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
    _flag(
        p,
        "--json",
        "with --dry-run: print the cells and the projection as JSON (schema: docs/sweeps.md)",
    )
    _flag(
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
    p.add_argument("--time", type=_positive_int, default=24 * 60, help="slurm time limit per cell, minutes")
    p.add_argument("--gpus", type=int, default=1, help="GPUs per slurm job (default 1)")
    p.add_argument("--array-parallelism", type=_positive_int, help="at most this many cells at once")
    p.add_argument(
        "--slurm",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="slurm: any sbatch option, repeatable: account=proj, qos=high, mem=32G (docs/gpu.md)",
    )
    _flag(p, "--no-wait", "slurm: return after submitting")
    _flag(p, "--quiet", "no progress bar")
    _force_arg(p)


def _bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "config",
        nargs="?",
        help="a TOML config: time its own program (evaluations included) and project its run's wall time; "
        "without it, the paper-shape benchmark of the training step",
    )
    p.add_argument("--seeds", help="without CONFIG: comma-separated ensemble sizes (default 1,8,64,256)")
    p.add_argument("--steps", type=_positive_int, help="without CONFIG: timed steps per repeat (default 3)")
    p.add_argument("--repeats", type=_positive_int, help="without CONFIG: timed repeats; the best is kept (default 3)")
    p.add_argument(
        "--block",
        type=_positive_int,
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
    _json_arg(p, "JSON instead of a table")


def _report_args(p: argparse.ArgumentParser) -> None:
    _dir_arg(p)
    _bootstrap_args(p)
    _json_arg(p, "report.json (docs/report-json.md) instead of where the files are")
    _force_arg(p)


def _hist_args(p: argparse.ArgumentParser) -> None:
    _dir_arg(p)
    _json_arg(p, "the bins and statistics as JSON (docs/report-json.md)")
    p.add_argument("--bins", type=_positive_int, default=12, help="histogram bins (default 12)")


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("dirs", nargs="+", metavar="DIR", help="run directories or sweep directories (finished cells)")
    p.add_argument(
        "--format",
        choices=tuple(FORMATS),
        default="csv",
        help="csv (default), parquet or netcdf (the Dataset itself; HDF5 through h5netcdf)",
    )
    p.add_argument("--out", required=True, help="directory for seeds.<ext> and curves.<ext> (created)")
    p.add_argument(
        "--censored",
        choices=("nan", "-1"),
        default="nan",
        help="a time not reached as NaN (default; with the boolean columns acquired and censored_<event>) "
        "or as results.npz's -1",
    )
    _force_arg(p)


def _analyze_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("study", help=f"the study: {', '.join(studies.STUDIES[:-1])} or {studies.STUDIES[-1]}")
    p.add_argument("subcommand", help="the study's analysis, e.g. lr")
    p.add_argument(
        "dirs",
        nargs="*",
        metavar="DIR",
        help="run directories or sweep directories (finished cells), as the subcommand takes",
    )
    p.add_argument(
        "--set",
        dest="options",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an option of the subcommand (below): a number, a string or a comma-separated list",
    )
    p.add_argument(
        "--out",
        help="JSON file to write (default: DIR/analyze/<study>-<subcommand>.json beside the one input "
        "directory; required otherwise)",
    )
    _force_arg(p)
    _json_arg(p, "the JSON instead of the summary")
    p.add_argument(
        "--boot",
        type=_boot,
        default=None,
        help="bootstrap replicates (default: the study's, 2000 for scale and linear_attention, 1000 for the others)",
    )
    p.add_argument("--seed", type=_seed, default=0, help="root of the bootstrap's generator (default 0)")


def _compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "dirs",
        nargs="+",
        metavar="DIR",
        help="two or more run directories (a sweep's cells/<name> too); the first is the reference",
    )
    p.add_argument("--out", required=True, help="directory for the comparison (created)")
    p.add_argument("--event", help="the event whose time is compared (default: the first run's headline, e.g. icl)")
    p.add_argument(
        "--label",
        action="append",
        metavar="NAME",
        help="a run's name in the text, tables and figure, once per DIR in their order (default: the folder names)",
    )
    _bootstrap_args(p)
    _force_arg(p)


@dataclasses.dataclass(frozen=True)
class Command:
    name: str
    help: str  # its line in `icl-race --help`
    description: str  # the first paragraph of `icl-race NAME --help`
    arguments: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace], int]  # the parsed arguments -> the exit code
    epilog: Callable[[], str] | None = None  # preformatted text after the options, made when shown


COMMANDS = (
    Command(
        "run",
        help="train one ensemble from a TOML config",
        description="Train every seed of CONFIG in one jitted, vmapped pass and write "
        "results.npz, meta.json and t_icl_hist.png to --out.",
        arguments=_run_args,
        handler=run_commands.run,
    ),
    Command(
        "demo",
        help="the CPU-sized demo (experiments/demo.toml)",
        description="Run the CPU-sized preset experiments/demo.toml: a few minutes on "
        "2 cores, then print where its histogram is.",
        arguments=_demo_args,
        handler=run_commands.demo,
    ),
    Command(
        "sweep",
        help="run the grid of a sweep file, one run directory per cell",
        description="Run every cell of SWEEP.toml's [grid] (the Cartesian product of its "
        "lists) into DIR/cells/<config hash>/; finished cells are skipped, "
        "partial ones resumed; DIR/summary.csv has one row per cell.",
        arguments=_sweep_args,
        handler=run_commands.sweep,
    ),
    Command(
        "bench",
        help="seed-steps/s and projected wall time of a config (default: the paper configuration)",
        description="With CONFIG: time that config's own program, one block of its seeds "
        "through its evaluation cadence, and project its run's wall time for its seeds "
        "and budget. Without: compile seconds and steady-state seed-steps/s of training "
        "steps at N = 100, K = 10^4, batch 128 for several ensemble sizes.",
        arguments=_bench_args,
        handler=run_commands.bench,
    ),
    Command(
        "report",
        help="statistics report of a run or sweep directory",
        description="Write DIR/report.md, DIR/report.json and DIR/figures/*.png|pdf: "
        "t_ICL distribution with censored seeds (Kaplan-Meier), tail fits, "
        "every seed's outcome, bimodality; for a sweep also K*(N), t_ICL vs N "
        "and balanced vs standard contexts, each with CIs and beside the "
        "paper's values.",
        arguments=_report_args,
        handler=report_commands.report,
    ),
    Command(
        "hist",
        help="terminal histogram of t_ICL and a summary line",
        description="Print a text histogram of t_ICL on log bins with the never-acquired "
        "count, and n seeds, acquired, KM median with CI and never-acquired "
        "fraction with CI (one summary line per cell for a sweep).",
        arguments=_hist_args,
        handler=report_commands.hist,
    ),
    Command(
        "export",
        help="per-seed table and curves of runs or sweeps, for notebooks",
        description="Write OUT/seeds.<ext> (one row per seed: the config fields that vary "
        "across the runs, seed id, acquired, every event time (NaN when not reached) "
        "with its censoring, outcome class, beta0, final values) and "
        "OUT/curves.<ext> (every probe per evaluation over run, seed and step; "
        "probes with axes of their own in netCDF only), with each run's provenance "
        "as file metadata (CSV: OUT/provenance.json). Needs the optional extra: "
        "pip install 'icl-race[export]'.",
        arguments=_export_args,
        handler=report_commands.export,
    ),
    Command(
        "analyze",
        help="a study's analysis of run or sweep directories (or of its own seeds)",
        description="Run the analysis SUBCOMMAND of STUDY (icl_race/studies/<study>.py) on "
        "run or sweep directories (none for a subcommand that trains its own "
        "seeds or samples its own data): print its summary and write its JSON to "
        "--out (default DIR/analyze/<study>-<subcommand>.json beside its one input "
        "directory), its tables (markdown) or figures (PNG) beside it.",
        arguments=_analyze_args,
        handler=analyze,
        epilog=studies.help_text,
    ),
    Command(
        "compare",
        help="Kaplan-Meier comparison of two or more runs",
        description="Overlaid Kaplan-Meier curves with bands, each run's median against the "
        "first's (ratio with a seed-bootstrap CI), the log-rank test, outcome "
        "counts and the config fields that differ: OUT/compare.md, "
        "OUT/compare.json, OUT/figures/km.png|pdf.",
        arguments=_compare_args,
        handler=report_commands.compare,
    ),
)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="icl-race",
        description="Seed-ensemble simulator of the race between in-context "
        "and in-weights learning (arXiv 2412.00104, 2501.16265).",
    )
    _flag(p, "--debug", "show the traceback of a failure (also ICL_RACE_DEBUG=1)")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for c in COMMANDS:
        command = sub.add_parser(c.name, help=c.help, description=c.description)
        if c.epilog is not None:  # preformatted: its own line breaks kept
            command.formatter_class, command.make_epilog = argparse.RawDescriptionHelpFormatter, c.epilog
        c.arguments(command)
        command.set_defaults(handler=c.handler)
    return p


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """A warning (JAX's, numpy's...) as one line on stderr, like every other message of the command;
    Python's own format adds the source line, and JAX's texts run over several (--debug keeps them)."""
    text = " ".join(str(message).split())
    return f"icl-race: warning: {category.__name__}: {text if len(text) <= 300 else text[:300] + '...'}\n"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    debug = args.debug or os.environ.get("ICL_RACE_DEBUG", "") not in ("", "0")
    if not debug:
        # Shown by ourselves, not only formatted: a library that routed warnings to logging
        # (logging.captureWarnings, as absl does) would print them in its own, multi-line format.
        warnings.formatwarning = _one_line_warning
        warnings.showwarning = lambda message, category, *_, **__: print(
            _one_line_warning(message, category, "", 0), end="", file=sys.stderr
        )
    try:
        return args.handler(args)
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
        return 2 if e.errno in BAD_PATH else 1


# The errors that say a path given is wrong (bad input, exit 2), not that the environment failed: a
# path through a file, a name over the file system's limit, a file where a directory goes (or the
# reverse), a loop of links.
BAD_PATH = {errno.ENOTDIR, errno.ENAMETOOLONG, errno.EISDIR, errno.EEXIST, errno.ELOOP}


if __name__ == "__main__":
    sys.exit(main())
