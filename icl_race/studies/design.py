"""The adaptive designs' synthetic check (experiments/design/, issue 54 items 4-5): replays of the K* design
and of the median rule on outcomes drawn from known truths (`icl_race.analysis.design_sim`); no
directories, no training.

  synthetic  [--set replays=500 --set slopes=15,8 --set totals=160,240,480 --set targets=0.1,0.075,0.05
              --set rel_width=0.25]   K*: the design, the posterior-estimate and posterior-quantile arms, the
              paper's wide grid and a focused grid at equal seeds, and the design stopped at each target
              CI half-width; the median rule against a fixed count of equal mean seeds; + .md
"""

from __future__ import annotations

import time

from icl_race.analysis import design as dz
from icl_race.analysis import design_sim as ds
from icl_race.config import ConfigError
from icl_race.studies.inputs import COUNT, Option

MEDIAN_TRUTHS = ((4389.0, 0.4, 4.0), (4389.0, 0.8, 2.0))  # (median, sigma, budget / median): width 512's
# K = infinity median at N = 32, a spread like its KM CI's and a wider one censored at 2x the median


def _list(v) -> list:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def synthetic(
    dirs,
    *,
    replays: int = 500,
    slopes=(15.0, 8.0),
    totals=(160, 240, 480),
    targets=(0.1, 0.075, 0.05),
    rel_width: float = 0.25,
    n_boot: int = 1000,
    seed: int = 0,
) -> ds.Synthetic:
    """Replays of the designs on known truths"""
    totals, S = sorted(_list(totals)), dz.KStarDesign().seeds_per_round
    bad = [t for t in totals if t % S]
    if bad:
        raise ConfigError(f"--set totals={bad[0]}: must be a multiple of {S} (the design's seeds per round)")
    start = time.monotonic()
    design = dz.KStarDesign(max_seeds=max(totals), half_width=0.0)
    kstar = [
        ds.kstar_case(s, totals, sorted(_list(targets), reverse=True), replays, seed, n_boot, design)
        for s in _list(slopes)
    ]
    mdesign = dz.MedianDesign(rel_width=rel_width)
    median = [ds.median_case(m, sg, f, mdesign, replays, seed) for m, sg, f in MEDIAN_TRUTHS]
    return ds.Synthetic(replays, seed, kstar, median, vars(mdesign), wall_s=round(time.monotonic() - start, 1))


OPTIONS = {
    "replays": COUNT,
    "slopes": Option(float, 0, 1000, above=True, many=True),
    "totals": Option(int, 16, 4800, many=True),
    "targets": Option(float, 0, 1, above=True, many=True),
    "rel_width": Option(float, 0, 10, above=True),
}
COMMANDS = {"synthetic": synthetic}
DIRECTORIES = {"synthetic": "none"}
MARKDOWN = ("synthetic",)
