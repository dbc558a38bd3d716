"""Memorization runs (task.kind = "memorization") have no t_ICL: their kinetics are summarised by
`experiments/memorization/analyze.py` (icl_race.analysis.memorization), so the report refuses them in one line."""

from pathlib import Path

from icl_race.config import ConfigError


def refuse(d: Path) -> None:
    raise ConfigError(f"{d}: memorization runs have no t_ICL report; summarise them with "
                      "`python experiments/memorization/analyze.py mlp DIR`")
