#!/usr/bin/env bash
# Issue 54 item 6: K*(N) at width 512 by designs, as far as this CPU reaches, in resumable pieces. Each
# N's design (experiments/design/kstar_w512_N<N>.toml) runs to its stop; killed (SIGTERM at a session's
# end, or kill -9) and rerun, it resumes at its round. Each piece's start and end go to
# runs/design/kstar_w512.times, so the wall time of every piece is on record. A piece that ends, stopped
# or finished, packs its finished rounds into experiments/design/pieces/ (`keep`, stamps.sh): commit that
# file, and the next session's run of this script unpacks it and goes on from those rounds.
#   ICL_RACE=.venv/bin/icl-race experiments/design/kstar_w512.sh 64 [100 ...]
# An argument that is not a number names another sweep file of experiments/design/ run the same way, in
# pieces (item 5's grid quarters: grid_w512_N64_s0 ... s12).
TIMES=kstar_w512.times
source "$(dirname "$0")/stamps.sh"
trap 'stamp "piece.stopped"' TERM INT
for n in "${@:-64}"; do
  name=kstar_w512_N$n
  [[ $n =~ ^[0-9]+$ ]] || name=$n
  restore "$name"
  stamp "$name.start"
  rc=0
  $icl sweep "experiments/design/$name.toml" --out "$out/$name" || rc=$?
  keep "$name"
  stamp "$name.end(exit-$rc)"
  [[ $rc == 0 ]] || exit "$rc"
done
