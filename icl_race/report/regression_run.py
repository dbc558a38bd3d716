"""One linear-regression run's statistics and their text: a `RegressionSample` read once from the `Run`,
`analyze` -> `RegressionStats` (records: `Transition`, `Dwell`, `Final`, `Eq21`, written to report.json by
their `to_json`), `run_markdown` (the tables of report.md). What the statistics are: report/regression.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from icl_race import rundir
from icl_race.analysis.record import OMIT_NONE, Record
from icl_race.analysis.regression import (
    ALIGNED,
    HEAD_KEYS,
    START_FRAC,
    Dwell,
    Eq21Match,
    Eq21Transition,
    Final,
    Transition,
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
from icl_race.plots.regression import CURVES
from icl_race.theory.linear_attention import staircase


def describe(cfg: dict) -> str:
    t, m = cfg["task"], cfg["model"]
    head = f"{m['kind']}{' softmax' if m.get('softmax') else ''}, H={m['heads']}"
    head += f", R={m['rank']}" if m["kind"] == "attn_s" else ""
    data = f"P={t['P'] or 'inf'}" + (f", c={t['icl_fraction']:g}" if t.get("icl_fraction", 1.0) < 1 else "")
    return f"{head}; D={t['D']}, N={t['N']}, {t['spectrum']} spectrum, {data}, dt={cfg['train']['lr']:g} tau/step"


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


def analyze(s: RegressionSample) -> RegressionStats:
    cfg, dt = s.config, s.dt
    eq21 = None
    if has_heads(cfg, s.heads):
        ref = staircase(lambdas(cfg), int(cfg["task"]["N"]))
        matches = eq21_matches(cfg, s.t, s.heads, s.eval_steps, dt)
        eq21 = Eq21(START_FRAC, eq21_stats(matches, ref["lam"], ref["vstar"]), matches)
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
        {e: transition_stats(s.t[e], s.censor_at, dt) for e in s.events},
        dwell_stats(s.t, s.D, dt, s.levels, s.curves["loss"], s.eval_steps),
        final_stats(s.levels, s.eval_steps, dt, s.curves),
        eq21,
    )


def fmt_tau(v) -> str:
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
            f"{fmt_tau(r and r.median_tau)} | {'–' if ratio is None else f'{ratio:.3f}'} | {r.n if r else '–'} |"
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
            f"| t_{e} | {t.reached} | {t.censored} | {fmt_tau(t.km_median_tau)} [{fmt_tau(lo)}, "
            f"{fmt_tau(hi) if hi is not None else 'beyond'}] | {fmt_tau(q[10])} / {fmt_tau(q[50])} / {fmt_tau(q[90])} |"
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
        e = r.rel_err  # set exactly when some seed made the transition (n > 0)
        if not r.n or e is None:
            md.append(head + "– | – | – | – | – |")
            continue
        md.append(
            head + f"{r.u0_median:.3f} | "
            f"{r.cos_k_median:.3f}, {r.cos_q_median:.3f} | {e[0]:+.2%} [{e[1]:+.2%}, {e[2]:+.2%}] | "
            f"{r.abs_rel_err_median:.2%} | {_pct(r.ansatz_abs_err_max)} ({r.n_ansatz}) |"
        )
    return md
