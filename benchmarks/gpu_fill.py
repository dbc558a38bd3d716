"""Issue 42 item 6 on one GPU, in under 5 minutes (driven by benchmarks/gpu_fill.sh): does the paper model fill
the chip? Every row is written to OUT/results-gpu-fill.json as soon as it is measured, so a run cut short keeps
what it measured.

    python benchmarks/gpu_fill.py --out DIR [--dry-run] [--sections rate,pack,trace,pallas]

rate   seed-steps/s of the paper model's training step (N = 100, width 512, batch 128, K = 10^4) at S = 256, 1,024
       and 4,096 seeds in one vmap, the step before issue 42 ("old": its folded LayerNorm, re-created below and
       reachable only from this file) against the package's ("new"), at jax's default matmul precision (TF32 on
       an H100 / H200) and at "highest" (full float32). Only the forward is old: the rest of the step, the
       optimizer's gradient barrier (131e580) included, is the package's, so the H200's 33,700 seed-steps/s of
       2026-12-04 (benchmarks/RESULTS.md) stays the baseline of the whole step
pack   the K grid of experiments/fig2bc.toml (10 cells, K_max = 10^5) as one 160-seed ensemble, each block of
       16 seeds with its cell's K (K is traced, so one program serves every cell: the emulation of a packed
       sweep), against one 16-seed cell alone; seed-steps/s of each
trace  a jax.profiler trace of the new step at S = 1,024, summarised as the top 25 device ops by time per
       seed-step, each with its HLO shape and kind (from the compiled module's text)
pallas the one-layer model with model.attention_kernel = "pallas" (models/attention_kernel.py, issue 42 item 3):
       first its logits and each parameter gradient leaf on one paper-shape batch against the XLA path's at
       "highest" precision (max abs difference, and relative to the leaf's largest entry), then the Pallas step's seed-steps/s at S = 256
       and 1,024 beside the XLA step's, at jax's default precision. The kernels compile through Triton for an
       H100 and an H200 (`make roofline-gpu`), but have never run: a failure is recorded as the row's error.

--dry-run: tiny sizes (N = 8, width 32, batch 16; S = 2, 4; a 2-cell grid), to try the script on a CPU.
Method as in benchmarks/run.py: AOT compile timed apart, one warm-up call, best of the timed calls.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import json
import re
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from icl_race import config  # noqa: E402
from icl_race.engine import ensemble  # noqa: E402
from icl_race.models.transformer import OneLayer, Transformer  # noqa: E402
from icl_race.systems.classification import ClassificationRace  # noqa: E402

FIG2BC_K = [500, 11554, 22610, 33666, 44722, 55776, 66832, 77888, 88944, 100000]


class OldOneLayer(OneLayer):
    """The forward pass before issue 42 (commit 790e06f): the centred tokens stored, read by two dot products
    forward and two backward, the variance from them (written twice, read six times: benchmarks/roofline.py)."""

    def __call__(self, x_BxNxE):
        ln, attn = self.ln, self.attn
        xc_BxNxE = x_BxNxE - jnp.mean(x_BxNxE, axis=-1, keepdims=True)
        r_BxN = jax.lax.rsqrt(jnp.mean(xc_BxNxE * xc_BxNxE, axis=-1) + ln.epsilon)
        g_1xE, b_1xE = ln.scale[...][None], ln.bias[...][None]
        h_BxE = xc_BxNxE[:, -1] * r_BxN[:, -1:] * g_1xE + b_1xE
        u_BxE = attn.q(h_BxE) @ attn.k.kernel[...].T
        s_BxN = jnp.einsum("bne,be->bn", xc_BxNxE, g_1xE * u_BxE) * r_BxN + jnp.sum(
            b_1xE * u_BxE, axis=-1, keepdims=True
        )
        a_BxN = jax.nn.softmax(s_BxN, axis=-1)
        o_BxE = attn.v(g_1xE * jnp.einsum("bn,bne->be", a_BxN * r_BxN, xc_BxNxE) + b_1xE)
        return self.mlp(h_BxE + o_BxE)[:, 0]


@dataclasses.dataclass(frozen=True)
class OldTransformer(Transformer):
    """The same parameters as Transformer (same init), the old forward pass; a distinct class, so that jit's
    caches never hand one step's program to the other."""

    def module(self, rngs):
        return OldOneLayer(self.E, self.width, rngs)


def paper_program(dry: bool, K: int = 10_000, K_max: int = 0, old: bool = False, kernel: str = "xla"):
    task = {"N": 8, "K": K, "K_max": K_max} if dry else {"N": 100, "K": K, "K_max": K_max}
    model = {"attention_kernel": kernel} | ({"width": 32} if dry else {})
    raw = {"task": task, "model": model} | ({"train": {"batch_size": 16}} if dry else {})
    program, consts = ClassificationRace.from_config(config.from_dict(raw))
    if old:
        program = dataclasses.replace(program, model=OldTransformer(**dataclasses.asdict(program.model)))
    return program, consts


