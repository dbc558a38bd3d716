#!/usr/bin/env bash
# The GPU queue of issue 58: given the seconds it may use, run the next unfinished pieces in order, as
# `icl-race sweep` workers (a grid's worker packs the cells of one program into one ensemble, one worker
# per program of a piece; a design runs in one process, one worker per design), stop them by SIGTERM
# before the limit (they checkpoint at the next chunk boundary; rerunning resumes, a design at its
# recorded round), record the finished pieces and the seconds each used in a state file, and pack the
# results and the newest checkpoints of unfinished cells into parts that the device tool brings back
# (48 MiB of parts, 64 MiB in all). Issue 25's pieces (2026-12-04) ran with this script's 697e51e version.
#
#   device: carry [".whl"] (+ "runs/scale/gpu/<sweep>" of a partial piece), command `bash experiments/scale/gpu_pieces.sh "$OUT" 540`
#   here:   tar xzf OUT/gpu_results.tgz && cat OUT/gpu_ckpt.tgz.part* | tar xz && cp OUT/gpu_queue_58.state experiments/scale/
#   CPU dry run (tiny cells, runs/scale/gpu-tiny/, its own state file):
#           PY=.venv/bin/python JAX_PLATFORMS=cpu QUEUE_TINY=1 nice -n 5 bash experiments/scale/gpu_pieces.sh /tmp/q58 300
#
# The pieces, in the issue's order (experiments/scale/README.md, *The GPU queue (issue 58)*, has their
# projected minutes):
#   a      benchmarks/gpu_fill.sh: the paper model's step old vs new, the packed grid, the profile, the
#          Pallas kernels. Needs A_NEED seconds; started only when they are left
#   b      precision_w512_N32.toml: highest, default (TF32), bf16; three workers
#   c      kinf_w512_N{50,100,150,200,250}_design.toml: the K = infinity median by the median rule; five
#          workers, one per design
#   d      kstar_w512_N{128,150,200,250}_design.toml: K*(N) by the K* design; four workers
#   e-lr   lr01_w512_N100.toml: lr 0.01 at N = 100 (beside c's lr 0.03 seeds); one worker
#   e-bench  the benchmark sections never measured on a GPU: run.py's MLP-only and linear attention
# A piece is finished when each of its sweeps is (gpu_queue.py done: a grid's every cell done, a design's
# design.json names why it stopped) or, for a benchmark piece, when its commands ended within their limits.
# Only a finished piece lets the queue go on to the next one, so the GPU is never split between two
# pieces, and a call ends early when its piece ends short of time.
# A width-512 seed's checkpoint is 1.18 MiB (1.56 with a K* design's item pool): the 48 MiB of parts bring
# back ~40 (~30) seeds of unfinished state per call, less than one 64-seed round of c or 48-seed round of
# d: such a round crosses calls only on a machine kept warm (README).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:?OUT_DIR}"
LIMIT="${2:-540}"
T0=$(date +%s)
STOP_AT=$(( T0 + LIMIT - ${QUEUE_RESERVE:-60} ))  # SIGTERM here: a chunk to finish, a checkpoint, the packing
S=experiments/scale
# QUEUE_TINY: one worker per sweep, and a piece's sweeps one after another (the 2-core CPU compiles one
# program at a time well, several badly)
if [ -n "${QUEUE_TINY:-}" ]; then D=runs/scale/gpu-tiny; STATE="$D/gpu_queue_58.state"; A_NEED=120; E_NEED=160
else D=runs/scale/gpu; STATE="${QUEUE_STATE:-$S/gpu_queue_58.state}"; A_NEED=300; E_NEED=170; fi
mkdir -p "$OUT" "$D/logs" "$D/tomls"
touch "$STATE"
source benchmarks/gpu_env.sh
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
Q="$PY $S/gpu_queue.py"
sweeps() {  # a piece's sweep files (experiments/scale/NAME.toml) and workers each
  local n
  case $1 in
    b) echo "precision_w512_N32:3";;
    c) for n in 50 100 150 200 250; do echo "kinf_w512_N${n}_design:1"; done;;
    d) for n in 128 150 200 250; do echo "kstar_w512_N${n}_design:1"; done;;
    e-lr) echo "lr01_w512_N100:1";;
  esac
}
toml() {  # the sweep file a worker runs: the piece's own, or its tiny copy
  if [ -n "${QUEUE_TINY:-}" ]; then $Q tiny "$S/$1.toml" "$D/tomls/$1.toml" && echo "$D/tomls/$1.toml"
  else echo "$S/$1.toml"; fi
}
run_sweeps() {  # every sweep of piece $1, its workers at once, each stopped at STOP_AT; 0 when all done
  local sw name n t i left rc=0
  for sw in $(sweeps "$1"); do
    name=${sw%%:*}; n=${sw##*:}; t=$(toml "$name")
    $Q done "$t" "$D/$name" >/dev/null && continue  # a stopped design or a finished grid of a partial piece
    [ -n "${QUEUE_TINY:-}" ] && n=1
    for i in $(seq 1 "$n"); do
      left=$(( STOP_AT - $(date +%s) ))
      [ "$left" -lt 10 ] && break 2  # a worker started now would be stopped before its first step
      timeout -k 30 "$left" "$PY" -m icl_race sweep "$t" --out "$D/$name" --quiet \
        >>"$D/logs/$name-$i.log" 2>&1 &
      sleep 2  # the first worker locks its pack before the next one looks
    done
    [ -n "${QUEUE_TINY:-}" ] && wait
  done
  wait
  for sw in $(sweeps "$1"); do name=${sw%%:*}; $Q done "$(toml "$name")" "$D/$name" || rc=1; done
  return $rc
}
run_bench() {  # pieces a and e-bench: 0 when every section ended within its limit
  local o="$D/bench" L="$D/logs/bench-$1-$T0.log" rc=0  # a log per piece and call: its failures are this call's
  mkdir -p "$o"
  if [ "$1" = a ]; then
    if [ -n "${QUEUE_TINY:-}" ]; then  # one section (~75 s here): the four time out at their GPU-sized limits
      timeout 120 "$PY" benchmarks/gpu_fill.py --out "$o/pack" --sections pack --dry-run >>"$L" 2>&1 \
        || echo "pack: failed or timed out" >>"$L"
    else bash benchmarks/gpu_fill.sh "$o" >>"$L" 2>&1 || rc=1; fi
  elif [ -n "${QUEUE_TINY:-}" ]; then
    timeout 150 "$PY" benchmarks/run.py --skip-torch --parts mlp,la --seeds 1 --steps 1 --repeats 1 --quick \
      --out "$o/results-gpu-mlp-la.json" >>"$L" 2>&1 || rc=1
  else
    timeout 150 "$PY" benchmarks/run.py --skip-torch --parts mlp,la --seeds 1,256,4096 --steps 20 --repeats 2 \
      --peak-tflops "${PEAK_TFLOPS:-494.7}" --out "$o/results-gpu-other.json" >>"$L" 2>&1 || rc=1
  fi
  grep -q "failed or timed out" "$L" && rc=1
  return $rc
}
PIECES="a b c d e-lr e-bench"
for p in $PIECES; do
  if grep -q "^$p done" "$STATE"; then continue; fi
  left=$(( STOP_AT - $(date +%s) ))
  case $p in a) need=$A_NEED;; e-bench) need=$E_NEED;; *) need=60;; esac
  if [ "$left" -lt "$need" ]; then echo "queue: $p not started ($left s left, needs $need)"; break; fi
  t=$(date +%s)
  case $p in a|e-bench) run_bench "$p";; *) run_sweeps "$p";; esac
  rc=$?
  st=done; [ "$rc" -ne 0 ] && st=partial
  echo "$p $st $(( $(date +%s) - t )) $(date -u +%FT%TZ)" | tee -a "$STATE"
  [ "$st" = partial ] && break
done
grep -q "^${PIECES##* } done" "$STATE" && echo "queue: every piece done"
nvidia-smi --query-gpu=name,utilization.gpu,memory.used --format=csv 2>/dev/null || true
# The results first and apart (every file but checkpoints), then the newest checkpoint of each unfinished
# cell in 15 MiB parts, 48 MiB at most in all (2026-12-04: one tar of 72 MB lost its last part).
cp "$STATE" "$OUT/gpu_queue_58.state"
$Q pack "$D" "$OUT" 48
split -b 15m -d "$OUT/gpu_ckpt.tgz" "$OUT/gpu_ckpt.tgz.part" && rm "$OUT/gpu_ckpt.tgz"
echo "queue: $(( $(date +%s) - T0 )) s of $LIMIT; state:"; cat "$STATE"
ls -la "$OUT"
