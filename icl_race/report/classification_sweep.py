"""Classification report of a sweep directory, computed: cells pooled by condition, K* per N with the slope
of log K* on log N, median t_ICL vs N at K = infinity, balanced vs standard contexts, the regime per N.

    compute(sweep, draws) -> SweepReport (typed; its sections are the analysis' results)

Each statistic draws its bootstrap from its own child of the report's SeedSequence, named by the section
and the cells it resamples (`draws.rng(...)`), so no section's numbers depend on which others exist. The markdown is `sweep_markdown`'s."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from icl_race import rundir
from icl_race.analysis import median_n as mn
from icl_race.analysis import threshold as th
from icl_race.analysis.draws import Draws
from icl_race.analysis.record import NotFitted
from icl_race.analysis.survival import censored_times
from icl_race.analysis.threshold import Slope
from icl_race.config import ConfigError, from_dict
from icl_race.report import levers
from icl_race.report.cell import CellStats, Statistics, Unfinished, analysed, analyze
from icl_race.report.claims import Comparison, sweep_comparisons
from icl_race.report.design import DesignSection
from icl_race.report.design import section as design_section
from icl_race.report.paper import paper_differences, scale_text
from icl_race.report.sample import Sample, pool
from icl_race.report.sweep_sections import (
    RETIREMENT_FIELDS,
    Balanced,
    RegimeRow,
    Scaling,
    ScalingInRegime,
    Threshold,
    ThresholdInRegime,
    WithN,
    balanced,
    best_observed,
    group_label,
    threshold,
)

# How a cell is observed, not what it measures: a budget and an evaluation period that scale with N (a
# sweep's [zip]) do not split the cells of a K*(N) or t_ICL(N) analysis into groups.
MEASUREMENT_FIELDS = {"train.steps", "train.eval_every"}


@dataclasses.dataclass(frozen=True)
class SweepReport:
    dir: Path
    samples: list[Sample]
    cells: list[CellStats]
    n_cells_finished: int
    unfinished: list[Unfinished]
    varying_fields: list[str]
    differences_from_paper_settings: list[str]
    sweep_toml: str | None
    thresholds: list[Threshold]
    t_icl_vs_N: list[Scaling]
    balanced_vs_standard: list[Balanced]
    regime: list[RegimeRow]
    by_lever: dict
    design: DesignSection | None = None  # a design sweep's section (report/design.py)

    @property
    def paper_comparisons(self) -> list[Comparison]:
        return sweep_comparisons(self.thresholds, self.t_icl_vs_N, self.balanced_vs_standard, self.regime)

    @property
    def paper_scale(self) -> str:
        return scale_text([s.config for s in self.samples])

    def to_json(self) -> dict:
        out = {
            "kind": "sweep",
            "dir": str(self.dir),
            "n_cells_finished": self.n_cells_finished,
            "n_conditions": len(self.cells),
            "unfinished": [u.to_json() for u in self.unfinished],
            "varying_fields": self.varying_fields,
            "cells": [c.to_json() for c in self.cells],
        }
        if self.cells:
            out["differences_from_paper_settings"] = self.differences_from_paper_settings
        if self.sweep_toml is not None:
            out["sweep_toml"] = self.sweep_toml
        return out | {
            "thresholds": [t.to_json() for t in self.thresholds],
            "t_icl_vs_N": [s.to_json() for s in self.t_icl_vs_N],
            "balanced_vs_standard": [b.to_json() for b in self.balanced_vs_standard],
            "regime": [r.to_json() for r in self.regime],
            "by_lever": self.by_lever,
            "paper_comparisons": [c.to_json() for c in self.paper_comparisons],
            "paper_scale": self.paper_scale,
            **({"design": self.design.to_json()} if self.design is not None else {}),
        }


def _label(cfg: dict) -> str | None:
    try:
        c = from_dict(cfg)
    except ConfigError:
        return None
    return f"{c.task.variant} K={'inf' if c.task.variant == 'infinite' else c.task.K} N={c.task.N}"


def discover(sweep: rundir.SweepDir) -> tuple[list[Sample], list[Unfinished]]:
    finished, unfinished = [], []
    for c in sweep.cells:
        label = _label(c.config) if c.config else None
        if c.run is None:
            unfinished.append(Unfinished(c.name, label, c.reason))
            continue
        try:
            finished.append(Sample.of(c.run))
        except ConfigError as e:
            unfinished.append(Unfinished(c.name, label, str(e)))
    return finished, unfinished


def _groups(conds, stats, varying, variants, drop) -> list[tuple[dict, list[int]]]:
    """The analysable cells of these variants, grouped by their varying fields other than `drop`:
    [(group fields, cell indices)], in a fixed order."""
    out: dict[str, list[int]] = {}
    for i, (c, s) in enumerate(zip(conds, stats)):
        if c.get("task.variant") in variants and isinstance(s.statistics, Statistics):
            g = {k: c.get(k) for k in varying if k not in drop | MEASUREMENT_FIELDS | RETIREMENT_FIELDS}
            out.setdefault(json.dumps(g, sort_keys=True, default=str), []).append(i)
    return [(json.loads(k), idx) for k, idx in sorted(out.items())]


def compute(sweep: rundir.SweepDir, draws: Draws) -> SweepReport:
    found, unfinished = discover(sweep)
    samples = pool(found)
    conds = [s.condition() for s in samples]
    keys = sorted({k for c in conds for k in c})
    varying = [k for k in keys if len({json.dumps(c.get(k), default=str) for c in conds}) > 1]
    # A cell's label names its variant, K and N; other varying fields (a lever's value) are added so
    # that the cells of a sweep over, say, train.lr can be told apart in every table.
    extra = [k for k in varying if k not in {"task.K", "task.N", "task.variant"} | MEASUREMENT_FIELDS]
    stats = [analyze(s, draws) for s in samples]
    if extra:
        stats = [
            dataclasses.replace(st, label=f"{st.label} ({group_label({k: c.get(k) for k in extra})})")
            for st, c in zip(stats, conds)
        ]
    common = set(paper_differences(samples[0].config)) if samples else set()
    for s in samples[1:]:
        common &= set(paper_differences(s.config))
    finite = _groups(conds, stats, varying, ("standard", "balanced"), {"task.K", "task.N"})
    kinf = _groups(conds, stats, varying, ("infinite",), {"task.K", "task.N"})
    thresholds = [
        threshold(g, idx, samples, stats, draws, lambda j: best_observed(j, conds, samples)) for g, idx in finite
    ]
    scalings = [_scaling(g, idx, samples, stats, draws) for g, idx in kinf]
    bal = [
        balanced(g, idx, conds, samples, stats, draws)
        for g, idx in _groups(conds, stats, varying, ("standard", "balanced"), {"task.K", "task.N", "task.variant"})
    ]
    regime = _regime_by_N(conds, stats)
    abrupt = {r.N for r in regime if r.abrupt}
    thresholds = [dataclasses.replace(t, in_regime=_in_regime_threshold(t, abrupt)) for t in thresholds]
    scalings = [
        dataclasses.replace(sc, in_regime=_in_regime_scaling(sc, idx, samples, abrupt, draws))
        for sc, (g, idx) in zip(scalings, kinf)
    ]
    times = {
        (json.dumps(sc.group, sort_keys=True, default=str), samples[i].N): censored_times(
            samples[i].t, samples[i].censor_at
        )
        for sc, (g, idx) in zip(scalings, kinf)
        for i in idx
    }
    return SweepReport(
        sweep.dir,
        samples,
        stats,
        len(found),
        unfinished,
        varying,
        sorted(common),
        sweep.spec,
        thresholds,
        scalings,
        [b for b in bal if b is not None],
        regime,
        levers.by_lever(thresholds, scalings, times, draws),
        design_section(sweep.design, samples, thresholds),
    )


def _regime_by_N(conds, stats: list[CellStats]) -> list[RegimeRow]:
    """Each N's regime, judged where the attention path runs alone: its K = infinity cells (standard
    contexts), else, as a proxy, its largest-K cell (near K* the t_ICL at the threshold times a second
    phase, not the jump, so finite K near K* says little about the jump)."""
    out = []
    done = [isinstance(s.statistics, Statistics) for s in stats]
    for N in sorted({c.get("task.N") for c, d in zip(conds, done) if d}):
        ok = [i for i, (c, d) in enumerate(zip(conds, done)) if d and c.get("task.N") == N]
        kinf = [i for i in ok if conds[i].get("task.variant") == "infinite"]
        std = sorted((i for i in ok if conds[i].get("task.variant") == "standard"), key=lambda i: conds[i]["task.K"])
        src = kinf or std[-1:]
        if not src:
            continue
        g = analysed(stats[src[0]]).regime
        out.append(
            RegimeRow(
                N,
                "K = infinity" if kinf else f"largest K = {conds[src[0]]['task.K']:,} (proxy)",
                stats[src[0]].label,
                g.rise_fraction,
                g.plateau,
                g.plateau_reaches_threshold,
                g.abrupt,
                all(analysed(stats[i]).regime.paper_rule for i in ok),
            )
        )
    return out


def _in_regime_threshold(t: Threshold, abrupt: set) -> ThresholdInRegime:
    """The K* slope over the N of this group that are in the abrupt regime (no new bootstrap draws:
    the per-N replicates are reused)."""
    acq = {N: f for N in t.N if N in abrupt and isinstance(f := t.acquisition[N].fit, th.Logistic)}
    Ns = list(acq)

    def fit(ns) -> Slope | NotFitted:
        return th.power_law_slope(
            np.log10(np.array(ns, float)),
            np.array([acq[N].b for N in ns]),
            np.stack([acq[N].boot_log10_kstar for N in ns]) if ns else None,
        )

    return ThresholdInRegime(
        Ns,
        fit(Ns),
        [WithN([a, b], fit([a, b])) for a, b in zip(Ns, Ns[1:])],
        [n for n in t.near_kstar if n.N in abrupt],
    )


def _median_vs_N(idx: list[int], samples: list[Sample], draws: Draws) -> mn.MedianVsN:
    tt = [censored_times(samples[i].t, samples[i].censor_at) for i in idx]
    return mn.median_vs_N(
        np.array([samples[i].N for i in idx]),
        [a for a, _ in tt],
        [b for _, b in tt],
        draws.bootstrap("t_icl_vs_N", *(c for i in idx for c in samples[i].cells)),
    )


def _in_regime_scaling(scaling: Scaling, idx, samples, abrupt: set, draws: Draws) -> ScalingInRegime:
    """Median t_ICL vs N over the N of this group in the abrupt regime (the group's own fit when that is
    every N)."""
    sub = sorted((i for i in idx if samples[i].N in abrupt), key=lambda i: samples[i].N)
    Ns = [samples[i].N for i in sub]
    if len(sub) == len(idx):
        return ScalingInRegime(Ns, scaling.median_vs_N)
    return ScalingInRegime(Ns, _median_vs_N(sub, samples, draws) if len(Ns) >= 2 else NotFitted())


def _scaling(gfields: dict, idx: list[int], samples: list[Sample], stats: list[CellStats], draws: Draws) -> Scaling:
    """Median t_ICL vs N of one group of K = infinity cells."""
    label = group_label(gfields) if gfields else "K = infinity"
    idx = sorted(idx, key=lambda i: samples[i].N)
    return Scaling(
        gfields,
        label,
        _median_vs_N(idx, samples, draws),
        [_lognormal_at(samples[i].N, stats[i]) for i in idx],
        idx,
    )


def _lognormal_at(N: int, st: CellStats) -> WithN:
    """A cell's lognormal fit with its N (every cell of a t_ICL(N) group has seeds, so has the fit)."""
    return WithN(N, analysed(st).lognormal or NotFitted("not fitted"))
