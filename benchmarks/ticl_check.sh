#!/usr/bin/env bash
# Does a change to the training step keep the t_ICL distribution? (issue 42 item 2) The tests' tiny config
# (K = 1000, N = 8, width 32: ICL within ~1,000 steps on a CPU) at 256 seeds, trained by the package as it was at
# BASE (a commit) and as it is in the work tree, then `icl-race compare`: log-rank p and the Kaplan-Meier median
# ratio with its bootstrap CI. About 20 minutes a side on a loaded 2-core machine, 4 on a quiet one. That tiny
# shape is outside the abrupt regime; CONFIG (a self-contained config file) replaces it, e.g.
# benchmarks/ticl_regime.toml (N = 32 at width 64, inside the regime).
#
#   bash benchmarks/ticl_check.sh BASE OUT [CONFIG]   # e.g. bash benchmarks/ticl_check.sh 790e06f /tmp/ticl
set -euo pipefail
cd "$(dirname "$0")/.."
BASE="$1"; OUT="$2"; CONFIG="${3:-}"
# OUT is this script's own: it writes ticl.toml, base-src/ and three run folders there, so it takes a new one.
if [ -e "$OUT" ] && [ -n "$(ls -A "$OUT")" ]; then echo "ticl_check: OUT = $OUT exists and is not empty: give a new folder" >&2; exit 2; fi
mkdir -p "$OUT/base-src"
git archive "$BASE" | tar -x -C "$OUT/base-src"
if [ -n "$CONFIG" ]; then cp "$CONFIG" "$OUT/ticl.toml"; else cat > "$OUT/ticl.toml" <<'TOML'
[task]
K = 1000
N = 8

[model]
width = 32

[train]
lr = 0.1
batch_size = 64
steps = 3000
eval_every = 50
eval_size = 200

[ensemble]
seeds = 256
TOML
fi
export JAX_PLATFORMS=cpu
# -P: `python -m` would put the working directory (this work tree) ahead of PYTHONPATH, and the base side
# would run the work tree's package (as it did before 2026-12-06 10:00, benchmarks/RESULTS.md).
PYTHONPATH="$OUT/base-src" .venv/bin/python -P -m icl_race run "$OUT/ticl.toml" --out "$OUT/base" --quiet
PYTHONPATH="$PWD" .venv/bin/python -P -m icl_race run "$OUT/ticl.toml" --out "$OUT/new" --quiet
.venv/bin/python -m icl_race compare "$OUT/base" "$OUT/new" --out "$OUT/compare"
