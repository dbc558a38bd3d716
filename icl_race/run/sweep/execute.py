"""A sweep's execution, the last of its three jobs: the stored spec (DIR/sweep.toml), the executors (the
cells one after another in this process, or a submitit job array) and DIR/summary.csv.
"""

from __future__ import annotations

import csv
import io
import itertools
import re
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from icl_race import config, rundir
from icl_race.config import ConfigError
from icl_race.run.sweep.plan import Planned, cell_dir, check_sizes, foreign_reason, packs, planned, status, where
from icl_race.run.sweep.spec import Cell, Sweep, same_spec, spec_toml
from icl_race.rundir import owner


def refuse_links(out: Path, sweep: Sweep) -> None:
    """Refuse a sweep directory where a path it writes (its own files, cells/, a cell) is a symbolic
    link, before any cell starts; each cell's run checks its own files again (rundir.refuse_links)."""
    rundir.refuse_links(out, (*rundir.SWEEP_NAMES, *(f"cells/{c.name}" for c in sweep.cells)))
    for cell in sweep.cells:
        rundir.refuse_links(cell_dir(out, cell))


SUMMARY_FIELDS = [
    "cell",
    "status",
    "seeds",
    "acquired",
    "acquired_fraction",
    "median_t_icl",
    "censored",
    "diverged",
    "steps_run",
    "budget",
    "seed_steps_per_s",
]


def summary_row(out: Path, cell: Cell) -> dict:
    row = {"cell": cell.name, **cell.values, "status": status(out, cell), "seeds": cell.cfg.ensemble.seeds}
    if row["status"] == "done":
        try:
            run = rundir.load_run(cell_dir(out, cell))
        except ConfigError:  # committed but unreadable: left for `icl-race run --redo` on the cell
            return {**row, "status": "damaged"}
        t = run.t()
        # The Kaplan-Meier median (censored seeds kept): "" when more than half never reached the event.
        med = run.km_median()
        row.update(
            acquired=int(np.sum(t >= 0)),
            acquired_fraction=round(float(np.mean(t >= 0)), 4) if t.size else "",
            median_t_icl="" if med is None else med,
            censored=int(np.sum(t < 0)),
            diverged=int(np.sum(run.diverged)),
            steps_run=run.steps_run,
            budget=run.budget,
            seed_steps_per_s=(run.meta or {}).get("seed_steps_per_s", ""),  # meta: None without meta.json
        )
    return row


def write_summary(out: Path, sweep: Sweep) -> Path:
    buf = io.StringIO()
    fields = ["cell", *sweep.fields, *SUMMARY_FIELDS[1:]]
    w = csv.DictWriter(buf, fieldnames=fields, restval="")
    w.writeheader()
    for cell in sweep.cells:
        w.writerow(summary_row(out, cell))
    path = Path(out) / "summary.csv"
    owner.write_files(out, "sweep", {path.name: buf.getvalue().encode()})
    return path


def store_spec(out: Path, sweep: Sweep, log) -> None:
    """DIR/sweep.toml: written once; a changed spec moves the previous one aside (under a name no earlier
    backup holds, so two changes within a second keep both). A file that says the same spec in another
    TOML layout (an older icl-race's) is left as it is (spec.same_spec)."""
    path = Path(out) / "sweep.toml"
    if path.exists() and not same_spec(path.read_text(), sweep):
        stamp = time.strftime("%Y%m%dT%H%M%S")
        backup = next(
            b
            for n in itertools.count()
            if not (b := path.with_name(f"sweep.previous-{stamp}{f'-{n}' if n else ''}.toml")).exists()
        )
        path.rename(backup)
        log(f"{out}: the sweep spec changed; the previous one is kept as {backup.name} (finished cells are reused)")
    if not path.exists():
        owner.write_files(out, "sweep", {path.name: spec_toml(sweep).encode()})


def run_cell(cfg_dict: dict, out: str) -> str:
    """One cell, in this process (the unit of work of every executor; picklable for submitit)."""
    from icl_race.run.runner import execute

    try:
        execute(config.from_dict(cfg_dict), Path(out), progress=False, log=lambda m: None)
    except rundir.Locked:
        return "running elsewhere"
    return "done"


def _check_cells(out: Path, sweep: Sweep, log, redo: bool) -> list[str]:
    """The cells the sweep cannot count, each named in one line: foreign ones (their folders hold other
    runs: left as they are) and damaged finished ones (unreadable results: with `redo` moved aside, never
    deleted, to be trained again). Returns what stays wrong."""
    problems = []
    for i, cell in enumerate(sweep.cells, 1):
        named, d = where(cell) or "(single cell)", cell_dir(out, cell)
        st = status(out, cell)
        if st == "foreign":
            problems.append(f"{d}: {foreign_reason(out, cell)}")
            log(
                f"[{i}/{len(sweep.cells)}] {named}: foreign, not counted: {problems[-1]}; move it aside to run this cell"
            )
        elif st == "done":
            try:
                rundir.load_run_results(d)
            except ConfigError as e:
                if not redo:
                    problems.append(f"{d}: damaged ({e}); rerun the sweep with --redo to train it again")
                    log(f"[{i}/{len(sweep.cells)}] {named}: {problems[-1]}")
                    continue
                aside = rundir.set_aside_final_files(d)
                log(f"[{i}/{len(sweep.cells)}] {named}: damaged results moved to {aside.name}/; training again")
            else:
                log(f"[{i}/{len(sweep.cells)}] {named}: done, skipped")
    return problems


