"""The levers on the race (issue 14 item 4; experiments/levers/README.md): pure summaries of finished
runs (`analysis.runs.FinishedRun`: the `rundir.Run`s a study loads, read through their typed config),
each a typed record (their text: `icl_race.studies.levers`).

  beta0       (a) per seed ln t_ICL against the beta0 measured at init, per cell and pooled
  pair        the same seeds under two settings (e.g. SGD and Adam): Spearman of their t_ICL
  lever_race  (b), (c) the K* the race predicts per lever value from MLP-only I_K(T) and K = inf t_ICL
  transience  (d) ICL's rise and fall per optimizer and L2 on the attention path, lasting losses
  kstar       (b), (c) the measured K* per lever value (logistic midpoint of the acquired fraction)

The copy-rule ceiling under item noise is theory: `icl_race.theory.ceiling`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from icl_race.analysis.draws import Bootstrap, Draws
from icl_race.analysis.memorization import Beta0Slope, log_t_vs_beta0, predict_k_star
from icl_race.analysis.memorization_summary import budgets_by_K
from icl_race.analysis.outcome import lasting_fall, seed_counts
from icl_race.analysis.race_summary import summarize_transience
from icl_race.analysis.record import Record
from icl_race.analysis.regime import rise_fraction
from icl_race.analysis.runs import FinishedRun
from icl_race.analysis.threshold import acquisition_curve, percentile_ci
from icl_race.configbase import ConfigError


@dataclass(frozen=True, order=True)
class Setting(Record):
    """What tells a lever's cells apart here (ordered as the cells are listed)."""

    optimizer: str
    lr: float
    qk_init_scale: float


def setting(run: FinishedRun) -> Setting:
    cfg = run.cfg
    return Setting(cfg.train.optimizer, cfg.train.lr, cfg.model.qk_init_scale)


def lever_value(run: FinishedRun, field: str) -> float:
    """The value of the lever `field` (`section.name`, e.g. task.epsilon) in a run; 0 where its system
    has no such field (the lever's default: no noise, no Zipf exponent)."""
    section, name = field.split(".")
    return float(getattr(getattr(run.cfg, section), name, 0.0))


@dataclass(frozen=True)
class Spread(Record):
    """A standard deviation over seeds with its bootstrap CI (`spread`)."""

    sd: float
    sd_ci: list[float | None] | None


def spread(values, bootstrap: Bootstrap) -> Spread:
    """Standard deviation of values with a bootstrap CI over seeds."""
    v = np.asarray(values, float)
    return Spread(float(np.std(v)), percentile_ci(bootstrap.replicates(np.std, v), bootstrap.confidence))


@dataclass(frozen=True)
class Beta0Cell(Setting):
    N: int
    seeds: int
    acquired: int
    beta0_mean: float
    fit: Beta0Slope | None  # log_t_vs_beta0 (None: < 3 acquired, or one beta0 for every seed)
    ln_t_spread: Spread | None  # None: none acquired
    beta0_spread: Spread


@dataclass(frozen=True)
class Beta0:
    cells: list[Beta0Cell]
    pooled: Beta0Slope  # log_t_vs_beta0 over every cell's seeds


def beta0(runs: Sequence[FinishedRun], draws: Draws) -> Beta0:
    """(a): per seed ln t_ICL against the beta0 measured at init, per init scale and pooled (theory
    slope -1); the spread of ln t_ICL beside the spread of ln e^-beta0 = -beta0 (equal if beta0 alone
    set t_ICL)."""
    boot = draws.bootstrap()
    rows, pooled_t, pooled_b = [], [], []
    for run in runs:
        t, b = np.asarray(run.t("icl"), float), np.asarray(run.curve("beta0"), float)[:, 0]
        ok = t > 0
        fit = log_t_vs_beta0(t, b, draws.bootstrap()) if ok.sum() > 2 and np.ptp(b[ok]) > 0 else None
        rows.append(
            Beta0Cell(
                **vars(setting(run)),
                N=run.cfg.task.N,
                **vars(seed_counts(ok)),
                beta0_mean=float(b.mean()),
                fit=fit,
                ln_t_spread=spread(np.log(t[ok]), boot) if ok.any() else None,
                beta0_spread=spread(b, boot),
            )
        )
        pooled_t.append(t)
        pooled_b.append(b)
    return Beta0(
        cells=sorted(rows, key=lambda c: (c.optimizer, c.lr, c.qk_init_scale)),
        pooled=log_t_vs_beta0(np.concatenate(pooled_t), np.concatenate(pooled_b), draws.bootstrap()),
    )


@dataclass(frozen=True)
class Pair:
    pairs: list  # per (cell of a, cell of b): settings a and b, seeds acquired in both, spearman, p


