"""`icl-race analyze STUDY SUBCOMMAND [DIR...]` (its arguments: cli.py's table; its help's list of
subcommands: `studies.help_text`, from the studies' registry)."""

from __future__ import annotations

import argparse
import json
import sys

from icl_race import rundir, studies


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
