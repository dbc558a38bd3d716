"""The reference pages cannot drift from the code: docs/config.md names every key of every system's config
(a system's own [task] or [model] keys in the section of its kind) and no key that no system has;
docs/commands.md names every option of every command (cli.COMMANDS) in that command's section, and no
option the command does not take, there or in its synopsis line."""

import argparse
import dataclasses
import re
from pathlib import Path

import pytest

from icl_race import config, systems
from icl_race.cli import COMMANDS, _parser

DOCS = Path(__file__).parents[1] / "docs"
GLOBAL = {"--help", "--debug"}  # `icl-race --help`, `icl-race --debug COMMAND`


def sections(text: str) -> dict[str, str]:
    """A page's `## ` sections by heading; "" holds what comes before the first."""
    parts = re.split(r"^## (.*)$", text, flags=re.M)
    return {"": parts[0], **dict(zip(parts[1::2], parts[2::2]))}


def keys_in(text: str) -> set[str]:
    """Every `section.key` a page names in code (a backticked span that starts with it)."""
    return {f"{s}.{k}" for s, k in re.findall(r"`(task|model|train|ensemble)\.(\w+)", text)}


def options_in(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[a-z][\w-]*", text))


CONFIG_MD = sections((DOCS / "config.md").read_text())


def _where_documented(system, section: str) -> str:
    """The text where a system's [task] or [model] keys belong: the page's main table for the default
    system's own section classes (the classification task and its transformer), else the sections whose
    heading names one of the system's kinds."""
    if getattr(system, section) is getattr(systems.SYSTEMS[0], section):
        return CONFIG_MD[""]
    kinds = (system.task_kind, *system.model_kinds)
    found = [body for head, body in CONFIG_MD.items() if any(f'"{k}"' in head for k in kinds)]
    assert found, f"docs/config.md has no section whose heading names {' or '.join(kinds)}"
    return "\n".join(found)


@pytest.mark.parametrize("system", systems.SYSTEMS, ids=lambda s: f"{s.task_kind}-{s.model_kinds[0]}")
def test_docs_config_md_names_every_key_of_each_system_in_its_section(system):
    missing = []
    for section in ("task", "model"):
        text = keys_in(_where_documented(system, section))
        fields = [f.name for f in dataclasses.fields(getattr(system, section)) if f.name != "kind"]
        missing += [f"{section}.{f}" for f in fields if f"{section}.{f}" not in text]
    assert not missing, f"docs/config.md lacks {', '.join(missing)}"


def test_docs_config_md_names_every_train_and_ensemble_key_and_no_key_that_does_not_exist():
    main = keys_in(CONFIG_MD[""])
    shared = {f"{s}.{n}" for s in ("train", "ensemble") for n in config.field_names(s)}
    assert not shared - main, f"docs/config.md's table lacks {', '.join(sorted(shared - main))}"
    every = {f"{s}.{n}" for s in config.SECTIONS for n in config.field_names(s)}
    named = keys_in((DOCS / "config.md").read_text())
    assert not named - every, f"docs/config.md names keys no system has: {', '.join(sorted(named - every))}"


def _options(name: str) -> set[str]:
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {o for a in sub.choices[name]._actions for o in a.option_strings if o.startswith("--")} - {"--help"}


COMMANDS_MD = (DOCS / "commands.md").read_text()


@pytest.mark.parametrize("name", [c.name for c in COMMANDS])
def test_docs_commands_md_gives_each_command_a_section_with_exactly_its_options(name):
    body = sections(COMMANDS_MD).get(f"`icl-race {name}`")
    assert body is not None, f"docs/commands.md has no section ## `icl-race {name}`"
    options, named = _options(name), options_in(body)
    assert not options - named, f"icl-race {name}: docs/commands.md lacks {', '.join(sorted(options - named))}"
    assert not named - options - GLOBAL, f"icl-race {name} has no {', '.join(sorted(named - options - GLOBAL))}"
    synopsis = [line.split("  #")[0] for line in COMMANDS_MD.splitlines() if line.startswith(f"icl-race {name} ")]
    assert synopsis, f"docs/commands.md's synopsis has no line for icl-race {name}"
    stray = options_in("\n".join(synopsis)) - options - GLOBAL
    assert not stray, f"the synopsis of icl-race {name} names {', '.join(sorted(stray))}, which it does not take"


def test_the_checks_see_a_missing_key_and_a_stray_option():
    """The parsers of the pages find what they look for: a key and an option only in code spans or as
    options, not inside longer words."""
    assert keys_in("| `train.lr`, `train.batch_size` | prose about train.steps and `icl_race/engine/ensemble.py`") == {
        "train.lr",
        "train.batch_size",
    }
    assert options_in("`--seeds S`, --no-measure, not a--b nor x-y; --x-y") == {"--seeds", "--no-measure", "--x-y"}
    assert _options("hist") == {"--bins", "--json"}