def run_local(
    out: Path,
    sweep: Sweep,
    log=print,
    progress: bool = True,
    redo: bool = False,
    listed: Sweep | None = None,
    known: Mapping[str, Planned] | None = None,
) -> list[str]:
    """The unfinished cells in this process, pack after pack (plan.packs: the cells of one program as
    one ensemble; one cell at a time with [sweep] pack = false), each with its plan (`known`: the plans
    run_sweep made for its checks, carried here; plan.planned makes the others); summary.csv rewritten
    after each pack, also after a failed one, listing `listed`'s cells (default: the sweep's; a design's
    round lists every round's). Returns the cells it could not count (`_check_cells`)."""
    import jax

    from icl_race.run.runner import execute_pack

    problems = _check_cells(out, sweep, log, redo)
    index = {c.name: i for i, c in enumerate(sweep.cells, 1)}
    last_program = None
    for pack in packs(planned(out, sweep, known), sweep.pack):
        for p in pack:
            named = where(p.cell) or "(single cell)"
            how = "resuming" if status(out, p.cell) == "partial" else "running"
            with_ = f" (packed: {len(pack)} cells of one program as one ensemble)" if len(pack) > 1 else ""
            log(f"[{index[p.cell.name]}/{len(sweep.cells)}] {named}: {how} -> {cell_dir(out, p.cell)}{with_}")
        # jit keeps every compiled program for the life of the process: ~44 MB per cell of a new shape,
        # never released (benchmarks/compile_memory.py). A pack of another program (run/identity.py) drops
        # the last one's, so the worker's memory stays flat over any number of shapes; packs of one
        # program (the same shapes at another resume step) still share its compilation.
        if last_program is not None and pack[0].program.program != last_program:
            jax.clear_caches()
        last_program = pack[0].program.program
        try:
            execute_pack([(p.run, cell_dir(out, p.cell)) for p in pack], progress=progress, log=log)
        finally:
            write_summary(out, listed or sweep)
    return problems


def run_submitit(out: Path, sweep: Sweep, cluster: str | None, params: dict, wait: bool, log=print) -> None:
    """All unfinished cells as one job array (Slurm, or submitit's local executor for testing). A job that
    ends without its cell (cancelled, out of time, failed) leaves the cell as it was, partial cells with
    their checkpoints: the others are waited for, summary.csv written, then a RunError names each."""
    try:
        import submitit
        from submitit.core.utils import FailedJobError, UncompletedJobError
    except ImportError:
        raise ConfigError("--executor slurm needs submitit: pip install 'icl-race[slurm]'") from None
    todo = [c for c in sweep.cells if status(out, c) in ("partial", "pending")]
    if not todo:
        log(f"{out}: every cell is done")
        write_summary(out, sweep)
        return
    ex = submitit.AutoExecutor(folder=Path(out) / "submitit", cluster=cluster)
    ex.update_parameters(**{k: v for k, v in params.items() if v is not None})
    try:
        jobs = ex.map_array(run_cell, [c.cfg.to_dict() for c in todo], [str(cell_dir(out, c)) for c in todo])
    except FailedJobError as e:  # sbatch refused the array (e.g. an option this cluster does not know)
        raise ConfigError(f"the job array was refused: {' '.join(str(e).split())}") from None
    log(f"{out}: submitted {len(jobs)} cells as job array {jobs[0].job_id.split('_')[0]}")
    if not wait:
        log(f"rerun the same `icl-race sweep` command afterwards to write {Path(out) / 'summary.csv'}")
        return
    unfinished = []
    for cell, job in zip(todo, jobs):
        try:
            job.result()
        except UncompletedJobError:
            unfinished.append(f"{where(cell) or cell.name}: job {job.job_id} {_ended(job)}, log {job.paths.stderr}")
            log(f"{out}: {unfinished[-1]}")
    write_summary(out, sweep)
    if unfinished:
        from icl_race.run.runner import RunError

        raise RunError(
            f"{len(unfinished)} of {len(jobs)} cells' jobs ended before their cell did ({'; '.join(unfinished)}); "
            "rerun the same command: finished cells are kept, partial ones resume from their last checkpoint"
        )
    log(f"{out}: all {len(jobs)} cells finished; summary in {Path(out) / 'summary.csv'}")


def _ended(job) -> str:
    """How a job ended, as the scheduler records it. sacct lags the job's end by a second or two, and a
    cell stopped by scancel's SIGTERM returns before that (submitit's state still reads RUNNING): ask
    again, for up to 10 s."""
    state = job.state
    for _ in range(20):
        if state not in ("RUNNING", "PENDING", "COMPLETING", "UNKNOWN"):
            break
        time.sleep(0.5)
        state = job.get_info(mode="force").get("State", state)
    return state


