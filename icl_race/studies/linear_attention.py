"""The linear-attention study (experiments/linear_attention/, issue 6): the single-active-head test, which
trains its own seeds (no directories).

  single_head  [--set seeds=20 --set scales=1e-2,1e-3 --set checks=1 --set horizon=1e9]
               the pre-registered test (experiments/linear_attention/single_head_protocol.md): ATTN_S, R = 1,
               D = 8, H = 16, N = 31, λ_d ∝ d⁻², population loss; seeds 0..seeds−1 of each init scale σ by
               float64 gradient flow (BDF) to `horizon` τ, read by `icl_race.analysis.single_head`; with
               checks, the protocol's numerical checks (each scale's seed 0 at rtol 1e-11; engine GD through
               `icl_race.run.retrain.train_seeds` against the flow). About 5 s a seed on one CPU core, 3-5 min in
               all; also writes the tables as <out stem>.md.

A seed's trajectory is the engine's: its init is the program's for seed id s (root seed 0), its flow
`systems.linear_attention.gradient_flow` on the program's own population loss.
"""

from __future__ import annotations

import os

# Before scipy's LAPACK loads (nothing on the way to `icl-race analyze` loads it): BDF factorises a 272 x 272
# Jacobian at every step, and multi-threaded OpenBLAS makes that ~20x slower on a shared 2-core CPU (5 s a
# seed against 95 s). Without effect in a process that loaded scipy.linalg before importing this module.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import dataclasses
import json
import math
import sys
import time
from dataclasses import dataclass, replace

import numpy as np

from icl_race.analysis import single_head as sh
from icl_race.analysis.draws import Draws
from icl_race.config import ConfigError
from icl_race.studies.inputs import COUNT, Option, listed

PROTOCOL = "single_head_protocol.md"
D, N, H = 8, 31, 16
RTOL, ATOL, CHECK_RTOL = 1e-9, 1e-14, 1e-11
GRID_POINTS = 4000  # the bracketing grid: 0, then geometric from 1e-2 τ to the horizon (0.5% spacing)
GD_DT, GD_EVERY = 0.1, 20  # check (b): engine GD at 0.1 τ a step, evaluated every 20 steps (2 τ)


# ---- the whole test: per init scale, with the numerical checks, and its markdown tables -----------------


@dataclass(frozen=True)
class ScaleResult:
    seeds: list  # of SeedStaircase
    table: list  # of TransitionSummary


@dataclass(frozen=True)
class SingleHead:
    """The test at each init scale σ (scales: f"{σ:g}" -> ScaleResult), with the protocol's numerical
    checks (None when not run): "rtol_1e-11_seed0_scale_<σ>" -> ToleranceCheck per scale and
    "gd_dt0.1_vs_flow_seed0_scale_0.01" -> GdVsFlow."""

    protocol: str
    D: int
    N: int
    H: int
    horizon: float
    rtol: float
    atol: float
    scales: dict
    checks: dict | None = None

    def text(self) -> str:
        f = lambda x: f"{x[0]:.3g} [{x[1]:.3g}, {x[2]:.3g}]"
        lines = [
            "# Single-active-head test: results",
            "",
            f"Protocol: `{self.protocol}` (pre-registered). ATTN_S, R = 1, D = {self.D}, H = {self.H}, "
            f"N = {self.N}, λ_d ∝ d⁻², population loss, float64 gradient flow (BDF, rtol {_e(self.rtol)}, "
            f"atol {_e(self.atol)}) to {_e(self.horizon)} τ.",
            "",
        ]
        for scale, res in self.scales.items():
            lines += [
                f"## σ = {scale} ({len(res.seeds)} seeds)",
                "",
                "| m→m+1 | n | cens. | #active 1/2/3/≥4 (0) | exactly one | median | exactly one @5% / @20% "
                "| escape ratio median [95% CI] | midpoint ratio | ratio (geo v) | i* active / moves most "
                "| cos k, cos q at t_m | v/‖k‖, ‖q‖/‖k‖ | max unrecruited v / v_i* | verdict |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
            ]
            for e in res.table:
                if e.active_hist is None:
                    lines.append(
                        f"| {e.m}→{e.m + 1} | {e.seeds} | {e.censored} | – | – | – | – | – | – | – "
                        "| – | – | – | – | censored |"
                    )
                    continue
                h = e.active_hist
                verdict = ("holds" if e.holds else "fails") + "; escape " + ("adequate" if e.escape_adequate else "off")
                lines.append(
                    f"| {e.m}→{e.m + 1} | {e.seeds} | {e.censored} | {h['1']}/{h['2']}/{h['3']}/{h['>=4']} ({h['0']}) "
                    f"| {e.frac_exactly_one:.2f} | {e.median_active:.0f} "
                    f"| {e.frac_exactly_one_5pct:.2f} / {e.frac_exactly_one_20pct:.2f} | {f(e.ratio)} "
                    f"| {f(e.ratio_half)} | {e.ratio_geo[0]:.3g} | {e.head_active:.2f} / {e.head_moves_most:.2f} "
                    f"| {e.median_cos_k:.3f}, {e.median_cos_q:.3f} | {e.median_v_over_k:.2f}, {e.median_q_over_k:.2f} "
                    f"| {e.median_max_unrecruited_v_ratio:.2f} | {verdict} |"
                )
            lines += [
                "",
                "Post hoc (not pre-registered; see the protocol's amendment): the escaping head j = the head "
                "whose v moves most in the transition; u = the pre-registered score restricted to heads not "
                "active in an earlier transition.",
                "",
                "| m→m+1 | ratio with v_j(t_m) [95% CI] | midpoint ratio (j) | ratio with geo v_j | cos k_j, cos q_j "
                "| v_j/‖k_j‖, ‖q_j‖/‖k_j‖ | u = j | j active before | ratio with v_u [95% CI] |",
                "|---|---|---|---|---|---|---|---|---|",
            ]
            for e in res.table:
                if e.active_hist is None:
                    continue
                lines.append(
                    f"| {e.m}→{e.m + 1} | {f(e.esc_ratio)} | {f(e.esc_ratio_half)} "
                    f"| {f(e.esc_ratio_geo)} | {e.median_esc_cos_k:.3f}, {e.median_esc_cos_q:.3f} "
                    f"| {e.median_esc_v_over_k:.2f}, {e.median_esc_q_over_k:.2f} | {e.unrec_is_esc:.2f} "
                    f"| {e.esc_was_recruited:.2f} | {f(e.unrec_ratio)} |"
                )
            lines += [
                "",
                "Median t_m (τ): "
                + ", ".join(f"t_{m}={sh.nanmedian([s.t_m[m] for s in res.seeds]):.3g}" for m in range(1, self.D + 1)),
                "",
            ]
        if self.checks:
            checks = {k: dataclasses.asdict(v) for k, v in self.checks.items()}  # as the JSON holds them
            lines += ["## Numerical checks", "", "```", json.dumps(checks, indent=1), "```", ""]
        return "\n".join(lines)


