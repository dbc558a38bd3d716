"""A sweep file with a [design] (run/sweep/design_spec.py, design_run.py, design_cost.py; report/design.py):
rounds proposed, trained as packed cells, recorded in design.json, resumed to the same choices, refused when
edited, projected by --dry-run, reported beside the logistic fit. Tiny configs: the mechanics, not K*."""

import csv
import dataclasses
import json
import shutil

import numpy as np
import pytest
import tiny
from refusal import refused

from icl_race import rundir
from icl_race.__main__ import main
from icl_race.analysis import design as dz
from icl_race.run import sweep
from icl_race.run.sweep.design_cost import FALL_STEPS, SIGMA, design_dry_run
from icl_race.run.sweep.design_spec import Design
from icl_race.studies import design as design_study

# 2 rounds of 2 seeds over K in 16-256, 100 steps: a design that stops at its seed maximum.
CONFIG = tiny.small(train={"steps": 100, "checkpoint_every": 1}, ensemble={"seeds": 2, "block": 2})
KSTAR = tiny.toml(CONFIG) + '[design]\nkind = "kstar"\nk_lo = 16\nk_hi = 256\nseeds_per_round = 2\nmax_seeds = 4\n'
MEDIAN = tiny.toml(CONFIG) + '[design]\nkind = "median"\nblock = 2\nmax_seeds = 4\nrel_width = 0.01\n'
# A median design on the fall: at ICL threshold 0.6 a tiny seed's noisy ICL accuracy (~0.5-0.7 here) crosses
# it at some step and stays below the fall's 0.9: its t_fell is its next evaluation, confirmed LASTING
# evaluations later where the budget has them (the mechanics of reading t_fell, not transience).
FALL_TRAIN = {
    "steps": 200,
    "eval_every": 10,
    "icl_threshold": 0.6,
    "stop_when_all_acquired": False,
    "retire_at_fall": True,
}
FALL = tiny.toml(tiny.small(train=FALL_TRAIN, ensemble={"seeds": 2, "block": 2}))
FALL += '[design]\nkind = "median"\nevent = "fall"\nblock = 2\nmax_seeds = 4\nrel_width = 0.01\n'


