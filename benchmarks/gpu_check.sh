#!/usr/bin/env bash
# The whole benchmark table on one GPU, in under 5 minutes (issue 7). Not yet run on a GPU: no GPU
# numbers are claimed anywhere until this script's JSON is committed.
#
#   bash benchmarks/gpu_check.sh [OUT_DIR]      # default benchmarks/
#
# Uses .venv if its jax sees a GPU, else builds .venv-gpu with the cuda extra (jax[cuda13]). Runs the JAX sections only
# (the PyTorch re-creation is the CPU reference; its rates are in results-cpu.json), with larger ensembles
# and longer timed calls than on the CPU, then a second pass of the classification section at TF32 and
# bf16 matmul precision (throughput only: their effect on t_ICL is measured by
# `icl-race sweep experiments/precision_gpu.toml`, which trains at each precision, before using them).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-benchmarks}"
PY=.venv/bin/python
if ! "$PY" -c 'import jax,sys; sys.exit(0 if jax.default_backend()=="gpu" else 1)' 2>/dev/null; then
  if [ ! -x .venv-gpu/bin/python ]; then
    python3 -m venv .venv-gpu
    .venv-gpu/bin/pip install -q -e '.[cuda]'
  fi
  PY=.venv-gpu/bin/python
fi
"$PY" -c 'import jax; print(jax.devices())'
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv || true
T0=$(date +%s)
timeout 200 "$PY" benchmarks/run.py --skip-torch --seeds 1,64,256,1024,4096 --steps 20 --repeats 3 \
  --out "$OUT/results-gpu.json"
for prec in tensorfloat32 bfloat16; do
  timeout 45 "$PY" benchmarks/run.py --skip-torch --parts cls --seeds 1024 --steps 20 --repeats 2 \
    --matmul-precision "$prec" --out "$OUT/results-gpu-$prec.json" || echo "precision $prec: failed or timed out"
done
echo "gpu_check: $(( $(date +%s) - T0 )) s"
