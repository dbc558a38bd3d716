"""Registered compositions of task + model + objective + probes, selected by `task.kind`."""

from icl_race.config import Config
from icl_race.systems.classification import ClassificationRace

SYSTEMS = {"classification": ClassificationRace}


def build(cfg: Config):
    """(program, consts) for a validated config."""
    return SYSTEMS[cfg.task.kind].from_config(cfg)
