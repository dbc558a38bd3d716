"""Side-by-side benchmark (issue 7): icl-race vs a Python loop over seeds vs a PyTorch re-creation of the
reference pipelines, and vs this machine's sgemm rate.

    .venv/bin/python benchmarks/run.py [--quick] [--skip-torch] [--seeds 1,8,64,256] [--out FILE]

Sections (all per seed-step, steady state; method of jax-ecosystem.md §8: AOT compile timed separately,
one warm-up call, best of `repeats` timed calls ended by block_until_ready):
  machine   sgemm GFLOP/s (jax and numpy, 2048^3 float32), threefry / rbg Gaussian draws per second
  cls       the one-layer classification race at N = 100, K in {1e4, 1e5}, batch 128: the ensemble
            (one vmap over S seeds, scan over steps; on a CPU also S one-seed blocks in sequence,
            ensemble.block = 1), a Python loop over seeds of a jitted single-seed
            step, FLOPs per seed-step (analytic and XLA cost analysis), FLOP/s, compile s, bytes per seed,
            and a profile (sampling alone, model step alone on a fixed batch, chunk length)
  regime    the shapes of the reduced-scale regime protocol (experiments/regime/): N = 32, 64, 128, MLP
            width 64 (and 128 at N = 32), finite K = 3600 at vmap widths 1/8/16/64 (S = 64), K = infinity
            with fresh Gaussian items vs a fixed item bank (task.infinite_bank), the split into sampling
            and model step, and the per-op profile at N = 32
  mlp       the MLP-only memorization model (task.kind = "memorization"), same columns
  la        linear attention: fast path (moments) ensemble vs token-level path vs the re-created
            reference step, P in {5000, 80000}, D in {4, 8} (ATTN_S, H = 5 at D = 4, H = 9 at D = 8)
  func      issue 42 item 7: the paper step at S = 1, 8, 64 (one vmap) beside a torch.func ensemble of the same
            model (torch_ref.bench_func, in the torch venv; not part of the default --parts)
  torch     the re-created reference pipelines (benchmarks/torch_ref.py), run in a separate Python 3.11
            venv with torch 2.13.0 CPU (created at --torch-venv if missing; --skip-torch to leave it out)
Writes everything as JSON to --out and prints a summary table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from icl_race import config  # noqa: E402
from icl_race.engine.ensemble import seed_keys  # noqa: E402
from icl_race.run.bench import measure_program  # noqa: E402
from icl_race.systems.classification import ClassificationRace  # noqa: E402

TORCH_PY = "/root/.pyenv/versions/3.11.7/bin/python"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def best_time(fn, repeats):
    best = float("inf")
    for _ in range(repeats):
        tic = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - tic)
    return best


# ---- machine -------------------------------------------------------------------------------------------


def machine(quick):
    n = 2048
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (n, n), jnp.float32)
    mm = jax.jit(lambda x, y: x @ y)
    jax.block_until_ready(mm(a, b))
    t_jax = best_time(lambda: mm(a, b), 5)
    an, bn = np.asarray(a), np.asarray(b)
    an @ bn
    t_np = best_time(lambda: an @ bn, 5)  # block_until_ready passes a numpy array through
    out = {
        "sgemm_n": n,
        "sgemm_gflops_jax": round(2 * n**3 / t_jax / 1e9, 1),
        "sgemm_gflops_numpy": round(2 * n**3 / t_np / 1e9, 1),
    }
    m = 1 << 22
    for impl in ("threefry2x32", "rbg"):
        k = jax.random.key(0, impl=impl)
        f = jax.jit(lambda k: jax.random.normal(k, (m,), jnp.float32))
        jax.block_until_ready(f(k))
        out[f"normal_M_per_s_{impl}"] = round(m / best_time(lambda: f(k), 3) / 1e6, 1)
        g = jax.jit(lambda k: jax.random.randint(k, (m,), 0, 10_000))
        jax.block_until_ready(g(k))
        out[f"randint_M_per_s_{impl}"] = round(m / best_time(lambda: g(k), 3) / 1e6, 1)
    return out


# ---- generic engine measurement ------------------------------------------------------------------------


def measure_ensemble(program, consts, seeds, steps, repeats, block=None):
    row = measure_program(program, consts, seeds, steps, repeats, block=block)
    return {**row, "steps_per_call": steps, "s_per_seed_step": 1 / row["seed_steps_per_s"]}


def ensemble_rows(name, program, consts, sizes, steps_for, flops, gemm, args, block1=True):
    """One row per ensemble size and layout: seed-steps/s, achieved GFLOP/s from the analytic `flops`
    per seed-step, its fraction of the measured sgemm rate (and of --peak-tflops when given)."""
    rows = []
    for S in sizes:
        for block in layouts(S, args) if block1 else [None]:
            r = measure_ensemble(program, consts, S, steps_for(S), args.repeats, block)
            r["gflops_achieved"] = round(r["seed_steps_per_s"] * flops / 1e9, 1)
            r["frac_of_sgemm"] = round(r["gflops_achieved"] / gemm, 3)
            if args.peak_tflops:
                r["frac_of_peak"] = round(r["gflops_achieved"] / (1e3 * args.peak_tflops), 4)
            rows.append(r)
            log(
                f"{name} S={S} block {r['block']}: {r['seed_steps_per_s']} seed-steps/s, "
                f"{r['gflops_achieved']} GFLOP/s, compile {r['compile_s']} s, "
                f"{r['bytes_per_seed'] / 2**20 if r['bytes_per_seed'] else 0:.1f} MB/seed"
            )
    return rows


def layouts(S, args):
    """Blocks to time S seeds in: one vmap of all S (the GPU layout), and with --block1 also S blocks
    of one seed in sequence (on a CPU a single seed's batch already fills the cores, and vmapped
    matmuls leave the fast GEMM kernels: see RESULTS.md)."""
    return [None] + ([1] if args.block1 and S > 1 else [])


def single_step_fn(program):
    return jax.jit(lambda state, consts, key: program.step(state, consts, key), donate_argnums=0)


def xla_flops_per_step(program, consts):
    """XLA's cost analysis of one jitted single-seed step (no scan, so nothing is counted once per loop)."""
    state = program.init(jax.random.key(0), consts)
    c = jax.jit(lambda s, cs, k: program.step(s, cs, k)).lower(state, consts, jax.random.key(1)).compile()
    ca = c.cost_analysis()
    if isinstance(ca, list):
        ca = ca[0]
    return float(ca.get("flops", float("nan"))) if ca else None


