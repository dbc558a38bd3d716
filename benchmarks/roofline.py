"""The training step's roofline (issue 42 item 1): per seed-step, FLOPs and bytes accessed from XLA's cost
analysis of the compiled step, how many times a token-sized (B, N, E) buffer is written and read in its HLO,
the compulsory traffic, and the ceilings they put on an H100 and an H200.

    .venv/bin/python benchmarks/roofline.py [--seeds 4] [--systems paper,regime,la] [--kernel xla|pallas] [--out FILE]
    make roofline-gpu     # the same for an H100 and an H200, compiled here without a GPU (--target)

PYTHONPATH=BASE (a `git archive` of another commit) costs that commit's step: the work tree is searched after it.

What is compiled: `engine.ensemble.steps_on_device`, the program `icl-race bench` times (a scan of training
steps over a vmap of `--seeds` seeds), on this machine's backend (the CPU here). XLA's cost analysis counts a
while loop's body once, so its figures over the seeds of the vmap are per seed-step.

--target h100 | h200: XLA's GPU compiler instead, run on this machine without a GPU (deviceless ahead-of-time
compilation: `jax.experimental.topologies` with the chip's GpuTargetConfig, CHIPS below), so that the GPU's
fusions are seen where no GPU is lent. It needs jax's CUDA plugin and ptxas (`make roofline-gpu` builds
.venv-gpu-compile from the pyproject extra gpu-compile; ~0.6 GB, no GPU or driver). The GPU compiler fuses differently from the CPU's:
it gathers the tokens from the item pool inside each reduction that reads them, so the token tensor never
exists, and its cost analysis counts the pool (shared by the seeds, resident in L2) once per fusion, not once
per token read. What it cannot do without a chip: autotune (GEMM tilings are the compiler's defaults, so a
GPU's own compile may pick other tiles and split-K factors; the fusions are decided before autotuning).
Deviceless executables have no cost_analysis(), so the analysis is run on the optimised module through
jaxlib's hlo_module_cost_analysis (the same HloCostAnalysis; a private API, checked against the CPU compile's
own figure in tests/test_roofline.py). That analysis cannot see into a custom call (it counts each as -1 byte
and -1 FLOP, which `cost` adds back): a row records the custom calls of the step (`custom_calls`), none on the
XLA path.
With --kernel pallas and a GPU target the Pallas kernels are compiled by Triton for the chip (a check that they
compile) and, as for the CPU's estimate, their traffic and FLOPs are the analytic ones added to XLA's figures for
the rest of the step. PYTHONPATH=BASE with --kernel pallas needs a BASE that has the kernels (issue 42 item 3).

Token passes: in the computations that run (the entry and loop bodies, not the fused computations inside
them), every instruction whose result holds S x B x N x E elements is a write of the token tensor, and every
instruction that takes one as an operand and reads all of it a read; a fusion that only slices it (the
query token) reads B x E of it, counted apart as a slice read.

Weight copies: copy instructions in the loop bodies shaped like one of the state's matrices over the seeds
(a weight copied every step, which `systems.optim.update` avoids; linear attention's plain gradient step
does not go through it).

Compulsory traffic per seed-step: the training state (parameters and optimizer state) read once and written
once. The item pool (K x E floats, 2.6 MB at K = 10^4) is shared by the seeds and fits in the 50 MB L2, so it
is not counted; the batch's ids are drawn on the chip. Ceiling = min(HBM bandwidth / bytes, peak FLOP/s /
FLOPs): with XLA's bytes (the step as compiled), and with the compulsory bytes (a step whose tokens never
leave the chip).

--kernel pallas (the classification systems; model.attention_kernel = "pallas", models/attention_kernel.py): an
ESTIMATE, not a measurement. XLA's cost analysis cannot see into a Pallas kernel (on the CPU it runs in
interpret mode, a loop whose body the analysis counts once; on a GPU it is an opaque custom call), so the row
adds two parts: XLA's bytes and FLOPs of the step compiled with the kernels replaced by a stand-in that reads
only the query token (the rest of the step: sampler, LayerNorm of the query, MLP, update), the batch kept
materialised as the kernels need it; and the kernels' analytic traffic per sequence
(`attention_kernel.hbm_bytes_per_sequence`: each reads the tokens once) and FLOPs (18 N E: four contractions of
the tile forward, the three recomputed and two more backward).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE.parent))  # after PYTHONPATH: PYTHONPATH=BASE-SRC costs another commit's step

# Dense figures of the SXM parts (NVIDIA's data sheets); TF32 is jax's default matmul precision on them.
# memory_bytes and kind: what --target tells XLA's GPU compiler besides (in the form a GPU process reports it).
CHIPS = {
    "H100": {
        "hbm_bytes_per_s": 3.35e12,
        "l2_bytes": 50e6,
        "fp32_flops": 67e12,
        "tf32_flops": 495e12,
        "memory_bytes": 80 << 30,
        "kind": "NVIDIA H100 80GB HBM3",
    },
    "H200": {
        "hbm_bytes_per_s": 4.8e12,
        "l2_bytes": 50e6,
        "fp32_flops": 67e12,
        "tf32_flops": 495e12,
        "memory_bytes": 141 << 30,
        "kind": "NVIDIA H200",
    },
}
# --target: the GpuTargetConfig of a chip (both are GH100 dies, 132 SMs, compute capability 9.0).
_TARGET_CONFIG = """gpu_device_info {{
  threads_per_block_limit: 1024 threads_per_warp: 32 shared_memory_per_block: 49152
  shared_memory_per_core: 233472 shared_memory_per_block_optin: 232448 threads_per_core_limit: 2048
  core_count: 132 fpus_per_core: 128 block_dim_limit_x: 2147483647 block_dim_limit_y: 65535
  block_dim_limit_z: 65535 memory_bandwidth: {bandwidth} l2_cache_size: 52428800 clock_rate_ghz: 1.98
  device_memory_size: {memory} cuda_compute_capability {{ major: 9 }} registers_per_core_limit: 65536
  registers_per_block_limit: 65536
}}
platform_name: "CUDA" dnn_version_info {{ major: 9 minor: 8 }} runtime_version {{ major: 12 minor: 9 }}
device_description_str: "{kind}"
"""

_DTYPE_BYTES = {"f32": 4, "s32": 4, "u32": 4, "pred": 1, "s8": 1, "u8": 1, "f16": 2, "bf16": 2, "s64": 8, "u64": 8}
_ARRAY = re.compile(r"\b(f32|s32|u32|pred|s8|u8|f16|bf16|s64|u64|f64)\[([0-9,]*)\]")
_INSTR = re.compile(r"^(?:ROOT )?%([\w.\-]+) = (.*?) ([\w\-]+)\((.*)$")
_NOT_A_PASS = {"parameter", "get-tuple-element", "tuple", "bitcast", "constant"}


def _dims(shape: str) -> tuple[int, ...] | None:
    """The dimensions of an array shape (None for a tuple: its parts are counted where they are made)."""
    m = _ARRAY.search(shape)
    return tuple(int(d) for d in m.group(2).split(",") if d) if m and not shape.startswith("(") else None


def _elements(shape: str) -> int:
    """Elements of an array shape (0 for a tuple)."""
    dims = _dims(shape)
    return 0 if dims is None else math.prod(dims)


def _computations(hlo: str) -> dict[str, list[str]]:
    comps: dict[str, list[str]] = {}
    current = None
    for line in hlo.splitlines():
        head = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
        if head and not line.startswith(" "):
            current = head.group(1)
            comps[current] = []
        elif line.startswith("}"):
            current = None
        elif current and line.strip():
            comps[current].append(line.strip())
    return comps


def _operands(rest: str) -> list[str]:
    return re.findall(r"%([\w.\-]+)", rest.split("), ")[0] if "), " in rest else rest)


def _sliced_params(lines: list[str], threshold: int) -> set[int]:
    """The parameter numbers of a fused computation that are read only through slices smaller than
    `threshold` elements (the query token of the batch), not as a whole."""
    params, users = {}, {}
    for line in lines:
        m = _INSTR.match(line)
        if not m:
            continue
        name, shape, op, rest = m.groups()
        if op == "parameter":
            params[name] = int(re.match(r"(\d+)", rest).group(1))
        for o in _operands(rest):
            users.setdefault(o, []).append((op, _elements(shape)))
    return {
        number
        for name, number in params.items()
        if users.get(name) and all(op in ("slice", "dynamic-slice") and n < threshold for op, n in users[name])
    }


def _running(comps: dict[str, list[str]]) -> dict[str, list[str]]:
    """The computations that run as a sequence of buffers (entry, loop bodies), not those fused or applied
    inside an instruction."""
    nested = {
        m.group(1)
        for lines in comps.values()
        for line in lines
        for m in re.finditer(r"(?:calls|to_apply)=%([\w.\-]+)", line)
    }
    return {name: lines for name, lines in comps.items() if name not in nested}


def matrix_copies(hlo: str, carry, seeds: int) -> list[int]:
    """The elements per seed of each copy instruction in the loop bodies of `hlo` (the steps, not the program's
    entry, which copies an undonated input once per call) whose result has the shape of one of the training
    state's matrices over the seeds: a weight copied every step (`systems.optim.update`'s barrier says why it
    happens and which copy is left)."""
    import jax

    shapes = {tuple(a.shape) for a in jax.tree.leaves(carry["state"]) if a.ndim >= 3}  # seed axis + a matrix
    comps = _computations(hlo)
    bodies = {m.group(1) for lines in comps.values() for line in lines for m in re.finditer(r"body=%([\w.\-]+)", line)}
    return sorted(
        _elements(m.group(2)) // seeds
        for name in bodies
        for line in comps.get(name, [])
        if (m := _INSTR.match(line)) and m.group(3) == "copy" and _dims(m.group(2)) in shapes
    )


def custom_calls(hlo: str) -> int:
    """Custom calls in the computations of `hlo` that run (a GEMM left to a library, a Pallas kernel): XLA's cost
    analysis of a deviceless module counts each as -1 byte and -1 FLOP."""
    return sum(
        1
        for lines in _running(_computations(hlo)).values()
        for line in lines
        if (m := _INSTR.match(line)) and m.group(3) == "custom-call"
    )


def token_passes(hlo: str, token_elements: int) -> dict[str, int]:
    """Writes, whole reads and slice reads of buffers of exactly `token_elements` elements (S x B x N x E)
    in the computations of the compiled module `hlo` (its text) that run, fused computations excluded."""
    comps = _computations(hlo)
    running = _running(comps)
    token = set()
    for lines in running.values():
        for line in lines:
            m = _INSTR.match(line)
            if m and _elements(m.group(2)) == token_elements:
                token.add(m.group(1))
    writes = reads = slice_reads = 0
    for lines in running.values():
        for line in lines:
            m = _INSTR.match(line)
            if not m or m.group(3) in _NOT_A_PASS:
                continue
            ins, _, op, rest = m.groups()
            writes += ins in token
            callee = re.search(r"calls=%([\w.\-]+)", line)
            sliced = _sliced_params(comps[callee.group(1)], token_elements) if op == "fusion" and callee else set()
            for i, o in enumerate(_operands(rest)):
                if o in token:
                    if i in sliced or op in ("slice", "dynamic-slice"):
                        slice_reads += 1
                    else:
                        reads += 1
    return {"writes": writes, "reads": reads, "slice_reads": slice_reads}


def gpu_device(chip: str):
    """The one device of a deviceless topology of `chip` (a CHIPS key), to compile for (module docstring). Must
    come before anything initialises jax's backends, and leaves the CPU the only backend that runs."""
    import jax
    from jax.experimental import topologies

    jax.config.update("jax_platforms", "cpu")  # the CUDA plugin must not look for a driver
    c = CHIPS[chip]
    config = _TARGET_CONFIG.format(bandwidth=int(c["hbm_bytes_per_s"]), memory=c["memory_bytes"], kind=c["kind"])
    try:
        return topologies.get_topology_desc(platform="cuda", target_config=config, topology="1x1x1").devices[0]
    except NotImplementedError:  # jax without its CUDA plugin
        sys.exit(
            f"roofline: --target {chip.lower()} needs jax's CUDA plugin: run `make roofline-gpu`, or this script with .venv-gpu-compile/bin/python"
        )


