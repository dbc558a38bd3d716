"""A design's projected cost (`sweep --dry-run` on a sweep file with a [design]): how many seeds and
seed-steps it is expected to spend, from replays of the design on outcomes drawn from an assumed truth
(no training), and the wall time of its rounds, measured on this machine's program (plan.dry_run) or
projected on a GPU (--device). Writes nothing in the sweep directory.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
from scipy.special import expit

from icl_race.analysis import design as dz
from icl_race.analysis.design_sim import log_spread, median_case
from icl_race.analysis.draws import generator
from icl_race.run.progress import hms
from icl_race.run.sweep.design_run import largest_round, proposal_size, read_record, sweep_of
from icl_race.run.sweep.design_spec import Design

REPLAYS = 20  # ~0.3 s each on 2 cores; the mean's standard error is ~5 % of a design's seeds
SLOPE = 15.0  # per decade: width 512's K* fits at N = 32, 64, 100 (23, 15, 16; experiments/README.md)
# The spread (sd of ln t_ICL) a median design is projected at: width 512's at K = infinity measured 0.23
# (N = 64) and 0.27 (N = 100), 32 seeds each (experiments/scale/results/gpu_vs_cpu_N*); 0.36 is the upper
# end of N = 100's 95 % interval, so a wider spread at paper scale is allowed for.
SIGMA = 0.36
BUDGET_FACTOR = 4.0  # the budget over the median: the configs' 4x (no seed censored at SIGMA)
# A design on the fall (design.event = "fall") is projected at the spread of the only lasting falls measured:
# the CPU miniature of Fig A6 (experiments/design/transience_retire.toml: K = 1000, N = 8, width 128, L2 =
# 1e-2 on the attention path, where all 8 seeds fell, at these steps, within its 22,000), at the upper end of
# the 95 % chi-square interval of their sd of ln t (`log_spread`), and at its budget over their median (a
# tighter budget than BUDGET_FACTOR: more seeds censored). Not measured at paper scale.
FALL_STEPS = (16400, 17000, 14000, 15600, 16600, 16800, 14400, 17600)
FALL_BUDGET = 22000


@dataclasses.dataclass(frozen=True)
class DesignDryRun:
    out: str
    kind: str
    rounds_done: int  # as design.json records them (finished rounds)
    seeds: list[float]  # expected seeds of the whole design: mean, 10 %, 50 %, 90 %
    rounds: float  # expected rounds (mean)
    budgets: float  # expected seed-steps in budgets: every seed its whole budget (an upper bound)
    round_seconds: float | None  # one round of seeds_per_round seeds: measured (<=) or, with device, estimated (~)
    seconds: float | None  # rounds x round_seconds
    device: str | None
    assumption: str

    def text(self) -> str:
        lines = [f"design ({self.kind}) in {self.out}: {self.rounds_done} rounds recorded"]
        mean, p10, p50, p90 = self.seeds
        lines.append(
            f"expected ~{mean:,.0f} seeds (10/50/90 %: {p10:,.0f}/{p50:,.0f}/{p90:,.0f}) in ~{self.rounds:.1f} rounds, "
            f"~{self.budgets:,.0f} budgets of seed-steps, assuming {self.assumption}"
        )
        if self.seconds is None:
            lines.append("no wall-time projection (not measured: --no-measure)")
        else:
            # A round measured here is a bound ("<="), a GPU's an estimate ("~"); the expected rounds make
            # the total an estimate either way.
            bound = "~" if self.device else "<="
            where = (
                f"one {self.device.upper()} (an estimate at its measured rate; compilation, evaluation and checkpoints not counted)"
                if self.device
                else "this machine (measured with compilation, evaluation and checkpoints; early stops only shorten it)"
            )
            lines.append(
                f"wall ~ {hms(self.seconds)} on {where}: {self.rounds:.1f} expected rounds x {bound} "
                f"{hms(self.round_seconds or 0)} a round{f', {self.seconds / 3600:,.2f} GPU hours' if self.device else ''}"
            )
        return "\n".join(lines)


def replay_seeds(design: dz.KStarDesign, log10_kstar: float, slope: float, replays: int, seed: int = 0) -> np.ndarray:
    """The seeds each of `replays` replays of the design spends until it stops, on outcomes drawn from
    P(acquire) = expit(slope (log10 K - log10_kstar))."""
    out = []
    for i in range(replays):
        rng, post = generator(seed, "design_cost", i), dz.prior(design)
        while dz.kstar_stop(post) is None:
            ks = dz.propose(post, seed)
            post = dz.update(post, ks, rng.random(ks.size) < expit(slope * (np.log10(ks) - log10_kstar)))
        out.append(post.seeds)
    return np.array(out, float)


def _median_truth(p: dz.MedianDesign) -> tuple[float, float, str]:
    """The lognormal a median design is replayed on: its spread in ln t, the budget over its median, in words."""
    if p.event != "fall":
        text = (
            f"lognormal t_ICL of spread {SIGMA:g} in ln t (width 512's measured 0.23-0.27 at K = infinity, at the upper "
            f"end of its interval), the budget {BUDGET_FACTOR:g}x the median, at most {p.max_seeds:,} seeds"
        )
        return SIGMA, BUDGET_FACTOR, text
    sd, (lo, hi) = log_spread(FALL_STEPS)
    factor = FALL_BUDGET / float(np.median(FALL_STEPS))
    text = (
        f"lognormal fall steps of spread {hi:.3f} in ln t (the upper end of the 95 % interval [{lo:.3f}, {hi:.3f}] "
        f"of the sd {sd:.3f} of the {len(FALL_STEPS)} falls measured, all on the CPU miniature at one L2: "
        f"experiments/design/transience_retire.toml), the budget {factor:.2f}x the median (the miniature's), "
        f"every seed falling, at most {p.max_seeds:,} seeds"
    )
    return hi, factor, text


def design_dry_run(
    out: Path, design: Design, measure: bool, remeasure: bool, device: str | None, log=print
) -> DesignDryRun:
    from icl_race.run.sweep.plan import dry_run

    p, root = design.params, design.cfg.ensemble.root_seed
    per = proposal_size(design, 0)
    log(f"replaying the design {REPLAYS} times on synthetic outcomes (no training)")
    if isinstance(p, dz.KStarDesign):
        mid = (math.log10(p.k_lo) + math.log10(p.k_hi)) / 2
        seeds = replay_seeds(p, mid, SLOPE, REPLAYS, root)
        stats = [float(seeds.mean()), *(float(q) for q in np.percentile(seeds, [10, 50, 90]))]
        truth = (
            f"the true K* at the prior's log-midpoint ({10**mid:,.0f}) with slope {SLOPE:g} a decade (width 512's fits)"
        )
    else:
        sigma, factor, truth = _median_truth(p)
        rule = median_case(1.0, sigma, factor, p, REPLAYS, root).rule  # the replays of item 4's simulator
        stats = [rule.seeds, *rule.seeds_q]
    # a fall design retires its seeds at the fall (train.retire_at_fall, which parse requires)
    sooner = "fall retire there" if design.run_event else "acquire retire sooner with ensemble.retire"
    assumption = f"{truth} and every seed training its whole budget (seeds that {sooner}); mean of {REPLAYS} replays"
    rounds = stats[0] / per
    one = None
    if measure or device:
        log(f"measuring one round's program ({per} seeds)" if not device else f"projecting one round on {device}")
        one = dry_run(out, sweep_of(design, largest_round(design)), measure, "local", remeasure, device).seconds
    done = sum(1 for r in read_record(out, design)[0] if isinstance(r, dict) and "after" in r)
    return DesignDryRun(
        str(out),
        design.kind,
        done,
        stats,
        rounds,
        stats[0],
        one,
        None if one is None else one * rounds,
        device,
        assumption,
    )
