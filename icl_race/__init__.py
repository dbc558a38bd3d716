"""icl-race: seed-ensemble simulator of the race between in-context and in-weights learning."""

__version__ = "0.1.0"


def load(d):
    """A run directory as an `icl_race.rundir.Run`, a sweep directory as an `icl_race.rundir.SweepDir`
    (its cells with their swept values and, when finished, their runs)."""
    from icl_race import rundir

    return rundir.load(d)
