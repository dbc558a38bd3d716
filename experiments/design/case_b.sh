#!/usr/bin/env bash
# Issue 54 item 5, live case (b), side by side in one script: the design from the paper's prior at
# width 512, N = 32, then the project's focused grid on the same config, then the comparison and the
# design's replays on the grid's seeds. Resumable: rerun after a kill and each sweep resumes.
# Each step's start and end go to runs/design/case_b.times.
TIMES=case_b.times
source "$(dirname "$0")/stamps.sh"
stamp design.start
$icl sweep experiments/design/kstar_w512_N32.toml --out "$out/kstar_w512_N32"
stamp design.end
stamp grid.start
$icl sweep experiments/scale/kstar_w512_N32.toml --out "$out/kstar_w512_N32_focused"
stamp grid.end
$icl analyze design versus "$out/kstar_w512_N32_focused" "$out/kstar_w512_N32" --set name=focused_w512_N32 \
  --out experiments/design/results/versus_focused_w512_N32.json --force
$icl analyze design replay "$out/kstar_w512_N32_focused" --out experiments/design/results/replay_focused_w512_N32.json --force
stamp done
