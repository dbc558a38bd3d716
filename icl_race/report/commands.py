"""The commands that read finished runs and write text, `icl-race report`, `hist`, `export` and `compare`,
and their arguments (`*_args`, in cli.py's table). Each takes the parsed arguments and returns the exit
code."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from icl_race.config import ConfigError
from icl_race.report.arguments import bootstrap_args, force_arg, json_arg, positive_int
from icl_race.report.export import FORMATS


def out_dir(text: str) -> Path:
    """--out of a command that writes a directory: refused when it exists and is not one (run, demo,
    sweep, export, compare), before any work."""
    out = Path(text)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory; choose a directory")
    return out


def plural(n: int, word: str) -> str:
    """ "1 run", "2 runs"."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def report(args: argparse.Namespace) -> int:
    from icl_race.report.directory import write_report

    warn = lambda line: print(line, file=sys.stderr)  # the warnings of the reading the files are of
    written = write_report(args.dir, n_boot=args.boot, seed=args.seed, force=args.force, say=_say("report"), warn=warn)
    if args.json:
        print((Path(args.dir) / "report.json").read_text(), end="")
        return 0
    n_fig = sum(f.endswith(".png") for f in written)
    print(
        f"{Path(args.dir) / 'report.md'} (and report.json; {n_fig} figures as PNG and PDF in "
        f"{Path(args.dir) / 'figures'})"
    )
    return 0


def _say(command: str) -> Callable[[str], None]:
    """What a command does, said on stderr as `COMMAND: LINE` once its input is checked (its statistics,
    scipy's and matplotlib's imports included, take seconds)."""
    return lambda line: print(f"{command}: {line}", file=sys.stderr, flush=True)


def hist(args: argparse.Namespace) -> int:
    if args.json:
        from icl_race.report.directory import hist_json

        print(json.dumps(hist_json(args.dir, bins=args.bins, say=_say("hist")), indent=1, allow_nan=False))
        return 0
    from icl_race.report.directory import hist_text

    print(hist_text(args.dir, bins=args.bins, say=_say("hist")))
    return 0


def export(args: argparse.Namespace) -> int:
    from icl_race.report.export import export

    out = out_dir(args.out)
    done = export(args.dirs, args.format, out, force=args.force, censored=args.censored, say=_say("export"))
    for why in done.skipped:
        print(f"icl-race: skipped {why}", file=sys.stderr)
    for d in done.repeated:
        print(f"icl-race: {d} given more than once; exported once", file=sys.stderr)
    for note in done.partial:  # the files' metadata says the same (export.py's provenance)
        print(f"icl-race: {note}", file=sys.stderr)
    if done.netcdf_only:
        print(
            f"icl-race: curves with axes of their own are in netCDF only (--format netcdf): {', '.join(done.netcdf_only)}",
            file=sys.stderr,
        )
    print(f"{', '.join(str(out / f) for f in done.files)} ({plural(done.runs, 'run')}, {plural(done.seeds, 'seed')})")
    return 0


def compare(args: argparse.Namespace) -> int:
    from icl_race.report.compare_input import NAMES, read
    from icl_race.rundir import owner

    out = out_dir(args.out)
    owner.check(out, "compare", NAMES, force=args.force)  # before any work; `write` checks again
    named, runs, event = read(args.dirs, args.event, args.label)
    _say("compare")(
        f"read {plural(len(runs), 'run')}; their {event} times compared ({args.boot:,} bootstrap replicates)"
    )
    from icl_race.analysis.draws import Draws
    from icl_race.report.compare import of_runs, summary, write  # scipy, matplotlib: after the first line

    c = of_runs(named, runs, event, Draws(args.seed, args.boot))
    written = write(c, out, force=args.force)
    print(f"{summary(c)}\n{out / written[0]} (and {', '.join(written[1:])})")
    return 0


# ---- the commands' arguments (the `arguments` of cli.py's table) ----------------------------------------


def _dir_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="a run directory (results.npz) or a sweep directory (cells/)")


def report_args(p: argparse.ArgumentParser) -> None:
    _dir_arg(p)
    bootstrap_args(p)
    json_arg(p, "report.json (docs/report-json.md) instead of where the files are")
    force_arg(p)


def hist_args(p: argparse.ArgumentParser) -> None:
    _dir_arg(p)
    json_arg(p, "the bins and statistics as JSON (docs/report-json.md)")
    p.add_argument("--bins", type=positive_int, default=12, help="histogram bins (default 12)")


def export_args(p: argparse.ArgumentParser) -> None:
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
    force_arg(p)


def compare_args(p: argparse.ArgumentParser) -> None:
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
    bootstrap_args(p)
    force_arg(p)
