"""The commands' refusals as the tests check them: one line on stderr, exit 2, nothing written."""

from icl_race.cli import main


def one_line_exit_2(argv: list[str], out, capsys, *words: str) -> str:
    """Runs `icl-race ARGV`; asserts the refusal (naming every one of `words`) and that `out` was not
    created; returns the line."""
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's refusals (icl_race.cli._Parser.error: one line, exit 2)
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and all(w in err for w in words), err
    assert not out.exists(), "a refused command must write nothing"
    return err
