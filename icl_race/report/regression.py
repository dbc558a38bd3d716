"""Reports for linear-regression run and sweep directories (linear attention, arXiv 2501.16265; task.kind =
"linear_regression"), called by `icl_race.report.write_report`, which writes what this returns. The statistics are in
`icl_race.analysis.regression`, the figures in `icl_race.plots.regression`.

    run_report(run, draws)      -> (report dict, report.md text, {figure name: Figure}) for one run
    sweep_report(sweep, draws)  -> the same for a sweep directory (cells/<digest>/, each a run directory)

The same typed path as the classification report: a `RegressionSample` read once from the `Run`,
`analyze` -> `RegressionStats` (records: `Transition`, `Dwell`, `Final`, `Eq21`), a sweep's
`RegressionSweepReport` of `RegressionCell`s; markdown and figures rendered from the records, report.json
written by their `to_json` (today's keys, in order).

What a run reports: the theory plateau levels L(M_0) … L(M_D) of Eq. 19 for the run's spectrum and N
(`icl_race.theory.linear_attention.plateau_losses`; with rank-R heads the conspicuous ones are m a multiple
of R), the loss curves over seeds (median and every seed, log time axis, the levels dotted), and
the distribution over seeds of each transition time t_m1 … t_mD and t_converged from results.npz (steps;
-1 = not reached, right-censored at the budget, or at steps_run if the run stopped early, never dropped):
Kaplan-Meier median with its 95% CI and quantiles of the reached seeds. The dwell on level m is
t_m(m+1) − t_m(m) (t_m0 = 0), over the seeds that reached both, and the loss on it is read at the
evaluation nearest the log-midpoint √(t_m(m) · t_m(m+1)) (t_m0 = the first evaluation). Times are reported
in units of τ (step × train.lr) and steps. Seeds flagged in `diverged` are excluded and counted.

For rank-1 attn_s runs (Fig 3) the report also follows, per transition M_m → M_(m+1) and seed, the head
that escapes (the one whose |v_i| grows most from t_m(m) to t_m(m+1)) against the scalar ODE of Eq. 21:
the ODE starts (t = 0, v0 = |v_i|) at the last evaluation before |v_i| first reaches START_FRAC · v*, and
the measured time from there to v*/2 is compared with the ODE's (`match_eq21`). Figure heads_eq21: (b)
|v_i(t)| of a few seeds with their ODE solutions, (c) the cosines of k_i and q_i with e_(m+1).
Imports no jax.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from icl_race import rundir
from icl_race.analysis.regression import (
    ALIGNED,
    HEAD_KEYS,
    START_FRAC,
    conspicuous,
    dwell_stats,
    eq21_matches,
    eq21_stats,
    final_stats,
    has_heads,
    lambdas,
    levels,
    transition_stats,
)
from icl_race.config import ConfigError
from icl_race.plots.regression import (
    CURVES,
    heads_figure,
    loss_figure,
    medians_figure,
    panels_figure,
    transitions_figure,
)
from icl_race.report.cell import Record, Unfinished
from icl_race.report.format import OMIT_NONE
from icl_race.theory.linear_attention import staircase


def describe(cfg: dict) -> str:
    t, m = cfg["task"], cfg["model"]
    head = f"{m['kind']}{' softmax' if m.get('softmax') else ''}, H={m['heads']}"
    head += f", R={m['rank']}" if m["kind"] == "attn_s" else ""
    data = f"P={t['P'] or 'inf'}" + (f", c={t['icl_fraction']:g}" if t.get("icl_fraction", 1.0) < 1 else "")
    return f"{head}; D={t['D']}, N={t['N']}, {t['spectrum']} spectrum, {data}, dt={cfg['train']['lr']:g} tau/step"


# ---- the typed path: a sample read once from the Run, its statistics as records -------------------------


@dataclasses.dataclass(frozen=True)
class RegressionSample:
    """What the report reads of one linear-regression run, read once from its `rundir.Run`: the kept seeds'
    transition times (event -> t[S] steps, -1 = censored at censor_at), curves and per-head probes
    ([S, T, ...]), eval_steps, dt = train.lr (steps -> units of tau) and the Eq. 19 levels."""

    dir: Path
    config: dict  # config.json, as stored
    events: list[str]  # m1 ... mD, converged
    t: dict[str, np.ndarray]  # event -> [S]
    censor_at: int
    budget: int
    steps_run: int
    n_diverged: int
    eval_steps: np.ndarray  # [T]
    dt: float
    levels: np.ndarray  # [D + 1]: L(M_0) ... L(M_D)
    curves: dict[str, np.ndarray]  # name -> [S, T]
    heads: dict[str, np.ndarray]  # probe -> [S, T, H, ...]

    @classmethod
    def of(cls, run: rundir.Run) -> RegressionSample:
        cfg = run.config
        D = int(cfg["task"]["D"])
        events = [*(f"m{m}" for m in range(1, D + 1)), "converged"]
        missing = [f"t_{e}" for e in events if e not in run.times] + ([] if "loss" in run.curves else ["loss"])
        if missing:
            raise ConfigError(f"{run.dir}/results.npz: missing {', '.join(missing)}")
        return cls(
            run.dir,
            cfg,
            events,
            {e: run.t(e) for e in events},
            run.censor_at(*events),
            run.budget,
            run.steps_run,
            int(run.diverged.sum()),
            run.eval_steps,
            float(cfg["train"]["lr"]),
            levels(cfg),
            {k: np.asarray(run.curve(k), float) for k in CURVES if k in run.curves},
            {k: np.asarray(run.curve(k), float) for k in HEAD_KEYS if k in run.curves},
        )

    @property
    def D(self) -> int:
        return int(self.config["task"]["D"])

    def plot_view(self) -> dict:
        """The sample as the figures of `plots.regression` read a run (by name)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclasses.dataclass(frozen=True)