def pair(runs_a: Sequence[FinishedRun], runs_b: Sequence[FinishedRun]) -> Pair:
    """The same seeds (same initial weights) under two settings, e.g. SGD and Adam: the Spearman
    correlation of their t_ICL, per pair of cells, over the seeds both acquired."""

    def by_setting(runs):
        return {setting(r): dict(zip(r.seed_ids[r.kept].tolist(), r.t("icl").tolist())) for r in runs}

    a, b = by_setting(runs_a), by_setting(runs_b)
    rows = []
    for ka, ta in sorted(a.items()):
        for kb, tb in sorted(b.items()):
            seeds = sorted(s for s in ta.keys() & tb.keys() if ta[s] > 0 and tb[s] > 0)
            rho = stats.spearmanr([ta[s] for s in seeds], [tb[s] for s in seeds]) if len(seeds) > 2 else None
            rows.append(
                {
                    "a": ka,
                    "b": kb,
                    "seeds": len(seeds),
                    "spearman": None if rho is None else float(rho.statistic),
                    "p": None if rho is None else float(rho.pvalue),
                }
            )
    return Pair(pairs=rows)


@dataclass(frozen=True)
class LeverRace:
    field: str
    N: int
    T: float
    t_fixed: float | None
    values: list  # per lever value: its MLP-only dir, K, nu, C, where t_ICL came from, K* from K = inf and from t_fixed


def lever_race(
    field: str,
    values,
    mlp_runs_V: Sequence[Sequence[FinishedRun]],
    kinf_runs: Sequence[FinishedRun],
    N: int,
    draws: Draws,
    T: float = 10000,
    t_fixed: float | None = None,
    mlp_names=None,
) -> LeverRace:
    """(b), (c): the K* the race predicts at one N for each value of a lever, from the MLP-only I_K(T) = C K^nu
    measured under that value (the runs of `mlp_runs_V[v]`, I_K at the race's budget T) and the K =
    infinity median t_ICL of the `kinf_runs` at that N with that value of the lever (or, for a lever the
    K = infinity variant cannot take, such as Zipf frequencies, its default value). With t_fixed, also the
    K* = (t / C)^(1/nu) for that t, the same for every value: the shift that memorization alone predicts."""
    kinf = [r for r in kinf_runs if r.cfg.task.N == N]
    mlp_names = list(mlp_names) if mlp_names is not None else [str(i) for i in range(len(values))]
    rows = []
    for v, mlp_runs, name in zip(values, mlp_runs_V, mlp_names, strict=True):
        K, I_by_K = budgets_by_K([r for r in mlp_runs if lever_value(r, field) == v], T)
        same = [r for r in kinf if lever_value(r, field) == v]
        source = "the same value" if same else "the lever's default (no K = infinity cell with this value)"
        same = same or [r for r in kinf if lever_value(r, field) == 0.0]
        if len(same) != 1 or not K:
            raise ConfigError(
                f"{field} = {v}: {len(same)} K = infinity cells at N = {N} and "
                f"{len(K)} MLP-only cells reaching T = {T} (need 1 and some)"
            )
        (run,) = same
        t_icl = run.t("icl")
        # t_fixed as a cell of seeds that all acquire at t: its KM median is t, with no spread.
        times = [np.asarray(t_icl, float)] + ([np.full(t_icl.size, t_fixed)] if t_fixed else [])
        N_M = np.full(len(times), N)  # one N per cell of times
        pred = predict_k_star(K, I_by_K, N_M, times, float(run.budget), draws.bootstrap())
        rows.append(
            {
                "value": v,
                "mlp": name,
                "K": list(K),
                "nu": pred.nu,
                "C": pred.C,
                "t_icl_from": source,
                "kinf": pred.per_N[0].to_json(),
                "fixed": pred.per_N[1].to_json() if t_fixed else None,
            }
        )
    base = rows[0]
    for row in rows:
        for k in ("kinf", "fixed"):
            if row[k]:
                row[k]["shift"] = row[k]["k_star"] / base[k]["k_star"]
    return LeverRace(field=field, N=N, T=T, t_fixed=t_fixed, values=rows)


@dataclass(frozen=True)
class LeverTransience:
    level: float
    lasting: int
    cells: list  # per (optimizer, L2): counts, rise and fall (KM medians), lasting losses, final accuracies


