"""`icl-race` command line: run, demo, sweep, bench, report, hist, export, compare, analyze.

One table, COMMANDS, makes the parser (each row: name, help, description, an argument builder, the
handler); the handlers and their argument builders live with what they drive: run/commands.py (run, demo,
sweep, bench), report/commands.py (report, hist, export, compare), studies/command.py (analyze, whose help
lists the studies' registry); the options several share are report/arguments.py's. This module only
builds the parser, dispatches, and turns the known errors into one line and an exit code. Heavy imports (jax, matplotlib) happen inside the commands, so `--help` and
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

from icl_race.config import ConfigError
from icl_race.report import commands as report_commands
from icl_race.report.arguments import flag
from icl_race.run import commands as run_commands
from icl_race.run.runner import RunError
from icl_race.run.signals import Interrupted
from icl_race.studies import registry
from icl_race.studies.command import analyze, analyze_args


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
        arguments=run_commands.run_args,
        handler=run_commands.run,
    ),
    Command(
        "demo",
        help="the CPU-sized demo (experiments/demo.toml)",
        description="Run the CPU-sized preset experiments/demo.toml: a few minutes on "
        "2 cores, then print where its histogram is.",
        arguments=run_commands.demo_args,
        handler=run_commands.demo,
    ),
    Command(
        "sweep",
        help="run the grid of a sweep file, one run directory per cell",
        description="Run every cell of SWEEP.toml's [grid] (the Cartesian product of its "
        "lists) into DIR/cells/<config hash>/; finished cells are skipped, "
        "partial ones resumed; DIR/summary.csv has one row per cell.",
        arguments=run_commands.sweep_args,
        handler=run_commands.sweep,
    ),
    Command(
        "bench",
        help="seed-steps/s and projected wall time of a config (default: the paper configuration)",
        description="With CONFIG: time that config's own program, one block of its seeds "
        "through its evaluation cadence, and project its run's wall time for its seeds "
        "and budget. Without: compile seconds and steady-state seed-steps/s of training "
        "steps at N = 100, K = 10^4, batch 128 for several ensemble sizes.",
        arguments=run_commands.bench_args,
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
        arguments=report_commands.report_args,
        handler=report_commands.report,
    ),
    Command(
        "hist",
        help="terminal histogram of t_ICL and a summary line",
        description="Print a text histogram of t_ICL on log bins with the never-acquired "
        "count, and n seeds, acquired, KM median with CI and never-acquired "
        "fraction with CI (one summary line per cell for a sweep).",
        arguments=report_commands.hist_args,
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
        arguments=report_commands.export_args,
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
        arguments=analyze_args,
        handler=analyze,
        epilog=registry.help_text,
    ),
    Command(
        "compare",
        help="Kaplan-Meier comparison of two or more runs",
        description="Overlaid Kaplan-Meier curves with bands, each run's median against the "
        "first's (ratio with a seed-bootstrap CI), the log-rank test, outcome "
        "counts and the config fields that differ: OUT/compare.md, "
        "OUT/compare.json, OUT/figures/km.png|pdf.",
        arguments=report_commands.compare_args,
        handler=report_commands.compare,
    ),
)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="icl-race",
        description="Seed-ensemble simulator of the race between in-context "
        "and in-weights learning (arXiv 2412.00104, 2501.16265).",
    )
    flag(p, "--debug", "show the traceback of a failure (also ICL_RACE_DEBUG=1)")
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
        # One library's use of another's deprecated name (orbax 0.12.8 imports jax.sharding.SingleDeviceSharding)
        # is for their maintainers, not for the command's user; shown with --debug.
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"orbax\.")
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
