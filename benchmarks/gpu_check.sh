#!/usr/bin/env bash
# The whole benchmark table on one GPU, in under 7 minutes (issue 7). Its first run (2026-12-04) was cut
# short; benchmarks/RESULTS.md, *First GPU check*, holds what it measured.
#
#   bash benchmarks/gpu_check.sh [OUT_DIR]      # default benchmarks/ (on the device tool: "$OUT")
#
# Which Python: .venv if its jax sees a GPU; else the machine's python3 if its jax does (the lent H200
# image: jax 0.11.2 + CUDA 13, no network), running the project from source (PYTHONPATH) with the
# wheels of benchmarks/gpu_wheels.sh from .whl/ when they were carried; else a new .venv-gpu with the
# cuda extra (needs PyPI). Runs the JAX sections only (the PyTorch re-creation is the CPU reference;
# its rates are in results-cpu.json), with larger ensembles and longer timed calls than on the CPU,
# then the classification section again at TF32 and bf16 matmul precision (throughput only: their
# effect on t_ICL is measured by `icl-race sweep experiments/precision_gpu.toml` before using them).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-benchmarks}"
mkdir -p "$OUT"
sees_gpu() { "$1" -c 'import jax,sys; sys.exit(0 if jax.default_backend()=="gpu" else 1)' 2>/dev/null; }
if [ -x .venv/bin/python ] && sees_gpu .venv/bin/python; then
  PY=.venv/bin/python
elif command -v python3 >/dev/null && sees_gpu python3; then
  PY=python3
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
  fi
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  if [ ! -x .venv-gpu/bin/python ]; then
    python3 -m venv .venv-gpu
    .venv-gpu/bin/pip install -q -e '.[cuda]'
  fi
  PY=.venv-gpu/bin/python
fi
"$PY" -c 'import jax, flax, optax; print(jax.__version__, flax.__version__, optax.__version__, jax.devices())'
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv || true
# Dense TF32 tensor-core peak of an H100 / H200 SXM (989 TFLOP/s is the sparse figure); set for other chips.
PEAK_TFLOPS="${PEAK_TFLOPS:-494.7}"
T0=$(date +%s)
# One run.py per group of sections, each under its own limit, so that a slow section cannot take the rest
# with it (2026-12-04: one 200 s call over every section ended inside the classification table).
timeout 170 "$PY" benchmarks/run.py --skip-torch --parts cls --seeds 1,256,4096 --steps 20 --repeats 2 \
  --peak-tflops "$PEAK_TFLOPS" --out "$OUT/results-gpu.json" || echo "cls: failed or timed out"
timeout 150 "$PY" benchmarks/run.py --skip-torch --parts regime,mlp,la --seeds 1,256,4096 --steps 20 --repeats 2 \
  --peak-tflops "$PEAK_TFLOPS" --out "$OUT/results-gpu-other.json" || echo "regime, mlp, la: failed or timed out"
for prec in tensorfloat32 bfloat16; do
  timeout 45 "$PY" benchmarks/run.py --skip-torch --parts cls --seeds 1024 --steps 20 --repeats 2 \
    --matmul-precision "$prec" --peak-tflops "$PEAK_TFLOPS" --out "$OUT/results-gpu-$prec.json" || echo "precision $prec: failed or timed out"
done
echo "gpu_check: $(( $(date +%s) - T0 )) s"