class Transition(Record):
    """One event over seeds (`analysis.regression.transition_stats`), in tau."""

    t_steps: list[int]  # per seed, as recorded (-1: not reached)
    reached: int
    censored: int
    censored_at_tau: float
    km_median_tau: float | None
    km_median_ci_tau: list  # [lo, hi]; hi None: beyond the budget
    quantiles_tau: dict[int, float | None]  # percentile (10, 50, 90) -> of the reached seeds


@dataclasses.dataclass(frozen=True)
class Dwell(Record):
    """The dwell on level m (`analysis.regression.dwell_stats`)."""

    m: int
    level: float
    n: int  # seeds that reached both ends
    median_tau: float | None
    median_log10_ratio: float | None
    mid_loss: list[float] | None  # median, 10%, 90% of the loss at the log-midpoint


@dataclasses.dataclass(frozen=True)
class FinalLoss(Record):
    """One recorded curve's final and lowest median (`analysis.regression.final_stats`)."""

    final_median: float
    final_min: float
    final_max: float
    median_min: float
    median_argmin_tau: float


@dataclasses.dataclass(frozen=True)
class Final(Record):
    """The last level L(M_D) and each recorded curve's final losses (report.json: one object, L_MD first)."""

    L_MD: float
    curves: dict[str, FinalLoss]  # curve name -> (plots.regression.CURVES)

    @classmethod
    def of(cls, d: dict) -> Final:
        return cls(d["L_MD"], {k: FinalLoss(**v) for k, v in d.items() if k != "L_MD"})

    def to_json(self) -> dict:
        return {"L_MD": self.L_MD} | {k: v.to_json() for k, v in self.curves.items()}


@dataclasses.dataclass(frozen=True)
class Eq21Match(Record):
    """One seed's escaping head across one transition against Eq. 21 (`analysis.regression.eq21_matches`)."""

    seed: int
    head: int
    start: int
    grown_before: bool
    t0_tau: float
    v0: float
    u0: float
    measured_tau: float
    predicted_tau: float
    rel_err: float
    cos_k: float
    cos_q: float


