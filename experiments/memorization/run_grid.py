"""Run the cells of a memorization sweep TOML (same expansion, K_max and cells/<digest> layout as
`icl-race sweep`), without the sweep's summary.csv: sweep.summary_row reads t_icl, which a
memorization run (events memorized, converged) does not have. Finished cells are skipped.

    python experiments/memorization/run_grid.py experiments/memorization/mlp_cpu.toml runs/memorization/mlp_cpu
    python experiments/memorization/analyze.py mlp runs/memorization/mlp_cpu
"""

import sys
from pathlib import Path

from icl_race import sweep
from icl_race.runner import execute

spec, out = sys.argv[1], Path(sys.argv[2])
sw = sweep.load(spec)
out.mkdir(parents=True, exist_ok=True)
sweep.store_spec(out, sw, print)
for i, cell in enumerate(sw.cells, 1):
    where = ", ".join(f"{k}={v}" for k, v in cell.values.items()) or "(single cell)"
    if sweep.status(out, cell) == "done":
        print(f"[{i}/{len(sw.cells)}] {where}: done, skipped")
        continue
    print(f"[{i}/{len(sw.cells)}] {where} -> {sweep.cell_dir(out, cell)}")
    execute(cell.cfg, sweep.cell_dir(out, cell), progress=False)
