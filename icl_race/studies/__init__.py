"""`icl-race analyze STUDY SUBCOMMAND [DIR...]`: each study's analyses of run directories, one command.

A study module (`icl_race/studies/<study>.py`) is glue only: it reads run or sweep directories
(`icl_race.rundir.runset`), or trains the seeds a test needs itself (`icl_race.run.retrain`, a system's integrator),
hands their arrays to pure functions in `icl_race.analysis` / `icl_race.theory`, and returns their typed
result: an analysis record (no text: analysis/ formats none), which the module renders (RENDER, with
`icl_race.report.format`'s numbers and CIs), or a dataclass of its own or of theory/ with a `text()`. The
command writes the JSON to `experiments/<study>/results/<subcommand>.json` (or --out) and prints the text.

    COMMANDS = {"lr": lr}          # in the study module: subcommand -> fn(dirs, *, draws, **options) -> result
    FIGURES = {"lr": figures}      # optional: subcommand -> fn(result) -> {suffix: matplotlib figure}
    RENDER = {"lr": lr_text}       # optional: subcommand -> fn(result) -> its text, in place of result.text()
    DIRECTORIES = {"ceiling": "none", "kstar": "any"}   # optional: what a subcommand takes besides
                                   # the default, one or more directories ("some"); "none": it computes
                                   # everything itself (a Monte Carlo, its own training)
    MARKDOWN = ("single_head",)    # optional: subcommands whose text is also written, as <out stem>.md

A subcommand's own options come from `--set NAME=VALUE` (`options`): a number, a string, or a comma-
separated list of them, checked against the module's OPTIONS before any work, passed to its function
as keyword arguments.

    OPTIONS = {"level": inputs.FRACTION}   # every option of its subcommands: what it may be (studies/inputs.py)
 A result field whose metadata says
{"json": False} (e.g. the points behind a figure) stays out of the JSON. Figures are written as PNG
next to the JSON: <out stem><suffix>.png.

`icl-race analyze --help` lists every registered subcommand (`registry.help_text`): what it takes
(DIRECTORIES), its options with their defaults (the function's keyword-only parameters), what it writes
besides the JSON (FIGURES, MARKDOWN), read from the modules where `HELP` does not say it for people.

    studies/registry.py  the studies (STUDIES), their subcommands, the help made from them
    studies/command.py   the command: --set parsed, a subcommand run and its files written (`run`)
    studies/inputs.py    the options and runs a subcommand takes, checked before any work
"""
