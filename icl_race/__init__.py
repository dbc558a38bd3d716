"""icl-race: seed-ensemble simulator of the race between in-context and in-weights learning.

The notebook API: `train` an ensemble into a `Run` (in memory, or into a run directory), `load` a run or
sweep directory (a run still training as its partial results so far). A `Run` is the same object either
way: its arrays, `censored`, `km_median`, and every reader (`report.summary.run_summary`,
`report.export.tables`, `report.compare.compare`) takes it where they take a directory. Both are defined
in run/train_api.py and only re-exported here."""

from importlib import metadata

from icl_race.run.train_api import IN_MEMORY, load, train

__version__ = metadata.version("icl-race")
