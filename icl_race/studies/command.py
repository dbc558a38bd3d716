"""`icl-race analyze STUDY SUBCOMMAND [DIR...]` and its arguments (`analyze_args`, in cli.py's table; its
help's list of subcommands: `studies.help_text`, from the studies' registry)."""

from __future__ import annotations

import argparse
import json
import sys

from icl_race import rundir, studies
from icl_race.report.arguments import boot_count, boot_seed, force_arg, json_arg


def analyze(args: argparse.Namespace) -> int:
    options = dict(studies.parse_option(o) for o in args.options)
    for line in rundir.skipped_cells(args.dirs):  # the cells load_runs leaves out, said
        print(f"icl-race analyze: {line}", file=sys.stderr)
    result, written = studies.run(
        args.study, args.subcommand, args.dirs, args.out, args.boot, args.seed, options, force=args.force
    )
    print(
        json.dumps(studies.payload(result), indent=1) if args.json else "\n".join([result.text(), *map(str, written)])
    )
    return 0


# ---- the commands' arguments (the `arguments` of cli.py's table) ----------------------------------------


def analyze_args(p: argparse.ArgumentParser) -> None:
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
    force_arg(p)
    json_arg(p, "the JSON instead of the summary")
    p.add_argument(
        "--boot",
        type=boot_count,
        default=None,
        help="bootstrap replicates (default: the study's, 2000 for scale and linear_attention, 1000 for the others)",
    )
    p.add_argument("--seed", type=boot_seed, default=0, help="root of the bootstrap's generator (default 0)")
