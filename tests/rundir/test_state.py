"""One notion of partial (rundir/state.py), read the same by every reader: a run killed before its commit
is "stopped at step X of Y" in `icl_race.load`, `report`, `hist`, `export` (file metadata, last_* columns,
never final_*), `compare` and `analyze` (refused unless --partial); the same run while a live process
holds its lock is "still training". live.npz is checked against the run's config as results.npz is, and
the writers' markers are validated when read and written under a lock."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import runproc
import tiny
from refusal import one_line_exit_2

import icl_race
from icl_race import config, rundir
from icl_race.cli import main
from icl_race.rundir import owner

RAW = tiny.small(
    train={"steps": 200, "evals_per_chunk": 1, "stop_when_all_acquired": False}, ensemble={"seeds": 2, "block": 2}
)
STOPPED = "stopped at step 150 of 200"  # what every reader says of the killed run


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """A run killed before its commit (after its chunks at 50, 100, 150 were written to live.npz): its
    process gone, so its lock free."""

    d = tmp_path_factory.mktemp("partial") / "run"
    runproc.killed_before_commit(config.from_dict(RAW), d)
    assert not (d / rundir.RESULTS).exists() and (d / rundir.LIVE).exists()
    return d


def _said_by_every_reader(d, tmp_path, capsys) -> dict[str, str]:
    """What each reader says of the run in `d`: its state's words, or a refusal's line."""
    said = {"load": icl_race.load(d).partial_note(), "state": rundir.state(d).text()}
    assert main(["hist", str(d)]) == 0
    said["hist"] = capsys.readouterr().out.splitlines()[-1]
    assert main(["hist", str(d), "--json"]) == 0
    said["hist --json"] = json.loads(capsys.readouterr().out)["partial"]
    assert main(["report", str(d), "--boot", "20", "--force"]) == 0  # into the run's folder, again
    said["report.md"] = (d / "report.md").read_text().splitlines()[2]
    said["report.json"] = json.loads((d / "report.json").read_text())["partial"]
    assert main(["export", str(d), "--out", str(tmp_path / "export")]) == 0
    said["export stderr"] = capsys.readouterr().err
    prov = json.loads((tmp_path / "export" / "provenance.json").read_text())
    said["export provenance"] = prov["runs"][str(d)]["partial"]
    assert prov["partial"] == [prov["runs"][str(d)]["partial"]]
    assert main(["compare", str(d), str(d), "--boot", "20", "--out", str(tmp_path / "compare")]) == 0
    capsys.readouterr()
    said["compare.json"] = json.loads((tmp_path / "compare" / "compare.json").read_text())["groups"][0]["partial"]
    said["analyze"] = one_line_exit_2(
        ["analyze", "race", "settle", str(d), "--out", str(tmp_path / "analyze" / "a.json")],
        tmp_path / "analyze",
        capsys,
        "analyze reads finished runs",
        "--partial",
    )
    return said


def test_a_killed_run_is_stopped_at_the_same_step_for_every_reader(killed, tmp_path, capsys):
    st = rundir.state(killed)
    assert (st.kind, st.step, st.budget, st.pid) == ("stopped", 150, 200, None)
    run = icl_race.load(killed)
    assert run.partial and run.state == st and run.steps_run == 150
    said = _said_by_every_reader(killed, tmp_path, capsys)
    for reader, line in said.items():
        assert STOPPED in line and "still training" not in line, (reader, line)


def test_a_run_whose_lock_a_live_process_holds_is_training_and_stopped_once_it_is_killed(killed, tmp_path, capsys):
    d = tmp_path / "run"
    shutil.copytree(killed, d)
    holder = subprocess.Popen(  # a runner's lock (rundir.lock), held until killed
        [
            sys.executable,
            "-c",
            "import sys\nfrom icl_race import rundir\nwith rundir.lock(sys.argv[1]):\n"
            "    print('held', flush=True)\n    sys.stdin.read()",
            str(d),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        st = rundir.state(d)
        assert (st.kind, st.step, st.budget, st.pid) == ("training", 150, 200, str(holder.pid))
        training = f"still training (pid {holder.pid}) as of step 150 of 200"
        said = _said_by_every_reader(d, tmp_path, capsys)
        for reader, line in said.items():
            assert training in line, (reader, line)
        with pytest.raises(rundir.Locked):  # the probes let the lock go: the holder still has it alone
            with rundir.lock(d):
                pass
    finally:
        holder.kill()  # SIGKILL: the kernel drops its lock
        holder.wait()
    assert rundir.state(d).text().startswith(STOPPED) and STOPPED in icl_race.load(d).partial_note()


def test_analyze_with_partial_analyses_the_results_so_far_and_records_them(killed, tmp_path, capsys):
    out = tmp_path / "a.json"
    assert main(["analyze", "race", "settle", str(killed), "--out", str(out), "--partial"]) == 0
    assert STOPPED in capsys.readouterr().err
    (line,) = json.loads(out.read_text())["partial"]
    assert line.startswith(f"{killed}: {STOPPED}")


def test_export_of_a_partial_run_names_no_value_final(killed, tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    assert main(["export", str(killed), "--out", str(tmp_path / "x")]) == 0
    seeds = pd.read_csv(tmp_path / "x" / "seeds.csv")
    assert not [c for c in seeds.columns if c.startswith("final_")] and "last_icl_acc" in seeds.columns
    assert set(seeds["state"]) == {"stopped"} and set(seeds["as_of_step"]) == {150}
    live = rundir.load_live(killed)
    np.testing.assert_allclose(seeds["last_icl_acc"], live.curves["icl_acc"][:, -1], rtol=1e-6)


def test_a_directory_with_no_chunk_written_says_so(tmp_path, capsys):
    d = tmp_path / "empty"
    d.mkdir()
    (d / rundir.CONFIG).write_text(json.dumps(config.from_dict(RAW).to_dict()))
    assert rundir.state(d).kind == "empty"
    one_line_exit_2(["hist", str(d)], tmp_path / "nothing", capsys, str(d), "not started")


def _cut_to_one_seed(arrays):
    S = arrays["seed_ids"].size
    return {k: v[:1] if v.ndim and v.shape[0] == S else v for k, v in arrays.items()}


@pytest.mark.parametrize("name", [rundir.LIVE, rundir.RESULTS])
def test_a_file_cut_to_one_seed_of_a_two_seed_run_is_refused_by_every_reader(killed, tmp_path, capsys, name):
    d = tmp_path / "run"
    shutil.copytree(killed, d)
    arrays = dict(np.load(d / rundir.LIVE))
    if name == rundir.RESULTS:  # a finished run's file of that layout, committed with its meta.json
        arrays.pop(rundir.LIVE_HEADLINE)
        (d / rundir.LIVE).unlink()
        cfg = json.loads((d / rundir.CONFIG).read_text())
        (d / rundir.META).write_text(json.dumps({"config": cfg, "stop_event": "icl"}))
    (d / name).write_bytes(rundir.npz_bytes(_cut_to_one_seed(arrays)))
    before = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}
    words = [f"{d / name}", "1 seeds", "ensemble.seeds = 2"]
    for argv in (["hist", str(d)], ["report", str(d)], ["export", str(d), "--out", str(tmp_path / "x")]):
        one_line_exit_2(argv, tmp_path / "x", capsys, *words)
    assert {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()} == before


# ---- the writers' markers (rundir/owner.py) ------------------------------------------------------------


def _plant(path, what):
    if what == "fifo":
        os.mkfifo(path)
    elif what == "huge":
        path.write_bytes(b'{"kind": "export", "files": {}, "pad": "' + b"x" * (owner.MARKER_MAX_BYTES + 1) + b'"}')
    else:
        path.write_text(what)


@pytest.mark.parametrize(
    "what, words",
    [
        ("fifo", ["not a regular file"]),
        ("huge", ["bytes, more than"]),
        ("not json", ["not JSON"]),
        ('{"kind": "compare", "files": {}}', ['"kind": "export"']),
        ('{"kind": "export", "files": {"seeds.csv": ["abc"]}}', ["seeds.csv", "sha256"]),
        ('{"kind": "export", "files": []}', ['"files"']),
    ],
)
def test_a_damaged_marker_is_named_in_one_line_and_its_folder_left_as_it_is(killed, tmp_path, capsys, what, words):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    _plant(out / owner.marker("export"), what)
    before = sorted((p.name, p.stat().st_size if p.is_file() else None) for p in out.iterdir())
    line = one_line_exit_2(
        ["export", str(killed), "--out", str(out)], tmp_path / "nothing", capsys, owner.marker("export"), *words
    )
    assert "damaged" in line
    assert sorted((p.name, p.stat().st_size if p.is_file() else None) for p in out.iterdir()) == before
    assert (out / "notes.txt").read_text() == "mine"


def test_two_writers_of_one_kind_keep_each_others_marker_entries(tmp_path):
    """Two sweep workers check the folder, then write in turn (summary.csv, sweep.toml): the second's
    record keeps the first's file, so that neither is later refused as not the sweep's."""
    names = ["sweep.toml", "summary.csv"]
    first, second = (owner.check(tmp_path, "sweep", names) for _ in range(2))
    owner.write(first, {"sweep.toml": b"[grid]\n"})
    owner.write(second, {"summary.csv": b"cell,status\n"})
    again = owner.check(tmp_path, "sweep", names)  # no --force: both files are recognised as the sweep's
    assert set(again.ours) == set(names)
    late = owner.check(tmp_path, "sweep", names)
    (tmp_path / "sweep.toml").write_text("edited after the check")  # by a writer that keeps no record
    with pytest.raises(rundir.RunDirError, match="changed since icl-race sweep checked it"):
        owner.write(late, {"sweep.toml": b"[grid]\n"})
    assert (tmp_path / "sweep.toml").read_text() == "edited after the check"
