"""The events a system records on the device and the analyses read back, named and bounded once (numpy and
scipy free: a system's program imports this, and a run's first line should not wait for scipy).

- `level_event(v)`: ICL accuracy passing v, recorded as t_icl60 for 0.6 (analysis/regime.py's rise).
- `LEVEL`, `LASTING`: the lasting fall, LASTING evaluations in a row with ICL accuracy below LEVEL after
  t_ICL (analysis/outcome.py's classes; train.retire_at_fall's "fell" event).
"""

LEVEL = 0.9
LASTING = 10


def level_event(level: float) -> str:
    """The event of ICL accuracy passing `level`: icl60 for 0.6 (its time is results' t_icl60)."""
    return f"icl{round(100 * level):02d}"