def measure_loop(program, consts, seeds, steps):
    """A Python loop over seeds (and steps) calling the same jitted single-seed step."""
    step = single_step_fn(program)
    keys = seed_keys(0, np.arange(seeds))
    states = [program.init(jax.random.fold_in(k, 0), consts) for k in keys]
    train = [jax.random.fold_in(k, 1) for k in keys]
    tic = time.perf_counter()
    for s in range(seeds):
        states[s], loss = step(states[s], consts, jax.random.fold_in(train[s], 0))
    jax.block_until_ready(loss)
    compile_s = time.perf_counter() - tic
    tic = time.perf_counter()
    for t in range(1, steps + 1):
        for s in range(seeds):
            states[s], loss = step(states[s], consts, jax.random.fold_in(train[s], t))
    jax.block_until_ready(states)
    wall = time.perf_counter() - tic
    return {
        "seeds": seeds,
        "steps": steps,
        "first_call_s": round(compile_s, 2),
        "seed_steps_per_s": round(seeds * steps / wall, 2),
    }


# ---- classification --------------------------------------------------------------------------------


def cls_program(K, N=100):
    cfg = config.from_dict({"task": {"K": K, "N": N}})
    return ClassificationRace.from_config(cfg)


def cls_analytic_flops(N=100, D=63, W=512, B=128):
    """Per seed-step, query-only attention. Forward per sequence: LayerNorm ~8 N E, q and u (2 x 2E^2),
    scores and weighted sum (2 x 2 N E), softmax ~5 N, v (2E^2), MLP 2 (E W + W W + W). Backward ~2x
    the forward. Returns (query-only, full causal attention as the reference computes it)."""
    E = D + 2
    mlp = 2 * (E * W + W * W + W)
    ln = 8 * N * E
    q_only = ln + 3 * 2 * E * E + 2 * 2 * N * E + 5 * N + mlp
    full = ln + 3 * 2 * N * E * E + 2 * 2 * N * N * E + 5 * N * N + mlp
    return 3.0 * B * q_only, 3.0 * B * full


