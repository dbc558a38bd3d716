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

from icl_race.config import Config
from icl_race.models.linear_attention import LinearAttention, gamma_loss
from icl_race.tasks import regression as task
from icl_race.tasks.regression import F64
from icl_race.theory import linear_attention as theory

PATHS = ("moments", "tokens")


@dataclass(frozen=True)
class LinearAttentionRegression:
    model: LinearAttention
    N: int
    P: int = 0                 # training sequences; 0 = population (P = ∞)
    path: str = "moments"      # moments (fast path) | tokens (token-level; the only one for softmax)
    init_scheme: str = "balanced"
    per_seed_data: bool = False
    center: bool = True
    whiten: bool = True
    freeze_event: str | None = None

    @staticmethod
    def needs_x64(cfg: Config) -> bool:
        """Whether this config's runs need `with jax.enable_x64(True):` (systems.precision): always."""
        return True
    stop_event = "converged"  # the run's headline time: loss within converged_tol of L(M_D)

    @property
    def event_names(self) -> tuple[str, ...]:
        return (*(f"m{m}" for m in range(1, self.model.D + 1)), "converged")

    # ---- set-up -------------------------------------------------------------------------------

    @classmethod
    def from_config(cls, cfg) -> tuple["LinearAttentionRegression", dict]:
        t, m, tr = cfg.task, cfg.model, cfg.train
        return cls.build(model=m.kind, D=t.D, N=t.N, H=m.heads, R=m.rank, softmax=m.softmax,
                         temperature=m.temperature, in_weight=m.in_weight, icl_fraction=t.icl_fraction,
                         test_size=t.test_size, spectrum=t.spectrum, alpha=t.alpha,
                         lambdas=list(t.lambdas) or None, rotate=t.rotate, cov_seed=t.cov_seed, P=t.P,
                         center=t.center, whiten=t.whiten, data_seed=t.data_seed, per_seed_data=t.per_seed_data,
                         path=t.path, init_scheme=m.init_scheme, init_scale=m.init_scale, dt=tr.lr,
                         plateau_frac=t.plateau_frac, converged_tol=t.converged_tol or None,
                         freeze_converged=tr.early_stop == "freeze")

    @classmethod
    def build(cls, *, model: str = "attn_s", D: int = 4, N: int = 31, H: int = 5, R: int = 1,
              softmax: bool = False, temperature: float = 1.0, in_weight: bool = False,
              icl_fraction: float = 1.0, test_size: int = 0,
              spectrum: str = "linear", alpha: float = 2.0, lambdas=None, rotate: bool = False,
              cov_seed: int = 0, P: int = 0, center: bool = True, whiten: bool = True, data_seed: int = 1,
              per_seed_data: bool = False, path: str | None = None,
              init_scheme: str = "balanced", init_scale: float = 1e-2, dt: float = 0.1,
              plateau_frac: float = 0.05, converged_tol: float | None = None,
              freeze_converged: bool = False) -> tuple["LinearAttentionRegression", dict]:
        """(program, consts). Static (recompiling) fields: shapes, model kind, P, path, data options.
        Traced (consts): dt, init_scale, icl_fraction, Λ's eigenvectors, the moments and the event
        thresholds.

        converged_tol defaults to 1% of the last plateau gap L(M_{D−1}) − L(M_D). The fixed task vector
        of the in-weight mixture and the two test sets have keys of their own, so the training set of a
        given data_seed is the same whatever icl_fraction and test_size."""
        task.require_x64()
        path = path or ("tokens" if softmax else "moments")
        if path not in PATHS:
            raise ValueError(f"path {path!r} not in {PATHS}")
        if (softmax or in_weight) and path != "tokens":
            raise ValueError("softmax attention and in_weight have no moments fast path: use path='tokens'")
        if (icl_fraction < 1 or test_size) and P <= 0:
            raise ValueError("the in-weight mixture and the test sets need a finite training set (P > 0)")
        if path == "tokens" and P <= 0:
            raise ValueError("the token path trains on a fixed set: P must be > 0")
        if per_seed_data and P <= 0:
            raise ValueError("per_seed_data needs a finite training set (P > 0)")
        net = LinearAttention(model, D, H, R, softmax, temperature, in_weight)
        program = cls(net, N, P, path, init_scheme, per_seed_data, center, whiten,
                      "converged" if freeze_converged else None)

        lam_D = task.spectrum(spectrum, D, alpha=alpha, values=lambdas)
        Lambda_DxD, E_DxD = task.covariance(lam_D, jax.random.key(cov_seed) if rotate else None)
        plateaus = theory.plateau_losses(lam_D, N)
        gaps = plateaus[:-1] - plateaus[1:]
        consts = {
            "dt": jnp.asarray(dt, F64),
            "init_scale": jnp.asarray(init_scale, F64),
            "Lambda_DxD": Lambda_DxD,
            "E_DxD": E_DxD,
            "plateaus": jnp.asarray(plateaus, F64),
            "thresholds": jnp.asarray(plateaus[1:] + plateau_frac * gaps, F64),
            "converged_at": jnp.asarray(plateaus[-1] + (0.01 * gaps[-1] if converged_tol is None
                                                        else converged_tol), F64),
            "pop": task.population_moments(Lambda_DxD, N),
        }
        if P > 0:
            k_w, k_iw, k_ic = jax.random.split(jax.random.fold_in(jax.random.key(data_seed), 1), 3)
            consts["w_fixed_D"] = task.fixed_task_vector(k_w, D)
            consts["icl_fraction"] = jnp.asarray(icl_fraction, F64)  # traced: a sweep over it compiles once
        if P > 0 and not per_seed_data:
            consts["train"] = program.prepare(task.sample_dataset(
                jax.random.key(data_seed), P, N, Lambda_DxD, center=center, whiten=whiten,
                icl_fraction=icl_fraction, w_fixed_D=consts["w_fixed_D"]))
        if test_size:
            consts["tests"] = {name: program.prepare(task.sample_dataset(
                k, test_size, N, Lambda_DxD, center=center, whiten=whiten, icl_fraction=c,
                w_fixed_D=consts["w_fixed_D"])) for name, k, c in (("iw", k_iw, 0.0), ("ic", k_ic, 1.0))}
        return program, consts

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
            state["train"] = self.prepare(task.sample_dataset(
                k_data, self.P, self.N, consts["Lambda_DxD"], center=self.center, whiten=self.whiten,
                icl_fraction=consts["icl_fraction"], w_fixed_D=consts["w_fixed_D"]))
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

def gradient_flow(model: LinearAttention, moments: dict, params0: dict, t_end: float, *,
                  rtol: float = 1e-9, atol: float = 1e-14, method: str = "BDF", t_eval=None):
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
    sol = solve_ivp(lambda t, y: np.asarray(field(y)), (0.0, float(t_end)), np.asarray(flat0, np.float64),
                    method=method, jac=lambda t, y: np.asarray(jac(y)), rtol=rtol, atol=atol,
                    dense_output=True, t_eval=t_eval)
    if sol.status < 0:
        raise RuntimeError(f"gradient flow failed: {sol.message}")
    return sol, unravel
