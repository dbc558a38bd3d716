"""`icl-race analyze STUDY SUBCOMMAND [DIR...]`: each study's analyses of run directories, one command.

A study module (`icl_race/studies/<study>.py`) is glue only: it reads run or sweep directories
(`icl_race.rundir.runset`), or trains the seeds a test needs itself (`icl_race.run.retrain`, a system's integrator),
hands their arrays to pure functions in `icl_race.analysis` / `icl_race.theory`, and returns their typed
result, which has a `text()` (markdown) and is a dataclass (its JSON). The
command writes the JSON to `experiments/<study>/results/<subcommand>.json` (or --out) and prints the text.

    COMMANDS = {"lr": lr}          # in the study module: subcommand -> fn(dirs, n_boot, seed, **options) -> result
    FIGURES = {"lr": figures}      # optional: subcommand -> fn(result) -> {suffix: matplotlib figure}
    DIRECTORIES = {"ceiling": "none", "kstar": "any"}   # optional: what a subcommand takes besides
                                   # the default, one or more directories ("some"); "none": it computes
                                   # everything itself (a Monte Carlo, its own training)
    MARKDOWN = ("single_head",)    # optional: subcommands whose text() is also written, as <out stem>.md

A subcommand's own options come from `--set NAME=VALUE` (`options`): a number, a string, or a comma-
separated list of them, checked against the module's OPTIONS before any work, passed to its function
as keyword arguments.

    OPTIONS = {"level": inputs.FRACTION}   # every option of its subcommands: what it may be (studies/inputs.py)
 A result field whose metadata says
{"json": False} (e.g. the points behind a figure) stays out of the JSON. Figures are written as PNG
next to the JSON: <out stem><suffix>.png.

`icl-race analyze --help` lists every registered subcommand (`help_text`): what it takes (DIRECTORIES),
its options with their defaults (the function's keyword-only parameters), what it writes besides the
JSON (FIGURES, MARKDOWN), read from the modules where `HELP` does not say it for people.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import textwrap
from pathlib import Path

import numpy as np

from icl_race import rundir
from icl_race.config import ConfigError, check_bootstrap
from icl_race.rundir import owner

STUDIES = ("scale", "race", "memorization", "levers", "linear_attention")
DIRECTORIES = ("some", "any", "none")


def commands(study: str) -> dict:
    if study not in STUDIES:
        raise ConfigError(f"study {study!r}: expected one of {', '.join(STUDIES)}")
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
    options = "; ".join(f"{name}={_shown(default)}" for name, default in _options(fn))
    writes = [w for w, table in (("PNG", "FIGURES"), (".md", "MARKDOWN")) if sub in getattr(module, table, ())]
    text = doc + (f" ({options})" if options else "") + "".join(f"; + {w}" for w in writes)
    return "\n".join(textwrap.wrap(text, 78))


def _options(fn) -> list[tuple[str, object]]:
    """A subcommand's --set options: its keyword-only parameters but the bootstrap's (--boot, --seed)."""
    return [
        (name, p.default)
        for name, p in inspect.signature(fn).parameters.items()
        if p.kind == p.KEYWORD_ONLY and name not in ("n_boot", "seed")
    ]


def _shown(default) -> str:
    """An option's default as --set would take it: nothing for none, a list comma-separated."""
    if default is None:
        return ""
    if isinstance(default, (list, tuple)):
        return ",".join(map(_shown, default))
    return f"{default:g}" if isinstance(default, float) else str(default)


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


def payload(result) -> dict:
    """The result as JSON-ready values: its fields but those marked {"json": False}."""
    return {f.name: _plain(getattr(result, f.name)) for f in dataclasses.fields(result) if f.metadata.get("json", True)}


def _plain(v):
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return _plain(v.tolist())
    if isinstance(v, np.generic):
        return v.item()
    return v


def run(
    study: str,
    sub: str,
    dirs: list[str],
    out: Path | None,
    n_boot: int | None = None,
    seed: int = 0,
    options: dict | None = None,
    force: bool = False,
):
    """The analysis `study sub` of `dirs`, its JSON written to `out` (default: `default_out`), its
    markdown (MARKDOWN) and figures beside it, as one into a folder analyze owns (rundir/owner.py; no file
    it did not write replaced unless `force`); returns (result, paths written). n_boot None: the study
    function's own default."""
    module = importlib.import_module(f"icl_race.studies.{study}") if study in STUDIES else None
    table = commands(study)
    if sub not in table:
        raise ConfigError(f"analyze {study} {sub!r}: expected one of {', '.join(table)}")
    _check_dirs(study, sub, getattr(module, "DIRECTORIES", {}).get(sub, "some"), dirs)
    check_bootstrap(n_boot, seed)
    takes = [n for n, p in inspect.signature(table[sub]).parameters.items() if p.kind == p.KEYWORD_ONLY]
    unknown = sorted(set(options or {}) - set(takes))
    if unknown:
        raise ConfigError(
            f"analyze {study} {sub}: no option {', '.join(unknown)} (--set takes "
            f"{', '.join(n for n in takes if n not in ('n_boot', 'seed')) or 'none'})"
        )
    allowed = getattr(module, "OPTIONS", {})
    options = {name: allowed[name].value(name, v) for name, v in (options or {}).items()}
    kwargs = options | {"seed": seed} | ({} if n_boot is None else {"n_boot": n_boot})
    out = Path(out) if out else default_out(study, sub, dirs)
    if out.exists() and out.is_dir():
        raise ConfigError(f"--out {out}: is a directory; give a file name")
    md = out.with_name(f"{out.stem}.md") if sub in getattr(module, "MARKDOWN", ()) else None
    if md == out:
        raise ConfigError(f"--out {out}: its tables go to <stem>.md beside the JSON; give the JSON another name")
    names = [out.name, *([md.name] if md else [])]
    owner.check(out.parent, "analyze", names, force=force, what=f"--out {out}: its folder")  # before any work
    result = table[sub](list(dirs), **kwargs)
    record = {"study": study, "analysis": sub, "dirs": [str(d) for d in dirs], "result": payload(result)}
    files = {out.name: (json.dumps(record, indent=1) + "\n").encode()}
    if md:
        files[md.name] = result.text().encode()
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
