"""The memorization and minimal-model sweeps (experiments/memorization/): reads sweep directories for
`icl_race.analysis.memorization_summary`, whose typed records are its results (the race's beside a measured K*).

  mlp DIR            --set T=2000,20000      I_K(T) at those steps (default: the shortest run's end)
  minimal DIR...
  race MLP_DIR KINF_DIR... --set T=2000 [--set kstar=REPORT_JSON]
                     K*(N) predicted from the MLP-only I_K(T) and the K = infinity t_ICL(N) (one run per
                     N, from one or more run or sweep directories), next to the
                     measured K*(N) of an `icl-race report` (its "finite K" threshold table) when given.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from icl_race.analysis.draws import Draws
from icl_race.analysis.memorization_summary import (
    KStarPrediction,
    MeasuredKStar,
    Memorization,
    Minimal,
    measured_k_star,
    summarize_memorization,
    summarize_minimal,
    summarize_race,
)
from icl_race.analysis.text import value_ci
from icl_race.config import ConfigError
from icl_race.studies.inputs import TEXT, Option, need_evaluated, runs_of

MINIMAL = ("classification/minimal",)
MLP = ("memorization",)  # the task.kind of the MLP-only runs


@dataclass(frozen=True)
class RaceKStar:
    """K*(N) predicted by summarize_race, beside the measured K*(N) of a report where one was given."""

    predicted: KStarPrediction
    measured: MeasuredKStar | None = None

    def text(self) -> str:
        p = self.predicted
        measured = {m.N: m for m in (self.measured.per_N if self.measured else [])}
        lines = [f"I_K({p.T:g}) = C K^nu over K {', '.join(f'{k:,}' for k in p.K or [])}: nu {p.nu:.3f}, C {p.C:.3g}"]
        for row in p.per_N:
            m, k = measured.get(row.N), row.t_icl_K or "inf"
            lines.append(
                f"N {row.N}: K = {k if k == 'inf' else f'{k:,}'} median t_ICL "
                f"{value_ci(row.median_t_icl, row.median_t_icl_ci)} "
                f"-> predicted K* {value_ci(row.k_star, row.k_star_ci)}"
                + (f", measured {value_ci(m.k_star, m.k_star_ci)}" if m else "")
            )
        slopes = (("predicted", p.k_star_slope.to_json()), ("measured", self.measured and self.measured.k_star_slope))
        for name, s in slopes:
            if s and s.get("ok"):
                lines.append(
                    f"slope of log K* on log N, {name}: {value_ci(s['slope'], s.get('slope_ci'), '{:.2f}')} "
                    f"({s['n_points']} values of N)"
                )
        return "\n".join(lines)


# ---- the subcommands ------------------------------------------------------------------------------


def _floats(v) -> list[float] | None:
    return None if v is None else [float(x) for x in (v if isinstance(v, list) else [v])]


def mlp(dirs, *, T=None, n_boot: int = 1000, seed: int = 0) -> Memorization:
    if len(dirs) != 1:
        raise ConfigError("analyze memorization mlp: give one sweep directory")
    runs = runs_of("memorization mlp", dirs, MLP)
    need_evaluated("memorization mlp", runs, "T", _floats(T) or [])
    return summarize_memorization(runs, Draws(seed, n_boot), _floats(T))


def minimal(dirs, *, n_boot: int = 1000, seed: int = 0) -> Minimal:
    return summarize_minimal(runs_of("memorization minimal", dirs, MINIMAL), Draws(seed, n_boot))


def race(dirs, *, T=None, kstar: str | None = None, n_boot: int = 1000, seed: int = 0) -> RaceKStar:
    if len(dirs) < 2 or T is None:
        raise ConfigError("analyze memorization race: give MLP_DIR KINF_DIR... and --set T=STEPS (the race's budget)")
    mlp, kinf = runs_of("memorization race", dirs[:1], MLP), runs_of("memorization race", dirs[1:])
    Ts = _floats(T) or []  # T is given (checked above): `or []` only says so to the type checker
    need_evaluated("memorization race", mlp, "T", Ts)
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
            measured = measured_k_star(json.loads(path.read_text()))
        except ValueError as e:
            raise ConfigError(f"--set kstar={kstar}: {e}") from None
    return RaceKStar(summarize_race(mlp, kinf, Ts[0], Draws(seed, n_boot)), measured)


OPTIONS = {"T": Option(float, 0, above=True, many=True), "kstar": TEXT}
COMMANDS = {"mlp": mlp, "minimal": minimal, "race": race}