def timed(fn, carry, args, steps, repeats):
    """(best seconds of `repeats` calls, carry) after one warm-up call; fn donates its carry."""
    carry, losses = fn(carry, *args(0))
    jax.block_until_ready(losses)
    best = float("inf")
    for r in range(repeats):
        tic = time.perf_counter()
        carry, losses = fn(carry, *args((r + 1) * steps))
        jax.block_until_ready(losses)
        best = min(best, time.perf_counter() - tic)
    if not np.isfinite(np.asarray(losses)).all():
        raise FloatingPointError("non-finite training loss")
    return best, carry


def rate_row(program, consts, seeds, steps, repeats):
    keys = ensemble.seed_keys(0, np.arange(seeds))
    carry = ensemble.init_on_device(program, seeds, keys, consts)
    tic = time.perf_counter()
    compiled = ensemble.steps_on_device.lower(program, seeds, steps, carry, consts, jnp.int32(0)).compile()
    compile_s = time.perf_counter() - tic
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    best, _ = timed(compiled, carry, lambda t: (consts, jnp.int32(t)), steps, repeats)
    return {
        "seeds": seeds,
        "compile_s": round(compile_s, 2),
        "step_ms": round(1e3 * best / steps, 3),
        "seed_steps_per_s": round(seeds * steps / best, 1),
        "xla_bytes_per_seed_step": round(cost["bytes accessed"] / seeds) if cost else None,
    }


def packed_row(program, consts, Ks, seeds_per_cell, steps, repeats):
    """len(Ks) cells of `seeds_per_cell` seeds as one ensemble whose consts carry a K per seed (vmapped with
    the seeds; every other const shared), as a packed sweep would train them."""
    K_S = jnp.repeat(jnp.asarray(Ks, jnp.int32), seeds_per_cell)
    S = K_S.size
    consts_S = {**consts, "K": K_S}
    axes = {k: 0 if k == "K" else None for k in consts}
    init = jax.jit(jax.vmap(functools.partial(ensemble._init_seed, program), in_axes=(axes, 0)))
    keys = jax.vmap(lambda k: jax.random.fold_in(k, ensemble.INIT_STREAM))(ensemble.seed_keys(0, np.arange(S)))
    carry = init(consts_S, ensemble.seed_keys(0, np.arange(S)))
    del keys
    step = jax.jit(
        jax.vmap(functools.partial(ensemble._train_steps, program, steps), in_axes=(axes, 0, None)),
        donate_argnums=1,
    )
    tic = time.perf_counter()
    compiled = step.lower(consts_S, carry, jnp.int32(0)).compile()
    compile_s = time.perf_counter() - tic
    best, _ = timed(lambda c, t: compiled(consts_S, c, t), carry, lambda t: (jnp.int32(t),), steps, repeats)
    return {
        "cells": len(Ks),
        "seeds_per_cell": seeds_per_cell,
        "seeds": S,
        "compile_s": round(compile_s, 2),
        "seed_steps_per_s": round(S * steps / best, 1),
    }


def pallas_agreement_row(dry: bool) -> dict:
    """The Pallas path against the XLA path on one training batch of the paper shape, at the initial parameters:
    max |logit difference|, and per gradient leaf the max |difference| over the leaf's largest entry. At "highest"
    matmul precision: at the default (TF32 on a GPU) the XLA path's contractions over the tokens are TF32 dots
    while the kernels sum in float32, and the difference would measure TF32, not the kernels."""
    with jax.default_matmul_precision("highest"):
        return _agreement(dry)


def _agreement(dry: bool) -> dict:
    xla, consts = paper_program(dry)
    pallas, _ = paper_program(dry, kernel="pallas")
    state = jax.jit(lambda k: xla.init(k, consts))(jax.random.key(0))
    x, y = jax.jit(lambda k: xla.train_batch(state, consts, k, xla.batch_size))(jax.random.key(1))
    logits = {p.model.attention_kernel: jax.jit(p.model.apply)(state["params"], x) for p in (xla, pallas)}
    grads = {p.model.attention_kernel: jax.jit(jax.grad(p.loss))(state["params"], x, y) for p in (xla, pallas)}
    leaves = jax.tree_util.tree_flatten_with_path(grads["xla"])[0]
    return {
        "max_abs_logit_diff": float(jnp.max(jnp.abs(logits["pallas"] - logits["xla"]))),
        "max_abs_logit": float(jnp.max(jnp.abs(logits["xla"]))),
        "grad_rel_diff": {
            jax.tree_util.keystr(k): float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b)))
            for (k, b), a in zip(leaves, jax.tree.leaves(grads["pallas"]), strict=True)
        },
    }


def hlo_shapes(hlo: str) -> dict[str, str]:
    """Instruction name -> "shape opcode[/fusion kind]" over the compiled module's text."""
    out = {}
    for m in re.finditer(r"^\s*(?:ROOT )?%([\w.\-]+) = (.*?) ([\w\-]+)\((.*)$", hlo, re.M):
        kind = re.search(r"kind=(\w+)", m.group(4))
        out[m.group(1)] = f"{m.group(2)} {m.group(3)}" + (f"/{kind.group(1)}" if kind else "")
    return out


