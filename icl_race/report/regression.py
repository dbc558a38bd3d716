"""Reports for linear-regression run and sweep directories (linear attention, arXiv 2501.16265; task.kind =
"linear_regression"), called by `icl_race.report.directory.write_report`, which writes what this returns. The
statistics are in `icl_race.analysis.regression`, the figures in `icl_race.plots.regression`.

    run_report(run, draws)      -> (report dict, report.md text, {figure name: Figure}) for one run
    sweep_report(sweep, draws)  -> the same for a sweep directory (cells/<digest>/, each a run directory)

The same typed path as the classification report: a `RegressionSample` read once from the `Run`,
`analyze` -> `RegressionStats` (records: `Transition`, `Dwell`, `Final`, `Eq21`; report/regression_run.py),
a sweep's `RegressionSweepReport` of `RegressionCell`s (report/regression_sweep.py); markdown and figures
rendered from the records, report.json written by their `to_json` (today's keys, in order).

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
Imports no jax; its statistics and figures (scipy, matplotlib: seconds) are imported by the function that
needs them, so that `report` reads its input and says what it does first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from icl_race import rundir


def run_report(found: rundir.Run, draws) -> tuple[dict, str, dict]:
    """The report of one run (no resampled statistics here: the draws are not used)."""
    from icl_race.plots.regression import heads_figure, loss_figure, transitions_figure
    from icl_race.report.regression_run import RegressionSample, analyze, run_markdown

    s = RegressionSample.of(found)
    st = analyze(s)
    md = [f"# Linear-regression report: {s.dir}", "", st.setup, ""] + run_markdown(st)
    md += ["", "![loss curves](figures/loss_curves.png)", "", "![transition times](figures/transition_times.png)"]
    figs = {"loss_curves": loss_figure(s.plot_view(), st.setup), "transition_times": transitions_figure(st.to_json())}
    if st.eq21 is not None:
        md += ["", "![escaping heads against Eq. 21](figures/heads_eq21.png)"]
        figs["heads_eq21"] = heads_figure(s.plot_view(), st.eq21.to_json())
    return {"kind": "linear_regression_run", **st.to_json()}, "\n".join(md) + "\n", figs


def sweep_report(sweep: rundir.SweepDir, draws) -> tuple[dict, str, dict]:
    """Every finished cell as in run_report, a table of the cells side by side, one panel of loss
    curves per cell and the cells' median losses overlaid. Cells are labelled by the grid's fields
    (sweep.toml) and ordered by their values."""
    from icl_race.report.regression_sweep import compute_sweep, sweep_figures, sweep_markdown

    rep = compute_sweep(sweep)
    return rep.to_json(), sweep_markdown(rep), sweep_figures(rep)
