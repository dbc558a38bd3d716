"""The memorization and minimal-model sweeps (experiments/memorization/): reads sweep directories for
`icl_race.analysis.memorization_summary`, whose typed records (the race's beside a measured K*) it renders.

  mlp DIR            --set T=2000,20000      I_K(T) at those steps (default: the shortest run's end)
  minimal DIR...
  race MLP_DIR KINF_DIR... --set T=2000 [--set kstar=REPORT_JSON]
                     K*(N) predicted from the MLP-only I_K(T) and the K = infinity t_ICL(N) (one run per
                     N, from one or more run or sweep directories), next to the measured K*(N) of an
                     `icl-race report` (its "finite K" threshold table) when given.
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
from icl_race.config import ConfigError
from icl_race.report.format import value_ci
from icl_race.studies.inputs import TEXT, Option, listed, need_evaluated, runs_of

MINIMAL = ("classification/minimal",)
MLP = ("memorization",)  # the task.kind of the MLP-only runs


@dataclass(frozen=True)
class RaceKStar:
    """K*(N) predicted by summarize_race, beside the measured K*(N) of a report where one was given."""

    predicted: KStarPrediction
    measured: MeasuredKStar | None = None


# ---- the subcommands ------------------------------------------------------------------------------


def mlp(dirs, *, T=None, draws: Draws = Draws(0, 1000)) -> Memorization:
    if len(dirs) != 1:
        raise ConfigError("analyze memorization mlp: give one sweep directory")
    runs = runs_of("memorization mlp", dirs, MLP)
    Ts = None if T is None else [float(t) for t in listed(T)]
    need_evaluated("memorization mlp", runs, "T", Ts or [])
    return summarize_memorization(runs, draws, Ts)


def minimal(dirs, *, draws: Draws = Draws(0, 1000)) -> Minimal:
    return summarize_minimal(runs_of("memorization minimal", dirs, MINIMAL), draws)


def race(dirs, *, T=None, kstar: str | None = None, draws: Draws = Draws(0, 1000)) -> RaceKStar:
    if len(dirs) < 2 or T is None:
        raise ConfigError("analyze memorization race: give MLP_DIR KINF_DIR... and --set T=STEPS (the race's budget)")
    mlp, kinf = runs_of("memorization race", dirs[:1], MLP), runs_of("memorization race", dirs[1:])
    Ts = [float(t) for t in listed(T)]
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
    return RaceKStar(summarize_race(mlp, kinf, Ts[0], draws), measured)


# ---- the records as text (`RENDER`: what `analyze` prints) ----------------------------------------------


def mlp_text(r: Memorization) -> str:
    lines = []
    for c in r.cells:
        budgets = "; ".join(f"I_K({b.T:g}) {value_ci(b.I_steps, b.I_steps_ci)} steps" for b in c.budgets)
        lines.append(
            f"K {c.K:,} ({c.seeds} seeds, to step {c.t_last:,.0f}): tail alpha "
            f"{value_ci(c.tail.alpha, c.tail.alpha_ci, '{:.2f}')}; {budgets or 'no T reached'}; "
            f"I_K(inf) {value_ci(c.I_inf_steps, missing='not shown to converge')}"
        )
    for n in r.nu:  # nu(T) over K, and its local exponent per step of K
        local = "; ".join(f"{x.K[0]:,.0f}-{x.K[1]:,.0f} {value_ci(x.nu, x.nu_ci, '{:.2f}')}" for x in n.local)
        nu, K = value_ci(n.nu, n.nu_ci, "{:.3f}"), ", ".join(f"{k:,}" for k in n.K or [])
        lines.append(f"T {n.T:g}: nu {nu} over K {K}\n  local exponent per step of K: {local}")
    return "\n".join(lines)


def minimal_text(m: Minimal) -> str:
    lines = []
    for c in m.cells:
        r, rf, slope = c.ratio, c.ratio_flow, c.ln_t_vs_beta0
        lines.append(
            f"N {c.N}, beta0 {'random' if c.beta0 is None else f'{c.beta0:g}'}: acquired {r.acquired}/{r.seeds}, "
            f"t_ICL over N sqrt(2 pi) e^-beta0 {value_ci(r.ratio, r.ratio_ci, '{:.3g}', 'n/a')} (steps), "
            f"{value_ci(rf.ratio, rf.ratio_ci, '{:.3g}', 'n/a')} (eta x steps)"
            + (f"; slope of ln t_ICL on beta0 {value_ci(slope.slope, slope.slope_ci, '{:.2f}')}" if slope else "")
        )
    return "\n".join(lines)


def race_text(r: RaceKStar) -> str:
    p = r.predicted
    measured = {m.N: m for m in (r.measured.per_N if r.measured else [])}
    lines = [f"I_K({p.T:g}) = C K^nu over K {', '.join(f'{k:,}' for k in p.K or [])}: nu {p.nu:.3f}, C {p.C:.3g}"]
    for row in p.per_N:
        m, k = measured.get(row.N), row.t_icl_K or "inf"
        lines.append(
            f"N {row.N}: K = {k if k == 'inf' else f'{k:,}'} median t_ICL "
            f"{value_ci(row.median_t_icl, row.median_t_icl_ci)} "
            f"-> predicted K* {value_ci(row.k_star, row.k_star_ci)}"
            + (f", measured {value_ci(m.k_star, m.k_star_ci)}" if m else "")
        )
    slopes = (("predicted", p.k_star_slope.to_json()), ("measured", r.measured and r.measured.k_star_slope))
    for name, s in slopes:
        if s and s.get("ok"):
            lines.append(
                f"slope of log K* on log N, {name}: {value_ci(s['slope'], s.get('slope_ci'), '{:.2f}')} "
                f"({s['n_points']} values of N)"
            )
    return "\n".join(lines)


RENDER = {"mlp": mlp_text, "minimal": minimal_text, "race": race_text}
OPTIONS = {"T": Option(float, 0, above=True, many=True), "kstar": TEXT}
COMMANDS = {"mlp": mlp, "minimal": minimal, "race": race}