def trace_rows(program, consts, seeds, steps, top=25):
    """The top `top` ops of a profiled call by total time, per seed-step, from the device planes (the host's
    XLA op events on a CPU)."""
    keys = ensemble.seed_keys(0, np.arange(seeds))
    carry = ensemble.init_on_device(program, seeds, keys, consts)
    compiled = ensemble.steps_on_device.lower(program, seeds, steps, carry, consts, jnp.int32(0)).compile()
    shapes = hlo_shapes(compiled.as_text())
    carry, losses = compiled(carry, consts, jnp.int32(0))
    jax.block_until_ready(losses)
    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp):
            carry, losses = compiled(carry, consts, jnp.int32(steps))
            jax.block_until_ready(losses)
        files = sorted(Path(tmp).rglob("*.xplane.pb"))
        data = jax.profiler.ProfileData.from_file(str(files[-1]))
    total = collections.Counter()
    count = collections.Counter()
    planes = [p for p in data.planes if p.name.startswith("/device:")] or [p for p in data.planes if "CPU" in p.name]
    for plane in planes:
        for line in plane.lines:
            if plane.name.startswith("/device:") and line.name not in ("XLA Ops", "Ops"):
                continue
            for ev in line.events:
                name = ev.name.split(":")[0].lstrip("%")
                if name in shapes:
                    total[name] += ev.duration_ns
                    count[name] += 1
    per = seeds * steps
    return [
        {"op": n, "hlo": shapes[n], "us_per_seed_step": round(t / 1e3 / per, 4), "calls": count[n]}
        for n, t in total.most_common(top)
    ], [p.name for p in data.planes]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="benchmarks")
    ap.add_argument("--dry-run", action="store_true", help="tiny sizes, to try the script on a CPU")
    ap.add_argument("--sections", default="rate,pack,trace,pallas")
    args = ap.parse_args()
    dry = args.dry_run
    out = Path(args.out) / "results-gpu-fill.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"device": str(jax.devices()[0]), "backend": jax.default_backend(), "jax": jax.__version__, "dry_run": dry}
    doc |= {"rate": [], "pack": [], "trace": None, "pallas": []}

    def save():
        out.write_text(json.dumps(doc, indent=2))

    save()
    sections = args.sections.split(",")
    sizes, steps, repeats = ((2, 4), 3, 1) if dry else ((256, 1024, 4096), 20, 2)
    if "rate" in sections:
        for precision in ("default", "highest"):
            for seeds in sizes:
                for old in (False, True):
                    program, consts = paper_program(dry, old=old)
                    n = steps if dry else min(40, max(5, 20_480 // seeds))  # ~2 s a call at today's rate
                    try:
                        with jax.default_matmul_precision(None if precision == "default" else precision):
                            row = rate_row(program, consts, seeds, n, repeats)
                    except Exception as e:
                        row = {"seeds": seeds, "error": f"{type(e).__name__}: {str(e)[:200]}"}
                    doc["rate"].append({"step": "old" if old else "new", "precision": precision, **row})
                    save()
                    print(json.dumps(doc["rate"][-1]), flush=True)
    if "pack" in sections:
        Ks = FIG2BC_K[:2] if dry else FIG2BC_K
        program, consts = paper_program(dry, K=Ks[0], K_max=max(Ks))
        for cells in (Ks, Ks[:1]):
            doc["pack"].append(packed_row(program, consts, cells, 2 if dry else 16, steps, repeats))
            save()
            print(json.dumps(doc["pack"][-1]), flush=True)
    if "pallas" in sections:  # the agreement first (one compile each way), then the rates, xla beside pallas
        try:
            row = {"check": "agreement", "precision": "highest", **pallas_agreement_row(dry)}
        except Exception as e:
            row = {"check": "agreement", "error": f"{type(e).__name__}: {str(e)[:400]}"}
        doc["pallas"].append(row)
        save()
        print(json.dumps(row), flush=True)
        for seeds in sizes[:2]:
            for kernel in ("xla", "pallas"):
                program, consts = paper_program(dry, kernel=kernel)
                n = steps if dry else min(40, max(5, 20_480 // seeds))
                try:
                    row = rate_row(program, consts, seeds, n, repeats)
                except Exception as e:
                    row = {"seeds": seeds, "error": f"{type(e).__name__}: {str(e)[:400]}"}
                doc["pallas"].append({"check": "rate", "kernel": kernel, **row})
                save()
                print(json.dumps(doc["pallas"][-1]), flush=True)
    if "trace" in sections:
        program, consts = paper_program(dry)
        rows, planes = trace_rows(program, consts, 4 if dry else 1024, steps)
        doc["trace"] = {"seeds": 4 if dry else 1024, "steps": steps, "planes": planes, "top_ops": rows}
        save()
        for r in rows:
            print(f"{r['us_per_seed_step']:>10.4f} us  {r['op']:<40} {r['hlo'][:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
