"""`icl-race analyze STUDY SUBCOMMAND [DIR...]`: its --set options parsed (`parse_option`), the study's
subcommand run with its directories and options checked before any work and its JSON, markdown and figures
written as one (`run`), the result printed (`analyze`); and its arguments (`analyze_args`, in cli.py's table;
its help's list of subcommands: `registry.help_text`)."""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import sys
from pathlib import Path

from icl_race import rundir
from icl_race.analysis.draws import Draws
from icl_race.analysis.record import finite, record_json
from icl_race.config import ConfigError, check_bootstrap
from icl_race.report.arguments import boot_count, boot_seed, force_arg, json_arg
from icl_race.rundir import owner
from icl_race.studies.inputs import check_finished
from icl_race.studies.registry import DIRECTORIES, STUDIES, check_study, commands, options_of


def analyze(args: argparse.Namespace) -> int:
    options = dict(parse_option(o) for o in args.options)
    check_study(args.study)
    # the first line, before the study's module (its analysis: scipy, jax, seconds) and its input are read
    n = len(args.dirs)
    then = f"checking and reading its {n} director{'ies' if n > 1 else 'y'}" if n else "checking its options"
    _say(f"{args.study} {args.subcommand}: loading the study's analysis, then {then}")
    for line in rundir.skipped_cells(args.dirs):  # the cells load_runs leaves out, said
        _say(line)
    result, written = run(
        args.study,
        args.subcommand,
        args.dirs,
        args.out,
        args.boot,
        args.seed,
        options,
        force=args.force,
        partial=args.partial,
        say=_say,
    )
    said = as_text(args.study, args.subcommand, result)
    print(
        json.dumps(finite(record_json(result)), indent=1, allow_nan=False)
        if args.json
        else "\n".join([said, *map(str, written)])
    )
    return 0


def as_text(study: str, sub: str, result) -> str:
    """The result as text: its study's RENDER[sub] (an analysis record, which holds no text), else its text()."""
    render = getattr(importlib.import_module(f"icl_race.studies.{study}"), "RENDER", {}).get(sub)
    return render(result) if render else result.text()


def _say(line: str) -> None:
    print(f"icl-race analyze: {line}", file=sys.stderr)


def parse_option(text: str) -> tuple[str, object]:
    """`NAME=VALUE` of --set: VALUE a number, a string, or a comma-separated list of them."""
    name, eq, value = text.partition("=")
    if not eq or not name.strip():
        raise ConfigError(f"--set {text!r}: expected NAME=VALUE")
    items = [_scalar(v.strip()) for v in value.split(",")]
    return name.strip().replace("-", "_"), items if "," in value else items[0]


def _scalar(v: str):
    for kind in (int, float):
        try:
            return kind(v)
        except ValueError:
            pass
    return v