def compile_step(program, consts, seeds: int, steps: int = 2, device=None):
    """The compiled training-step program of `seeds` seeds in one vmap (`steps` > 1, so that the steps are a
    loop whose body the cost analysis counts once), for this machine's backend or for `device` (`gpu_device`)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from icl_race.engine.ensemble import init_on_device, seed_keys, steps_on_device

    keys = seed_keys(0, np.arange(seeds))
    carry = jax.eval_shape(lambda k: init_on_device(program, seeds, k, consts), keys)
    args = carry, consts, jnp.int32(0)
    if device is not None:  # abstract arguments placed on the target: nothing is transferred, nothing runs
        where = jax.sharding.make_single_device_sharding(device)
        args = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=where), args)
    return steps_on_device.lower(program, seeds, steps, *args).compile(), carry


def cost(compiled, deviceless: bool = False) -> dict:
    """XLA's cost analysis of a compiled program: its own, or for a deviceless GPU executable (which has none)
    HloCostAnalysis run here on its optimised module, less its -1 byte and -1 FLOP for each custom call (whose
    work it cannot see: `custom_calls`)."""
    if not deviceless:
        out = compiled.cost_analysis()
        return out[0] if isinstance(out, list) else out
    import jax
    from jax._src.lib import _jax

    [module] = compiled.runtime_executable().hlo_modules()
    out = _jax.hlo_module_cost_analysis(jax.devices("cpu")[0].client, module)
    unseen = custom_calls(compiled.as_text())
    return out | {"flops": out["flops"] + unseen, "bytes accessed": out["bytes accessed"] + unseen}


def state_bytes(carry, seeds: int) -> int:
    """One seed's training state (parameters and optimizer state), in bytes."""
    import jax

    return sum(a.size * a.dtype.itemsize for a in jax.tree.leaves(carry["state"])) // seeds


