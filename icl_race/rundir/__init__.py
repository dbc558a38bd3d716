"""The run directory: the one place that writes it and reads it back, in three modules.

    rundir/layout.py  the names (DIR/config.json, results.npz, meta.json, ...), `is_done`, the errors
    rundir/write.py   every write: atomic files, the lock, the commit that finishes a run (`finish`),
                      the gate before a run (`check`, `refuse_links`), damaged files set aside
    rundir/read.py    the read-back: read_*, `Run`, `SweepDir`, `check_results`, `load_run`, `load`
    rundir/owner.py   the rule of every other writer (sweep, report, export, compare, analyze): only into
                      its own folder (a marker), only its named files, none it did not write replaced

Every public name is here too, as `icl_race.rundir.NAME`.
"""

from icl_race.rundir.layout import (
    CHECKPOINTS,
    CONFIG,
    LIVE,
    LIVE_HEADLINE,
    LOCK,
    META,
    RESULTS,
    RUN_NAMES,
    SCALARS,
    SWEEP_NAMES,
    DamagedFileError,
    Locked,
    RunDirError,
    checkpoint_steps,
    foreign,
    half_finished,
    is_done,
)
from icl_race.rundir.read import (
    CellEntry,
    Run,
    SweepDir,
    cell_status,
    check_provenance,
    check_results,
    differing_fields,
    is_sweep,
    load,
    load_live,
    load_run,
    load_run_results,
    load_runs,
    load_sweep,
    read_config,
    read_meta,
    read_results,
    run_of,
    skipped_cells,
    stored_config,
    with_defaults,
)
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
