"""A design sweep's rounds (issue 54): propose, train as one packed ensemble, read the outcomes, update,
stop. The third job of a design as execute.py is a grid's; its statistics are analysis/design.py's.

DIR holds what a grid's does (sweep.toml, cells/, summary.csv) plus design.json, the record of every round:
its proposal (K per seed, its cells), then its outcomes, the posterior after it and the seed-steps it
spent, and at the end why the design stopped. The truth is the cells: every posterior is recomputed from
the outcomes of every finished cell, and design.json is written before a round trains (its proposal) and
after (its outcomes), each time as one file. A design killed at any moment and run again replays the
recorded proposals (valid ones: checked against the design), trains what is unfinished (partial cells
resume from their checkpoints) and proposes the next rounds from the same outcomes with the same seed: the
choices of an uninterrupted design. A design.json that is damaged or not this design's is set aside and
the proposals recomputed (the same, on this machine). A sweep file edited between rounds is refused,
naming the field, unless --force starts a new design beside the old cells.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from icl_race import rundir
from icl_race.analysis import design as dz
from icl_race.config import ConfigError, short
from icl_race.run.sweep.design_spec import Design, first_difference, spec_text
from icl_race.run.sweep.execute import run_local, write_summary
from icl_race.run.sweep.plan import cell_dir, check_sizes, planned, status
from icl_race.run.sweep.spec import Cell, Sweep, expand
from icl_race.rundir import owner
from icl_race.rundir.sweepdir import DESIGN_JSON, read_design

NAMES = ("sweep.toml", "summary.csv", DESIGN_JSON)


def round_cells(design: Design, seeds_before: int, K: Sequence[int] | None, n: int) -> tuple[Cell, ...]:
    """A round's cells. K*: one per distinct K of `K` (a K per seed), ascending, each given the next
    contiguous seed ids after the `seeds_before` seeds of the earlier rounds; median: one cell of `n` seeds."""
    first = design.cfg.ensemble.first_seed + seeds_before
    if design.kind == "median":
        rows = {"ensemble.first_seed": [first], "ensemble.seeds": [n]}
    else:
        ks, counts = np.unique(np.asarray(K, np.int64), return_counts=True)
        starts = first + np.concatenate([[0], np.cumsum(counts)[:-1]])
        rows = {
            "task.K": [int(k) for k in ks],
            "ensemble.first_seed": [int(s) for s in starts],
            "ensemble.seeds": [int(c) for c in counts],
        }
    return expand(design.base, {}, rows).cells


def proposal_size(design: Design, seeds_before: int) -> int:
    """The seeds of the round after `seeds_before`: a round's (or a block's), or what the maximum leaves."""
    p = design.params
    per = p.seeds_per_round if isinstance(p, dz.KStarDesign) else p.block
    return min(per, p.max_seeds - seeds_before)


def largest_round(design: Design) -> tuple[Cell, ...]:
    """A round at its largest, what the memory check and the cost measurement size: all its seeds in one
    cell, at the design's largest K (K is traced: any K costs the same)."""
    n = proposal_size(design, 0)
    K = [int(design.params.candidates()[-1])] * n if isinstance(design.params, dz.KStarDesign) else None
    return round_cells(design, 0, K, n)


def sweep_of(design: Design, cells: Sequence[Cell]) -> Sweep:
    """The cells of some rounds as a Sweep, for the executors (plan, execute) that run and list cells."""
    options = design.raw.get("sweep", {})
    zipped = {f: [c.values[f] for c in cells] for f in design.fields} if cells else {}
    return Sweep({**design.base, **({"sweep": options} if options else {}), "grid": {}, "zip": zipped}, tuple(cells))


@dataclasses.dataclass(frozen=True)
class Outcomes:
    """What a design's finished cells say, seed by seed (kept seeds: diverged ones say nothing)."""

    K: np.ndarray  # [S] the seed's K (K*); 0 for a median design
    acquired: np.ndarray  # [S] bool
    times: np.ndarray  # [S] t_ICL (or the design's event's step: the lasting fall), or the censoring time
    observed: np.ndarray  # [S] bool: reached within the budget
    diverged: int
    seed_steps: int  # every live seed's steps until it retired or the run ended

    @classmethod
    def of(cls, out: Path, cells, event: str | None = None) -> Outcomes:
        """The cells' seeds; `times` of the run's `event` (default its headline, t_ICL; "fell": the lasting
        fall, which a seed that did not fall, acquired or not, has not reached: censored where it stopped)."""
        K, acq, times, obs, diverged, steps = [], [], [], [], 0, 0
        for cell in cells:
            run = rundir.load_run(cell_dir(out, cell))
            t, o = run.censored(event)
            K.append(np.full(t.size, cell.cfg.task.K if "task.K" in cell.values else 0))
            acq.append(run.t() >= 0)
            times.append(t)
            obs.append(o)
            diverged += int(run.diverged.sum())
            steps += int(np.where(run.retired_at >= 0, run.retired_at, run.steps_run).sum())
        cat = lambda xs, dtype: np.concatenate(xs).astype(dtype) if xs else np.zeros(0, dtype)
        return cls(cat(K, np.int64), cat(acq, bool), cat(times, float), cat(obs, bool), diverged, steps)

    def __add__(self, other: Outcomes) -> Outcomes:
        cat = lambda a, b: np.concatenate([a, b])
        return Outcomes(
            cat(self.K, other.K),
            cat(self.acquired, other.acquired),
            cat(self.times, other.times),
            cat(self.observed, other.observed),
            self.diverged + other.diverged,
            self.seed_steps + other.seed_steps,
        )