def roofline(name: str, program, consts, seeds: int, token_elements: int | None, device=None) -> dict:
    import jax

    compiled, carry = compile_step(program, consts, seeds, device=device)
    analysis = cost(compiled, deviceless=device is not None)
    flops, xla_bytes = analysis["flops"] / seeds, analysis["bytes accessed"] / seeds
    state = state_bytes(carry, seeds)
    compiled_for = jax.default_backend() if device is None else f"{device.device_kind} (deviceless, not autotuned)"
    row = {
        "system": name,
        "compiled_for": compiled_for,
        "seeds": seeds,
        "flops_per_seed_step": round(flops),
        "bytes_per_seed_step": round(xla_bytes),
        "state_bytes_per_seed": state,
        "compulsory_bytes_per_seed_step": 2 * state,
        "matrix_copies": matrix_copies(compiled.as_text(), carry, seeds),
        "custom_calls": custom_calls(compiled.as_text()),
    }
    if token_elements:
        row["token_bytes_per_seed"] = 4 * token_elements
        row["token_passes"] = token_passes(compiled.as_text(), seeds * token_elements)
    return row | ceilings(flops, xla_bytes, 2 * state)


def ceilings(flops: float, xla_bytes: float, compulsory_bytes: float) -> dict:
    """Per chip and precision, min(HBM bandwidth / bytes, peak / FLOPs) in seed-steps/s: with the bytes as
    compiled, and with the compulsory ones."""
    return {
        f"ceiling_{chip}_{precision}": {
            "as_compiled": round(min(c["hbm_bytes_per_s"] / xla_bytes, c[f"{precision}_flops"] / flops)),
            "compulsory": round(min(c["hbm_bytes_per_s"] / compulsory_bytes, c[f"{precision}_flops"] / flops)),
        }
        for chip, c in CHIPS.items()
        for precision in ("fp32", "tf32")
    }