def cls_profile(program, consts, steps, repeats):
    """Where one seed-step's time goes: sampling alone, the model step alone on a fixed batch."""
    state = program.init(jax.random.key(0), consts)
    key = jax.random.key(1)

    @jax.jit
    def sample_only(state, consts, key):
        def body(acc, t):
            x, y = program.train_batch(state, consts, jax.random.fold_in(key, t), program.batch_size)
            return acc + jnp.sum(x) + jnp.sum(y), None  # use all of x, or XLA computes one element

        return jax.lax.scan(body, jnp.float32(0), jnp.arange(steps))[0]

    x, y = program.train_batch(state, consts, key, program.batch_size)

    @jax.jit
    def model_only(state, consts, x, y):
        def body(st, t):
            loss, g = jax.value_and_grad(program.loss)(st["params"], x, y)
            return {**st, "params": jax.tree.map(lambda p, gi: p - consts["lr"] * gi, st["params"], g)}, loss

        return jax.lax.scan(body, state, jnp.arange(steps))[1]

    jax.block_until_ready(sample_only(state, consts, key))
    t_s = best_time(lambda: sample_only(state, consts, key), repeats) / steps
    jax.block_until_ready(model_only(state, consts, x, y))
    t_m = best_time(lambda: model_only(state, consts, x, y), repeats) / steps
    return {"sample_ms_per_step": round(1e3 * t_s, 3), "model_step_ms_on_fixed_batch": round(1e3 * t_m, 3)}


def op_profile(program, consts, steps=20, calls=5, top=12):
    """Per-XLA-op time of one seed's training step (block 1) from a profiler trace: the ops that
    take the most time, with their shapes and the jax operation they come from (HLO metadata)."""
    import collections
    import gzip
    import re
    import tempfile

    from icl_race.engine.ensemble import Layout, start, steps_on_device

    carry, consts = start(program, Layout(block=1), 0, np.arange(1), consts)
    run = lambda c, t: steps_on_device(program, 1, steps, c, consts, jnp.int32(t))
    carry, loss = run(carry, 0)
    jax.block_until_ready(loss)
    hlo = steps_on_device.lower(program, 1, steps, carry, consts, jnp.int32(0)).compile().as_text()
    with tempfile.TemporaryDirectory() as d:
        with jax.profiler.trace(d, create_perfetto_trace=True):
            for i in range(calls):
                carry, loss = run(carry, steps * (i + 1))
                jax.block_until_ready(loss)
        with gzip.open(next(Path(d).rglob("*.trace.json.gz"))) as f:
            trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    us = collections.Counter()
    for e in events:
        if e.get("ph") == "X":
            us[e["name"]] += e["dur"]
    ops = []
    for name, t in us.most_common():
        m = re.search(rf"^\s*(?:ROOT )?%{re.escape(name)} = (\S+) .*", hlo, re.M)
        if m is None:  # runtime bookkeeping (executor, thread pool, Python frames), not an op
            continue
        origin = re.search(r'op_name="([^"]+)"', m.group(0))
        called = re.search(r"calls=(%[\w.]+)", m.group(0))
        if origin is None and called:  # a library fusion: name it by its root instruction's origin
            body = re.search(rf"^{re.escape(called.group(1))} .*?^}}", hlo, re.M | re.S)
            root = re.search(r"ROOT .*", body.group(0)) if body else None
            origin = re.search(r'op_name="([^"]+)"', root.group(0)) if root else None
        ops.append(
            {
                "op": name,
                "us_per_step": round(t / (calls * steps), 1),
                "shape": m.group(1),
                "from": origin.group(1).split("eval_jaxpr/")[-1] if origin else "",
            }
        )
    total = sum(o["us_per_step"] for o in ops)
    return {"us_per_step_in_ops": round(total, 1), "top": ops[:top]}


