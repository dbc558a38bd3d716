"""The commands' refusals as the tests check them: one line on stderr, exit 2, nothing written. A command
whose checks need jax or its study's analysis says first what it loads (tests/test_first_line.py); a
refusal found after that is the one line that follows it (`refused`)."""

import re

from icl_race.cli import main

# The first line of run, demo, sweep and analyze, before their slow imports: it says what comes next (run's,
# in a process that has jax loaded already, names only its memory check).
SAYS = re.compile(r"[:;] loading (jax|the study's analysis), then |: config checked; checking that the ensemble fits")


def refused(err: str) -> list[str]:
    """stderr's lines, less a first line that says what the command loads before its checks."""
    lines = err.strip().splitlines()
    return lines[1:] if len(lines) > 1 and SAYS.search(lines[0]) else lines


def one_line_exit_2(argv: list[str], out, capsys, *words: str) -> str:
    """Runs `icl-race ARGV`; asserts the refusal (naming every one of `words`) and that `out` was not
    created; returns the line."""
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's refusals (icl_race.cli._Parser.error: one line, exit 2)
        rc = e.code
    assert rc == 2
    lines = refused(capsys.readouterr().err)
    assert len(lines) == 1 and all(w in lines[0] for w in words), lines
    assert not out.exists(), "a refused command must write nothing"
    return lines[0]