def pallas_estimate(name: str, program, consts, seeds: int, token_elements: int) -> dict:
    """The `--kernel pallas` row (module docstring): the step with a stand-in for the kernels, compiled and costed
    by XLA, plus the kernels' analytic traffic and FLOPs."""
    import dataclasses
    from unittest import mock

    import jax
    import jax.numpy as jnp

    from icl_race.models import transformer

    @jax.custom_vjp
    def stand_in(x_BxNxE, gu_BxE):
        # the barrier keeps the batch materialised (XLA would otherwise gather the query rows only)
        q_BxE = jax.lax.optimization_barrier(x_BxNxE)[:, -1]
        return q_BxE * gu_BxE, jnp.sum(q_BxE * gu_BxE, axis=-1)

    def fwd(x_BxNxE, gu_BxE):
        return stand_in(x_BxNxE, gu_BxE), (x_BxNxE[:, -1], gu_BxE)

    def bwd(res, cot):
        (q_BxE, _), (dwx_BxE, dwm_B) = res, cot
        return None, (dwx_BxE + dwm_B[:, None]) * q_BxE

    stand_in.defvjp(fwd, bwd)
    model = dataclasses.replace(program.model, attention_kernel="pallas")
    with mock.patch.object(transformer, "query_attention", stand_in):
        row = roofline(name, dataclasses.replace(program, model=model), consts, seeds, token_elements)
    return with_kernels(row, program, "pallas kernels (estimate)")