def run(
    study: str,
    sub: str,
    dirs: list[str],
    out: Path | None,
    n_boot: int | None = None,
    seed: int | None = None,
    options: dict | None = None,
    force: bool = False,
    partial: bool = False,
    say=lambda line: None,
):
    """The analysis `study sub` of `dirs`, its JSON written to `out` (default: `default_out`), its
    markdown (MARKDOWN) and figures beside it, as one into a folder analyze owns (rundir/owner.py; no file
    it did not write replaced unless `force`); returns (result, paths written). The study function draws
    from `Draws(seed, n_boot)` (None: root 0, its default draws' count); one that takes no `draws`
    resamples nothing and refuses either. A run directory not finished is
    refused unless `partial` (studies/inputs.py's `check_finished`); with it, each such run is said (`say`)
    and recorded in the JSON."""
    module = importlib.import_module(f"icl_race.studies.{study}") if study in STUDIES else None
    table = commands(study)
    if sub not in table:
        raise ConfigError(f"analyze {study} {sub!r}: expected one of {', '.join(table)}")
    _check_dirs(study, sub, getattr(module, "DIRECTORIES", {}).get(sub, "some"), dirs)
    root = 0 if seed is None else seed  # --seed's default
    check_bootstrap(n_boot, root)
    params = inspect.signature(table[sub]).parameters
    if "draws" not in params and (n_boot is not None or seed is not None):
        raise ConfigError(f"analyze {study} {sub}: resamples nothing, so takes no --boot or --seed")
    takes = [name for name, _ in options_of(table[sub])]
    unknown = sorted(set(options or {}) - set(takes))
    if unknown:
        raise ConfigError(
            f"analyze {study} {sub}: no option {', '.join(unknown)} (--set takes {', '.join(takes) or 'none'})"
        )
    allowed = getattr(module, "OPTIONS", {})
    options = {name: allowed[name].value(name, v) for name, v in (options or {}).items()}
    if "draws" in params:
        default = params["draws"].default  # the study's own count of draws
        options |= {"draws": Draws(root, default.n_boot if n_boot is None else n_boot)}
    out = Path(out) if out else default_out(study, sub, dirs)
    if out.exists() and out.is_dir():
        raise ConfigError(f"--out {out}: is a directory; give a file name")
    md = out.with_name(f"{out.stem}.md") if sub in getattr(module, "MARKDOWN", ()) else None
    if md == out:
        raise ConfigError(f"--out {out}: its tables go to <stem>.md beside the JSON; give the JSON another name")
    names = [out.name, *([md.name] if md else [])]
    owner.check(out.parent, "analyze", names, force=force, what=f"--out {out}: its folder")  # before any work
    unfinished = check_finished(dirs, partial)
    for line in unfinished:
        say(line)
    result = table[sub](list(dirs), **options)
    record = {"study": study, "analysis": sub, "dirs": [str(d) for d in dirs], "result": record_json(result)}
    record |= {"partial": unfinished} if unfinished else {}
    files = {out.name: (json.dumps(finite(record), indent=1, allow_nan=False) + "\n").encode()}
    if md:
        files[md.name] = as_text(study, sub, result).encode()
    figures = getattr(module, "FIGURES", {}).get(sub)
    if figures:
        from icl_race.plots.common import png_bytes

        files |= {f"{out.stem}{suffix}.png": png_bytes(fig, dpi=110) for suffix, fig in figures(result).items()}
    written = [out.parent / n for n in owner.write_files(out.parent, "analyze", files, force=force)]
    return result, written


def default_out(study: str, sub: str, dirs) -> Path:
    """Where `analyze` writes without --out: beside its one input directory, in DIR/analyze/ (never under
    the working directory, which may be the source tree with its committed results); refused when there
    is not exactly one."""
    if len(dirs) != 1:
        what = "no input directory" if not dirs else f"{len(dirs)} input directories"
        raise ConfigError(f"analyze {study} {sub}: {what}, so no one folder to write beside; give --out FILE.json")
    return Path(dirs[0]) / "analyze" / f"{study}-{sub}.json"


def _check_dirs(study: str, sub: str, takes: str, dirs) -> None:
    """One line before any work: directories given to a subcommand that takes none, or none given to one
    that needs some (which would otherwise summarise nothing, or fail deep inside)."""
    if takes not in DIRECTORIES:
        raise ValueError(f"icl_race.studies.{study}.DIRECTORIES[{sub!r}] = {takes!r}: expected one of {DIRECTORIES}")
    if takes == "none" and dirs:
        raise ConfigError(f"analyze {study} {sub}: takes no directories (got {', '.join(map(str, dirs))})")
    if takes == "some" and not dirs:
        raise ConfigError(f"analyze {study} {sub}: give one or more run or sweep directories")


# ---- the commands' arguments (the `arguments` of cli.py's table) ----------------------------------------


def analyze_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("study", help=f"the study: {', '.join(STUDIES[:-1])} or {STUDIES[-1]}")
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
    p.add_argument(
        "--partial",
        action="store_true",
        help="analyse a run directory not finished (training, or stopped) as its results so far, said on stderr "
        "and recorded in the JSON (default: refused, naming its step)",
    )
    json_arg(p, "the JSON instead of the summary")
    p.add_argument(
        "--boot",
        type=boot_count,
        default=None,
        help="bootstrap replicates (default: the study's, 2000 for scale and linear_attention, 1000 for the others)",
    )
    p.add_argument("--seed", type=boot_seed, default=None, help="root of the bootstrap's generator (default 0)")
