#!/usr/bin/env bash
# Issue 25's width-512 pieces that the 2-core CPU cannot afford, on one lent GPU in one device call:
# several `icl-race sweep` workers at once (a sweep's cells are locked per process, so two workers share
# one sweep directory), each stopped by SIGTERM at the deadline (it checkpoints; rerunning resumes), then
# the run directories packed into OUT_DIR: the results in one file, the unfinished cells' newest checkpoints in
# <= 15 MB parts (the device tool brings back 8 files of 16 MiB, 64 MiB in all).
#
#   bash experiments/scale/gpu_pieces.sh OUT_DIR [SECONDS]      # device tool: carry [".whl"], OUT_DIR "$OUT"
#   tar xzf OUT_DIR/gpu_results.tgz && cat OUT_DIR/gpu_ckpt.tgz.part* | tar xz   # here: runs/scale/gpu/
#
# On the GPU every cell runs as one vmapped block of its 16 seeds (ensemble.block = 16), evaluates 256
# sequences per pass (train.eval_batch: other probe sequences, the same distribution) and computes its
# matmuls in full float32 (train.matmul_precision = "highest", which is what a CPU computes whatever
# the setting): the GPU cells measure what the CPU cells measure. kinf_w512's N = 64 and 100 are run
# again beside the CPU's as the check of that (their t_ICL distributions must agree).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:?OUT_DIR}"
DEADLINE=$(( $(date +%s) + ${2:-470} ))
mkdir -p "$OUT"
source benchmarks/gpu_env.sh
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
D=runs/scale/gpu
mkdir -p "$D/logs"
piece() {  # piece LOG SWEEP_TOML OUT_SUBDIR: one worker, stopped at the deadline
  local left=$(( DEADLINE - $(date +%s) ))
  if [ "$left" -lt 20 ]; then echo "$1: not started (deadline)"; return; fi
  local t0=$(date +%s)
  timeout -k 30 "$left" "$PY" -m icl_race sweep "$2" --out "$D/$3" --quiet \
    --set ensemble.block=16 --set train.eval_batch=256 --set train.matmul_precision=highest >"$D/logs/$1.log" 2>&1
  echo "$1: rc $? after $(( $(date +%s) - t0 )) s"; tail -n 3 "$D/logs/$1.log"
}
S=experiments/scale
piece kinf_a $S/kinf_w512.toml kinf_w512 &
sleep 5; piece kinf_b $S/kinf_w512.toml kinf_w512 &
piece kstar100_a $S/kstar_w512_N100.toml kstar_w512_N100 &
sleep 5; piece kstar100_b $S/kstar_w512_N100.toml kstar_w512_N100 &
(piece width128 $S/kinf_width_N128.toml kinf_width_N128; piece nosettle $S/kstar_w512_N32_budget_nosettle.toml kstar_w512_N32_budget_nosettle) &
wait
nvidia-smi --query-gpu=name,utilization.gpu,memory.used --format=csv || true
# Pack the results first and apart (gpu_results.tgz: every file but checkpoints), then the newest checkpoint
# of each unfinished cell (gpu_ckpt.tgz.partNN, <= 15 MB each), so that the results come back even when the
# checkpoints pass the tool's 64 MiB (2026-12-04: four unfinished cells' checkpoints made 72 MB in all).
"$PY" - "$D" "$OUT" <<'PY'
import sys, tarfile
from pathlib import Path
from icl_race.rundir import CHECKPOINTS, LOCK, checkpoint_steps, is_done
root, out = Path(sys.argv[1]), Path(sys.argv[2])
with tarfile.open(out / "gpu_results.tgz", "w:gz") as tar:
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name != LOCK and CHECKPOINTS not in p.relative_to(root).parts:
            tar.add(p, arcname=str(p))
with tarfile.open(out / "gpu_ckpt.tgz", "w:gz") as tar:
    for cell in sorted(root.glob("*/cells/*")):
        if checkpoint_steps(cell) and not is_done(cell):
            newest = cell / CHECKPOINTS / str(checkpoint_steps(cell)[-1])
            tar.add(newest, arcname=str(newest))
PY
split -b 15m -d "$OUT/gpu_ckpt.tgz" "$OUT/gpu_ckpt.tgz.part" && rm "$OUT/gpu_ckpt.tgz"
ls -la "$OUT"
