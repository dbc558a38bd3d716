"""What `icl-race analyze` checks before any work, so that a bad input is one line naming it (exit 2),
never a traceback from inside an analysis or a number computed from a nonsensical option:

    Option          what one `--set NAME=VALUE` may be (a study module's OPTIONS: name -> Option, for
                    every option of its subcommands; `studies.command.run` checks them before the subcommand runs)
    check_finished  a run directory not finished (training or stopped, rundir/state.py) refused, naming its
                    step, unless --partial: an analysis computes the numbers a paper quotes, never from
                    results so far presented as final
    runs_of         the runs of directories, refused when one is of a system the subcommand does not read
    need_acquired   refused when too few seeds reached the event an analysis fits
    need_evaluated  refused when a time option lies before the runs' first evaluation

The bootstrap's --boot and --seed share report's and compare's bounds (`config.check_bootstrap`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from icl_race.config import INDEX_MAX, ConfigError
from icl_race.configbase import short
from icl_race.rundir import is_sweep, load_runs, state


@dataclass(frozen=True)
class Option:
    """One --set option: a number (`kind` float or int) within [lo, hi] (lo itself excluded when `above`),
    or text (`kind` str); a comma-separated list of them when `many`."""

    kind: type = float
    lo: float = -math.inf
    hi: float = math.inf
    above: bool = False
    many: bool = False

    def allowed(self) -> str:
        if self.kind is str:
            what = "text"
        else:
            what = "an integer" if self.kind is int else "a finite number"
            low, high = math.isfinite(self.lo), math.isfinite(self.hi)
            lo, hi = (f"{v:,}" if self.kind is int else f"{v:g}" for v in (self.lo, self.hi))
            if low and high:
                what += f" in {'(' if self.above else '['}{lo}, {hi}]"
            elif low:
                what += f" {'>' if self.above else '>='} {lo}"
            elif high:
                what += f" <= {hi}"
        return f"{what}, or several comma-separated" if self.many else what

    def value(self, name: str, given):
        """`given` (as `studies.command.parse_option` parsed it, or as a caller passed it) checked and converted."""
        items = list(given) if isinstance(given, (list, tuple)) else [given]
        if (isinstance(given, (list, tuple)) and not self.many) or not items:
            raise ConfigError(f"--set {name}={short(given)}: must be {self.allowed()} (one value)")
        out = [self._one(name, given, v) for v in items]
        return out if isinstance(given, (list, tuple)) else out[0]

    def _one(self, name: str, given, v):
        if self.kind is str:
            return str(v)
        number = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
        if number and self.kind is int and float(v).is_integer() and abs(v) <= INDEX_MAX:
            v = int(v)
        ok = number and (self.kind is float or isinstance(v, int)) and math.isfinite(v)
        if ok and not (self.lo < v if self.above else self.lo <= v) or ok and not v <= self.hi:
            ok = False
        if not ok:
            raise ConfigError(f"--set {name}={short(given)}: must be {self.allowed()}")
        return float(v) if self.kind is float else v


def listed(v) -> list:
    """A `many` option's value as a list (one value may be given alone)."""
    return list(v) if isinstance(v, (list, tuple)) else [v]


# The kinds of option the studies share.
FRACTION = Option(float, 0, 1, above=True)  # an accuracy level
STEPS = Option(float, 0, above=True)  # a time in SGD steps
COUNT = Option(int, 1, INDEX_MAX)  # a size or a number of things
TEXT = Option(str)


def check_finished(dirs: Sequence, partial: bool = False) -> list[str]:
    """Refuse a run directory among `dirs` that is not finished (rundir/state.py: training or stopped), in
    one line naming it and its step; with `partial`, one line per such run saying it is analysed as its
    results so far (what analyze prints and records). A sweep's unfinished cells are not its runs
    (`SweepDir.runs`): they are left out, never read."""
    lines = []
    for d in dirs:
        if not Path(d).is_dir() or is_sweep(Path(d)) or (st := state(d)).finished:
            continue
        if not partial:
            raise ConfigError(
                f"{d}: {st.text()}; analyze reads finished runs only: wait for it to finish (or resume it), "
                "or pass --partial to analyse its results so far"
            )
        lines.append(f"{d}: {st.text()}; analysed as its results so far (--partial)")
    return lines


def runs_of(sub: str, dirs: Sequence, kinds: Sequence[str] = ("classification",)) -> list:
    """The finished runs of `dirs` (rundir.load_runs); one of a system that `analyze <sub>` does not
    read (a regression run given to a classification analysis, say) is refused, naming it. `kinds`: each
    a task.kind, or a task.kind/model.kind."""
    runs = load_runs(*dirs)
    check_kinds(sub, runs, kinds)
    return runs


def check_kinds(sub: str, runs: Sequence, kinds: Sequence[str] = ("classification",)) -> None:
    for r in runs:
        task, model = r.cfg.task.kind, r.cfg.model.kind
        if task not in kinds and f"{task}/{model}" not in kinds:
            raise ConfigError(
                f"{r.dir}: a run of task.kind = {task}, model.kind = {model}; analyze {sub} reads runs of "
                f"{' or '.join(kinds)} (task.kind[/model.kind])"
            )


def need_acquired(sub: str, runs: Sequence, least: int, event: str = "icl") -> None:
    """Refuse runs where fewer than `least` seeds in all reached `event` (the analysis fits their times)."""
    got = sum(int(np.sum(np.asarray(r.t(event)) > 0)) for r in runs)
    if got < least:
        seeds = sum(int(np.asarray(r.t(event)).size) for r in runs)
        raise ConfigError(
            f"{', '.join(str(r.dir) for r in runs)}: {got} of {seeds} seeds reached t_{event}; analyze {sub} "
            f"needs at least {least} (train longer, or give runs where more seeds acquired)"
        )


def need_evaluated(sub: str, runs: Sequence, name: str, Ts: Sequence[float]) -> None:
    """Refuse a time option (--set T=...) before the runs' first evaluation: the memorization budget
    I_K(T) integrates the evaluated c1 from there."""
    first = max((float(r.eval_steps[0]) for r in runs), default=0.0)
    early = [T for T in Ts if T < first]
    if early:
        raise ConfigError(
            f"--set {name}={early[0]:g}: must be >= {first:g}, the first evaluation step of the runs "
            f"(analyze {sub} integrates c1 from there)"
        )
