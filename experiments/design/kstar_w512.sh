#!/usr/bin/env bash
# Issue 54 item 6: K*(N) at width 512 by designs, as far as this CPU reaches, in resumable pieces. Each
# N's design (experiments/design/kstar_w512_N<N>.toml) runs to its stop; killed (SIGTERM at a session's
# end, or kill -9) and rerun, it resumes at its round. Each piece's start and end go to
# runs/design/kstar_w512.times, so the wall time of every piece is on record.
#   ICL_RACE=.venv/bin/icl-race experiments/design/kstar_w512.sh 64 [100 ...]
TIMES=kstar_w512.times
source "$(dirname "$0")/stamps.sh"
trap 'stamp "piece.stopped"' TERM INT
for n in "${@:-64}"; do
  stamp "N$n.start"
  $icl sweep "experiments/design/kstar_w512_N$n.toml" --out "$out/kstar_w512_N$n"
  stamp "N$n.end"
done