def bench_cls(args, sizes, gemm):
    steps_for = lambda S: args.steps if S > 1 else max(args.steps, 10)
    rows = []
    for K in (10_000, 100_000):
        program, consts = cls_program(K)
        fl_an, fl_full = cls_analytic_flops()
        fl_xla = xla_flops_per_step(program, consts)
        res = {
            "K": K,
            "N": 100,
            "batch": 128,
            "flops_per_seed_step_analytic": fl_an,
            "flops_per_seed_step_full_attention_analytic": fl_full,
            "flops_per_seed_step_xla": fl_xla,
            "loop": None,
            "profile": None,
        }
        res["ensemble"] = ensemble_rows(f"cls K={K}", program, consts, sizes, steps_for, fl_an, gemm, args)
        res["loop"] = measure_loop(program, consts, 8, 3 if args.quick else 6)
        log(f"cls K={K} loop: {res['loop']}")
        res["profile"] = cls_profile(program, consts, 10, args.repeats)
        if K == 10_000 and jax.default_backend() == "cpu":  # a GPU trace names kernels, not HLO ops
            res["profile"]["ops"] = op_profile(program, consts)
        if K == 10_000 and not args.quick:
            res["profile"]["chunk_length"] = [
                {
                    "steps_per_call": n,
                    "seed_steps_per_s": measure_ensemble(program, consts, 1, n, args.repeats)["seed_steps_per_s"],
                }
                for n in (1, 10, 50)
            ]
        log(f"cls K={K} profile: {res['profile']}")
        rows.append(res)
    # K = infinity (fig6b): every step draws 128 x 100 x 63 fresh Gaussians, bounded by the RNG rate.
    program, consts = ClassificationRace.from_config(config.from_dict({"task": {"variant": "infinite"}}))
    res = {
        "K": "inf",
        "N": 100,
        "batch": 128,
        "flops_per_seed_step_analytic": cls_analytic_flops()[0],
        "flops_per_seed_step_xla": xla_flops_per_step(program, consts),
        "normals_per_seed_step": 128 * 100 * 63,
    }
    res["ensemble"] = ensemble_rows(
        "cls K=inf",
        program,
        consts,
        sizes[:2],
        steps_for,
        res["flops_per_seed_step_analytic"],
        gemm,
        args,
        block1=False,
    )
    res["profile"] = cls_profile(program, consts, 10, args.repeats)
    log(f"cls K=inf profile: {res['profile']}")
    rows.append(res)
    return rows


# ---- the regime protocol's shapes ---------------------------------------------------------------------------


def regime_program(N, W, K):
    """K: an int, "inf" (fresh Gaussian items) or "bank" (K = infinity from a 2^18 item bank)."""
    task = {"N": N} | (
        {"K": K} if isinstance(K, int) else {"variant": "infinite", "infinite_bank": 2**18 if K == "bank" else 0}
    )
    return ClassificationRace.from_config(config.from_dict({"task": task, "model": {"width": W}, "train": {"lr": 0.1}}))


