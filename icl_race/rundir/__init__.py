"""The run directory: the one place that writes it and reads it back.

    rundir/layout.py    the names (DIR/config.json, results.npz, meta.json, ...), `is_done`, the errors
    rundir/write.py     every write: atomic files, the lock, the commit that finishes a run (`finish`),
                        the gate before a run (`check`, `refuse_links`), damaged files set aside
    rundir/files.py     each file read back: `read_config`, `read_meta`, `read_results`, `stored_config`
    rundir/verify.py    results.npz and config.json checked as data: `check_results`, `check_provenance`
    rundir/state.py     where a run stands, every reader's one answer: `state` (finished, training or stopped
                        as of step X of Y by a liveness check of its lock, empty), a `RunState`
    rundir/read.py      one run directory as a `Run`: `load_run`, `load_live`, `run_of`
    rundir/sweepdir.py  a sweep directory as a `SweepDir` of `CellEntry`s: `load_sweep`, `skipped_cells`
    rundir/sweepstate.py  where a sweep stands (`SweepDir.state`): F of N grid cells finished, the others
                        training, stopped or not started, a `SweepState`
    rundir/loading.py   `load` (either kind of directory), `load_runs`
    rundir/runset.py    several runs, the fields that differ
    rundir/provenance.py  versions, commit, device
    rundir/owner.py     the rule of every other writer (sweep, report, export, compare, analyze): only into
                        its own folder (a marker), only its named files, none it did not write replaced

Every public name is here too, as `icl_race.rundir.NAME`.
"""

from icl_race.rundir.files import (
    differing_fields,
    read_config,
    read_meta,
    read_params,
    read_results,
    stored_config,
    with_defaults,
)
from icl_race.rundir.layout import (
    CHECKPOINTS,
    CONFIG,
    LIVE,
    LIVE_HEADLINE,
    LOCK,
    META,
    PARAMS,
    RESULTS,
    RUN_NAMES,
    SCALARS,
    SWEEP_NAMES,
    DamagedFileError,
    Locked,
    RunDirError,
    checkpoint_steps,
    half_finished,
    holds_others,
    is_done,
)
from icl_race.rundir.loading import load, load_runs
from icl_race.rundir.read import Run, load_live, load_run, load_run_results, run_of
from icl_race.rundir.state import RunState, lock_holder, state
from icl_race.rundir.sweepdir import CellEntry, SweepDir, cell_status, is_sweep, load_sweep, skipped_cells
from icl_race.rundir.sweepstate import SweepState, sweep_state
from icl_race.rundir.verify import check_provenance, check_results
from icl_race.rundir.write import (
    atomic_write,
    check,
    drop_superseded_checkpoints,
    finish,
    json_bytes,
    lock,
    npz_bytes,
    refuse_links,
    repair_notice,
    set_aside_final_files,
    write_config,
)