def with_kernels(row: dict, program, label: str) -> dict:
    """A row of the step without the kernels' work, plus the kernels' analytic traffic per sequence
    (`attention_kernel.hbm_bytes_per_sequence`: each reads the tokens once) and FLOPs (18 N E: four contractions
    of the tile forward, the three recomputed and two more backward), and the ceilings again."""
    from icl_race.models import attention_kernel

    B, N, E = program.batch_size, program.N, program.model.E
    kernels = {k: B * v for k, v in attention_kernel.hbm_bytes_per_sequence(N, E).items()}
    flops = row["flops_per_seed_step"] + 18 * B * N * E
    xla_bytes = row["bytes_per_seed_step"] + sum(kernels.values())
    row = row | {
        "system": f"{row['system']}, {label}",
        "rest_of_step_bytes_per_seed_step": row["bytes_per_seed_step"],
        "kernel_bytes_per_seed_step": kernels,
        "flops_per_seed_step": flops,
        "bytes_per_seed_step": xla_bytes,
    }
    return row | ceilings(flops, xla_bytes, row["compulsory_bytes_per_seed_step"])


def pallas_compiled(name: str, program, consts, seeds: int, token_elements: int, device) -> dict:
    """The `--kernel pallas` row for a GPU target: the step with the kernels lowered by Pallas' Triton backend and
    compiled for the chip (module docstring). Pallas asks the local GPU which chip it lowers for; with none, it is
    told (jax's private gpu_info, as of jax 0.12)."""
    import dataclasses
    from unittest import mock

    from jax._src.pallas.triton import gpu_info, pallas_call_registration

    from icl_race.models import attention_kernel

    chip = gpu_info.get_gpu_info_from_version(gpu_info.gpu_version_from_device_kind(device.device_kind))
    model = dataclasses.replace(program.model, attention_kernel="pallas")
    with (
        mock.patch.object(attention_kernel, "interpret", lambda: False),
        mock.patch.object(pallas_call_registration.gpu_info_lib, "get_gpu_info", lambda: chip),
    ):
        row = roofline(name, dataclasses.replace(program, model=model), consts, seeds, token_elements, device)
    return with_kernels(row, program, "pallas kernels (Triton; their traffic and FLOPs analytic)")


