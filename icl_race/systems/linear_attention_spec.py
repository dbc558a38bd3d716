"""In-context linear regression with linear attention (arXiv 2501.16265; task.kind = "linear_regression")
as a registered system: its [task] and [model] sections and their validation (the only place these fields
are checked: `LinearAttentionRegression.build` goes through it too), float64 always, its program
(`systems/linear_attention.py`) and report (`report/regression.py`). No jax."""

from __future__ import annotations

from dataclasses import dataclass

from icl_race.configbase import Config, System, check
from icl_race.theory.linear_attention import SPECTRA


@dataclass(frozen=True)
class RegressionTaskConfig:
    kind: str = "linear_regression"
    D: int = 4
    N: int = 31  # context tokens (the query is extra), the paper's N
    spectrum: str = "linear"  # white (I/D) | linear (lambda_d ~ d) | power (lambda_d ~ d^-alpha) | custom
    alpha: float = 2.0
    lambdas: tuple = ()  # the custom spectrum (normalised to trace 1)
    rotate: bool = False  # random eigenvectors (else the coordinate axes)
    cov_seed: int = 0
    P: int = 0  # training sequences; 0 = the population limit (P = infinity)
    center: bool = True  # the reference's centring of x and whitening of task vectors
    whiten: bool = True
    data_seed: int = 1
    per_seed_data: bool = False  # each seed draws its own training set
    path: str = "moments"  # moments (the sufficient-statistics fast path) | tokens
    plateau_frac: float = 0.05  # transition m = loss within this fraction of the gap above L(M_m)
    converged_tol: float = 0.0  # converged = loss below L(M_D) + this; 0 = 1% of the last gap
    icl_fraction: float = 1.0  # < 1: the reference's in-weight mixture (--icl c); 1: all in-context
    test_size: int = 0  # > 0: record iw_loss / ic_loss on fixed in-weight / in-context test sets of this size


@dataclass(frozen=True)
class LinearAttentionConfig:
    """Linear attention with merged (attn_m) or separate rank-R (attn_s) key/query, or the two-layer
    linear network on cubic features (mlp); softmax = true for the softmax variant (token path)."""

    kind: str = "attn_s"
    heads: int = 5
    rank: int = 1
    softmax: bool = False
    temperature: float = 1.0
    init_scheme: str = "balanced"  # balanced | entrywise | aligned
    init_scale: float = 1e-2
    in_weight: bool = False  # token path: also train ṽ_i, ũ_i (k̃_ir), the blocks that allow in-weight learning


INIT_SCHEMES = ("balanced", "entrywise", "aligned")


def validate(cfg: Config) -> None:
    t, m = cfg.task, cfg.model
    check(t.D >= 1, "task.D", t.D, "an integer >= 1")
    check(t.N >= 1, "task.N", t.N, "an integer >= 1 (context tokens)")
    check(t.spectrum in SPECTRA, "task.spectrum", t.spectrum, "one of " + ", ".join(f'"{s}"' for s in SPECTRA))
    check(
        t.spectrum != "custom" or (len(t.lambdas) == t.D and min(t.lambdas) > 0),
        "task.lambdas",
        list(t.lambdas),
        f'{t.D} positive numbers with task.spectrum = "custom"',
    )
    check(t.P >= 0, "task.P", t.P, "an integer >= 0 (0: the population limit)")
    check(not t.whiten or t.P == 0 or t.P > t.D + 1, "task.P", t.P, f"> D + 1 = {t.D + 1} with task.whiten")
    check(t.path in ("moments", "tokens"), "task.path", t.path, '"moments" or "tokens"')
    check(t.path == "moments" or t.P > 0, "task.P", t.P, '> 0 with task.path = "tokens" (a fixed training set)')
    check(not t.per_seed_data or t.P > 0, "task.per_seed_data", t.per_seed_data, "false when task.P = 0")
    check(0 < t.plateau_frac < 1, "task.plateau_frac", t.plateau_frac, "in (0, 1)")
    check(t.converged_tol >= 0, "task.converged_tol", t.converged_tol, ">= 0 (0: 1% of the last gap)")
    check(0 <= t.icl_fraction <= 1, "task.icl_fraction", t.icl_fraction, "in [0, 1] (1: in-context task only)")
    check(
        t.icl_fraction == 1 or t.P > 0,
        "task.icl_fraction",
        t.icl_fraction,
        "1 when task.P = 0 (a mixture needs a fixed training set)",
    )
    check(t.test_size >= 0, "task.test_size", t.test_size, "an integer >= 0 (0: no test sets)")
    check(t.test_size == 0 or t.P > 0, "task.test_size", t.test_size, "0 when task.P = 0")
    check(
        t.test_size == 0 or not t.whiten or t.test_size > t.D + 1,
        "task.test_size",
        t.test_size,
        f"0 or > D + 1 = {t.D + 1} with task.whiten (the test sets are whitened too)",
    )
    check(m.heads >= 1, "model.heads", m.heads, "an integer >= 1")
    check(m.temperature > 0, "model.temperature", m.temperature, "a finite number > 0 (the softmax temperature)")
    check(m.kind != "attn_s" or 1 <= m.rank <= t.D, "model.rank", m.rank, f"in [1, task.D = {t.D}]")
    check(
        not m.softmax or (m.kind != "mlp" and t.path == "tokens"),
        "model.softmax",
        m.softmax,
        'false unless model.kind is attn_m/attn_s and task.path = "tokens"',
    )
    check(
        not m.in_weight or (m.kind != "mlp" and t.path == "tokens"),
        "model.in_weight",
        m.in_weight,
        'false unless model.kind is attn_m/attn_s and task.path = "tokens"',
    )
    check(
        m.init_scheme in INIT_SCHEMES, "model.init_scheme", m.init_scheme, 'one of "balanced", "entrywise", "aligned"'
    )
    check(
        m.init_scheme != "aligned" or m.kind != "attn_s",
        "model.init_scheme",
        m.init_scheme,
        '"balanced" or "entrywise" with model.kind = "attn_s" (the aligned init is Eq. 10\'s, for attn_m and mlp)',
    )
    check(m.init_scale > 0, "model.init_scale", m.init_scale, "a finite number > 0")
    check(
        cfg.train.optimizer == "sgd",
        "train.optimizer",
        cfg.train.optimizer,
        '"sgd" with task.kind = "linear_regression" (full-batch gradient descent in units of tau)',
    )


def always(cfg: Config) -> bool:
    """Linear regression runs in float64 throughout (tasks/regression.py refuses float32)."""
    return True


def describe(cfg: Config) -> str:
    t = cfg.task
    return f"{cfg.model.kind} D={t.D} N={t.N} P={t.P or 'inf'}"


SYSTEM = System(
    task=RegressionTaskConfig,
    model=LinearAttentionConfig,
    model_kinds=("attn_s", "attn_m", "mlp"),
    validate=validate,
    program="icl_race.systems.linear_attention:LinearAttentionRegression",
    describe=describe,
    needs_x64=always,
    report="icl_race.report.regression",
)