def bench_regime(args, gemm):
    S, steps = 64, max(args.steps, 10)
    rows = []
    for N, W, K, blocks in [
        (32, 64, 3600, (1, 8, 16, 64)),
        (32, 128, 3600, (1, 16)),
        (64, 64, 3600, (1, 8, 16)),
        (128, 64, 3600, (1, 8, 16)),
        (32, 64, "inf", (16,)),
        (32, 64, "bank", (16,)),
        (128, 64, "inf", (16,)),
        (128, 64, "bank", (16,)),
    ]:
        program, consts = regime_program(N, W, K)
        fl = cls_analytic_flops(N=N, W=W)[0]
        for block in blocks:
            r = measure_ensemble(program, consts, S, steps, args.repeats, block)
            r |= {
                "N": N,
                "width": W,
                "K": K,
                "gflops_achieved": round(r["seed_steps_per_s"] * fl / 1e9, 1),
                "frac_of_sgemm": round(r["seed_steps_per_s"] * fl / 1e9 / gemm, 3),
            }
            log(f"regime N={N} W={W} K={K} block {block}: {r['seed_steps_per_s']} seed-steps/s")
            rows.append(r)
    profiles = {}
    for K in (3600, "inf", "bank"):
        program, consts = regime_program(32, 64, K)
        profiles[str(K)] = cls_profile(program, consts, 20, args.repeats)
        if K == 3600 and jax.default_backend() == "cpu":
            profiles[str(K)]["ops"] = op_profile(program, consts)
        log(f"regime N=32 K={K} profile: { {k: v for k, v in profiles[str(K)].items() if k != 'ops'} }")
    return {"rows": rows, "profile_N32_W64": profiles}


# ---- MLP-only ------------------------------------------------------------------------------------------


def mlp_analytic_flops(D: int = 63, W: int = 512, B: int = 128) -> float:
    """Forward 2 B (D W + W W + W); backward twice the forward for the matmuls (weight and input grads),
    less the first layer's input gradient; plus the elementwise update (~3 per parameter)."""
    fwd = 2 * B * (D * W + W * W + W)
    bwd = 2 * fwd - 2 * B * D * W
    n_params = D * W + W + W * W + W + W + 1
    return float(fwd + bwd + 3 * n_params)


def bench_mlp(args, sizes, gemm):
    from icl_race.systems import build

    rows = []
    for K in (10_000, 100_000):
        program, consts = build(
            config.from_dict({"task": {"kind": "memorization", "K": K}, "model": {"kind": "mlp", "width": 512}})
        )
        fl_an = mlp_analytic_flops()
        res = {
            "K": K,
            "batch": 128,
            "flops_per_seed_step_analytic": fl_an,
            "flops_per_seed_step_xla": xla_flops_per_step(program, consts),
        }
        res["ensemble"] = ensemble_rows(
            f"mlp K={K}",
            program,
            consts,
            sizes,
            lambda S: max(args.steps, 10) if S <= 8 else args.steps,
            fl_an,
            gemm,
            args,
        )
        res["loop"] = measure_loop(program, consts, 8, 10 if args.quick else 30)
        log(f"mlp K={K} loop: {res['loop']}")
        rows.append(res)
    return rows


# ---- linear attention ------------------------------------------------------------------------------------


