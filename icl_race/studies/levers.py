"""The levers on the race (experiments/levers/, issue 14 item 4): reads sweep directories for
`icl_race.analysis.levers` and renders its records (`RENDER`); the copy-rule ceiling is
`icl_race.theory.ceiling` (no directories).

  beta0 DIR...                       (a) ln t_ICL against beta0
  pair DIR OTHER                     Spearman of t_ICL over the same seeds under two settings
  race KINF_DIR... --set field=task.epsilon --set values=0,1 --set mlp=MLP_DIR0,MLP_DIR1
                   [--set N=32 --set T=10000 --set t_fixed=1200]   (b), (c) the K* each value predicts
  transience DIR...                  --set level=0.9 --set lasting=10   (d) ICL's rise and fall
  kstar [DIR...] --set field=task.epsilon [--set counts=PRIOR_JSON --set N=32]   the measured K*
  ceiling          --set epsilon=0,0.5,1 [--set D=63 --set N=32 --set sequences=20000]
  collapse DIR     [--set seed_id=0 --set at=3000,6000,...]   (c) one seed retrained, its network inspected
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from icl_race.analysis import levers
from icl_race.analysis.draws import Draws
from icl_race.config import INDEX_MAX, ConfigError
from icl_race.report.format import ci_text, value_ci
from icl_race.studies.inputs import (
    COUNT,
    FRACTION,
    STEPS,
    TEXT,
    Option,
    check_kinds,
    listed,
    need_acquired,
    need_evaluated,
    runs_of,
)
from icl_race.theory.ceiling import Ceiling, copy_ceiling


def _need(sub: str, **given):
    missing = [k for k, v in given.items() if v is None]
    if missing:
        raise ConfigError(f"analyze levers {sub}: needs --set {', '.join(f'{k}=...' for k in missing)}")


def beta0(dirs, *, draws: Draws = Draws(0, 1000)) -> levers.Beta0:
    runs = runs_of("levers beta0", dirs)
    if fixed := [r for r in runs if not hasattr(r.cfg.model, "qk_init_scale")]:
        raise ConfigError(
            f"levers beta0: {fixed[0].dir} is a {fixed[0].cfg.model.kind} model, whose beta0 its config sets "
            "(no model.qk_init_scale): use `icl-race analyze memorization minimal`"
        )
    need_acquired("levers beta0", runs, 3)  # the pooled fit of ln t_ICL against beta0
    return levers.beta0(runs, draws)


def pair(dirs) -> levers.Pair:
    if len(dirs) != 2:
        raise ConfigError("analyze levers pair: give two directories (the same seeds under two settings)")
    return levers.pair(runs_of("levers pair", dirs[:1]), runs_of("levers pair", dirs[1:]))


def race(
    dirs,
    *,
    field: str | None = None,
    values=None,
    mlp=None,
    N: int = 32,
    T: float = 10000,
    t_fixed: float | None = None,
    draws: Draws = Draws(0, 1000),
) -> levers.LeverRace:
    """dirs: the K = infinity race sweeps; `mlp`: one MLP-only sweep directory per lever value."""
    _need("race", field=field, values=values, mlp=mlp)
    assert field is not None  # _need refused a missing one
    values, mlp = [float(v) for v in listed(values)], [str(d) for d in listed(mlp)]
    if len(values) != len(mlp):
        raise ConfigError(f"analyze levers race: {len(values)} values but {len(mlp)} mlp directories")
    mlp_runs = [runs_of("levers race", [d], ("memorization",)) for d in mlp]
    need_evaluated("levers race", [r for runs in mlp_runs for r in runs], "T", [float(T)])
    kinf, fixed = runs_of("levers race", dirs), None if t_fixed is None else float(t_fixed)
    return levers.lever_race(field, values, mlp_runs, kinf, N, draws, float(T), fixed, mlp_names=mlp)


def transience(dirs, *, level: float = 0.9, lasting: int = 10, draws: Draws = Draws(0, 1000)) -> levers.LeverTransience:
    return levers.transience(runs_of("levers transience", dirs), draws, level, lasting)


def kstar(
    dirs, *, field: str | None = None, N: int = 32, counts: str | None = None, draws: Draws = Draws(0, 1000)
) -> levers.KStar:
    """K* per lever value over the finite-K cells of dirs and of an earlier kstar result (`counts`: its JSON,
    as this command writes it or as experiments/levers/analyze.py wrote it), so K* can grow over sessions
    whose run directories (git-ignored) are gone."""
    _need("kstar", field=field)
    assert field is not None  # _need refused a missing one
    prior = None
    if counts:
        path = Path(counts)
        if not path.is_file():
            raise ConfigError(f"--set counts={counts}: no such file")
        prior = json.loads(path.read_text())
        prior = prior.get("result", prior)  # this command's JSON wraps the result
        if (prior["field"], prior["N"]) != (field, N):
            raise ConfigError(
                f"--set counts={counts}: field {prior['field']} at N = {prior['N']}, not {field} at N = {N}"
            )
    cells = levers.kstar_cells(field, N, [(d, runs_of("levers kstar", [d])) for d in dirs], prior and prior["cells"])
    if not cells:
        raise ConfigError("analyze levers kstar: no finite-K cell (give directories or --set counts=FILE)")
    return levers.kstar(field, N, cells, draws.bootstrap())


def ceiling(
    dirs,
    *,
    epsilon=(0.0, 0.5, 1.0),
    D: int = 63,
    N: int = 32,
    sequences: int = 20000,
    draws: Draws = Draws(0, 1000),
) -> Ceiling:
    if N < 2:
        raise ConfigError(f"analyze levers ceiling: --set N={N}: must be >= 2 (the query and a context item)")
    if sequences * (N - 1) * D > CEILING_SIZE:
        raise ConfigError(
            f"analyze levers ceiling: sequences x (N - 1) x D = {sequences:,} x {N - 1:,} x {D:,}: must be at "
            f"most {CEILING_SIZE:,} (one array of the Monte Carlo); lower --set sequences, N or D"
        )
    return copy_ceiling([float(e) for e in listed(epsilon)], D=D, N=N, sequences=sequences, seed=draws.seed)


def collapse(dirs, *, seed_id: int = 0, at=(3000, 6000, 9000, 12000, 18000, 24000, 30000)) -> levers.Collapse:
    """One seed of a finished cell retrained alone (icl_race.run.retrain) in vmaps of one seed, the fast CPU
    layout this was first written with, so the same trajectory as inside its ensemble to float tolerance
    (without the ensemble.block override: exactly its run's, at the cost of a whole block), its network
    read at each of the `at` steps (`Transformer.activations` on a training batch of 512). `seed_id`: the
    seed retrained (nothing here is resampled: no --boot or --seed)."""
    import jax

    from icl_race import systems
    from icl_race.run.retrain import retrain
    from icl_race.rundir import runset

    at = sorted(int(a) for a in listed(at))
    runs = runset.load(dirs).runs
    check_kinds("levers collapse", runs)
    if len(runs) != 1:
        raise ConfigError(
            f"{', '.join(map(str, dirs))}: analyze levers collapse needs one finished cell, found {len(runs)}"
        )
    run = runs[0]
    if seed_id not in run.seed_ids.tolist():
        raise ConfigError(
            f"--set seed_id={seed_id}: not a seed of {run.dir} (its seeds: {run.seed_ids.min()}-{run.seed_ids.max()})"
        )
    kept = {}  # step -> the seed's state (parameters, label map), copied before the next chunk donates the carry

    def keep(p):
        if p.step in at:
            # the whole state: a finite-K task draws its batches through the seed's own label map
            kept[p.step] = jax.device_get(jax.tree.map(lambda a: a[0], p.carry["state"]))

    # One evaluation per chunk, at every multiple of the steps' gcd, and no early stop: each inspected
    # step is a chunk boundary, where `keep` looks.
    res = retrain(
        run.dir,
        [seed_id],
        steps=max(at),
        on_chunk=keep,
        overrides=[
            "ensemble.block=1",
            "ensemble.devices=0",
            f"train.eval_every={np.gcd.reduce(at)}",
            "train.evals_per_chunk=1",
            "train.stop_when_all_acquired=false",
        ],
    )
    program, consts = systems.build(run.cfg)
    rows = []
    for step, state in sorted(kept.items()):
        i = int(np.searchsorted(res["eval_steps"], step))
        x_BxNxE, _ = program.train_batch(state, consts, jax.random.key(step), 512)
        act = program.model.activations(state["params"], x_BxNxE)
        read = [act[k] for k in ("query_scores", "relu1", "relu2", "logit")]
        rows.append(levers.network_state(step, res["icl_acc"][0, i], res["train_loss"][0, i], *read))
    return levers.Collapse(dir=str(dirs[0]), seed=seed_id, rows=rows)


# ---- the records as text (`RENDER`: what `analyze` prints) ----------------------------------------------


def _label(c: levers.Setting) -> str:
    return f"{c.optimizer} lr {c.lr:g}, qk_init_scale {c.qk_init_scale:g}"


def beta0_text(r: levers.Beta0) -> str:
    lines = []
    for c in r.cells:
        f, s, sb = c.fit, c.ln_t_spread or levers.Spread(float("nan"), None), c.beta0_spread
        slope = (
            "not fitted (< 3 acquired, or one beta0 for every seed)"
            if f is None
            else value_ci(f.slope, f.slope_ci, "{:.2f}")
        )
        lines.append(
            f"{_label(c)} (N = {c.N}): acquired {c.acquired}/{c.seeds}, mean beta0 {c.beta0_mean:.3f}; slope of "
            f"ln t_ICL on beta0 {slope}; sd of ln t_ICL {value_ci(s.sd, s.sd_ci, '{:.3f}')} vs sd of beta0 "
            f"{value_ci(sb.sd, sb.sd_ci, '{:.3f}')}"
        )
    p = r.pooled
    lines.append(
        f"pooled: slope {value_ci(p.slope, p.slope_ci, '{:.2f}')} over {p.n} acquired seeds "
        f"({p.censored} censored, dropped)"
    )
    return "\n".join(lines)


def pair_text(r: levers.Pair) -> str:
    return "\n".join(
        f"{_label(row['a'])} vs {_label(row['b'])}: Spearman rho of t_ICL {row['spearman']:.2f} "
        f"(p = {row['p']:.2g}) over {row['seeds']} seeds acquired in both"
        for row in r.pairs
        if row["spearman"] is not None
    )


def race_text(r: levers.LeverRace) -> str:
    lines = []
    for row in r.values:
        k, f = row["kinf"], row["fixed"]
        kinf = (
            f"{k['median_t_icl']:.0f} ({row['t_icl_from']}) -> K* {value_ci(k['k_star'], k['k_star_ci'])} "
            f"(x{k['shift']:.2f})"
            if np.isfinite(k["median_t_icl"])
            else f"not reached by the budget ({row['t_icl_from']}) -> no K*"
        )
        line = f"{r.field} = {row['value']:g}: nu {row['nu']:.3f}, C {row['C']:.3g}; K = inf median t_ICL {kinf}"
        if f:
            line += f"; at t = {r.t_fixed:g}: K* {value_ci(f['k_star'], f['k_star_ci'])} (x{f['shift']:.2f})"
        lines.append(line)
    return "\n".join(lines)


def transience_text(r: levers.LeverTransience) -> str:
    med = lambda d: value_ci(d["median"], d.get("median_ci"))
    return "\n".join(
        f"{row['optimizer']}, L2 {row['weight_decay_attn']:g}: acquired {row['acquired']}/{row['seeds']} "
        f"(KM median t_ICL {med(row['rise'])}), fell {row['fell']}/{row['acquired']} (KM median fall "
        f"{med(row['fall'])}, budget {row['budget']:.0f}), lost for >= {r.lasting} evaluations "
        f"{row['lost_lasting']}, ended below {r.level:g} {row['ended_below']}; final ICL accuracy "
        f"{row['final_icl_acc_median']:.2f}, IWL {row['final_iwl_acc_median']:.2f} (seed medians)"
        for row in r.cells
    )


def kstar_text(r: levers.KStar) -> str:
    # The regime check beside each K*: a median rise fraction above the protocol's bound (0.10 at K =
    # infinity; 0.17-0.25 near K* without a lever) says ICL climbed to the threshold rather than jumped.
    rise = lambda c: "" if c.get("rise_fraction_median") is None else f" (r {c['rise_fraction_median']:.2f})"
    lines = []
    for fit in r.kstar:
        v = fit["value"]
        counts = ", ".join(f"{c['acquired']}/{c['seeds']} at {c['K']:,}{rise(c)}" for c in r.cells if c["value"] == v)
        if not fit["ok"]:
            verdict = f"no K* ({fit['reason']})"
        else:
            verdict = f"K* {fit['kstar']:,.0f} {ci_text(fit['kstar_ci'], '{:,.0f}')}" + (
                "" if fit["bracketed"] else ", not bracketed by the grid: an extrapolation"
            )
        lines.append(f"{r.field} = {v:g} (N = {r.N}): {verdict}; acquired {counts}")
    return "\n".join(lines)


def collapse_text(r: levers.Collapse) -> str:
    return "\n".join(
        f"step {s.step}: ICL accuracy {s.icl_acc:.3f}, training loss {s.train_loss:.3f}; attention logit spread "
        f"{s.score_spread:.1f}; ReLUs active {s.relu_active_fc1:.2f} (layer 1), {s.relu_active_fc2:.2f} (layer 2); "
        f"mean |logit| {s.logit_abs:.3f}"
        for s in r.rows
    )


RENDER = {"beta0": beta0_text, "pair": pair_text, "race": race_text, "transience": transience_text}
RENDER |= {"kstar": kstar_text, "collapse": collapse_text}  # ceiling: theory.ceiling.Ceiling's own text()
COMMANDS = {
    "beta0": beta0,
    "pair": pair,
    "race": race,
    "transience": transience,
    "kstar": kstar,
    "ceiling": ceiling,
    "collapse": collapse,
}
CEILING_SIZE = 4 * 10**8  # elements of one array of the ceiling's Monte Carlo (3.2 GB of float64)
OPTIONS = {
    "field": TEXT,
    "values": Option(float, many=True),
    "mlp": Option(str, many=True),
    "N": COUNT,
    "T": STEPS,
    "t_fixed": STEPS,
    "level": FRACTION,
    "lasting": COUNT,
    "counts": TEXT,
    "epsilon": Option(float, 0, many=True),
    "D": COUNT,
    "sequences": COUNT,
    "seed_id": Option(int, 0, INDEX_MAX),
    "at": Option(int, 1, INDEX_MAX, many=True),
}
DIRECTORIES = {"ceiling": "none", "kstar": "any"}  # ceiling: a Monte Carlo of the task's sequences; kstar: or counts=