NONE = Outcomes(np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0), np.zeros(0, bool), 0, 0)


def _posterior(design: Design, seen: Outcomes, spent: int) -> dz.Posterior:
    """K*'s posterior of the kept seeds' outcomes, counting as `spent` every seed trained (diverged ones
    too: the seed maximum is a budget)."""
    assert isinstance(design.params, dz.KStarDesign)
    return dataclasses.replace(dz.posterior(design.params, seen.K, seen.acquired), seeds=spent)


def assess(design: Design, seen: Outcomes, spent: int) -> tuple[dict, str | None]:
    """The posterior's summary (K*) or the median's check after `seen`, and why the design stops (None: on)."""
    if isinstance(design.params, dz.KStarDesign):
        post = _posterior(design, seen, spent)
        return dataclasses.asdict(post.summary()), dz.kstar_stop(post)
    check = dz.median_check(design.params, seen.times, seen.observed)
    stop = check.stop or ("max_seeds" if spent >= design.params.max_seeds else None)
    return dataclasses.asdict(check), stop


def proposal(design: Design, seen: Outcomes, spent: int) -> list[int] | None:
    """The next round's K per seed, in the order picked (K*), None for a median design's block."""
    if isinstance(design.params, dz.KStarDesign):
        return [int(k) for k in dz.propose(_posterior(design, seen, spent), design.cfg.ensemble.root_seed)]
    return None


def _valid(design: Design, rec, seeds_before: int) -> bool:
    """Whether a recorded round's proposal is one this design could make at this point."""
    want = proposal_size(design, seeds_before)
    if (
        not isinstance(rec, dict)
        or rec.get("seeds") != want
        or rec.get("first_seed") != design.cfg.ensemble.first_seed + seeds_before
    ):
        return False
    K = rec.get("K")
    if isinstance(design.params, dz.MedianDesign):
        return K is None
    ok = set(int(k) for k in design.params.candidates())
    return isinstance(K, list) and len(K) == want and all(type(k) is int and k in ok for k in K)


def read_record(out: Path, design: Design) -> tuple[list, str | None]:
    """design.json's rounds when it is this design's record (rundir.read_design), else ([], why not)."""
    doc, why = read_design(out)
    if doc is not None and doc["kind"] != design.kind:
        why = f"the record of a {doc['kind']} design, not of this {design.kind} one"
    return (doc["rounds"] if doc is not None and why is None else []), why


def recorded(out: Path, design: Design, log) -> list:
    """`read_record`'s rounds; a damaged design.json is set aside (named in one line) and the rounds are
    recomputed from the cells."""
    rounds, why = read_record(out, design)
    if why is not None:
        path = Path(out) / DESIGN_JSON
        aside = path.with_name(f"design.damaged-{time.strftime('%Y%m%dT%H%M%S')}.json")
        path.rename(aside)
        log(f"{path}: {why}; set aside as {aside.name}, the rounds recomputed from the cells")
    return rounds


def check_spec(out: Path, design: Design, force: bool, log) -> None:
    """Refuse a folder whose design was started from another sweep file (one line naming the first field
    that differs), unless `force`: then its sweep.toml and design.json are kept aside and a new design
    starts beside the old cells (a cell it proposes that an old one is, same config, is reused)."""
    import tomllib

    path = Path(out) / "sweep.toml"
    if not path.is_file():
        return
    try:
        stored = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError):
        stored = {}
    field = first_difference(stored, tomllib.loads(spec_text(design)))
    if field is None:
        return
    if not force:
        sec, _, key = field.partition(".")
        then, now = stored.get(sec, {}), design.raw.get(sec, {})
        said = lambda t: short(t[key]) if isinstance(t, dict) and key in t else "(not set)"
        raise ConfigError(
            f"{path}: this folder's design was started with {field} = {said(then)}, the file now says {said(now)}; "
            "run the design as it was started, or pass --force to start a new design beside its cells"
        )
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for name in ("sweep.toml", DESIGN_JSON):
        if (Path(out) / name).is_file():
            stem, ext = name.split(".")
            (Path(out) / name).rename(Path(out) / f"{stem}.previous-{stamp}.{ext}")
    log(
        f"{out}: --force: a new design ({field} changed); the previous sweep.toml and {DESIGN_JSON} kept as *.previous-{stamp}.*"
    )