def bench_la(args):
    from icl_race.systems.linear_attention import LinearAttentionRegression

    rows = []
    grid = [(5000, 4, 5), (5000, 8, 9)] + ([] if args.quick else [(80000, 4, 5), (80000, 8, 9)])
    with jax.enable_x64(True):
        for P, D, H in grid:
            row = {"P": P, "D": D, "H": H, "N": 31, "model": "attn_s", "dtype": "float64"}
            program, consts = LinearAttentionRegression.build(model="attn_s", D=D, H=H, N=31, P=P, path="moments")
            S = 256
            r = measure_ensemble(program, consts, S, 200, args.repeats)
            row["fast"] = {
                "seeds": S,
                "s_per_seed_step": r["s_per_seed_step"],
                "seed_steps_per_s": r["seed_steps_per_s"],
                "compile_s": r["compile_s"],
                "bytes_per_seed": r["bytes_per_seed"],
            }
            r1 = measure_ensemble(program, consts, 1, 200, args.repeats)
            row["fast_single_seed"] = {"s_per_seed_step": r1["s_per_seed_step"], "compile_s": r1["compile_s"]}
            # Token path at 80000 x D = 8 needs a (P, H, 32, 32) float64 score tensor and its gradient
            # (~12 GB): too much beside other work on a 24 GB machine; measured where it fits.
            if P * H * 32 * 32 * 8 * 3 < 8e9:
                program_t, consts_t = LinearAttentionRegression.build(
                    model="attn_s", D=D, H=H, N=31, P=P, path="tokens"
                )
                rt = measure_ensemble(program_t, consts_t, 1, 1, 2 if P > 5000 else args.repeats)
                row["tokens"] = {
                    "s_per_seed_step": rt["s_per_seed_step"],
                    "compile_s": rt["compile_s"],
                    "bytes_per_seed": rt["bytes_per_seed"],
                }
            else:
                row["tokens"] = None
            log(f"la {row}")
            rows.append(row)
    return rows


# ---- torch ---------------------------------------------------------------------------------------------


def run_torch(args):
    venv = Path(args.torch_venv)
    py = venv / "bin" / "python"
    if not py.exists():
        log(f"creating {venv} (Python 3.11 + torch==2.13.0 CPU wheel)")
        subprocess.run([TORCH_PY, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "torch==2.13.0", "numpy"], check=True)
    cmd = [str(py), str(HERE / "torch_ref.py"), "--threads", str(args.threads)] + (["--quick"] if args.quick else [])
    log("running", " ".join(cmd))
    # OMP_WAIT_POLICY=PASSIVE: with torch's default (spinning) OpenMP threads, every small op on this
    # shared 2-core machine waits ~8 ms for a descheduled thread (model step 2.5 it/s instead of ~20);
    # passive waiting is the setting that favours the reference, so the ratios below are conservative.
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_func(args):
    """Issue 42 item 7: icl-race's paper step (N = 100, width 512, batch 128, K = 10^4; one vmap of S seeds,
    sampling on the device) beside the peer a PyTorch user would write (torch_ref.bench_func: a torch.func
    ensemble, stack_module_state + vmap(grad(functional_call)), batched on-device sampling, the same
    query-only model), at S = 1, 8, 64, in one run."""
    program, consts = cls_program(10_000)
    sizes = [1, 8, 64]
    ours = [measure_ensemble(program, consts, S, 5, args.repeats) for S in sizes]
    py = Path(args.torch_venv) / "bin" / "python"
    cmd = [str(py), str(HERE / "torch_ref.py"), "--threads", str(args.threads), "--parts", "func"]
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    theirs = json.loads(
        subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout.splitlines()[-1]
    )
    rows = []
    for r, t in zip(ours, theirs["func"], strict=True):
        rows.append(
            {
                "seeds": r["seeds"],
                "icl_race_seed_steps_per_s": r["seed_steps_per_s"],
                "torch_func_seed_steps_per_s": t["seed_steps_per_s"],
                "ratio": round(r["seed_steps_per_s"] / t["seed_steps_per_s"], 2),
            }
        )
        log(f"func {rows[-1]}")
    return {"torch": theirs["torch"], "rows": rows}


# ---- summary -------------------------------------------------------------------------------------------