def transience(runs: Sequence[FinishedRun], draws: Draws, level: float = 0.9, lasting: int = 10) -> LeverTransience:
    """(d): ICL's rise and fall (first evaluation after t_ICL with ICL accuracy < level) per optimizer and
    L2 on the attention path (analysis.race.summarize_transience, one optimizer at a time), with the seeds'
    median final ICL and IWL accuracies. A fall by that rule may be a one-evaluation dip, so also: the
    acquired seeds that stay below level for `lasting` consecutive evaluations (a lasting loss, the rule of
    `outcome.lasting_fall`), and those that end the run below it."""
    rows = []
    for opt in sorted({r.cfg.train.optimizer for r in runs}):
        mine = [r for r in runs if r.cfg.train.optimizer == opt]
        by_wd = {r.cfg.train.weight_decay_attn: r for r in mine}
        for row in summarize_transience(mine, draws, level).to_json()["cells"]:
            run = by_wd[row["weight_decay_attn"]]
            t_icl, icl_acc = run.t("icl"), run.curve("icl_acc")
            acquired = t_icl >= 0
            rows.append(
                {
                    "optimizer": opt,
                    "final_icl_acc_median": float(np.median(icl_acc[:, -1])),
                    "final_iwl_acc_median": float(np.median(run.curve("iwl_acc")[:, -1])),
                    "lost_lasting": int((lasting_fall(icl_acc, run.eval_steps, t_icl, level, lasting) >= 0).sum()),
                    "ended_below": int((acquired & (icl_acc[:, -1] < level)).sum()),
                    **{k: row[k] for k in ("weight_decay_attn", "seeds", "acquired", "fell", "budget", "rise", "fall")},
                }
            )
    return LeverTransience(level=level, lasting=lasting, cells=rows)


@dataclass(frozen=True)
class KStar:
    field: str
    N: int
    cells: list  # per (value, K): seeds, acquired, budget, median rise fraction, source directory
    kstar: list  # per value: acquisition_curve's fit (K*, its CI, bracketed)


def kstar_cells(field: str, N: int, sources, prior=None) -> list:
    """The finite-K cells at N of `sources` ((name, runs) pairs) beside `prior` (an earlier KStar's cells,
    kept for the (value, K) cells the sources lack); a cell in both must agree (the same config digest
    trains the same seeds), and keeps the prior's source."""
    rows = {(c["value"], c["K"]): c for c in (prior or [])}
    for name, runs in sources:
        for run in runs:
            cfg = run.cfg
            if cfg.task.N != N or getattr(cfg.task, "variant", None) == "infinite":
                continue
            t = np.asarray(run.t("icl"))
            r_S = rise_fraction(t, np.asarray(run.t("icl60")))
            cell = {
                "value": lever_value(run, field),
                "K": int(cfg.task.K),
                **seed_counts(t >= 0).to_json(),
                "budget": int(cfg.train.steps),
                "rise_fraction_median": float(np.nanmedian(r_S)) if (t >= 0).any() else None,
                "source": str(name),
            }
            old = rows.get((cell["value"], cell["K"]))
            if old and (old["seeds"], old["acquired"]) != (cell["seeds"], cell["acquired"]):
                raise ConfigError(
                    f"{field} = {cell['value']:g}, K = {cell['K']}: {name} has {cell['acquired']}/"
                    f"{cell['seeds']} acquired, the earlier counts {old['acquired']}/{old['seeds']}"
                )
            rows[(cell["value"], cell["K"])] = {**cell, "source": old["source"] if old else cell["source"]}
    return [rows[k] for k in sorted(rows)]


def kstar(field: str, N: int, cells, bootstrap: Bootstrap) -> KStar:
    """(b), (c): K* per value of a lever at one N, the logistic midpoint of the acquired fraction against
    log K (analysis.threshold.acquisition_curve, the report's estimator) over `cells` (kstar_cells), with
    each cell's median rise fraction r (analysis.regime) where its seeds were at hand."""
    fits = []
    for v in sorted({c["value"] for c in cells}):
        mine = [c for c in cells if c["value"] == v]
        outcomes = [np.arange(c["seeds"]) < c["acquired"] for c in mine]
        fit = acquisition_curve(np.log10([c["K"] for c in mine]), outcomes, bootstrap)
        fits.append({"value": v, **{k: x for k, x in fit.to_json().items() if k != "boot_log10_kstar"}})
    return KStar(field=field, N=N, cells=list(cells), kstar=fits)


@dataclass(frozen=True)
class NetworkState(Record):
    """What collapse reads off a batch's activations at one step (`network_state`)."""

    step: int
    icl_acc: float
    train_loss: float
    score_spread: float  # of the query's attention logits over its context (a hard argmax when large)
    relu_active_fc1: float  # the fraction of each ReLU layer active
    relu_active_fc2: float
    logit_abs: float  # the mean |logit|


def network_state(
    step: int, icl_acc: float, train_loss: float, scores_BxN, relu1_BxW, relu2_BxW, logit_B
) -> NetworkState:
    return NetworkState(
        int(step),
        float(icl_acc),
        float(train_loss),
        float(np.mean(np.std(np.asarray(scores_BxN), axis=-1))),
        float(np.mean(np.asarray(relu1_BxW) > 0)),
        float(np.mean(np.asarray(relu2_BxW) > 0)),
        float(np.mean(np.abs(np.asarray(logit_B)))),
    )


@dataclass(frozen=True)
class Collapse:
    """(c): one seed's network along its training (experiments/levers/, epsilon = 1 at K = infinity: ICL
    rose, then the training loss went back to ln 2 with nothing to memorize)."""

    dir: str
    seed: int
    rows: list[NetworkState]  # per inspected step
