"""The studies' registry: which studies there are (`STUDIES`, one module each), their subcommands
(`commands`), what a subcommand may take (`DIRECTORIES`), and the `icl-race analyze --help` list made from
it (`help_text`, with `HELP`'s entries as written for people). What a study module declares: the package's
docstring (icl_race/studies/__init__.py)."""

from __future__ import annotations

import importlib
import inspect
import textwrap

from icl_race.config import ConfigError

STUDIES = ("scale", "race", "memorization", "levers", "linear_attention", "design")
DIRECTORIES = ("some", "any", "none")


def check_study(study: str) -> None:
    """A study of the registry, before its module (its analysis' imports) is loaded."""
    if study not in STUDIES:
        raise ConfigError(f"study {study!r}: expected one of {', '.join(STUDIES)}")


def commands(study: str) -> dict:
    check_study(study)
    return importlib.import_module(f"icl_race.studies.{study}").COMMANDS


# Each subcommand's entry in the help as written for people: (what it takes, None for the word of its
# DIRECTORIES; what it computes, its --set options and what it writes besides the JSON, "\n" where the
# line breaks). The list itself is the registry's (help_text): a subcommand without an entry here is
# listed all the same, its entry made from its module, and test_cli checks that every entry is a
# registered subcommand and that the help names every option of every subcommand.
HELP: dict[str, tuple[str | None, str]] = {
    "scale lr": (None, "the lr rescaling and the bridge lr of one width"),
    "scale kinf": (None, "t_ICL(N) at K = infinity per width and lr over the abrupt N; + PNG"),
    "race transience": ("DIR", "ICL's rise and fall per weight decay (level=0.9); + PNG"),
    "race loss": (None, "L_ICL vs -1/2 log L_IWL per cell (min_x=0.5); + PNG per cell"),
    "race independence": ("MEM T_ICL MLP...", "one sub-circuit frozen at init (level=0.9); + PNG"),
    "race settle": (None, "train.settle_iwl's bet, on runs trained without it (level=0.9)"),
    "memorization mlp": ("DIR", "tail fits, I_K(T), nu (T=STEPS[,STEPS...])"),
    "memorization minimal": (None, "minimal model: t_ICL against N sqrt(2 pi) e^-beta0"),
    "memorization race": ("MLP KINF...", "predicted K*(N), one K = inf run per N (T=STEPS; kstar=REPORT_JSON)"),
    "levers beta0": (None, "ln t_ICL against beta0"),
    "levers pair": ("DIR OTHER", "Spearman of t_ICL over the same seeds"),
    "levers race": (
        "KINF...",
        "K* each lever value predicts (field=, values=, mlp=DIR,DIR...;\nN=32, T=10000, t_fixed=)",
    ),
    "levers transience": (None, "rise and fall per optimizer and L2 (level=0.9, lasting=10)"),
    "levers kstar": (None, "measured K* per lever value (field=; counts=PRIOR_JSON, N=32)"),
    "levers ceiling": (None, "copy-rule accuracy under item noise (epsilon=0,0.5,1; D=63,\nN=32, sequences=20000)"),
    "levers collapse": ("DIR", "one seed retrained, its network read (seed_id=0, at=3000,...,30000)"),
    "linear_attention single_head": (
        None,
        "the single-active-head test, its own seeds by gradient flow (seeds=20,\n"
        "scales=1e-2,1e-3, checks=1, horizon=1e9); + .md; 3-5 min",
    ),
    "design replay": (
        None,
        "the K* design replayed on finished K* grids' seeds, per DIR and N (replays=200,\n"
        "half_width=0.05, seeds_per_round=16, max_seeds=480); + .md",
    ),
    "design slope": (
        None,
        "K*(N) from K* designs' and grids' folders and intervals given=N:K:LO:HI[:LABEL],...\n"
        "(runs no longer on disk), and the slope of log10 K* on log10 N; + .md",
    ),
    "design shared": (
        None,
        "fixed K* grids whose K share their seeds: what their intervals cover, beside independent\n"
        "cells (replays=500, slopes=15,8, per_k=16); + .md",
    ),
    "design versus": (
        "GRID DESIGN [FRESH...]",
        "a K* grid beside a K* design on one config: K*, interval, seed-steps (name=);\n"
        "fresh seeds' counts against each arm's prediction",
    ),
    "design synthetic": (
        None,
        "the K* design and the median rule replayed on known truths (replays=500,\n"
        "slopes=15,8, totals=160,240,480, targets=0.1,0.075,0.05, rel_width=0.25); + .md",
    ),
}
TAKES = {"some": "DIR...", "any": "[DIR...]", "none": ""}  # DIRECTORIES' words as the help shows them


def help_text() -> str:
    """The epilog of `icl-race analyze --help`: one entry per subcommand of every study's COMMANDS, in
    their order, so that the help cannot miss one. Imports every study module: called only when the help
    is shown."""
    lines = ["studies, subcommands, directories and --set options:"]
    for study in STUDIES:
        module = importlib.import_module(f"icl_race.studies.{study}")
        for sub, fn in module.COMMANDS.items():
            takes, said = HELP.get(f"{study} {sub}") or (None, _made(module, sub, fn))
            if takes is None:
                takes = TAKES[getattr(module, "DIRECTORIES", {}).get(sub, "some")]
            head = f"  {study} {sub}{f' {takes}' if takes else ''}"
            first, *rest = said.split("\n")
            lines += [f"{head:<40}{first}" if len(head) < 40 else f"{head}\n{'':<40}{first}"]
            lines += [f"{'':<40}{line}" for line in rest]
    lines.append(
        "e.g. icl-race analyze levers kstar runs/levers/epsilon --set field=task.epsilon \\\n"
        "         --set counts=experiments/levers/results/kstar_epsilon.json --out experiments/levers/results/kstar_epsilon.json"
    )
    return "\n".join(lines) + "\n"


def _made(module, sub: str, fn) -> str:
    """The entry of a subcommand that HELP does not describe, from its module: its docstring's first
    sentence, its options with their defaults, what it writes besides the JSON."""
    doc = " ".join((inspect.getdoc(fn) or fn.__name__).split()).split(". ")[0].rstrip(".")
    options = "; ".join(f"{name}={_shown(default)}" for name, default in options_of(fn))
    writes = [w for w, table in (("PNG", "FIGURES"), (".md", "MARKDOWN")) if sub in getattr(module, table, ())]
    text = doc + (f" ({options})" if options else "") + "".join(f"; + {w}" for w in writes)
    return "\n".join(textwrap.wrap(text, 78))


def options_of(fn) -> list[tuple[str, object]]:
    """A subcommand's --set options: its keyword-only parameters but its draws (--boot, --seed)."""
    return [
        (name, p.default)
        for name, p in inspect.signature(fn).parameters.items()
        if p.kind == p.KEYWORD_ONLY and name != "draws"
    ]


def _shown(default) -> str:
    """An option's default as --set would take it: nothing for none, a list comma-separated."""
    if default is None:
        return ""
    if isinstance(default, (list, tuple)):
        return ",".join(map(_shown, default))
    return f"{default:g}" if isinstance(default, float) else str(default)
