#!/usr/bin/env bash
# The whole benchmark table on one GPU, in under 7 minutes (issue 7). Its first run (2026-12-04) was cut
# short; benchmarks/RESULTS.md, *First GPU check*, holds what it measured.
#
#   bash benchmarks/gpu_check.sh [OUT_DIR]      # default benchmarks/ (on the device tool: "$OUT")
#
# Which Python: benchmarks/gpu_env.sh. Runs the JAX sections only (the PyTorch re-creation is the CPU reference;
# its rates are in results-cpu.json), with larger ensembles and longer timed calls than on the CPU,
# then the classification section again at TF32 and bf16 matmul precision (throughput only: their
# effect on t_ICL is measured by `icl-race sweep experiments/precision_gpu.toml` before using them).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-benchmarks}"
mkdir -p "$OUT"
source benchmarks/gpu_env.sh   # sets PY (and PYTHONPATH on the lent image)
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