def _e(x: float) -> str:
    """1e-09 -> 1e-9, 1e+09 -> 1e9: powers of ten as the protocol writes them."""
    if x > 0 and math.log10(x) == round(math.log10(x)):
        return f"1e{round(math.log10(x))}"
    return f"{x:g}"


# ---- the test's seeds ------------------------------------------------------------------------------


def config_of(scale: float, **train):
    """The setup as a config: ATTN_S, R = 1, λ_d ∝ d⁻², init scale σ, GD at dt = 0.1 τ a step (train.lr,
    used by check (b) only), one seed per vmap; `train` sets further [train] fields."""
    from icl_race import config

    return config.from_dict(
        {
            "task": {
                "kind": "linear_regression",
                "D": D,
                "N": N,
                "spectrum": "power",
                "alpha": 2.0,
                "plateau_frac": sh.PLATEAU_FRAC,
            },
            "model": {"kind": "attn_s", "heads": H, "rank": 1, "init_scale": scale},
            "train": {"lr": GD_DT, **train},
            "ensemble": {"seeds": 1, "block": 1},
        }
    )


def grid(horizon: float) -> np.ndarray:
    return np.concatenate([[0.0], np.geomspace(1e-2, horizon, GRID_POINTS)])


def flow(program, consts, seed: int, horizon: float, rtol: float = RTOL):
    """Seed `seed` by gradient flow to `horizon`: (the solver's solution, observe) with observe(t) ->
    (loss_T, v_TxH, k_TxHxD, q_TxHxD) from its dense output, as analysis.single_head reads it."""
    import jax
    import jax.numpy as jnp

    from icl_race.engine.ensemble import INIT_STREAM, seed_keys
    from icl_race.systems.linear_attention import gradient_flow

    key = seed_keys(0, np.array([seed]))[0]  # exactly the engine's init of seed id `seed` (root seed 0)
    params0 = program.init(jax.random.fold_in(key, INIT_STREAM), consts)["params"]
    model, moments = program.model, consts["pop"]
    sol, unravel = gradient_flow(model, moments, params0, horizon, rtol=rtol, atol=ATOL)

    @jax.jit
    def at(Y_nxT):
        def one(y):
            p = unravel(y)  # Λ is diagonal: e_dᵀ k_i = k_i[d]; rank 1: the head's one key and query
            return model.moment_loss(p, moments), p["v"], p["k"][:, 0, :], p["q"][:, 0, :]

        return jax.vmap(one, in_axes=1)(Y_nxT)

    def observe(t):
        return tuple(np.asarray(x) for x in at(jnp.asarray(sol.sol(np.atleast_1d(np.asarray(t, np.float64))))))

    return sol, observe


