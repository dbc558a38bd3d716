"""The levers on the race (issue 14 item 4; experiments/levers/README.md): pure summaries of finished
runs (`analysis.runs.FinishedRun`: the `rundir.Run`s a study loads, read through their typed config),
each a typed result with a `text()`.

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

from icl_race.analysis.draws import Bootstrap, Draws, generator
from icl_race.analysis.memorization import Beta0Slope, log_t_vs_beta0, predict_k_star
from icl_race.analysis.memorization_summary import budgets_by_K
from icl_race.analysis.outcome import seed_counts
from icl_race.analysis.race_summary import summarize_transience
from icl_race.analysis.regime import rise_fraction
from icl_race.analysis.runs import FinishedRun
from icl_race.analysis.text import ci_text, value_ci
from icl_race.analysis.threshold import acquisition_curve, percentile_ci
from icl_race.configbase import ConfigError

SETTING = ("optimizer", "lr", "qk_init_scale")  # what tells a lever's cells apart here


def setting(run: FinishedRun) -> dict:
    cfg = run.cfg
    return {"optimizer": cfg.train.optimizer, "lr": cfg.train.lr, "qk_init_scale": cfg.model.qk_init_scale}


def lever_value(run: FinishedRun, field: str) -> float:
    """The value of the lever `field` (`section.name`, e.g. task.epsilon) in a run; 0 where its system
    has no such field (the lever's default: no noise, no Zipf exponent)."""
    section, name = field.split(".")
    return float(getattr(getattr(run.cfg, section), name, 0.0))


def _label(c: dict) -> str:
    return f"{c['optimizer']} lr {c['lr']:g}, qk_init_scale {c['qk_init_scale']:g}"


def spread(values, n_boot: int, rng: np.random.Generator) -> dict:
    """Standard deviation of values with a bootstrap CI over seeds."""
    v = np.asarray(values, float)
    boot = [np.std(v[rng.integers(0, v.size, v.size)]) for _ in range(n_boot)]
    return {"sd": float(np.std(v)), "sd_ci": percentile_ci(boot, 0.95)}


def longest_run(mask_SxT: np.ndarray) -> np.ndarray:
    """The longest run of consecutive True per row."""
    longest, run = np.zeros(mask_SxT.shape[0], int), np.zeros(mask_SxT.shape[0], int)
    for col in mask_SxT.T:
        run = np.where(col, run + 1, 0)
        longest = np.maximum(longest, run)
    return longest


@dataclass(frozen=True)
class Beta0:
    cells: (
        list  # per cell: its setting, N, seeds, acquired, beta0_mean, fit (log_t_vs_beta0), ln_t_spread, beta0_spread
    )
    pooled: Beta0Slope  # log_t_vs_beta0 over every cell's seeds

    def text(self) -> str:
        lines = []
        for c in self.cells:
            f, s, sb = c["fit"], c["ln_t_spread"] or {"sd": float("nan"), "sd_ci": None}, c["beta0_spread"]
            slope = "not fitted (< 3 acquired)" if f is None else value_ci(f.slope, f.slope_ci, "{:.2f}")
            lines.append(
                f"{_label(c)} (N = {c['N']}): acquired {c['acquired']}/{c['seeds']}, mean beta0 "
                f"{c['beta0_mean']:.3f}; slope of ln t_ICL on beta0 {slope}; sd of ln t_ICL "
                f"{value_ci(s['sd'], s['sd_ci'], '{:.3f}')} vs sd of beta0 {value_ci(sb['sd'], sb['sd_ci'], '{:.3f}')}"
            )
        p = self.pooled
        lines.append(
            f"pooled: slope {value_ci(p.slope, p.slope_ci, '{:.2f}')} over {p.n} acquired seeds "
            f"({p.censored} censored, dropped)"
        )
        return "\n".join(lines)


def beta0(runs: Sequence[FinishedRun], n_boot: int = 1000, seed: int = 0) -> Beta0:
    """(a): per seed ln t_ICL against the beta0 measured at init, per init scale and pooled (theory
    slope -1); the spread of ln t_ICL beside the spread of ln e^-beta0 = -beta0 (equal if beta0 alone
    set t_ICL)."""
    rng = generator(seed)
    rows, pooled_t, pooled_b = [], [], []
    for run in runs:
        t, b = np.asarray(run.t("icl"), float), np.asarray(run.curve("beta0"), float)[:, 0]
        ok = t > 0
        fit = log_t_vs_beta0(t, b, Bootstrap(n_boot, generator(seed))) if ok.sum() > 2 else None
        rows.append(
            {
                **setting(run),
                "N": run.cfg.task.N,
                **seed_counts(ok).to_json(),
                "beta0_mean": float(b.mean()),
                "fit": fit,
                "ln_t_spread": spread(np.log(t[ok]), n_boot, rng) if ok.any() else None,
                "beta0_spread": spread(b, n_boot, rng),
            }
        )
        pooled_t.append(t)
        pooled_b.append(b)
    return Beta0(
        cells=sorted(rows, key=lambda c: tuple(c[k] for k in SETTING)),
        pooled=log_t_vs_beta0(np.concatenate(pooled_t), np.concatenate(pooled_b), Bootstrap(n_boot, generator(seed))),
    )


@dataclass(frozen=True)
class Pair:
    pairs: list  # per (cell of a, cell of b): settings a and b, seeds acquired in both, spearman, p

    def text(self) -> str:
        return "\n".join(
            f"{_label(row['a'])} vs {_label(row['b'])}: Spearman rho of t_ICL {row['spearman']:.2f} "
            f"(p = {row['p']:.2g}) over {row['seeds']} seeds acquired in both"
            for row in self.pairs
            if row["spearman"] is not None
        )


def pair(runs_a: Sequence[FinishedRun], runs_b: Sequence[FinishedRun]) -> Pair:
    """The same seeds (same initial weights) under two settings, e.g. SGD and Adam: the Spearman
    correlation of their t_ICL, per pair of cells, over the seeds both acquired."""

    def by_setting(runs):
        return {tuple(setting(r).values()): dict(zip(r.seed_ids[r.kept].tolist(), r.t("icl").tolist())) for r in runs}

    a, b = by_setting(runs_a), by_setting(runs_b)
    rows = []
    for ka, ta in sorted(a.items()):
        for kb, tb in sorted(b.items()):
            seeds = sorted(s for s in ta.keys() & tb.keys() if ta[s] > 0 and tb[s] > 0)
            rho = stats.spearmanr([ta[s] for s in seeds], [tb[s] for s in seeds]) if len(seeds) > 2 else None
            rows.append(
                {
                    "a": dict(zip(SETTING, ka)),
                    "b": dict(zip(SETTING, kb)),
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

    def text(self) -> str:
        lines = []
        for row in self.values:
            k, f = row["kinf"], row["fixed"]
            kinf = (
                (
                    f"{k['median_t_icl']:.0f} ({row['t_icl_from']}) -> K* {value_ci(k['k_star'], k['k_star_ci'])} "
                    f"(x{k['shift']:.2f})"
                )
                if np.isfinite(k["median_t_icl"])
                else f"not reached by the budget ({row['t_icl_from']}) -> no K*"
            )
            line = f"{self.field} = {row['value']:g}: nu {row['nu']:.3f}, C {row['C']:.3g}; K = inf median t_ICL {kinf}"
            if f:
                line += f"; at t = {self.t_fixed:g}: K* {value_ci(f['k_star'], f['k_star_ci'])} (x{f['shift']:.2f})"
            lines.append(line)
        return "\n".join(lines)


def lever_race(
    field: str,
    values,
    mlp_runs_V: Sequence[Sequence[FinishedRun]],
    kinf_runs: Sequence[FinishedRun],
    N: int,
    T: float = 10000,
    t_fixed: float | None = None,
    mlp_names=None,
    n_boot: int = 1000,
    seed: int = 0,
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
        pred = predict_k_star(
            K, I_by_K, np.full(len(times), N), times, float(run.budget), Bootstrap(n_boot, generator(seed))
        )
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

    def text(self) -> str:
        lines = []
        for row in self.cells:

            def med(d):
                return value_ci(d["median"], d.get("median_ci"))

            lines.append(
                f"{row['optimizer']}, L2 {row['weight_decay_attn']:g}: acquired {row['acquired']}/{row['seeds']} "
                f"(KM median t_ICL {med(row['rise'])}), fell {row['fell']}/{row['acquired']} (KM median fall "
                f"{med(row['fall'])}, budget {row['budget']:.0f}), lost for >= {self.lasting} evaluations "
                f"{row['lost_lasting']}, ended below {self.level:g} {row['ended_below']}; final ICL accuracy "
                f"{row['final_icl_acc_median']:.2f}, IWL {row['final_iwl_acc_median']:.2f} (seed medians)"
            )
        return "\n".join(lines)


def transience(
    runs: Sequence[FinishedRun], level: float = 0.9, lasting: int = 10, n_boot: int = 1000, seed: int = 0
) -> LeverTransience:
    """(d): ICL's rise and fall (first evaluation after t_ICL with ICL accuracy < level) per optimizer and
    L2 on the attention path (analysis.race.summarize_transience, one optimizer at a time), with the seeds'
    median final ICL and IWL accuracies. A fall by that rule may be a one-evaluation dip, so also: the
    acquired seeds that stay below level for `lasting` consecutive evaluations (a lasting loss), and
    those that end the run below it."""
    rows = []
    for opt in sorted({r.cfg.train.optimizer for r in runs}):
        mine = [r for r in runs if r.cfg.train.optimizer == opt]
        by_wd = {r.cfg.train.weight_decay_attn: r for r in mine}
        for row in summarize_transience(mine, Draws(seed, n_boot), level).to_json()["cells"]:
            run = by_wd[row["weight_decay_attn"]]
            t_icl, icl_acc = run.t("icl"), run.curve("icl_acc")
            acquired = t_icl >= 0
            after_SxT = (run.eval_steps[None, :] > t_icl[:, None]) & acquired[:, None]
            below_SxT = after_SxT & (icl_acc < level)
            rows.append(
                {
                    "optimizer": opt,
                    "final_icl_acc_median": float(np.median(icl_acc[:, -1])),
                    "final_iwl_acc_median": float(np.median(run.curve("iwl_acc")[:, -1])),
                    "lost_lasting": int((longest_run(below_SxT) >= lasting).sum()),
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

    def text(self) -> str:
        # The regime check beside each K*: a median rise fraction above the protocol's bound (0.10 at K =
        # infinity; 0.17-0.25 near K* without a lever) says ICL climbed to the threshold rather than jumped.
        def rise(c):
            return "" if c.get("rise_fraction_median") is None else f" (r {c['rise_fraction_median']:.2f})"

        lines = []
        for fit in self.kstar:
            v = fit["value"]
            counts = ", ".join(
                f"{c['acquired']}/{c['seeds']} at {c['K']:,}{rise(c)}" for c in self.cells if c["value"] == v
            )
            if not fit["ok"]:
                verdict = f"no K* ({fit['reason']})"
            else:
                verdict = f"K* {fit['kstar']:,.0f} {ci_text(fit['kstar_ci'], '{:,.0f}')}" + (
                    "" if fit["bracketed"] else ", not bracketed by the grid: an extrapolation"
                )
            lines.append(f"{self.field} = {v:g} (N = {self.N}): {verdict}; acquired {counts}")
        return "\n".join(lines)


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


def kstar(field: str, N: int, cells, n_boot: int = 1000, seed: int = 0) -> KStar:
    """(b), (c): K* per value of a lever at one N, the logistic midpoint of the acquired fraction against
    log K (analysis.threshold.acquisition_curve, the report's estimator) over `cells` (kstar_cells), with
    each cell's median rise fraction r (analysis.regime) where its seeds were at hand."""
    rng = generator(seed)
    fits = []
    for v in sorted({c["value"] for c in cells}):
        mine = [c for c in cells if c["value"] == v]
        fit = acquisition_curve(
            np.log10([c["K"] for c in mine]),
            [np.arange(c["seeds"]) < c["acquired"] for c in mine],
            Bootstrap(n_boot, rng),
        )
        fits.append({"value": v, **{k: x for k, x in fit.to_json().items() if k != "boot_log10_kstar"}})
    return KStar(field=field, N=N, cells=list(cells), kstar=fits)


@dataclass(frozen=True)
class Collapse:
    """(c): one seed's network along its training (experiments/levers/, epsilon = 1 at K = infinity: ICL
    rose, then the training loss went back to ln 2 with nothing to memorize)."""

    dir: str
    seed: int
    rows: list  # per inspected step: network_state's fields

    def text(self) -> str:
        return "\n".join(
            f"step {r['step']}: ICL accuracy {r['icl_acc']:.3f}, training loss {r['train_loss']:.3f}; "
            f"attention logit spread {r['score_spread']:.1f}; ReLUs active {r['relu_active_fc1']:.2f} "
            f"(layer 1), {r['relu_active_fc2']:.2f} (layer 2); mean |logit| {r['logit_abs']:.3f}"
            for r in self.rows
        )


def network_state(step: int, icl_acc: float, train_loss: float, scores_BxN, relu1_BxW, relu2_BxW, logit_B) -> dict:
    """What collapse reads off a batch's activations: the spread of the query's attention logits over its
    context (a hard argmax when large), the fraction of each ReLU layer active, the mean |logit|."""
    return {
        "step": int(step),
        "icl_acc": float(icl_acc),
        "train_loss": float(train_loss),
        "score_spread": float(np.mean(np.std(np.asarray(scores_BxN), axis=-1))),
        "relu_active_fc1": float(np.mean(np.asarray(relu1_BxW) > 0)),
        "relu_active_fc2": float(np.mean(np.asarray(relu2_BxW) > 0)),
        "logit_abs": float(np.mean(np.abs(np.asarray(logit_B)))),
    }