def systems(names: list[str]):
    """(name, program, consts, token elements per seed) of each system asked for."""
    import jax

    from icl_race import config
    from icl_race.systems.classification import ClassificationRace
    from icl_race.systems.linear_attention import LinearAttentionRegression

    out = []
    if "paper" in names:  # the paper model: N = 100, width 512, batch 128, K = 10^4
        program, consts = ClassificationRace.from_config(config.from_dict({"task": {"K": 10_000, "N": 100}}))
        out.append(("classification paper N=100 W=512 B=128", program, consts, 128 * 100 * 65))
    if "regime" in names:  # the regime protocol's CPU shape (experiments/regime/)
        cfg = {"task": {"K": 3600, "N": 32}, "model": {"width": 64}, "train": {"lr": 0.1}}
        program, consts = ClassificationRace.from_config(config.from_dict(cfg))
        out.append(("classification regime N=32 W=64 B=128", program, consts, 128 * 32 * 65))
    if "la" in names:  # linear attention, the moments path (no token tensor in its step)
        with jax.enable_x64(True):
            program, consts = LinearAttentionRegression.build(model="attn_s", D=4, H=5, N=31, P=5000, path="moments")
        out.append(("linear attention attn_s D=4 H=5 P=5000 (moments, float64)", program, consts, None))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="4", help="seeds in the vmap that is compiled (a comma list: one row each)")
    ap.add_argument("--systems", default="paper,regime,la")
    ap.add_argument("--kernel", choices=("xla", "pallas"), default="xla", help="the classification steps' attention")
    ap.add_argument("--target", choices=("cpu", *(c.lower() for c in CHIPS)), default="cpu", help="compile for")
    ap.add_argument("--out", default=None, help="JSON file for the rows")
    args = ap.parse_args()
    device = None if args.target == "cpu" else gpu_device(args.target.upper())  # before any backend starts
    import jax

    rows = []
    for (name, program, consts, tokens), seeds in itertools.product(
        systems(args.systems.split(",")), map(int, args.seeds.split(","))
    ):
        with jax.enable_x64(name.startswith("linear")):
            if args.kernel == "pallas" and tokens and device is not None:
                rows.append(pallas_compiled(name, program, consts, seeds, tokens, device))
            elif args.kernel == "pallas" and tokens:
                rows.append(pallas_estimate(name, program, consts, seeds, tokens))
            else:
                rows.append(roofline(name, program, consts, seeds, tokens, device))
        r = rows[-1]
        print(
            f"{r['system']}, S = {seeds}, compiled for {r['compiled_for']}: "
            f"{r['flops_per_seed_step'] / 1e6:.3f} MFLOP, {r['bytes_per_seed_step'] / 1e6:.3f} MB accessed, "
            f"compulsory {r['compulsory_bytes_per_seed_step'] / 1e6:.3f} MB per seed-step; "
            f"weight matrices copied (elements per seed): {r['matrix_copies']}"
            + (f"; token tensor {r['token_bytes_per_seed'] / 1e6:.2f} MB, {r['token_passes']}" if tokens else "")
        )
        for chip in CHIPS:
            for p in ("fp32", "tf32"):
                c = r[f"ceiling_{chip}_{p}"]
                print(
                    f"  {chip} {p}: ceiling {c['as_compiled']:,} seed-steps/s as compiled, {c['compulsory']:,} compulsory"
                )
    if args.out:
        import icl_race

        meta = {"backend": jax.default_backend(), "target": args.target, "package": icl_race.__file__}
        Path(args.out).write_text(json.dumps(meta | {"rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
