"""In-context linear regression with linear attention (arXiv 2501.16265) as an engine program, plus an
adaptive gradient-flow integrator for horizons that fixed-step GD cannot reach.

The program trains each seed by full-batch gradient descent on the fast path ŷ = βᵀ Γ x_q, with either the
population moments (P = ∞, the paper's theory model exactly) or the exact moments of a fixed training set
of P sequences (shared by all seeds, or one per seed), or — for softmax attention, which has no fast path —
on the token-level model over a fixed training set. Time is in units of τ: a step of `dt` is
W −= (dt/2) ∂L/∂W, the Euler step of τ Ẇ = −½ ∂L/∂W (Eq. 5).

Probes (per evaluation, per seed): loss (the training loss: population or finite-P), pop_loss (population
loss of the same Γ; absent for softmax and in_weight), gamma_eig (D,) = diag(Eᵀ Γ E), the map along each
eigenvector (Eq. 22 predicts 1/(λ_d c_d) for d ≤ m at plateau m, 0 beyond; absent likewise), v (H,); for
attn_s also k_norm, q_norm (H,) and k_align, q_align (H, R, D) = e_dᵀ k_ir, e_dᵀ q_ir; for attn_m / mlp
u_norm (H,) = ‖U_i‖_F (W1's rows); with test_size > 0, iw_loss and ic_loss: the losses on the reference's
fixed in-weight test set (generated with icl_fraction 0) and in-context test set (icl_fraction 1),
test_size sequences each, on the training path.

Events (first passages, recorded on the device): m1 … mD, "loss ≤ L(M_m) + plateau_frac · (L(M_{m−1}) −
L(M_m))" with the population plateaus of Eq. 19 (the pre-registered t_m of the single-head test), and
converged, "loss ≤ L(M_D) + converged_tol". With finite P the training plateaus differ slightly from Eq. 19.

float64 throughout: build and run inside `with jax.enable_x64(True):` (engine calls included).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from icl_race import config
from icl_race.configbase import Config
from icl_race.engine.program import Program
from icl_race.models.linear_attention import LinearAttention, gamma_loss
from icl_race.tasks import regression as task
from icl_race.tasks.regression import F64
from icl_race.theory import linear_attention as theory

# The keywords of `LinearAttentionRegression.build` and the config fields they set.
BUILD_FIELDS = {
    "model": "model.kind",
    "H": "model.heads",
    "R": "model.rank",
    "softmax": "model.softmax",
    "temperature": "model.temperature",
    "in_weight": "model.in_weight",
    "init_scheme": "model.init_scheme",
    "init_scale": "model.init_scale",
    "dt": "train.lr",
    **{
        name: f"task.{name}"
        for name in (
            "D",
            "N",
            "icl_fraction",
            "test_size",
            "spectrum",
            "alpha",
            "lambdas",
            "rotate",
            "cov_seed",
            "P",
            "center",
            "whiten",
            "data_seed",
            "per_seed_data",
            "path",
            "plateau_frac",
            "converged_tol",
        )
    },
}


@dataclass(frozen=True)
class LinearAttentionRegression(Program):
    model: LinearAttention
    N: int
    P: int = 0  # training sequences; 0 = population (P = ∞)
    path: str = "moments"  # moments (fast path) | tokens (token-level; the only one for softmax)
    init_scheme: str = "balanced"
    per_seed_data: bool = False
    center: bool = True
    whiten: bool = True
    freeze_event: str | None = None

    stop_event = "converged"  # the run's headline time: loss within converged_tol of L(M_D)

    @property
    def event_names(self) -> tuple[str, ...]:
        return (*(f"m{m}" for m in range(1, self.model.D + 1)), "converged")

    # ---- set-up -------------------------------------------------------------------------------

    @classmethod
    def from_config(cls, cfg: Config) -> tuple[LinearAttentionRegression, dict]:
        """(program, consts) for a validated config (systems/linear_attention_spec.py). Static
        (recompiling) fields: shapes, model kind, P, path, data options. Traced (consts): train.lr (dt,
        in units of τ), init_scale, icl_fraction, Λ's eigenvectors, the moments and the event thresholds.

        task.converged_tol = 0 means 1% of the last plateau gap L(M_{D−1}) − L(M_D). The fixed task vector
        of the in-weight mixture and the two test sets have keys of their own, so the training set of a
        given data_seed is the same whatever icl_fraction and test_size."""
        task.require_x64()
        t, m, tr = cfg.task, cfg.model, cfg.train
        net = LinearAttention(m.kind, t.D, m.heads, m.rank, m.softmax, m.temperature, m.in_weight)
        program = cls(
            net,
            t.N,
            t.P,
            t.path,
            m.init_scheme,
            t.per_seed_data,
            t.center,
            t.whiten,
            "converged" if tr.early_stop == "freeze" else None,
        )

        lam_D = task.spectrum(t.spectrum, t.D, alpha=t.alpha, values=list(t.lambdas) or None)
        Lambda_DxD, E_DxD = task.covariance(lam_D, jax.random.key(t.cov_seed) if t.rotate else None)
        plateaus = theory.plateau_losses(lam_D, t.N)
        gaps = plateaus[:-1] - plateaus[1:]
        consts = {
            "dt": jnp.asarray(tr.lr, F64),
            "init_scale": jnp.asarray(m.init_scale, F64),
            "Lambda_DxD": Lambda_DxD,
            "E_DxD": E_DxD,
            "plateaus": jnp.asarray(plateaus, F64),
            "thresholds": jnp.asarray(plateaus[1:] + t.plateau_frac * gaps, F64),
            "converged_at": jnp.asarray(plateaus[-1] + (t.converged_tol or 0.01 * gaps[-1]), F64),
            "pop": task.population_moments(Lambda_DxD, t.N),
        }
        if t.P > 0:
            k_w, k_iw, k_ic = jax.random.split(jax.random.fold_in(jax.random.key(t.data_seed), 1), 3)
            consts["w_fixed_D"] = task.fixed_task_vector(k_w, t.D)
            consts["icl_fraction"] = jnp.asarray(t.icl_fraction, F64)  # traced: a sweep over it compiles once
        data = dict(center=t.center, whiten=t.whiten, w_fixed_D=consts.get("w_fixed_D"))
        if t.P > 0 and not t.per_seed_data:
            consts["train"] = program.prepare(
                task.sample_dataset(
                    jax.random.key(t.data_seed), t.P, t.N, Lambda_DxD, icl_fraction=t.icl_fraction, **data
                )
            )
        if t.test_size:
            consts["tests"] = {
                name: program.prepare(task.sample_dataset(k, t.test_size, t.N, Lambda_DxD, icl_fraction=c, **data))
                for name, k, c in (("iw", k_iw, 0.0), ("ic", k_ic, 1.0))
            }
        return program, consts

    @classmethod
    def build(cls, *, freeze_converged: bool = False, **fields) -> tuple[LinearAttentionRegression, dict]:
        """`from_config` for Python callers: each keyword sets the config field BUILD_FIELDS names (model =
        model.kind, H = model.heads, R = model.rank, dt = train.lr, D = task.D, ...; None keeps the
        default), every other field keeps the config's default, and the config's validation applies
        (a ConfigError names the field). path defaults to "tokens" with softmax (it has no fast path)."""
        if fields.get("softmax") and fields.get("path") is None:
            fields["path"] = "tokens"
        raw = {"task": {"kind": "linear_regression"}, "model": {}, "train": {}}
        for name, value in fields.items():
            if name not in BUILD_FIELDS:
                raise TypeError(f"build() got an unexpected keyword argument {name!r}")
            sec, key = BUILD_FIELDS[name].split(".")
            if value is not None:
                raw[sec][key] = value
        if freeze_converged:
            raw["train"]["early_stop"] = "freeze"
        return cls.from_config(config.from_dict(raw))

    def prepare(self, data: dict) -> dict:
        """A data set in the form the training path reads: its moments, or its tokens."""
        if self.path == "moments":
            return task.finite_moments(data)
        X_PxTxE, yq_P = task.tokens(data)
        return {"X_PxTxE": X_PxTxE, "yq_P": yq_P}

    def init(self, key, consts) -> dict:
        task.require_x64()
        k_model, k_data = jax.random.split(key)
        state = {"params": self.model.init(k_model, consts["init_scale"], self.init_scheme)}
        if self.per_seed_data:
            state["train"] = self.prepare(
                task.sample_dataset(
                    k_data,
                    self.P,
                    self.N,
                    consts["Lambda_DxD"],
                    center=self.center,
                    whiten=self.whiten,
                    icl_fraction=consts["icl_fraction"],
                    w_fixed_D=consts["w_fixed_D"],
                )
            )
        return state

    # ---- training -------------------------------------------------------------------------------

    def work_bytes(self) -> int:
        """One seed's largest live intermediates (engine/memory.py), float64: on the token path the
        full-batch pass over the P training sequences (tokens and per-head scores, or the cubic
        features of the MLP) three times over for the backward pass; the moments path keeps only
        D x D and D^2 x D^2 moments, already counted as constants or state."""
        if self.path != "tokens":
            return 0
        m = self.model
        per_sequence = m.D**3 if m.kind == "mlp" else (self.N + 1) * (m.D + 1 + m.H)
        return 8 * 3 * self.P * per_sequence

    def data_loss(self, params, data):
        """The loss on a data set from `prepare` (or the population moments)."""
        if self.path == "tokens":
            return self.model.token_loss(params, data["X_PxTxE"], data["yq_P"])
        return self.model.moment_loss(params, data)

    def train_loss(self, params, state, consts):
        if self.P <= 0:
            return self.data_loss(params, consts["pop"])
        return self.data_loss(params, state["train"] if self.per_seed_data else consts["train"])

    def step(self, state, consts, key):
        loss, grads = jax.value_and_grad(self.train_loss)(state["params"], state, consts)
        params = jax.tree.map(lambda p, g: p - 0.5 * consts["dt"] * g, state["params"], grads)
        return {**state, "params": params}, loss

    # ---- evaluation -----------------------------------------------------------------------------

    def probe(self, state, consts, key):
        params = state["params"]
        out = probes(self.model, params, consts, self.train_loss(params, state, consts))
        return out | {f"{name}_loss": self.data_loss(params, data) for name, data in consts.get("tests", {}).items()}

    def events(self, probes, consts):
        fired = {f"m{m}": probes["loss"] <= consts["thresholds"][m - 1] for m in range(1, self.model.D + 1)}
        return {**fired, "converged": probes["loss"] <= consts["converged_at"]}


def probes(model: LinearAttention, params: dict, consts: dict, loss) -> dict:
    """The per-head observables of one seed (see the module docstring)."""
    E_DxD = consts["E_DxD"]
    out = {"loss": loss, "v": model.head_values(params)}
    if not (model.softmax or model.in_weight):  # else Γ is not the whole model
        G_DxD = model.gamma(params)
        out["pop_loss"] = gamma_loss(G_DxD, consts["pop"])
        out["gamma_eig"] = jnp.einsum("id,ij,jd->d", E_DxD, G_DxD, E_DxD)
    if model.kind == "attn_s":
        for name in ("k", "q"):
            out[f"{name}_norm"] = jnp.sqrt(jnp.sum(params[name] ** 2, axis=(1, 2)))
            out[f"{name}_align"] = jnp.einsum("hri,id->hrd", params[name], E_DxD)
    else:
        U = params["W1"] if model.kind == "mlp" else params["U"].reshape(model.H, -1)
        out["u_norm"] = jnp.sqrt(jnp.sum(U**2, axis=1))
    return out


def log_subsample(eval_steps: np.ndarray, n: int) -> np.ndarray:
    """Indices into a linear evaluation grid nearest to n log-spaced times (unique, increasing): to thin
    a linearly evaluated run for plotting (train.eval_spacing = "log" records log-spaced times directly)."""
    eval_steps = np.asarray(eval_steps)
    targets = np.geomspace(eval_steps[0], eval_steps[-1], n)
    return np.unique(np.clip(np.searchsorted(eval_steps, targets), 0, len(eval_steps) - 1))


# ---- gradient flow with an adaptive implicit solver ----------------------------------------------------


def gradient_flow(
    model: LinearAttention,
    moments: dict,
    params0: dict,
    t_end: float,
    *,
    rtol: float = 1e-9,
    atol: float = 1e-14,
    method: str = "BDF",
    t_eval=None,
):
    """τ θ̇ = −½ ∇_θ L(θ) on the fast path from params0 (one seed) to t_end (in τ), by scipy's solve_ivp
    with the vector field and its Jacobian compiled by JAX.

    Why: escapes from late plateaus take ~1e6–1e8 τ while converged heads relax on a scale of ~1 τ, so
    the flow is stiff: fixed-step GD needs ~t_end/0.1 steps and explicit adaptive solvers are held to
    steps of ~1 τ by stability, whereas an implicit (BDF) solver takes steps as long as the dynamics
    allows. atol is tiny on purpose: escape is seeded by components of size ~init, which must be tracked
    relatively. Returns (solution with dense output: sol.sol(t) -> flat params (n,) or (n, T)), unravel)."""
    from scipy.integrate import solve_ivp

    task.require_x64()
    flat0, unravel = ravel_pytree(params0)
    field = jax.jit(lambda y: -0.5 * jax.grad(lambda p: model.moment_loss(unravel(p), moments))(y))
    jac = jax.jit(jax.jacfwd(field))
    sol = solve_ivp(
        lambda t, y: np.asarray(field(y)),
        (0.0, float(t_end)),
        np.asarray(flat0, np.float64),
        method=method,
        jac=lambda t, y: np.asarray(jac(y)),
        rtol=rtol,
        atol=atol,
        dense_output=True,
        t_eval=t_eval,
    )
    if sol.status < 0:
        raise RuntimeError(f"gradient flow failed: {sol.message}")
    return sol, unravel