# sbatch options that submitit or another flag of `sweep` sets: --slurm does not override them.
OWNED_OPTIONS = {
    "partition": "use --partition",
    "time": "use --time",
    "gpus-per-node": "use --gpus",
    "array": "use --array-parallelism",
    "output": "submitit reads the job's log there",
    "error": "submitit reads the job's log there",
    "open-mode": "submitit appends to the job's log",
    "signal": "submitit's own, the time limit's warning",
}


def slurm_options(pairs: list[str]) -> dict[str, str | int | bool]:
    """The repeatable `--slurm KEY=VALUE` as sbatch options: any long option of sbatch (account, qos,
    constraint, mem, exclude, mail-user, ...), KEY in its own spelling or with underscores. Values: a whole
    number is an int, "true" a bare flag (`--slurm exclusive=true` is `#SBATCH --exclusive`), any other
    text as given. Refused in one line, before anything is written: no "=", an empty or odd KEY, a KEY
    given twice, "false" (leave the option out), one the sweep sets itself (OWNED_OPTIONS)."""
    options: dict[str, str | int | bool] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        key = key.strip().replace("_", "-")
        if not eq or not re.fullmatch(r"[a-z][a-z0-9-]*", key):
            raise ConfigError(f"--slurm {pair!r}: expected KEY=VALUE, KEY an sbatch option (e.g. account=myproj)")
        if key in options:
            raise ConfigError(f"--slurm {key}: given twice")
        if key in OWNED_OPTIONS:
            raise ConfigError(f"--slurm {key}: set by the sweep ({OWNED_OPTIONS[key]})")
        if value.lower() == "false":
            raise ConfigError(f"--slurm {key}=false: leave the option out instead")
        options[key] = True if value.lower() == "true" else int(value) if re.fullmatch(r"\d+", value) else value
    return options


def submitit_params(
    executor: str, minutes: int, partition, gpus: int, parallelism, options: list[str] | None = None
) -> tuple[str, dict]:
    """(submitit's cluster, its parameters) for --executor slurm or submitit-local; `options` (--slurm,
    `slurm_options`) go to sbatch as submitit's slurm_additional_parameters. Raises ConfigError on a
    malformed option, or on any with another executor."""
    if options and executor != "slurm":
        raise ConfigError(f"--slurm: only with --executor slurm (here {executor})")
    if executor == "submitit-local":
        return "local", {"timeout_min": minutes}
    return "slurm", {
        "timeout_min": minutes,
        "slurm_partition": partition,
        "gpus_per_node": gpus,
        "slurm_array_parallelism": parallelism,
        "slurm_additional_parameters": slurm_options(options or []) or None,
    }


def run_sweep(
    out: Path,
    spec: Sweep,
    executor: str,
    log,
    progress: bool,
    slurm: dict,
    wait: bool,
    force: bool = False,
    redo: bool = False,
) -> Path:
    """Run the unfinished cells of `spec` into `out` with `executor` (local, slurm, submitit-local) and
    return summary.csv's path. Every cell's size is checked before anything is written, and the folder
    must be the sweep's own (rundir/owner.py, which names a run directory as such), checked first. Cells it
    cannot count (foreign or damaged: `_check_cells`) are an error once the others have run, summary.csv
    written."""
    # The executor's parameters first: a malformed --slurm is refused before anything is written.
    submit = submitit_params(executor, **slurm)
    names = ["sweep.toml", "summary.csv"]
    owner.check(out, "sweep", names, force=force)
    if progress:  # the first line, before jax's import and the cells' plans and memory checks (seconds)
        log(f"{out}: {len(spec.cells)} cells checked; loading jax, then planning each and checking that it fits")
    todo = {p.cell.name: p for p in planned(out, spec)}  # each cell planned once, here, for all that follows
    check_sizes(out, todo.values())
    # The folder and its marker: nothing is written before every check passed. The marker's record is read
    # again here, not kept from before check_sizes (seconds): workers started together on one DIR (one per
    # GPU, docs/gpu.md) would write back a record that lacks the sweep.toml another one wrote meanwhile.
    owner.write(owner.check(out, "sweep", names, force=force), {})
    store_spec(out, spec, log)
    if progress:  # the first line after the checks (a refusal is one line): the packs' compilations come next
        left = sum(status(out, c) in ("partial", "pending") for c in spec.cells)
        then = "training them pack by pack" if executor == "local" else "submitting them as one job array"
        log(f"{out}: {len(spec.cells)} cells, {left} to train: {then}")
    if executor == "local":
        from icl_race.run.signals import stop_on_signals

        with stop_on_signals():  # a signal between two cells stops the sweep too
            problems = run_local(out, spec, log=log, progress=progress, redo=redo, known=todo)
    else:
        problems = _check_cells(out, spec, lambda m: None, redo)
        run_submitit(out, spec, *submit, wait=wait, log=log)
    path = write_summary(out, spec)
    if problems:
        raise rundir.RunDirError(
            f"{len(problems)} of {len(spec.cells)} cells not counted in {path}: " + "; ".join(problems)
        )
    return path