def summarise(res):
    lines = []
    gemm = res["machine"]["sgemm_gflops_jax"]
    tor = res.get("torch") or {}
    ref_cls = {r["K"]: r for r in tor.get("cls", [])}
    ref_mlp = {r["K"]: r for r in tor.get("mlp", [])}
    ref_la = {(r["P"], r["D"]): r for r in tor.get("la", [])}
    lines.append(f"load (1/5/15 min) before: {res['load_before']}, after: {res['load_after']}")
    lines.append(
        f"sgemm: jax {gemm} GFLOP/s, numpy {res['machine']['sgemm_gflops_numpy']} GFLOP/s; "
        f"normal draws: threefry {res['machine']['normal_M_per_s_threefry2x32']} M/s, "
        f"rbg {res['machine']['normal_M_per_s_rbg']} M/s"
    )
    for name, rows, ref in (("cls", res.get("cls", []), ref_cls), ("mlp", res.get("mlp", []), ref_mlp)):
        for r in rows:
            rr = ref.get(r["K"], {})
            e2e = rr.get("end_to_end_steps_per_s")
            loop = r["loop"]["seed_steps_per_s"] if r.get("loop") else float("nan")
            lines.append(
                f"[{name}] K={r['K']}: FLOP/seed-step analytic {r['flops_per_seed_step_analytic'] / 1e9:.3f} G, "
                f"XLA {(r.get('flops_per_seed_step_xla') or 0) / 1e9:.3f} G; loop {loop} seed-steps/s; "
                f"torch re-creation e2e {e2e}, model-only {rr.get('model_only_steps_per_s')}"
            )
            lines.append(
                f"{'S':>5} {'block':>5} {'seed-steps/s':>13} {'x re-creation':>14} {'x loop':>7} {'GFLOP/s':>8} "
                f"{'of sgemm':>9} {'compile s':>10} {'MB/seed':>8}"
            )
            for e in r["ensemble"]:
                ratio = f"{e['seed_steps_per_s'] / e2e:.1f}" if e2e else "-"
                mb = e["bytes_per_seed"] / 2**20 if e["bytes_per_seed"] else float("nan")
                lines.append(
                    f"{e['seeds']:>5} {e['block']:>5} {e['seed_steps_per_s']:>13.1f} {ratio:>14} "
                    f"{e['seed_steps_per_s'] / loop:>7.2f} {e['gflops_achieved']:>8.1f} "
                    f"{100 * e['frac_of_sgemm']:>8.0f}% {e['compile_s']:>10.2f} {mb:>8.2f}"
                    + (f"  {100 * e['frac_of_peak']:.1f}% of peak" if "frac_of_peak" in e else "")
                )
            if r.get("profile"):
                prof = {k: v for k, v in r["profile"].items() if k != "ops"}
                lines.append(f"  profile: {prof}")
                if "ops" in r["profile"]:
                    ops = r["profile"]["ops"]
                    lines.append(f"  XLA ops of one seed-step ({ops['us_per_step_in_ops']} us in ops):")
                    lines += [
                        f"    {o['us_per_step']:7.1f} us  {o['op']:<28} {o['shape']:<22} {o['from']}"
                        for o in ops["top"]
                    ]
    if res.get("regime"):
        lines.append("[regime] S = 64 seeds, batch 128, D = 63 (K: finite, inf = fresh items, bank = 2^18 item bank)")
        lines.append(
            f"{'N':>4} {'width':>5} {'K':>5} {'block':>5} {'seed-steps/s':>13} {'GFLOP/s':>8} {'compile s':>10} {'MB/seed':>8}"
        )
        for e in res["regime"]["rows"]:
            mb = e["bytes_per_seed"] / 2**20 if e["bytes_per_seed"] else float("nan")
            lines.append(
                f"{e['N']:>4} {e['width']:>5} {e['K']!s:>5} {e['block']:>5} {e['seed_steps_per_s']:>13.1f} "
                f"{e['gflops_achieved']:>8.1f} {e['compile_s']:>10.2f} {mb:>8.2f}"
            )
        for K, prof in res["regime"]["profile_N32_W64"].items():
            lines.append(f"  N=32 K={K}: { ({k: v for k, v in prof.items() if k != 'ops'}) }")
            if "ops" in prof:
                lines += [
                    f"    {o['us_per_step']:7.1f} us  {o['op']:<28} {o['shape']:<22} {o['from']}"
                    for o in prof["ops"]["top"]
                ]
    for r in res.get("la", []):
        ref = ref_la.get((r["P"], r["D"]), {})
        ref_s = ref.get("s_per_step")
        f = r["fast"]["s_per_seed_step"]
        t = r["tokens"]["s_per_seed_step"] if r["tokens"] else None
        lines.append(
            f"[la] P={r['P']} D={r['D']} H={r['H']}: fast {f * 1e6:.2f} us/seed-step (S=256), "
            f"single seed {r['fast_single_seed']['s_per_seed_step'] * 1e6:.1f} us; "
            f"tokens {'-' if t is None else f'{t:.3f} s'}; re-created ref {ref_s} s; "
            f"fast/ref {'-' if not ref_s else f'{ref_s / f:.3g}x'}; "
            f"fast/tokens {'-' if t is None else f'{t / f:.3g}x'}"
        )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer sizes and steps (~3 min)")
    ap.add_argument("--skip-torch", action="store_true")
    ap.add_argument("--seeds", default=None, help="ensemble sizes (default 1,8,64,256; quick 1,8,64)")
    ap.add_argument("--steps", type=int, default=3, help="steps per timed call for S > 1")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--block1",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also time each S > 1 as S one-seed blocks in sequence (default: on a CPU only)",
    )
    ap.add_argument("--parts", default="cls,regime,mlp,la")
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    ap.add_argument("--torch-venv", default=os.environ.get("ICL_RACE_TORCH_VENV", "/work/torch-venv"))
    ap.add_argument("--out", default=str(HERE / "results-cpu.json"))
    ap.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        help="the device's dense peak for the precision used (e.g. 494.7 for an H200's TF32): "
        "rows also report their fraction of it",
    )
    ap.add_argument(
        "--matmul-precision",
        default=None,
        choices=["default", "tensorfloat32", "bfloat16", "highest"],
        help="jax_default_matmul_precision for the float32 parts (TF32/bf16 act on GPUs only)",
    )
    args = ap.parse_args()
    if args.matmul_precision:
        jax.config.update("jax_default_matmul_precision", args.matmul_precision)
    sizes = [int(s) for s in (args.seeds or ("1,8,64" if args.quick else "1,8,64,256")).split(",")]
    parts = args.parts.split(",")
    dev = jax.devices()[0]
    if args.block1 is None:
        args.block1 = dev.platform == "cpu"
    res = {
        "device": f"{len(jax.devices())} x {dev.platform}:{dev.device_kind}",
        "jax": jax.__version__,
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_before": os.getloadavg(),
        "args": vars(args),
    }
    tic = time.perf_counter()
    res["machine"] = machine(args.quick)
    log(f"machine: {res['machine']}")
    gemm = res["machine"]["sgemm_gflops_jax"]
    sections = [
        ("cls", lambda: bench_cls(args, sizes, gemm)),
        ("regime", lambda: bench_regime(args, gemm)),
        ("mlp", lambda: bench_mlp(args, sizes, gemm)),
        ("la", lambda: bench_la(args)),
        ("func", lambda: bench_func(args)),
    ] + ([] if args.skip_torch else [("torch", lambda: run_torch(args))])
    for name, run in sections:
        if name in parts or name == "torch":
            res[name] = run()
            # Written after every section, so that a run stopped by a time limit keeps what it measured.
            res["load_after"] = os.getloadavg()
            res["wall_s"] = round(time.perf_counter() - tic, 1)
            Path(args.out).write_text(json.dumps(res, indent=1, default=float))
    print(summarise(res))
    print(f"wrote {args.out} ({res['wall_s']} s)")


if __name__ == "__main__":
    main()
