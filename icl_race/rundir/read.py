"""One run directory read back as a `Run`: finished (`load_run`: its files checked as data, rundir/verify.py)
or not (`load_live`, from its live.npz, with its `RunState`: training or stopped, rundir/state.py);
`run_of` makes the same `Run` of arrays already in memory (the runner's, just committed). Padding seeds (the ensemble rounded up to a multiple of
ensemble.block) never reach results.npz, so a `Run` holds live seeds only; `diverged` masks the seeds
the statistics exclude. A sweep directory is rundir/sweepdir.py's, either kind rundir/loading.py's."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import numpy as np

from icl_race import config
from icl_race.config import Config, ConfigError
from icl_race.rundir.files import read_config_parsed, read_meta, read_npz, read_params, read_results
from icl_race.rundir.layout import LIVE, LIVE_HEADLINE, SCALARS, DamagedFileError
from icl_race.rundir.state import FINISHED, RunState, state
from icl_race.rundir.verify import check_provenance, check_results


@dataclasses.dataclass(frozen=True, eq=False)
class Run:
    """One run directory, read back: finished, or not (`partial`: training or stopped, its `state`). Per-seed arrays hold every
    live seed; `kept` (not diverged) selects the seeds the statistics use."""

    dir: Path
    config: dict  # resolved: every field of this version present
    seed_ids: np.ndarray  # [S]
    times: dict[str, np.ndarray]  # event -> [S] first-passage step, -1 = not reached (censored)
    headline: str  # the event the run is summarised by (the system's stop event): t_<headline>
    diverged: np.ndarray  # [S] bool
    # [S] the step of a retired seed's last evaluation (ensemble.retire: its curves hold that value
    # after it), -1 for a seed evaluated to the end (and for every seed of a run written without it)
    retired_at: np.ndarray
    eval_steps: np.ndarray  # [T]
    curves: dict[str, np.ndarray]  # probe -> [S, T, ...]
    budget: int
    steps_run: int
    meta: dict | None  # None only for directories written without one (older versions, tests), and partial runs
    # where the run stands (rundir/state.py): an unfinished one is read from its live.npz (`load_live`), its
    # curves and first passages up to steps_run, the seeds that have not reached an event censored there
    state: RunState = FINISHED

    @property
    def partial(self) -> bool:
        """Not finished: training, or stopped (killed, interrupted) before its commit."""
        return not self.state.finished

    def partial_note(self) -> str | None:
        """One line saying whose results so far these are and where the run stands; None when finished."""
        if not self.partial:
            return None
        return (
            f"partial: {self.dir} {self.state.text()}; these are its results so far (its last chunk "
            f"written, {LIVE}), the seeds not yet at an event censored there"
        )

    @property
    def kept(self) -> np.ndarray:
        return ~self.diverged

    @functools.cached_property
    def cfg(self) -> Config:
        """The typed config, parsed once per Run (a run the runner just committed carries its own: `run_of`)."""
        return config.from_dict(self.config)

    def first_passage(self, event: str | None = None) -> np.ndarray:
        """Every seed's first-passage step of `event` (default: the headline) as floats, NaN where it was
        not reached: the notebook's view (`icl_race.train`, `icl_race.load`), as `export` writes it.
        `times` keeps results.npz's own integers (-1), which every reader here takes."""
        t = self.times[event or self.headline]
        return np.where(t >= 0, t, np.nan)

    def t(self, event: str | None = None) -> np.ndarray:
        """First-passage steps of the kept seeds (-1 = censored) for `event` (default: the headline)."""
        return self.times[event or self.headline][self.kept].astype(np.int64)

    def censor_at(self, *events: str) -> int:
        """When a kept seed that has not reached one of `events` (default: the headline) stopped being
        observed: steps_run if the run stopped before the budget with such a seed, else the budget."""
        from icl_race.analysis.survival import censor_time

        unreached = any(np.any(self.t(e) < 0) for e in (events or (self.headline,)))
        return censor_time(self.budget, self.steps_run, unreached)

    def censored(self, event: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(times, observed) of the kept seeds for Kaplan-Meier, censored at `censor_at(event)`."""
        from icl_race.analysis.survival import censored_times

        event = event or self.headline
        return censored_times(self.t(event), self.censor_at(event))

    def km_median(self, event: str | None = None) -> float | None:
        """Kaplan-Meier median of `event`'s time over the kept seeds; None when not reached by half."""
        from icl_race.analysis.survival import km_median

        times, observed = self.censored(event)
        m = km_median(times, observed) if times.size else float("nan")
        return None if not np.isfinite(m) else float(m)

    def curve(self, name: str) -> np.ndarray:
        """A probe's [S_kept, T, ...] curve."""
        return self.curves[name][self.kept]

    def params(self, seed: int, at: str = "final"):
        """Seed `seed`'s (an id of seed_ids) parameters as the model's pytree of numpy arrays, kept by
        train.keep_params in DIR/params/: at the end of its training ("final") or at the evaluation of its
        first passage of the headline event ("at_t_icl", t_icl); read from disk on each call."""
        if at not in ("final", "at_t_icl"):
            raise ValueError(f'at = {at!r}: must be "final" or "at_t_icl"')
        rows = np.flatnonzero(self.seed_ids == seed)
        if not rows.size:
            raise ValueError(
                f"seed {seed}: not a seed of {self.dir} (seeds {self.seed_ids.min()}..{self.seed_ids.max()})"
            )
        if at == "at_t_icl" and not self.times[self.headline][rows[0]] >= 0:  # -1 (or NaN): never reached
            raise ValueError(f"seed {seed} of {self.dir} never reached t_{self.headline}: no parameters kept at it")
        import jax

        return jax.tree.map(lambda a: np.asarray(a[rows[0]]), read_params(self.dir, at))


def load_run(d: Path) -> Run:
    """A run directory with config.json and results.npz (meta.json is read when there), checked as data
    (`check_results`, `check_provenance`): what it returns is what the run computed."""
    return load_run_results(d)[0]


def load_run_results(d: Path, config: tuple[dict, Config | None] | None = None) -> tuple[Run, dict[str, np.ndarray]]:
    """`load_run`, and results.npz's arrays as read: one read of the file serves both (the runner's
    rerun of a finished run returns them). `config`: its config.json as a reader already read it
    (`read_config_parsed`: a sweep's cell), not read nor parsed again."""
    d = Path(d)
    cfg, typed = config or read_config_parsed(d)
    res = read_results(d)
    meta = read_meta(d)
    # against the config the runner recorded with them, every field (meta.json's, which config.json must
    # equal: check_provenance); a hand-made one is checked in the fields it states, none without one
    made = meta.get("config") if isinstance(meta, dict) and isinstance(meta.get("config"), dict) else None
    check_results(d, res, made)
    check_provenance(d, cfg, meta)
    return run_of(d, cfg, res, meta, typed), res


def load_live(d: Path, st: RunState | None = None) -> Run:
    """An unfinished run (`st`, rundir/state.py's: training or stopped), from its live.npz (run/live.py:
    results.npz's arrays as of its last chunk written), checked as results are, against its config's
    layout too: a `Run` whose state says it is partial, as of the step live.npz holds. No live.npz is a
    ConfigError saying where the run stands."""
    d = Path(d)
    cfg, typed = read_config_parsed(d)
    st = st or state(d, cfg)
    try:
        res = read_npz(d / LIVE)
    except FileNotFoundError:
        raise ConfigError(
            f"{d}: no results.npz (not finished) and no {LIVE} (no results so far): {st.text()}"
        ) from None
    headline = res.pop(LIVE_HEADLINE, None)
    if headline is not None and (headline.dtype.kind != "U" or headline.shape != ()):
        raise DamagedFileError(f"{d / LIVE}: array {LIVE_HEADLINE}: expected the headline event's name")
    check_results(d, res, cfg, LIVE)  # no meta.json yet: config.json, which the runner wrote first
    meta = None if headline is None else {"stop_event": str(headline)}
    run = run_of(d, cfg, res, meta, typed)
    # the step of the arrays just read, not of an earlier look at the file: the runner may have replaced it since
    st = dataclasses.replace(st, step=run.steps_run, budget=run.budget)
    return dataclasses.replace(run, meta=None, state=st)


def run_of(d: Path, cfg: dict, res: dict[str, np.ndarray], meta: dict | None, parsed: Config | None = None) -> Run:
    """The `Run` of results arrays, config and meta already in memory: what `load_run` makes of the
    files, and what the runner makes of the arrays it has just committed (with its `parsed` config,
    which `Run.cfg` then returns instead of parsing `cfg` again)."""
    d = Path(d)
    events = {k[2:]: np.asarray(v) for k, v in res.items() if k.startswith("t_")}
    S = next(iter(events.values())).shape[0]
    steps = np.asarray(res["eval_steps"])
    # steps_run and budget are absent only from hand-made directories: the last evaluation stands in.
    budget = int(res.get("budget", steps[-1]))
    steps_run = int(res.get("steps_run", budget))
    headline = (meta or {}).get("stop_event") or ("icl" if "icl" in events else next(iter(events)))
    if not isinstance(headline, str) or headline not in events:
        raise DamagedFileError(f"{d}/results.npz: missing t_{str(headline)[:80]} (meta.json's stop_event)")
    fixed = {"seed_ids", "diverged", "retired_at", "eval_steps", *SCALARS, *(f"t_{e}" for e in events)}
    run = Run(
        dir=d,
        config=cfg,
        seed_ids=np.asarray(res.get("seed_ids", np.arange(S))),
        times=events,
        headline=headline,
        diverged=np.asarray(res.get("diverged", np.zeros(S, bool)), bool),
        retired_at=np.asarray(res.get("retired_at", np.full(S, -1)), np.int64),
        eval_steps=steps,
        curves={k: v for k, v in res.items() if k not in fixed},
        budget=budget,
        steps_run=steps_run,
        meta=meta,
    )
    if parsed is not None:
        vars(run)["cfg"] = parsed  # Run.cfg's cache (a cached_property): no second parse of the same config
    return run
