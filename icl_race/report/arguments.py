"""The options that several commands share, as argparse types and builders: counts (`positive_int`), the
bootstrap's --boot and --seed within config.check_bootstrap's range, --json, --force and on/off flags. Each
command's own arguments live with its handler (run/commands.py, report/commands.py, studies/command.py);
cli.py's table puts them together."""

from __future__ import annotations

import argparse

from icl_race.config import BOOT_DEFAULT, BOOT_MAX, ConfigError, check_bootstrap


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def positive_int(text: str) -> int:
    if (value := _integer(text)) < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1")
    return value


def boot_count(text: str) -> int:
    """--boot of report, compare and analyze, within config.check_bootstrap's range."""
    value = _integer(text)
    _check_bootstrap(value, 0)
    return value


def boot_seed(text: str) -> int:
    """--seed of report, compare and analyze, within config.check_bootstrap's range."""
    value = _integer(text)
    _check_bootstrap(None, value)
    return value


def _check_bootstrap(n_boot: int | None, seed: int) -> None:
    try:
        check_bootstrap(n_boot, seed)
    except ConfigError as e:  # argparse prints "argument --boot: " before the rest of the line
        raise argparse.ArgumentTypeError(str(e).partition(": ")[2]) from None


def bootstrap_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--boot",
        type=boot_count,
        default=BOOT_DEFAULT,
        help=f"bootstrap replicates (default {BOOT_DEFAULT}, at most {BOOT_MAX:,})",
    )
    p.add_argument("--seed", type=boot_seed, default=0, help="root of the bootstrap's SeedSequence (default 0)")


def json_arg(p: argparse.ArgumentParser, what: str) -> None:
    """--json: print WHAT instead of the human-readable output (schemas: docs/report-json.md). sweep's
    --json, which only qualifies --dry-run, is its own."""
    flag(p, "--json", f"print {what}")


def flag(p: argparse.ArgumentParser, name: str, help: str) -> None:
    """An on/off option (argparse's store_true)."""
    p.add_argument(name, action="store_true", help=help)


def force_arg(p: argparse.ArgumentParser) -> None:
    """--force: the one way past rundir/owner.py's rule (a command writes only into its own folder and
    replaces only files it wrote), for every command that writes files but run."""
    flag(
        p,
        "--force",
        "write into a folder this command did not create, replacing the files it names there (never any other file)",
    )