def _spec(tmp_path, text, name="design.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A K* design run to its end once: (its sweep file, its folder)."""
    tmp = tmp_path_factory.mktemp("design")
    spec, out = _spec(tmp, KSTAR), tmp / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--quiet"]) == 0
    return spec, out


@pytest.mark.parametrize(
    "table, named",
    [
        ('kind = "grid"', "design.kind"),
        ('kind = "kstar"\nseeds_per_round = 2.5', "design.seeds_per_round"),
        ('kind = "kstar"\nhalf_width = true', "design.half_width"),
        ('kind = "kstar"\nk_lo = 500\nk_hi = 100', "design.k_lo, k_hi"),
        ('kind = "kstar"\nthreshold = 3', "design.threshold"),
        ('kind = "kstar"\naxis = "task.N"', "design.axis"),
        ('kind = "kstar"\nk_hi = 4000\n[task.K_max]', "task.K_max"),
        ('kind = "median"\nblock = 0', "design.block"),
        ('kind = "median"\nblock = 1', "ensemble.block"),
        ('kind = "median"\nevent = "t_ICL"', 'design.event = \'t_ICL\': must be "t_icl" or "fall"'),
        ('kind = "median"\nevent = 1', 'design.event = 1: must be "t_icl" or "fall"'),
        ('kind = "median"\nevent = "fall"', "train.retire_at_fall = false"),
        ('kind = "kstar"\nevent = "fall"', "design.event: not an option of a kstar design"),
        ('kind = "kstar"\n[grid]\n"task.N" = [8, 16]', "[design]"),
    ],
)
def test_a_design_file_is_refused_in_one_line_naming_the_field(tmp_path, capsys, table, named):
    text = tiny.toml(CONFIG) + "[design]\n" + table + "\n"
    if "[task.K_max]" in text:  # a K_max below the design's largest K, in the config's own [task]
        text = text.replace("[task.K_max]\n", "").replace("[task]\n", "[task]\nK_max = 1000\n")
    spec = _spec(tmp_path, text)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out")]) == 2
    err = refused(capsys.readouterr().err)
    assert len(err) == 1 and named in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_design_based_on_a_grid_file_takes_its_config_not_its_cells(tmp_path):
    _spec(tmp_path, tiny.toml(CONFIG) + '[grid]\n"task.N" = [8, 16]\n', "grid.toml")
    design = sweep.load(
        _spec(tmp_path, 'base = "grid.toml"\n[task]\nN = 16\n[design]\nkind = "kstar"\nk_lo = 16\nk_hi = 256\n')
    )
    assert isinstance(design, Design) and design.cfg.task.N == 16 and design.cfg.model.width == 16
    assert design.cfg.task.K_max == 256 and design.fields == ["task.K", "ensemble.first_seed", "ensemble.seeds"]


def test_a_design_records_its_rounds_and_each_posterior_is_the_cells_outcomes(finished):
    _, out = finished
    doc = json.loads((out / "design.json").read_text())
    design = dz.KStarDesign(**doc["design"])
    assert doc["stop"] == "max_seeds" and [r["round"] for r in doc["rounds"]] == [0, 1]
    K, acquired, seen = [], [], 0
    for r in doc["rounds"]:
        # contiguous seed ids, one cell per distinct K, each K a candidate of the design
        assert r["first_seed"] == seen and r["seeds"] == 2 and set(r["K"]) <= set(design.candidates().tolist())
        assert sorted(r["K"]) == [k for c in r["cells"] for k in [c["task.K"]] * c["ensemble.seeds"]]
        for c in r["cells"]:
            run = rundir.load_run(out / "cells" / c["name"])
            assert run.seed_ids.tolist() == list(
                range(c["ensemble.first_seed"], c["ensemble.first_seed"] + c["ensemble.seeds"])
            )
            K += [c["task.K"]] * run.t().size
            acquired += (run.t() >= 0).tolist()
        seen += r["seeds"]
        # the posterior after the round, recomputed here from the cells: the same numbers
        after = dz.posterior(design, K, acquired).summary()
        assert r["after"]["log10_kstar"] == pytest.approx(after.log10_kstar, rel=1e-12)
        assert r["after"]["ci"] == pytest.approx(after.ci, rel=1e-12)
    # the first round is the design's proposal from the prior, with the root seed
    assert doc["rounds"][0]["K"] == dz.propose(dz.prior(design), 0).tolist()
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert sorted(r["cell"] for r in rows) == sorted(c["name"] for r in doc["rounds"] for c in r["cells"])


def test_a_finished_design_run_again_trains_nothing_and_writes_the_same_record(finished, tmp_path):
    spec, out = finished
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    before = (copy / "design.json").read_bytes()
    cells = sorted(p.name for p in (copy / "cells").iterdir())
    assert main(["sweep", str(spec), "--out", str(copy), "--quiet"]) == 0
    assert (copy / "design.json").read_bytes() == before
    assert sorted(p.name for p in (copy / "cells").iterdir()) == cells


def test_a_damaged_design_json_is_set_aside_and_the_rounds_recomputed_the_same(finished, tmp_path, capsys):
    spec, out = finished
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    before = (copy / "design.json").read_bytes()
    (copy / "design.json").write_text('{"kind": "kstar", "rounds": [')
    rundir.owner.write(rundir.owner.check(copy, "sweep", ["design.json"], force=True), {})  # the user's edit, adopted
    assert main(["sweep", str(spec), "--out", str(copy), "--quiet"]) == 0
    assert "design.json: not JSON" in capsys.readouterr().err
    assert (copy / "design.json").read_bytes() == before
    assert len(list(copy.glob("design.damaged-*.json"))) == 1


def test_an_edited_design_is_refused_naming_the_field_and_force_starts_a_new_one(finished, tmp_path, capsys):
    _, out = finished
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    snapshot = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    edited = _spec(tmp_path, KSTAR.replace("max_seeds = 4", "max_seeds = 6"), "edited.toml")
    assert main(["sweep", str(edited), "--out", str(copy), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "design.max_seeds = 4" in err and "6" in err and "--force" in err
    assert {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()} == snapshot  # nothing written
    assert main(["sweep", str(edited), "--out", str(copy), "--quiet", "--force"]) == 0
    doc = json.loads((copy / "design.json").read_text())
    assert doc["design"]["max_seeds"] == 6 and len(list(copy.glob("design.previous-*.json"))) == 1
    old = json.loads(snapshot[copy / "design.json"])
    # the new design makes the same first two rounds (same outcomes, same seed): their cells are reused
    assert [r["K"] for r in doc["rounds"][:2]] == [r["K"] for r in old["rounds"]]


def test_the_report_gives_the_posterior_beside_the_logistic_fit(finished, tmp_path):
    _, out = finished
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    assert main(["report", str(copy)]) == 0
    md = (copy / "report.md").read_text()
    assert "## Design: K* by a sequential design" in md
    assert "design posterior" in md and "logistic fit over the cells" in md and "not an unbiased estimate" in md
    section = json.loads((copy / "report.json").read_text())["design"]
    assert section["seeds"] == 4 and section["stop"] == "max_seeds" and section["seeds_in_cells"] == 4


def test_a_median_design_adds_blocks_until_its_rule_stops(tmp_path):
    spec, out = _spec(tmp_path, MEDIAN), tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--quiet"]) == 0
    doc = json.loads((out / "design.json").read_text())
    assert doc["stop"] == "max_seeds" and [r["seeds"] for r in doc["rounds"]] == [2, 2]
    assert "event" not in doc["design"]  # a t_ICL design's record as before design.event existed
    runs = [rundir.load_run(out / "cells" / c["name"]) for r in doc["rounds"] for c in r["cells"]]
    times = np.concatenate([r.censored()[0] for r in runs])
    observed = np.concatenate([r.censored()[1] for r in runs])
    check = dz.median_check(dz.MedianDesign(**doc["design"]), times, observed)
    assert doc["result"]["median"] == check.median and doc["result"]["seeds"] == 4


def test_the_dry_run_projects_from_replays_states_its_assumption_and_writes_nothing(tmp_path, capsys):
    spec, out = _spec(tmp_path, KSTAR), tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--dry-run", "--no-measure"]) == 0
    text = capsys.readouterr().out
    assert "expected ~4 seeds" in text and "assuming the true K* at the prior's log-midpoint" in text
    assert not out.exists()
    plan = design_dry_run(out, sweep.load(spec), measure=False, remeasure=False, device="h200", log=lambda m: None)
    assert plan.seconds is not None and plan.seconds > 0 and "GPU hours" in plan.text()


def test_the_design_replays_on_a_finished_sweeps_seeds(finished, tmp_path):
    """`analyze design replay` reads a sweep's cells as a grid (here the design's own folder: 8 K, one seed
    each) and writes the replays' JSON and markdown."""
    _, out = finished
    result = tmp_path / "replay.json"
    args = ["--set", "replays=2", "--set", "seeds_per_round=4", "--set", "max_seeds=8"]
    assert main(["analyze", "design", "replay", str(out), "--out", str(result), *args]) == 0
    case = json.loads(result.read_text())["result"]["cases"][0]
    assert case["grid_seeds"] == 4 and case["design"]["replays"] == 2 and case["design"]["seeds"] == 8
    assert "replayed on finished grids" in result.with_suffix(".md").read_text()


def test_versus_sets_a_grid_beside_a_design_and_checks_what_each_spent(finished, tmp_path, capsys):
    """`analyze design versus GRID DESIGN` (item 5's live cases): here the design's own folder as both arms,
    so each spent the same seeds and seed-steps (design.json's total), the grid's fit is the design's cells'
    fit, and the design's posterior is the report's; a folder without design.json is refused in one line."""
    _, out = finished
    result = tmp_path / "versus.json"
    assert main(["analyze", "design", "versus", str(out), str(out), "--out", str(result), "--set", "name=wide_t"]) == 0
    case = json.loads(result.read_text())["result"]
    doc = json.loads((out / "design.json").read_text())
    assert case["name"] == "wide_t" and case["stop"] == doc["stop"] == "max_seeds"
    assert case["fixed"]["seeds"] == case["design"]["seeds"] == 4
    assert case["fixed"]["seed_steps"] == case["design"]["seed_steps"] == doc["seed_steps"]
    assert case["cost_ratio"] == 1.0 and case["design_fit"] == case["fixed"]
    runs = [rundir.load_run(out / "cells" / c["name"]) for r in doc["rounds"] for c in r["cells"]]
    K = np.concatenate([np.full(r.t().size, r.cfg.task.K) for r in runs])
    post = dz.posterior(dz.KStarDesign(**doc["design"]), K, np.concatenate([r.t() >= 0 for r in runs])).summary()
    assert case["design"]["kstar"] == pytest.approx(10**post.log10_kstar)
    assert "beside the design" in result.with_suffix(".md").read_text()
    plain = tmp_path / "plain"
    shutil.copytree(out, plain)
    (plain / "design.json").unlink()
    capsys.readouterr()
    assert main(["analyze", "design", "versus", str(out), str(plain), "--out", str(tmp_path / "x.json")]) == 2
    err = refused(capsys.readouterr().err)
    assert len(err) == 1 and "not a K* design's folder" in err[0], err
    assert not (tmp_path / "x.json").exists()


def test_versus_counts_fresh_seeds_against_each_arm_and_refuses_seeds_an_arm_trained(finished, tmp_path, capsys):
    """`analyze design versus GRID DESIGN FRESH`: a folder of seeds neither arm trained (ids 100-101, one K)
    gives its count of acquirers with each arm's prediction; one that trains the design's seed ids is no
    check of anything and is refused in one line, nothing written."""
    _, out = finished
    cfg = {**CONFIG, "ensemble": {**CONFIG["ensemble"], "first_seed": 100}}
    fresh, again = tmp_path / "fresh", tmp_path / "again"
    for folder, c in ((fresh, cfg), (again, CONFIG)):
        spec = _spec(tmp_path, tiny.toml(c) + '[grid]\n"task.K" = [64]\n', f"{folder.name}.toml")
        assert main(["sweep", str(spec), "--out", str(folder), "--quiet"]) == 0
    result = tmp_path / "versus" / "versus.json"
    assert main(["analyze", "design", "versus", str(out), str(out), str(fresh), "--out", str(result)]) == 0
    (cell,) = json.loads(result.read_text())["result"]["fresh"]
    (run,) = [rundir.load_run(c) for c in (fresh / "cells").iterdir()]
    assert (cell["K"], cell["seeds"], cell["seed_ids"]) == (64, 2, [100, 101])
    assert cell["acquired"] == int((run.t() >= 0).sum())
    assert cell["grid"] is None  # the tiny design's seeds never acquire: as a grid, it has no K* to predict from
    assert 0 <= cell["design"]["p"] <= 1 and cell["design"]["at_most"] + cell["design"]["at_least"] >= 1
    assert "Fresh seeds" in result.with_suffix(".md").read_text()
    capsys.readouterr()
    args = ["analyze", "design", "versus", str(out), str(out), str(again), "--out", str(tmp_path / "x" / "x.json")]
    assert main(args) == 2
    err = refused(capsys.readouterr().err)
    assert len(err) == 1 and "that an arm trained" in err[0], err
    assert not (tmp_path / "x").exists()


def test_a_grid_trained_in_parts_reads_as_one_grid_with_its_seed_ids_in_order(tmp_path):
    """A grid trained in two parts (ensemble.first_seed 0 and 2, as design/grid_w512_N64_s*.toml), its cells
    linked into one folder, reads as the whole grid: at every K the seed ids 0-3 in order and each seed's
    outcome and steps in its place, so that `grid_ci_by_seed` can resample the ids together."""
    grid = '[grid]\n"task.K" = [16, 32, 64, 128, 256]\n'
    whole = tmp_path / "whole"
    config = tiny.small(train={"steps": 100}, ensemble={"seeds": 4, "block": 2})
    assert (
        main(["sweep", str(_spec(tmp_path, tiny.toml(config) + grid, "w.toml")), "--out", str(whole), "--quiet"]) == 0
    )
    links = tmp_path / "links" / "cells"
    links.mkdir(parents=True)
    for first in (0, 2):
        part = tiny.small(train={"steps": 100}, ensemble={"seeds": 2, "block": 2, "first_seed": first})
        assert (
            main(
                [
                    "sweep",
                    str(_spec(tmp_path, tiny.toml(part) + grid, f"p{first}.toml")),
                    "--out",
                    str(tmp_path / f"p{first}"),
                    "--quiet",
                ]
            )
            == 0
        )
        for cell in (tmp_path / f"p{first}" / "cells").iterdir():
            (links / cell.name).symlink_to(cell)
    (one,), (split,) = design_study._grids([whole]), design_study._grids([links.parent])
    assert split.K == one.K == [16, 32, 64, 128, 256]
    assert all(list(i) == [0, 1, 2, 3] for i in split.seed_ids)
    for a, b in zip(split.acquired + split.steps, one.acquired + one.steps):
        assert np.array_equal(a, b)


def test_slope_takes_a_design_s_posterior_and_intervals_given_and_refuses_a_bad_one(finished, tmp_path, capsys):
    """`analyze design slope` (item 6): the design's folder gives its posterior (as `versus` recomputes it)
    at its N, `given` adds intervals of runs no longer on disk; the slope is the points' least squares.
    A malformed interval, or points at one N, are refused in one line, with nothing written."""
    _, out = finished
    result = tmp_path / "slope.json"
    given = "--set", "given=4:40:30:50:grid_a,16:200:150:260"
    assert main(["analyze", "design", "slope", str(out), *given, "--out", str(result), "--boot", "200"]) == 0
    r = json.loads(result.read_text())["result"]
    versus = tmp_path / "versus.json"
    assert main(["analyze", "design", "versus", str(out), str(out), "--out", str(versus)]) == 0
    design = json.loads(versus.read_text())["result"]["design"]
    N = tiny.small()["task"]["N"]
    assert [p["N"] for p in r["points"]] == sorted([4, 16, N])
    (mine,) = [p for p in r["points"] if "posterior" in p["source"]]
    assert [mine["kstar"], *mine["ci"]] == pytest.approx([design["kstar"], *design["ci"]])
    x, y = np.log10([p["N"] for p in r["points"]]), np.log10([p["kstar"] for p in r["points"]])
    assert r["fit"]["slope"] == pytest.approx(np.polyfit(x, y, 1)[0])
    assert "slope of log10 K*" in result.with_suffix(".md").read_text()
    assert [p["source"] for p in r["points"] if p["N"] == 4] == ["given: grid_a"]
    for bad, says in [("given=4:40:50:30", "--set given=4:40:50:30"), ("given=16:200:150:260", "needs K* at >= 2")]:
        capsys.readouterr()
        assert main(["analyze", "design", "slope", "--set", bad, "--out", str(tmp_path / "x.json")]) == 2
        err = refused(capsys.readouterr().err)
        assert len(err) == 1 and says in err[0], err
    assert not (tmp_path / "x.json").exists()


def test_a_median_design_is_projected_from_replays_at_the_stated_spread(tmp_path, capsys):
    """A lenient rule (a CI within 10 medians) stops long before its 64-seed maximum: the projection is
    the replays' seeds, not the maximum."""
    lenient = MEDIAN.replace("max_seeds = 4\nrel_width = 0.01", "max_seeds = 64\nrel_width = 10")
    spec, out = _spec(tmp_path, lenient), tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--dry-run", "--no-measure"]) == 0
    text = capsys.readouterr().out
    seeds = float(text.split("expected ~")[1].split(" seeds")[0])
    assert 2 <= seeds < 64 and f"spread {SIGMA:g} in ln t" in text and "at most 64 seeds" in text
    assert not out.exists()


def test_a_median_design_on_the_fall_reads_each_seeds_lasting_fall(tmp_path):
    """design.event = "fall": the rule's times are the cells' t_fell (a seed that did not fall censored where
    it stopped), not t_ICL; design.json says which event; the report recomputes the same median from the
    outcome classes' falls and names the event; the dry run states the measured spread it projects at."""
    spec, out = _spec(tmp_path, FALL), tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--quiet"]) == 0
    doc = json.loads((out / "design.json").read_text())
    design = dz.MedianDesign(**doc["design"])
    assert doc["design"]["event"] == "fall" and doc["stop"] in ("precise", "max_seeds")
    runs = [rundir.load_run(out / "cells" / c["name"]) for r in doc["rounds"] for c in r["cells"]]
    fall = [np.concatenate(x) for x in zip(*(r.censored("fell") for r in runs))]
    t_icl = [np.concatenate(x) for x in zip(*(r.censored() for r in runs))]
    assert fall[1].any() and not np.array_equal(fall[0], t_icl[0])  # some seeds fell; their times are not t_ICL
    check = dz.median_check(design, *fall)
    assert doc["result"] == json.loads(json.dumps(dataclasses.asdict(check)))
    assert doc["result"] != json.loads(json.dumps(dataclasses.asdict(dz.median_check(design, *t_icl))))
    assert main(["report", str(out)]) == 0
    section = json.loads((out / "report.json").read_text())["design"]
    assert section["answer"] == doc["result"] and section["params"]["event"] == "fall"
    md = (out / "report.md").read_text()
    assert "## Design: the median fall step" in md and "lasting fall after acquiring ICL" in md
    dry = design_dry_run(out, sweep.load(spec), measure=False, remeasure=False, device=None, log=lambda m: None)
    assert f"the {len(FALL_STEPS)} falls measured, all on the CPU miniature" in dry.assumption
    assert "spread 0.166 in ln t" in dry.assumption and "retire there" in dry.assumption
