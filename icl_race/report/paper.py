"""The paper (arXiv 2412.00104) as the classification reports read it: its numbers (`PAPER`), its settings
(the classification race's defaults: what a run differs from them in, the scale it ran at) and the methods
paragraph every classification report ends with. Its claims beside ours are `claims.py`'s."""

from __future__ import annotations

import dataclasses

from icl_race import config
from icl_race.analysis.bimodality import MIN_N


@dataclasses.dataclass(frozen=True)
class Paper:
    """The paper's numbers the reports compare with (their claims' text: `claims.CLAIMS`)."""

    kstar_slope_measured: float = 1.41  # [secondary]: not found in the code or any available text
    kstar_slope_predicted: float = 1 / 0.7  # 1/nu with nu = 0.7 (the reference line of Fig 6A)
    bimodal_cell_N: int = 100  # Fig 6C
    bimodal_cell_K: int = 9666
    kstar_N100_order: float = 1e4  # [inferred] from the paper's grids
    balanced_metric_threshold: float = 0.75  # Fig 6E title: fraction of runs with ICL accuracy > 0.75


PAPER = Paper()
# Fields that do not change what a cell measures: cells that differ only in them are pooled.
IGNORED_FIELDS = {
    "ensemble.seeds",
    "ensemble.first_seed",
    "ensemble.root_seed",
    "ensemble.block",
    "train.evals_per_chunk",
    "task.K_max",
    "train.eval_batch",
}


def flat(cfg: dict) -> dict:
    return {f"{s}.{k}": v for s, sec in cfg.items() if isinstance(sec, dict) for k, v in sec.items()}


SCALE_FIELDS = {"model.width": "MLP width", "train.lr": "lr"}


def scale_text(configs: list[dict]) -> str:
    """The MLP width(s) and learning rate(s) of the runs a comparison reads, beside the paper's: a verdict
    at a reduced scale is the miniature's (experiments/README.md, *Miniature to paper*, per width)."""
    ref = flat(config.from_dict({}).to_dict())
    ours = [flat(c) for c in configs]
    seen = {k: sorted({c.get(k, ref[k]) for c in ours}) for k in SCALE_FIELDS}
    text = ", ".join(f"{name} {', '.join(f'{v:g}' for v in seen[k])}" for k, name in SCALE_FIELDS.items())
    return text + " (the paper: " + ", ".join(f"{name} {ref[k]:g}" for k, name in SCALE_FIELDS.items()) + ")"


def paper_differences(cfg: dict) -> list[str]:
    """Config fields that differ from the paper's settings (the defaults of the classification race)."""
    ref = flat(config.from_dict({}).to_dict())
    ours = flat(cfg)
    skip = IGNORED_FIELDS | {"train.early_stop", "train.stop_when_all_acquired"}
    return [
        f"{k}={ours[k]!r} (paper {ref[k]!r})" for k in sorted(ours) if k in ref and k not in skip and ours[k] != ref[k]
    ]


def methods_markdown() -> list[str]:
    return [
        "## Methods",
        "",
        "- Seeds that never acquired ICL are right-censored at the budget (Kaplan-Meier, censored likelihoods), "
        "never dropped; diverged seeds (results.npz `diverged`) are excluded and counted.",
        "- Kaplan-Meier: scipy.stats.ecdf, Greenwood variance with a log-log band; the median's CI inverts the "
        "band. Never-acquired fraction: Wilson interval.",
        "- Lognormal: censored maximum likelihood on all seeds, Wald CIs. Power law: Pareto above xmin (Clauset's KS "
        "choice of xmin), censored MLE; compared with a lognormal truncated at xmin by Vuong's likelihood ratio.",
        "- Bimodality: values are first spread uniformly over their grid cell (t_ICL over its evaluation period, "
        "accuracy over 1/eval_size) so that ties do not fake modes; Hartigan's dip test (diptest package), "
        "bimodality coefficient, 1- vs 2-Gaussian mixture BIC (sds floored at 10% of the sample's). A verdict "
        "is given where the three agree; where they do not, the report says which points where. Fewer than "
        f"{MIN_N} values are underpowered for the dip test.",
        "- Outcomes (`analysis/outcome.py`, docs/outcomes.md): an acquired seed is persistent (no lasting fall, ICL "
        "accuracy >= 0.9 at the end), falling (below 0.9 at the end, for fewer than 10 evaluations), transient (a "
        "lasting fall: >= 10 consecutive evaluations below 0.9 after t_ICL, and below at the end) or recovered (a "
        "lasting fall, then >= 0.9 at the end); then censored, diverged; counts with Wilson intervals; the time "
        "from t_ICL to the lasting fall by Kaplan-Meier, seeds without one censored at the end. Final accuracy = "
        "a seed's last finite evaluation.",
        "- Sweeps: logistic fit of the acquired fraction vs log10 K (K* = midpoint), the paper's 4-parameter "
        "sigmoid on final ICL accuracy (only with >= 5 values of K spanning the transition), bootstrap "
        "percentile CIs resampling seeds within cells, except K*'s where every K holds the same seeds (a seed's "
        "outcomes across K are one threshold: its ids are resampled together over every K); cells that differ only in their budget, evaluation "
        "period or retirement (train.stop_threshold, train.settle_iwl) share one K*(N) or t_ICL(N) group, and a seed "
        "run in two of them at one K counts once, read from the one without train.settle_iwl; a run "
        "with train.settle_iwl does not measure final accuracy (a settled seed ends when it retired), so it "
        "gets no final-accuracy bimodality or paper's sigmoid; two "
        "t_ICL distributions are compared by a log-rank test "
        "(scipy.stats.logrank). Each bootstrap draws from its own child of one SeedSequence (`--seed`), named by "
        "its section and the cells it resamples, so adding or reordering a section changes no other number.",
        "",
    ]