@dataclasses.dataclass(frozen=True)
class Eq21Transition(Record):
    """One transition's matches summarised (`analysis.regression.eq21_stats`); the medians only with a match."""

    m: int
    lam: float
    vstar: float
    n: int
    n_grown_before: int
    n_ansatz: int
    ansatz_abs_err_max: float | None
    u0_median: float | None = dataclasses.field(default=None, metadata=OMIT_NONE)
    cos_k_median: float | None = dataclasses.field(default=None, metadata=OMIT_NONE)
    cos_q_median: float | None = dataclasses.field(default=None, metadata=OMIT_NONE)
    rel_err: list[float] | None = dataclasses.field(default=None, metadata=OMIT_NONE)  # median, 10%, 90%
    abs_rel_err_median: float | None = dataclasses.field(default=None, metadata=OMIT_NONE)


@dataclasses.dataclass(frozen=True)
class Eq21(Record):
    start_frac: float
    transitions: list[Eq21Transition]
    matches: list[list[Eq21Match]]  # per transition, per matched seed


@dataclasses.dataclass(frozen=True)
class RegressionStats(Record):
    """Every statistic of one run (or sweep cell), in report.json's order."""

    dir: str
    setup: str
    dt: float
    n_seeds: int
    n_diverged: int
    budget: int
    steps_run: int
    censor_at: int
    levels: list[float]
    conspicuous_m: list[int]
    transitions: dict[str, Transition]  # event -> (m1 ... mD, converged)
    dwell: list[Dwell]  # per level m = 0 ... D - 1
    final: Final
    eq21: Eq21 | None = dataclasses.field(default=None, metadata=OMIT_NONE)  # rank-1 attn_s with head probes


@dataclasses.dataclass(frozen=True)
class RegressionCell(Record):
    """A sweep's cell: its directory name, label and grid values, and its statistics."""

    cell: str
    label: str
    values: dict[str, object]  # grid field -> this cell's value
    stats: RegressionStats

    def to_json(self) -> dict:
        return {"cell": self.cell, "label": self.label, "values": self.values} | self.stats.to_json()


def analyze(s: RegressionSample) -> RegressionStats:
    cfg, dt = s.config, s.dt
    eq21 = None
    if has_heads(cfg, s.heads):
        ref = staircase(lambdas(cfg), int(cfg["task"]["N"]))
        matches = eq21_matches(cfg, s.t, s.heads, s.eval_steps, dt)
        eq21 = Eq21.of(
            {"start_frac": START_FRAC, "transitions": eq21_stats(matches, ref["lam"], ref["vstar"]), "matches": matches}
        )
    return RegressionStats(
        str(s.dir),
        describe(cfg),
        dt,
        int(s.t["converged"].size),
        s.n_diverged,
        s.budget,
        s.steps_run,
        s.censor_at,
        s.levels.tolist(),
        conspicuous(cfg),
        {e: Transition.of(transition_stats(s.t[e], s.censor_at, dt)) for e in s.events},
        [Dwell.of(d) for d in dwell_stats(s.t, s.D, dt, s.levels, s.curves["loss"], s.eval_steps)],
        Final.of(final_stats(s.levels, s.eval_steps, dt, s.curves)),
        eq21,
    )


def _tau(v) -> str:
    return "–" if v is None else f"{v:,.4g}"


def _pct(v) -> str:
    return "–" if v is None else f"{v:.2%}"


