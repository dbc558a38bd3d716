"""Statistics reports of a run or sweep directory, and the `hist` terminal view.

    write_report(DIR)  ->  DIR/report.md, DIR/report.json, DIR/figures/<name>.png and .pdf (`report --json`
                           then prints report.json)
    hist_text(DIR)     ->  a text histogram of the headline time with the censored count, and a summary line
    hist_json(DIR)     ->  the same as data (`hist --json`)

The JSON of both is described in docs/report-json.md. A report's bootstraps draw from one
`SeedSequence` (--seed), each section from its own named child (`draws.Draws`).

Each system's report is the module its registration names (`icl_race.systems`: classification for the
race and the minimal model, regression for linear attention; memorization has none and says so),
composed from the statistics in `icl_race.analysis` and the figures in `icl_race.plots`; `format` and
`paper` are shared. The directories are read through `icl_race.rundir`. Imports no jax.

The three entries are report/directory.py's, also here as `icl_race.report.NAME`.
"""

from icl_race.report.directory import hist_json, hist_text, write_report
