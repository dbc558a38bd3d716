"""icl-race: seed-ensemble simulator of the race between in-context and in-weights learning."""

__version__ = "0.1.0"