def _round_record(design: Design, index: int, first: int, K, cells, seen: Outcomes | None, after) -> dict:
    rec = {"round": index, "first_seed": first, "seeds": len(K) if K is not None else cells[0].cfg.ensemble.seeds}
    rec |= {"K": K, "cells": [{"name": c.name, **c.values} for c in cells]}
    if seen is not None:
        rec |= {
            "acquired": int(seen.acquired.sum()),
            "kept": int(seen.acquired.size),
            "diverged": seen.diverged,
            "seed_steps": seen.seed_steps,
            "after": after,
        }
    return rec


def _write(out: Path, design: Design, rounds: list[dict], stop: str | None, final: dict | None, spent) -> None:
    budget = design.cfg.train.steps
    doc = {
        "kind": design.kind,
        "design": dz.record(design.params),
        "root_seed": design.cfg.ensemble.root_seed,
        "budget": budget,
        "rounds": rounds,
        "seeds": spent[0],
        "seed_steps": spent[1],
        "budgets": round(spent[1] / budget, 3),
        "stop": stop,
        "result": final,
    }
    owner.write_files(out, "sweep", {DESIGN_JSON: (json.dumps(doc, indent=1) + "\n").encode()})


def run_design(out: Path, design: Design, log, progress: bool, force: bool = False, redo: bool = False) -> Path:
    """Round after round into `out` until the stopping rule holds; returns design.json's path. Every check
    (the folder is the sweep's own, the sweep file is the one the design started with, a round's size fits
    the device) before anything is written."""
    from icl_race.run.signals import stop_on_signals

    out = Path(out)
    owned = owner.check(out, "sweep", NAMES, force=force)
    check_spec(out, design, force, log)
    check_sizes(out, planned(out, sweep_of(design, largest_round(design))))
    owner.write(owner.check(out, "sweep", NAMES, force=force) if force else owned, {})
    if not (out / "sweep.toml").exists():
        owner.write_files(out, "sweep", {"sweep.toml": spec_text(design).encode()})
    plan = recorded(out, design, log)
    rounds: list[dict] = []
    cells: list[Cell] = []
    seen, spent = NONE, 0
    with stop_on_signals():
        while True:
            result, stop = assess(design, seen, spent)
            if stop is not None:
                break
            first = design.cfg.ensemble.first_seed + spent
            if len(rounds) < len(plan) and _valid(design, plan[len(rounds)], spent):
                K = plan[len(rounds)]["K"]  # the recorded choice (the same as recomputing it, on this machine)
            else:
                plan = plan[: len(rounds)]  # a record that stops agreeing is no longer followed
                K = proposal(design, seen, spent)
            n = proposal_size(design, spent)
            new = round_cells(design, spent, K, n)
            what = (
                f"K {', '.join(f'{c.cfg.task.K:,}x{c.cfg.ensemble.seeds}' for c in new)}"
                if K is not None
                else f"{n} seeds"
            )
            log(f"{out}: design round {len(rounds) + 1}: {what} (seed ids {first}-{first + n - 1})")
            cells += new
            _write(
                out,
                design,
                [*rounds, _round_record(design, len(rounds), first, K, new, None, None)],
                None,
                None,
                (spent, seen.seed_steps),
            )
            problems = run_local(
                out, sweep_of(design, new), log=log, progress=progress, redo=redo, listed=sweep_of(design, cells)
            )
            if problems or any(status(out, c) != "done" for c in new):
                raise rundir.RunDirError(
                    f"design round {len(rounds) + 1} has cells it cannot count: " + "; ".join(problems)
                )
            got = Outcomes.of(out, new, design.run_event)
            seen, spent = seen + got, spent + n
            after, _ = assess(design, seen, spent)
            rounds.append(_round_record(design, len(rounds), first, K, new, got, after))
            _write(out, design, rounds, None, None, (spent, seen.seed_steps))
    _write(out, design, rounds, stop, result, (spent, seen.seed_steps))
    write_summary(out, sweep_of(design, cells))
    log(
        f"{out}: design stopped ({stop}) after {len(rounds)} rounds, {spent} seeds, {seen.seed_steps / design.cfg.train.steps:,.1f} budgets of seed-steps"
    )
    return out / DESIGN_JSON
