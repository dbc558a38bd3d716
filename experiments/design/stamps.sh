# Sourced by the design scripts (case_b.sh, kstar_w512.sh): the repository root, the icl-race to call,
# runs/design/, and `stamp WHAT`, which appends WHAT, the UTC time and the commit to runs/design/$TIMES.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
icl=${ICL_RACE:-icl-race}
out=runs/design
mkdir -p "$out"
stamp() { echo "$1 $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git rev-parse --short HEAD)" >>"$out/$TIMES"; }
