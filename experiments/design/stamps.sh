# Sourced by the design scripts (case_b.sh, kstar_w512.sh): the repository root, the icl-race to call,
# runs/design/, `stamp WHAT`, which appends WHAT, the UTC time and the commit to runs/design/$TIMES, and
# `restore NAME` / `keep NAME`, which carry a design's finished rounds from one session to the next.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
icl=${ICL_RACE:-icl-race}
out=runs/design
pieces=experiments/design/pieces
mkdir -p "$out"
stamp() { echo "$1 $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git rev-parse --short HEAD)" >>"$out/$TIMES"; }

# A session's runs/ does not outlive it; the repository does. `keep NAME` packs runs/design/NAME into
# $pieces/NAME.tar.gz without checkpoints and without unfinished cells (a cell is finished when it holds
# results.npz): sweep.toml, design.json, the markers and the finished cells, tens of kB a cell against
# 1.6 MB a seed's checkpoint. `restore NAME` unpacks it where runs/design/NAME is absent. The rerun replays
# the recorded rounds and trains the unfinished round's cells again from step 0: the same choices
# (docs/designs.md), at the cost of the round's progress when the piece stopped.
keep() {
  local d="$out/$1" unfinished
  unfinished=$(find "$d/cells" -mindepth 1 -maxdepth 1 -type d '!' -exec test -e '{}/results.npz' ';' -printf 'cells/%f\n')
  mkdir -p "$pieces"
  tar -C "$d" -czf "$pieces/$1.tar.gz.tmp" --exclude=checkpoints --exclude='.lock' \
    --exclude-from=<(printf '%s\n' $unfinished) --sort=name --owner=0 --group=0 --mtime=@0 .
  mv "$pieces/$1.tar.gz.tmp" "$pieces/$1.tar.gz"
  echo "kept $d in $pieces/$1.tar.gz ($(du -h "$pieces/$1.tar.gz" | cut -f1); unfinished cells left out: $(echo $unfinished | wc -w))"
}
restore() {
  [[ -e "$out/$1" || ! -e "$pieces/$1.tar.gz" ]] && return 0
  mkdir -p "$out/$1" && tar -C "$out/$1" -xzf "$pieces/$1.tar.gz"
  echo "restored $out/$1 from $pieces/$1.tar.gz"
}