def one_seed(program, consts, seed: int, horizon: float, rtol: float = RTOL) -> sh.SeedStaircase:
    from icl_race.tasks.regression import spectrum

    tic = time.perf_counter()
    sol, observe = flow(program, consts, seed, horizon, rtol)
    res = sh.staircase_seed(
        observe, grid(horizon), spectrum("power", D, alpha=2.0), N, seed=seed, solver_steps=sol.t.size
    )
    return replace(res, seconds=time.perf_counter() - tic)


def _flag(v) -> bool:
    text = str(v).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"--set checks={v}: expected 1 or 0 (true or false)")


def single_head(
    dirs, *, seeds: int = 20, scales=(1e-2, 1e-3), checks=1, horizon: float = 1e9, draws: Draws = Draws(0, 2000)
) -> SingleHead:
    """The test on seeds 0..seeds−1 at each init scale (`draws`: the bootstrap's root and count)."""
    import jax

    from icl_race.systems.linear_attention import LinearAttentionRegression

    # seeds >= 1, scales > 0 and horizon > 1e-2: OPTIONS, checked before the command calls this
    scales, horizon, run_checks = [float(s) for s in listed(scales)], float(horizon), _flag(checks)
    out, zero = {}, {}
    with jax.enable_x64(True):
        for scale in scales:
            program, consts = LinearAttentionRegression.from_config(config_of(scale))
            done = []
            for s in range(int(seeds)):
                done.append(one_seed(program, consts, s, horizon))
                print(
                    f"σ={scale:g} seed {s}: t_m = "
                    + " ".join(f"{t:.3g}" for t in done[-1].t_m[1:])
                    + " active = "
                    + " ".join(str(r.n_active[str(sh.PRIMARY)]) if r.n_active else "c" for r in done[-1].transitions)
                    + f" ({done[-1].seconds:.1f} s)",
                    file=sys.stderr,
                    flush=True,
                )
            out[f"{scale:g}"] = ScaleResult(seeds=done, table=sh.summarise(done, draws.bootstrap()))
            zero[scale] = done[0]
        found = _checks(scales, zero, horizon) if run_checks else None
    return SingleHead(protocol=PROTOCOL, D=D, N=N, H=H, horizon=horizon, rtol=RTOL, atol=ATOL, scales=out, checks=found)


def _checks(scales, zero: dict, horizon: float) -> dict:
    """(a) seed 0 of each scale again at rtol 1e-11; (b) engine GD at dt = 0.1 τ for seed 0 at σ = 1e-2,
    its first passages t_1, t_2 on its evaluation grid against the flow's (float64, as the flow)."""
    from icl_race.run.retrain import train_seeds
    from icl_race.systems.linear_attention import LinearAttentionRegression

    out: dict[str, sh.ToleranceCheck | sh.GdVsFlow] = {}
    for scale in scales:
        program, consts = LinearAttentionRegression.from_config(config_of(scale))
        tight = one_seed(program, consts, 0, horizon, CHECK_RTOL)
        out[f"rtol_1e-11_seed0_scale_{scale}"] = sh.tolerance_check(zero[scale], tight)
    base = zero.get(1e-2)
    if base is None:
        program, consts = LinearAttentionRegression.from_config(config_of(1e-2))
        base = one_seed(program, consts, 0, horizon)
    if not np.isfinite(base.t_m[2]):
        raise ConfigError(
            f"analyze linear_attention single_head: check (b) needs t_2 within the horizon "
            f"({horizon:g} τ); --set checks=0 for a shorter one"
        )
    chunk = GD_EVERY * 100  # evaluations per chunk, as train.evals_per_chunk below
    steps = int(np.ceil(1.3 * base.t_m[2] / GD_DT / chunk)) * chunk
    gd_run = train_seeds(config_of(1e-2, steps=steps, eval_every=GD_EVERY, evals_per_chunk=100), [0])
    passage = {m: sh.Passage(int(gd_run[f"t_m{m}"][0]) * GD_DT, base.t_m[m], GD_EVERY * GD_DT) for m in (1, 2)}
    out["gd_dt0.1_vs_flow_seed0_scale_0.01"] = sh.GdVsFlow(t_1=passage[1], t_2=passage[2])
    return out


COMMANDS = {"single_head": single_head}
OPTIONS = {
    "seeds": COUNT,
    "scales": Option(float, 0, above=True, many=True),
    "checks": Option(str),  # 1 or 0, true or false: `_flag`
    "horizon": Option(float, 1e-2, above=True),
}
DIRECTORIES = {"single_head": "none"}  # it trains its own seeds
MARKDOWN = ("single_head",)  # its tables, written beside the JSON