def run_markdown(st: RegressionStats) -> list[str]:
    md = [
        f"Seeds: {st.n_seeds} ({st.n_diverged} diverged, excluded); budget {st.budget:,} steps "
        f"({st.budget * st.dt:,.4g} tau), run {st.steps_run:,}; unreached seeds censored at "
        f"{st.censor_at * st.dt:,.4g} tau.",
        "",
        "| level m | L(M_m) (Eq. 19) | loss at the log-midpoint, median [10%, 90%] | conspicuous | "
        "dwell median (tau) | median log10 t_(m+1)/t_m | seeds |",
        "|---|---|---|---|---|---|---|",
    ]
    dwell = {r.m: r for r in st.dwell}
    for m, level in enumerate(st.levels):
        r = dwell.get(m)
        ratio, mid = (r.median_log10_ratio, r.mid_loss) if r else (None, None)
        md.append(
            f"| {m} | {level:.6f} | {'–' if mid is None else f'{mid[0]:.6f} [{mid[1]:.6f}, {mid[2]:.6f}]'} | "
            f"{'yes' if m in st.conspicuous_m else 'no'} | "
            f"{_tau(r and r.median_tau)} | {'–' if ratio is None else f'{ratio:.3f}'} | {r.n if r else '–'} |"
        )
    md += [
        "",
        "| event | reached | censored | KM median (tau) [95% CI] | 10% / 50% / 90% of reached (tau) |",
        "|---|---|---|---|---|",
    ]
    for e, t in st.transitions.items():
        lo, hi = t.km_median_ci_tau
        q = t.quantiles_tau
        md.append(
            f"| t_{e} | {t.reached} | {t.censored} | {_tau(t.km_median_tau)} [{_tau(lo)}, "
            f"{_tau(hi) if hi is not None else 'beyond'}] | {_tau(q[10])} / {_tau(q[50])} / {_tau(q[90])} |"
        )
    md += ["", f"Final losses (L(M_D) = {st.final.L_MD:.6f}):", ""]
    for name, f in st.final.curves.items():
        md.append(
            f"- {CURVES[name][0]}: median {f.final_median:.6f} (seeds {f.final_min:.6f} – "
            f"{f.final_max:.6f}); lowest median {f.median_min:.6f} at t = "
            f"{f.median_argmin_tau:,.4g} tau"
        )
    return md + (eq21_markdown(st.eq21) if st.eq21 is not None else [])


