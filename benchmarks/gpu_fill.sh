#!/usr/bin/env bash
# Issue 42 item 6 on one GPU, in under 5 minutes: the paper model's step old vs new at S = 256, 1,024, 4,096
# (TF32 and highest precision), a packed 10-cell x 16-seed K grid against one 16-seed cell, and the top 25
# device ops of a profiled step, and the Pallas attention kernels against the XLA path (agreement, then the
# rate at S = 256 and 1,024; benchmarks/gpu_fill.py). Each section has its own time limit, and every row
# is in OUT/results-gpu-fill*.json as soon as it is measured.
#
#   bash benchmarks/gpu_wheels.sh                    # here, once (PyPI): the wheels into .whl/
#   device: carry [".whl"], command `bash benchmarks/gpu_fill.sh "$OUT"`
#   PY=.venv/bin/python JAX_PLATFORMS=cpu bash benchmarks/gpu_fill.sh /tmp/fill --dry-run   # try it on a CPU
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-benchmarks}"
DRY="${2:-}"
mkdir -p "$OUT"
source benchmarks/gpu_env.sh   # sets PY (and PYTHONPATH on the lent image)
T0=$(date +%s)
# 140 + 60 + 45 + 40 s of limits: under 5 minutes with the start-up (before the pallas section: 170 + 60 + 50)
timeout 140 "$PY" benchmarks/gpu_fill.py --out "$OUT/rate" --sections rate $DRY || echo "rate: failed or timed out"
timeout 60 "$PY" benchmarks/gpu_fill.py --out "$OUT/pallas" --sections pallas $DRY || echo "pallas: failed or timed out"
timeout 45 "$PY" benchmarks/gpu_fill.py --out "$OUT/pack" --sections pack $DRY || echo "pack: failed or timed out"
timeout 40 "$PY" benchmarks/gpu_fill.py --out "$OUT/trace" --sections trace $DRY || echo "trace: failed or timed out"
echo "gpu_fill: $(( $(date +%s) - T0 )) s"
