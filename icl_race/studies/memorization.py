"""The memorization and minimal-model sweeps (experiments/memorization/): reads sweep directories for
`icl_race.analysis.memorization`.

  mlp DIR            --set T=2000,20000      I_K(T) at those steps (default: the shortest run's end)
  minimal DIR...
  race MLP_DIR KINF_DIR... --set T=2000 [--set kstar=REPORT_JSON]
                     K*(N) predicted from the MLP-only I_K(T) and the K = infinity t_ICL(N) (one run per
                     N, from one or more run or sweep directories), next to the
                     measured K*(N) of an `icl-race report` (its "finite K" threshold table) when given.
"""

from __future__ import annotations

import json
from pathlib import Path

from icl_race.analysis import memorization as mem
from icl_race.config import ConfigError
from icl_race.studies.inputs import TEXT, Option, need_evaluated, runs_of

MINIMAL = ("classification/minimal",)
MLP = ("memorization",)  # the task.kind of the MLP-only runs


def _floats(v) -> list[float] | None:
    return None if v is None else [float(x) for x in (v if isinstance(v, list) else [v])]


def mlp(dirs, *, T=None, n_boot: int = 1000, seed: int = 0) -> mem.Memorization:
    if len(dirs) != 1:
        raise ConfigError("analyze memorization mlp: give one sweep directory")
    runs = runs_of("memorization mlp", dirs, MLP)
    need_evaluated("memorization mlp", runs, "T", _floats(T) or [])
    return mem.memorization(runs, _floats(T), n_boot=n_boot, seed=seed)


def minimal(dirs, *, n_boot: int = 1000, seed: int = 0) -> mem.Minimal:
    return mem.minimal(runs_of("memorization minimal", dirs, MINIMAL), n_boot, seed=seed)


def race(dirs, *, T=None, kstar: str | None = None, n_boot: int = 1000, seed: int = 0) -> mem.RaceKStar:
    if len(dirs) < 2 or T is None:
        raise ConfigError("analyze memorization race: give MLP_DIR KINF_DIR... and --set T=STEPS (the race's budget)")
    mlp, kinf = runs_of("memorization race", dirs[:1], MLP), runs_of("memorization race", dirs[1:])
    need_evaluated("memorization race", mlp, "T", _floats(T) or [])
    Ns = [r.cfg.task.N for r in kinf]
    if len(set(Ns)) < len(Ns):
        raise ConfigError(
            f"analyze memorization race: the K = infinity runs in {', '.join(map(str, dirs[1:]))} "
            f"repeat an N ({sorted(Ns)}): give one run per N (e.g. a sweep's cell directory)"
        )
    measured = None
    if kstar:
        path = Path(kstar)
        if not path.is_file():
            raise ConfigError(f"--set kstar={kstar}: no such file")
        try:
            measured = mem.measured_k_star(json.loads(path.read_text()))
        except ValueError as e:
            raise ConfigError(f"--set kstar={kstar}: {e}") from None
    return mem.race(mlp, kinf, _floats(T)[0], measured, n_boot, seed=seed)


OPTIONS = {"T": Option(float, 0, above=True, many=True), "kstar": TEXT}
COMMANDS = {"mlp": mlp, "minimal": minimal, "race": race}