def eq21_markdown(eq21: Eq21) -> list[str]:
    md = [
        "",
        f"Escaping heads against Eq. 21 (the head whose |v| grows most across the transition; ODE started "
        f"at the last evaluation before |v| reaches {eq21.start_frac:g} v*; error = measured / predicted − 1 "
        "of the time from there to v*/2; grown before: |v| was past the start already when the transition began; "
        f"in the ansatz (Eq. 20): not grown before and cos k · cos q ≥ {ALIGNED:g} at the start):",
        "",
        "| transition | lambda | v* | seeds (grown before) | v0/v* (median) | cos k, cos q at start (median) | "
        "error median [10%, 90%] | median abs error | max abs error in the ansatz (seeds) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in eq21.transitions:
        seeds = f"{r.n} ({r.n_grown_before})"
        head = f"| {r.m}→{r.m + 1} | {r.lam:.4g} | {r.vstar:.4f} | {seeds} | "
        if not r.n:
            md.append(head + "– | – | – | – | – |")
            continue
        e = r.rel_err
        md.append(
            head + f"{r.u0_median:.3f} | "
            f"{r.cos_k_median:.3f}, {r.cos_q_median:.3f} | {e[0]:+.2%} [{e[1]:+.2%}, {e[2]:+.2%}] | "
            f"{r.abs_rel_err_median:.2%} | {_pct(r.ansatz_abs_err_max)} ({r.n_ansatz}) |"
        )
    return md


# ---- entry points -------------------------------------------------------------------------------------


def run_report(found: rundir.Run, draws) -> tuple[dict, str, dict]:
    """The report of one run (no resampled statistics here: the draws are not used)."""
    s = RegressionSample.of(found)
    st = analyze(s)
    md = [f"# Linear-regression report: {s.dir}", "", st.setup, ""] + run_markdown(st)
    md += ["", "![loss curves](figures/loss_curves.png)", "", "![transition times](figures/transition_times.png)"]
    figs = {"loss_curves": loss_figure(s.plot_view(), st.setup), "transition_times": transitions_figure(st.to_json())}
    if st.eq21 is not None:
        md += ["", "![escaping heads against Eq. 21](figures/heads_eq21.png)"]
        figs["heads_eq21"] = heads_figure(s.plot_view(), st.eq21.to_json())
    return {"kind": "linear_regression_run", **st.to_json()}, "\n".join(md) + "\n", figs


def _value(cfg: dict, field: str):
    sec, _, key = field.partition(".")
    return cfg.get(sec, {}).get(key)


@dataclasses.dataclass(frozen=True)
class RegressionSweepReport:
    """A sweep's finished cells in the grid's order, and the unfinished ones (skipped)."""

    dir: Path
    fields: list[str]  # the grid's fields (sweep.toml)
    samples: list[RegressionSample]
    cells: list[RegressionCell]
    unfinished: list[Unfinished]

    def to_json(self) -> dict:
        return {
            "kind": "linear_regression_sweep",
            "fields": self.fields,
            "cells": [c.to_json() for c in self.cells],
            "unfinished": [u.to_json() for u in self.unfinished],
        }


def compute_sweep(sweep: rundir.SweepDir) -> RegressionSweepReport:
    """Every finished cell's sample, read once, ordered by the grid's values, and its statistics."""
    fields = sweep.fields
    samples, unfinished = [], []
    for cell in sweep.cells:
        try:
            if cell.run is None:
                raise ConfigError(f"{cell.dir}: {cell.reason}" if cell.config else cell.reason)
            samples.append(RegressionSample.of(cell.run))
        except ConfigError as e:
            unfinished.append(Unfinished(cell.name, reason=str(e)))
    if not samples:
        raise ConfigError(f"{sweep.dir}: no finished cells")
    numeric = lambda v: (0, float(v), "") if isinstance(v, (int, float)) else (1, 0.0, str(v))
    samples.sort(key=lambda s: [numeric(_value(s.config, f)) for f in fields])
    cells = [
        RegressionCell(
            s.dir.name,
            ", ".join(f"{f.partition('.')[2]}={_value(s.config, f)}" for f in fields) or s.dir.name,
            {f: _value(s.config, f) for f in fields},
            analyze(s),
        )
        for s in samples
    ]
    return RegressionSweepReport(sweep.dir, fields, samples, cells, unfinished)


def sweep_markdown(rep: RegressionSweepReport) -> str:
    cells = rep.cells
    D = max(len(c.stats.levels) - 1 for c in cells)
    md = [
        f"# Linear-regression sweep report: {rep.dir}",
        "",
        f"{len(cells)} finished cells, {len(rep.unfinished)} unfinished.",
        "",
        "Median over seeds of each transition time t_m (tau; reached/seeds) and of the dwell on each level "
        "(tau); the level values and per-cell details follow.",
        "",
        "| cell | setup | final loss (median) | "
        + " | ".join(f"t_m{m}" for m in range(1, D + 1))
        + " | "
        + " | ".join(f"dwell {m}" for m in range(D))
        + " |",
        "|---|---|---|" + "---|" * (2 * D),
    ]
    for c in cells:
        st, tr = c.stats, c.stats.transitions
        t = [
            f"{_tau(tr[f'm{m}'].km_median_tau)} ({tr[f'm{m}'].reached}/{st.n_seeds})" if f"m{m}" in tr else ""
            for m in range(1, D + 1)
        ]
        w = [_tau(r.median_tau) for r in st.dwell] + [""] * (D - len(st.dwell))
        md.append(
            f"| {c.label} | {st.setup} | {st.final.curves['loss'].final_median:.6f} | " + " | ".join(t + w) + " |"
        )
    for c in cells:
        md += ["", f"## {c.label}", "", c.stats.setup, ""] + run_markdown(c.stats)
    if rep.unfinished:
        md += ["", "Unfinished or unreadable cells (skipped):", ""]
        md += [f"- `{u.cell}`: {u.reason}" for u in rep.unfinished]
    md += [
        "",
        "![loss curves per cell](figures/loss_curves.png)",
        "",
        "![median training loss of every cell](figures/loss_medians.png)",
    ]
    return "\n".join(md) + "\n"


def sweep_figures(rep: RegressionSweepReport) -> dict:
    runs, labels = [s.plot_view() for s in rep.samples], [c.label for c in rep.cells]
    return {"loss_curves": panels_figure(runs, labels), "loss_medians": medians_figure(runs, labels)}


def sweep_report(sweep: rundir.SweepDir, draws) -> tuple[dict, str, dict]:
    """Every finished cell as in run_report, a table of the cells side by side, one panel of loss
    curves per cell and the cells' median losses overlaid. Cells are labelled by the grid's fields
    (sweep.toml) and ordered by their values."""
    rep = compute_sweep(sweep)
    return rep.to_json(), sweep_markdown(rep), sweep_figures(rep)
