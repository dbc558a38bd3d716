"""Linear attention (arXiv 2501.16265): token path vs fast path, moments, theory vs simulation.

Everything runs in float64 through the `jax.enable_x64(True)` context manager (autouse fixture), so the
float32 tests in the same process are unaffected.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from icl_race.engine.chunks import chunk_plan
from icl_race.engine.ensemble import Layout, start, train
from icl_race.models.linear_attention import LinearAttention, code_units, optimal_gamma
from icl_race.systems.linear_attention import LinearAttentionRegression, gradient_flow, log_subsample
from icl_race.tasks import regression as task
from icl_race.theory import linear_attention as th


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def _data(P=48, N=5, D=3, center=True, whiten=True, rotate=True, kind="linear"):
    lam = task.spectrum(kind, D)
    Lambda, E = task.covariance(lam, jax.random.key(7) if rotate else None)
    return task.sample_dataset(jax.random.key(0), P, N, Lambda, center=center, whiten=whiten), Lambda, E


def _max_abs(a, b):
    return max(float(jnp.max(jnp.abs(x - y))) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def _run(program, consts, *, seeds, steps, eval_every, block=4):
    layout = Layout(block)
    carry, _ = start(program, layout, 0, np.arange(seeds), consts)
    carry, curves, eval_steps = train(
        program,
        consts,
        carry,
        layout=layout,
        plan=chunk_plan(steps, eval_every, max(1, steps // eval_every)),
    )
    return jax.device_get(carry), {k: v[:seeds] for k, v in curves.items()}, eval_steps


# ---- the two implementations -----------------------------------------------------------------------


@pytest.mark.parametrize("kind,R", [("attn_m", 1), ("attn_s", 1), ("attn_s", 2), ("mlp", 1)])
def test_token_path_equals_fast_path_in_loss_and_gradient(kind, R):
    data, _, _ = _data()
    X, yq = task.tokens(data)
    model = LinearAttention(kind, D=3, H=3, R=R)
    params = model.init(jax.random.key(1), 0.8, "entrywise")  # O(1) weights: nothing is trivially small
    loss_tok, grad_tok = jax.value_and_grad(model.token_loss)(params, X, yq)
    loss_fast, grad_fast = jax.value_and_grad(model.moment_loss)(params, task.finite_moments(data))
    assert loss_tok.dtype == jnp.float64 and loss_tok > 0.1
    assert abs(float(loss_tok - loss_fast)) < 1e-8 * float(loss_tok)
    assert _max_abs(grad_tok, grad_fast) < 1e-8 * max(float(jnp.max(jnp.abs(g))) for g in jax.tree.leaves(grad_tok))


def test_moment_loss_is_the_direct_average():
    data, _, _ = _data(P=64)
    model = LinearAttention("attn_s", D=3, H=2, R=1)
    params = model.init(jax.random.key(3), 0.9, "entrywise")
    beta, xq, yq = task.context_beta(data["x_PxTxD"], data["y_PxT"]), data["x_PxTxD"][:, -1], data["y_PxT"][:, -1]
    direct = jnp.mean((yq - model.predict_fast(params, beta, xq)) ** 2)
    np.testing.assert_allclose(model.moment_loss(params, task.finite_moments(data)), direct, rtol=1e-12)


@pytest.mark.parametrize("kind", ["attn_m", "attn_s"])
def test_reference_code_output_is_N_times_the_paper_output(kind):
    data, _, _ = _data(N=7)
    X, _ = task.tokens(data)
    model = LinearAttention(kind, D=3, H=2)
    params = model.init(jax.random.key(2), 0.5, "entrywise")
    np.testing.assert_allclose(
        model.predict_tokens(params, X, normalise=False), 7 * model.predict_tokens(params, X), rtol=1e-12, atol=1e-14
    )


@pytest.mark.parametrize("kind,lr", [("attn_m", 1e-3), ("attn_s", 2e-2)])
def test_code_units_convert_a_reference_run(kind, lr):
    # The spec's numbers (§3), then 30 GD steps of the un-normalised model in code units against the
    # paper model in converted units: same function (ŷ_code = ŷ_paper), weights rescaled by N^power.
    assert code_units("attn_m", 31, 1e-3, 1.0)["dt"] == pytest.approx(0.062)
    assert code_units("attn_s", 31, 0.02, 1.0)["dt"] == pytest.approx(0.3948, abs=1e-4)
    N, init = 7, 0.3
    data, _, _ = _data(P=32, N=N)
    X, yq = task.tokens(data)
    model = LinearAttention(kind, D=3, H=2)
    u = code_units(kind, N, lr, init)
    code = model.init(jax.random.key(4), init, "entrywise")
    paper = jax.tree.map(lambda p: p * N ** u["power"], code)
    code_loss = lambda p: jnp.mean((yq - model.predict_tokens(p, X, normalise=False)) ** 2)
    for _ in range(30):
        code = jax.tree.map(lambda p, g: p - lr * g, code, jax.grad(code_loss)(code))
        paper = jax.tree.map(lambda p, g: p - 0.5 * u["dt"] * g, paper, jax.grad(model.token_loss)(paper, X, yq))
    np.testing.assert_allclose(
        model.predict_tokens(code, X, normalise=False), model.predict_tokens(paper, X), rtol=1e-9, atol=1e-12
    )


def test_mlp_on_cubic_features_is_attn_m():
    # Eqs. 6-7: same key -> W1 rows = vec(U_i), w2 = v, so the same Γ, loss and gradient in Γ.
    moments = task.population_moments(task.covariance(task.spectrum("linear", 3))[0], 5)
    m, mlp = LinearAttention("attn_m", 3, 4), LinearAttention("mlp", 3, 4)
    pm, pl = m.init(jax.random.key(0), 0.3), mlp.init(jax.random.key(0), 0.3)
    np.testing.assert_allclose(m.gamma(pm), mlp.gamma(pl), rtol=1e-14)
    gm, gl = jax.grad(m.moment_loss)(pm, moments), jax.grad(mlp.moment_loss)(pl, moments)
    np.testing.assert_allclose(gm["U"].reshape(4, 9), gl["W1"], rtol=1e-12)


# ---- moments ------------------------------------------------------------------------------------------


def test_centring_and_whitening_are_exact():
    data, _, _ = _data(P=40)
    w = data["w_PxD"]
    np.testing.assert_allclose(jnp.mean(w, axis=0), 0.0, atol=1e-13)
    np.testing.assert_allclose(w.T @ w / (40 - 1), np.eye(3), atol=1e-12)
    np.testing.assert_allclose(jnp.mean(data["x_PxTxD"], axis=0), 0.0, atol=1e-13)


def test_icl_fraction_is_traced_so_a_sweep_over_it_compiles_once():
    # The jitted chunk takes the program as a static argument: equal programs share one compilation.
    build = lambda c, per_seed: LinearAttentionRegression.build(
        model="attn_s", D=3, N=5, H=2, P=40, icl_fraction=c, per_seed_data=per_seed
    )
    from icl_race.run import compile_stats

    for per_seed in (False, True):
        (p_a, c_a), (p_b, c_b) = build(0.3, per_seed), build(0.8, per_seed)
        assert p_a == p_b and hash(p_a) == hash(p_b)
        assert float(c_a["icl_fraction"]) == 0.3 and float(c_b["icl_fraction"]) == 0.8
        _, curves_a, _ = _run(p_a, c_a, seeds=2, steps=20, eval_every=10, block=2)
        before, _ = compile_stats.snapshot()
        _, curves_b, _ = _run(p_b, c_b, seeds=2, steps=20, eval_every=10, block=2)
        assert compile_stats.snapshot()[0] == before, "a second icl_fraction compiled again"
        assert not np.allclose(curves_a["loss"], curves_b["loss"]), "the traced value reached the step"


@pytest.mark.parametrize("c", [0.0, 0.3, 0.55])
def test_in_weight_mixture(c):
    # The reference's --icl c: int(cP) in-context sequences first, the rest on the fixed w of norm √D.
    P, N, D = 40, 5, 3
    Lambda, _ = task.covariance(task.spectrum("white", D))
    w_a, w_b = task.fixed_task_vector(jax.random.key(3), D), task.fixed_task_vector(jax.random.key(4), D)
    np.testing.assert_allclose(jnp.linalg.norm(w_a), np.sqrt(D), rtol=1e-14)
    a = task.sample_dataset(jax.random.key(0), P, N, Lambda, icl_fraction=c, w_fixed_D=w_a)
    b = task.sample_dataset(jax.random.key(0), P, N, Lambda, icl_fraction=c, w_fixed_D=w_b)
    n_ic = {0.0: 0, 0.3: 12, 0.55: 22}[c]
    on_fixed = np.all(np.asarray(a["w_PxD"]) == np.asarray(w_a)[None], axis=1)
    assert int(on_fixed.sum()) == P - n_ic and on_fixed[n_ic:].all()
    np.testing.assert_allclose(a["y_PxT"][n_ic:, -1], a["x_PxTxD"][n_ic:, -1] @ w_a, rtol=1e-12)
    if c == 0:  # the context is pure noise: the same whatever w is, and not w's labels
        np.testing.assert_array_equal(a["y_PxT"][:, :N], b["y_PxT"][:, :N])
        assert not np.allclose(a["y_PxT"][:, :N], jnp.einsum("pnd,d->pn", a["x_PxTxD"][:, :N], w_a))
    else:  # every context is labelled by its own task vector, in-context ones unchanged by w
        np.testing.assert_allclose(a["y_PxT"], jnp.einsum("ptd,pd->pt", a["x_PxTxD"], a["w_PxD"]), rtol=1e-12)
        np.testing.assert_array_equal(a["y_PxT"][:n_ic], b["y_PxT"][:n_ic])
    full = task.sample_dataset(jax.random.key(0), P, N, Lambda, icl_fraction=1.0, w_fixed_D=w_a)
    np.testing.assert_array_equal(full["y_PxT"], task.sample_dataset(jax.random.key(0), P, N, Lambda)["y_PxT"])


@pytest.mark.parametrize("kind", ["attn_m", "attn_s"])
def test_in_weight_blocks_predict_from_the_query_alone(kind):
    # With v = 0 and ũ = k̃ = 0 only ṽ acts: ŷ = (1/N) Σ_i ṽ_iᵀ Σ_{all T tokens} x_m a_i(x_m, x_q), whatever
    # the y, with a_i = x_mᵀ U_i x_q (ATTN_M) or Σ_r (k_irᵀ x_m)(q_irᵀ x_q) (ATTN_S).
    data, _, _ = _data(P=6, N=5, D=3)
    X, _ = task.tokens(data)
    model = LinearAttention(kind, D=3, H=2, R=2, in_weight=True)
    params = model.init(jax.random.key(1), 0.5)
    assert not any(np.any(params[k]) for k in ("vt", "ut", "kt") if k in params)  # zero at init, as the reference
    plain = LinearAttention(kind, D=3, H=2, R=2)
    np.testing.assert_allclose(
        model.predict_tokens(params, X), plain.predict_tokens(plain.init(jax.random.key(1), 0.5), X), rtol=1e-14
    )
    params = {**params, "v": jnp.zeros(2), "vt": jax.random.normal(jax.random.key(2), (2, 3), jnp.float64)}
    x = data["x_PxTxD"]
    a_PxHxT = (
        jnp.einsum("pmj,hjk,pk->phm", x, params["U"], x[:, -1])
        if kind == "attn_m"
        else jnp.einsum("hrj,pmj,hrk,pk->phm", params["k"], x, params["q"], x[:, -1])
    )
    expected = jnp.einsum("hi,pmi,phm->p", params["vt"], x, a_PxHxT) / 5
    np.testing.assert_allclose(model.predict_tokens(params, X.at[:, :, -1].multiply(-3.0)), expected, rtol=1e-12)


@pytest.mark.parametrize("prepared", [False, True])
def test_population_moments_match_monte_carlo(prepared):
    # Tolerance: every entry of s, C, S within 5 standard errors of its Monte Carlo mean (P = 40000).
    # prepared = the reference's centring + whitening, which moves the moments by O(1/P) only.
    P, N = 40_000, 4
    data, Lambda, _ = _data(P=P, N=N, center=prepared, whiten=prepared)
    x, y = data["x_PxTxD"], data["y_PxT"]
    beta, xq, yq = task.context_beta(x, y), x[:, -1], y[:, -1]
    z = task.cubic_features(beta, xq)
    samples = {
        "s": yq[:, None] ** 2,
        "C_DxD": (yq[:, None] * z),
        "S_FxF": (z[:, :, None] * z[:, None, :]).reshape(P, -1),
    }
    pop = task.population_moments(Lambda, N)
    for name, smp in samples.items():
        zscore = (jnp.mean(smp, axis=0) - pop[name].reshape(-1)) / (jnp.std(smp, axis=0) / np.sqrt(P))
        assert float(jnp.max(jnp.abs(zscore))) < 5.0, name
    fin = task.finite_moments(data)
    np.testing.assert_allclose(fin["S_FxF"], jnp.mean(samples["S_FxF"], axis=0).reshape(9, 9), rtol=1e-12)


# ---- theory -------------------------------------------------------------------------------------------


def test_plateau_losses_and_maps():
    lam = task.spectrum("power", 5, alpha=2.0)
    Lambda, E = task.covariance(lam, jax.random.key(1))
    Lambda, E, N = np.asarray(Lambda), np.asarray(E), 9
    L = th.plateau_losses(lam, N)
    assert L[0] == pytest.approx(1.0) and np.all(np.diff(L) < 0)
    for m in range(6):  # Eq. 19 is the loss of the PCR map of Eq. 22
        assert th.population_loss(th.pcr_map(lam, N, m, E), Lambda, N) == pytest.approx(L[m], abs=1e-13)
    g_star = th.converged_map(Lambda, N)  # Eq. 11 = PCR at m = D = the optimum of the fast path
    np.testing.assert_allclose(g_star, th.pcr_map(lam, N, 5, E), atol=1e-11)
    np.testing.assert_allclose(optimal_gamma(task.population_moments(jnp.asarray(Lambda), N)), g_star, atol=1e-9)
    np.testing.assert_allclose(th.plateau_values(lam, N), (lam * th.c_factors(lam, N)) ** (-1 / 3))
    assert th.plateau_losses(lam, 10**9)[2] == pytest.approx(lam[2:].sum(), rel=1e-6)  # N -> infinity


def test_scalar_ode_closed_form_matches_an_ode_solver():
    lam, c, v0 = 0.2, 1.4, 1e-2
    ts = np.geomspace(1.0, 5e4, 60)
    ref = solve_ivp(
        lambda t, v: th.scalar_ode_rhs(v, lam, c), (0, ts[-1]), [v0], method="LSODA", t_eval=ts, rtol=1e-12, atol=1e-15
    ).y[0]
    np.testing.assert_allclose(th.scalar_ode_solution(ts, v0, lam, c), ref, rtol=1e-7)
    vstar = (lam * c) ** (-1 / 3)
    assert th.scalar_ode_solution([1e9], v0, lam, c)[0] == pytest.approx(vstar, rel=1e-12)
    down = th.scalar_ode_solution(ts, 2 * vstar, lam, c)  # from above v*, decays to it
    assert np.all(np.diff(down) <= 0) and down[-1] == pytest.approx(vstar, rel=1e-6)
    # the escape estimate 1/(λ² v0) is the leading term of the exact time to v*/2 when v0 << v*
    assert th.escape_time(lam, v0) == pytest.approx(th.scalar_ode_time(vstar / 2, v0, lam, c), rel=0.05)


def test_attn_s_from_the_ansatz_follows_eq21():
    # Eq. 20: heads 1..m converged on e_1..e_m, head m+1 = v0 e_{m+1} (balanced), the rest zero.
    D, N, H, m, v0 = 4, 31, 5, 1, 1e-2
    lam = task.spectrum("linear", D)
    moments = task.population_moments(task.covariance(lam)[0], N)
    vstar = th.plateau_values(lam, N)
    v = np.zeros(H)
    v[:m], v[m] = vstar[:m], v0
    k = np.zeros((H, 1, D))
    for i in range(m + 1):
        k[i, 0, i] = v[i]
    model = LinearAttention("attn_s", D, H, 1)
    params = {"v": jnp.asarray(v), "k": jnp.asarray(k), "q": jnp.asarray(k)}
    ts = np.linspace(0, 3 / (lam[m] ** 2 * v0), 40)
    sol, unravel = gradient_flow(model, moments, params, ts[-1], rtol=1e-11, atol=1e-16)
    traj = [unravel(jnp.asarray(y)) for y in sol.sol(ts).T]
    v_sim = np.array([float(p["v"][m]) for p in traj])
    v_theory = th.scalar_ode_solution(ts, v0, lam[m], th.c_factors(lam, N)[m])
    np.testing.assert_allclose(v_sim, v_theory, rtol=1e-6)
    assert v_theory[-1] > 0.9 * vstar[m]  # the window covers the whole escape
    np.testing.assert_allclose([float(p["v"][0]) for p in traj], vstar[0], rtol=1e-9)  # converged head stays


def test_attn_m_white_time_course_matches_eq10_and_gd_converges_to_it():
    # Λ = I/D (the reference's white covariance), aligned init of layer norm w_init: Eq. 10 at s = 1/D.
    D, N, w_init = 4, 31, 1e-3
    t_half = th.attn_m_white_half_time(D, N, w_init)
    ts = np.linspace(0, 2 * t_half, 50)
    model = LinearAttention("attn_m", D, H=3)
    moments = task.population_moments(task.covariance(task.spectrum("white", D))[0], N)
    params = model.init(jax.random.key(0), w_init, "aligned")
    sol, unravel = gradient_flow(model, moments, params, ts[-1], rtol=1e-11, atol=1e-18)
    flow = np.array([float(model.moment_loss(unravel(jnp.asarray(y)), moments)) for y in sol.sol(ts).T])
    theory = th.attn_m_white_loss(ts, D, N, w_init)
    assert theory[0] - theory[-1] > 0.5 * (theory[0] - th.plateau_losses(np.full(D, 1 / D), N)[-1])
    np.testing.assert_allclose(flow, theory, atol=1e-8)
    # Engine GD in units of τ: the error against Eq. 10 is first order in dt (halving dt halves it), and
    # the Richardson extrapolation 2 L(dt/2) − L(dt) removes it.
    curves = []
    for k, dt in enumerate((0.04, 0.02)):
        program, consts = LinearAttentionRegression.build(
            model="attn_m", D=D, N=N, H=3, spectrum="white", init_scheme="aligned", init_scale=w_init, dt=dt
        )
        steps = int(round(ts[-1] / 0.04 / 50)) * 50 * 2**k
        _, c, eval_steps = _run(program, consts, seeds=1, steps=steps, eval_every=steps // 50, block=1)
        curves.append(c["loss"][0])
    theory = th.attn_m_white_loss(eval_steps * dt, D, N, w_init)
    errors = [np.max(np.abs(c - theory)) for c in curves]
    assert errors[1] < 1e-2 and 1.8 < errors[0] / errors[1] < 2.2, errors
    assert np.max(np.abs(2 * curves[1] - curves[0] - theory)) < 0.05 * errors[1]


# ---- the engine program -----------------------------------------------------------------------------


def test_staircase_plateaus_match_eq19_in_an_engine_ensemble():
    # Fig. 3's setting (D = 4, λ ∝ d, H = 5, R = 1, N = 31, population), small balanced init, GD at 0.5 τ/step.
    D, N, dt = 4, 31, 0.5
    program, consts = LinearAttentionRegression.build(
        model="attn_s", D=D, N=N, H=5, R=1, spectrum="linear", init_scale=1e-2, dt=dt
    )
    carry, curves, eval_steps = _run(program, consts, seeds=4, steps=120_000, eval_every=200)
    plateaus = th.plateau_losses(task.spectrum("linear", D), N)
    gap = np.min(plateaus[:-1] - plateaus[1:])
    t = eval_steps * dt
    for s in range(4):
        loss, t_m = curves["loss"][s], [carry["t_first"][f"m{m}"][s] for m in range(1, D + 1)]
        assert np.all(np.diff(loss) <= 1e-12), "GD on this loss at this dt descends monotonically"
        assert all(0 < a < b for a, b in zip(t_m, t_m[1:])), t_m  # the plateaus are visited in order
        for m in range(1, D):  # a plateau at L(M_m): time spent within 1% of the smallest gap
            near = t[np.abs(loss - plateaus[m]) < 0.01 * gap]
            assert near.size and near[-1] / near[0] > 1.3, (s, m)
        assert abs(loss[-1] - plateaus[-1]) < 1e-6
    m = 2  # Eq. 22 on the plateau: the map is PCR on e_1, e_2
    s, i = 0, np.searchsorted(t, np.sqrt(carry["t_first"]["m2"][0] * carry["t_first"]["m3"][0]) * dt)
    lam = task.spectrum("linear", D)
    np.testing.assert_allclose(curves["gamma_eig"][s, i], np.diag(th.pcr_map(lam, N, m)), atol=2e-3)
    np.testing.assert_allclose(curves["gamma_eig"][s, -1], 1 / (lam * th.c_factors(lam, N)), rtol=1e-5)
    assert curves["k_align"].shape == (4, len(t), 5, 1, D) and curves["v"].shape == (4, len(t), 5)
    idx = log_subsample(eval_steps, 40)
    assert np.all(np.diff(idx) > 0) and idx[-1] == len(t) - 1


@pytest.mark.parametrize(
    "path,softmax,per_seed", [("moments", False, True), ("tokens", True, False), ("tokens", False, False)]
)
def test_finite_training_sets_in_the_engine(path, softmax, per_seed):
    program, consts = LinearAttentionRegression.build(
        model="attn_s",
        D=2,
        N=4,
        H=2,
        P=24,
        path=path,
        softmax=softmax,
        per_seed_data=per_seed,
        init_scale=0.3,
        dt=0.5,
        spectrum="linear",
    )
    carry, curves, _ = _run(program, consts, seeds=2, steps=400, eval_every=100, block=2)
    loss = curves["loss"]
    assert np.all(np.isfinite(loss)) and np.all(loss[:, -1] < curves["train_loss"][:, 0])
    assert ("pop_loss" in curves) != softmax
    if per_seed:  # each seed trains on its own data set
        assert not np.allclose(carry["state"]["train"]["C_DxD"][0], carry["state"]["train"]["C_DxD"][1])


def test_float32_is_refused():
    with jax.enable_x64(False):
        with pytest.raises(RuntimeError, match="float64"):
            LinearAttentionRegression.build()
