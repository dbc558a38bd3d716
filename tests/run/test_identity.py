"""One identity of a program (run/identity.py, issue 55 item 4) for the packs, the cost cache and the
compile-cache clearing; a sweep planning each cell once (sweep/plan.py's `plan_cell`) and carrying the plan to
its execution; a dry run showing each cell's row as the cell is planned (issue 56 item 4)."""

import itertools

import tiny

from icl_race.run import cost, runner
from icl_race.run import sweep as sweeps
from icl_race.run.records import RunPlan
from icl_race.run.sweep import plan as planning

BASE = tiny.small(ensemble={"seeds": 2, "block": 2})
COST = cost.Cost(setup_s=10.0, compile_s=4.0, period_s=1.0, first_period=50, checkpoint_s=0.5, finish_s=2.0)
SLURM = {"minutes": 1, "partition": None, "gpus": 0, "parallelism": None}


def test_one_identity_decides_the_packs_the_cost_cache_and_the_compile_cache_clearing(tmp_path, monkeypatch):
    import jax

    # task.K is traced, model.width a shape, train.eval_size a static field of the program
    s = sweeps.expand(BASE, {"task.K": [200, 400], "model.width": [8, 16], "train.eval_size": [50, 60]})
    todo = list(sweeps.planned(tmp_path, s))
    shape = {p.cell.name: (p.cell.values["model.width"], p.cell.values["train.eval_size"]) for p in todo}
    for a, b in itertools.combinations(todo, 2):
        same = shape[a.cell.name] == shape[b.cell.name]  # they differ in K only
        assert (a.program == b.program) == same, (a.cell.values, b.cell.values)
        assert (cost.key(a.run, a.program) == cost.key(b.run, b.program)) == same
    packs = sweeps.packs(todo, pack=True)
    assert len(packs) == 4 and all(len({shape[p.cell.name] for p in pack}) == 1 for pack in packs)
    assert sorted(len(pack) for pack in packs) == [2, 2, 2, 2]
    # the local executor runs those packs, with the plans made above, and drops jit's caches between them
    events: list = []
    monkeypatch.setattr(runner, "execute_pack", lambda runs, **kw: events.append([r for r, _ in runs]))
    monkeypatch.setattr(jax, "clear_caches", lambda: events.append("clear"))
    (tmp_path / "out").mkdir()
    known = {p.cell.name: p for p in todo}
    sweeps.run_local(tmp_path / "out", s, log=lambda m: None, progress=False, known=known)
    assert events[1::2] == ["clear"] * 3
    assert events[::2] == [[p.run for p in pack] for pack in packs]


def test_a_sweep_plans_each_cell_once_from_its_checks_to_its_execution(tmp_path, monkeypatch):
    calls: list = []
    of = RunPlan.of
    monkeypatch.setattr(RunPlan, "of", classmethod(lambda cls, cfg: calls.append(cfg) or of(cfg)))
    executed: list = []
    monkeypatch.setattr(runner, "execute_pack", lambda runs, **kw: executed.extend(r for r, _ in runs))
    s = sweeps.expand(BASE, {"task.K": [200, 400], "model.width": [8, 16]})
    sweeps.run_sweep(tmp_path / "out", s, "local", lambda m: None, False, SLURM, wait=True)
    assert len(calls) == len(s.cells) == len(executed)  # the memory check, the packs and the run share one plan
    assert {r.cfg.digest() for r in executed} == {c.name for c in s.cells}
    calls.clear()
    sweeps.dry_run(tmp_path / "dry", s, measure=False)
    assert len(calls) == len(s.cells)


def test_a_dry_run_shows_each_cells_row_before_it_plans_the_next(tmp_path, monkeypatch):
    events: list = []
    plan = planning.plan_cell
    monkeypatch.setattr(
        planning, "plan_cell", lambda cell, pack: events.append(("plan", cell.name)) or plan(cell, pack)
    )
    monkeypatch.setattr(cost, "measure", lambda run: events.append(("measure", run.cfg.digest())) or COST)
    s = sweeps.expand(BASE, {"task.K": [200, 400], "model.width": [8, 16]})
    shown: list[str] = []
    result = sweeps.dry_run(tmp_path / "out", s, show=lambda line: shown.append(line) or events.append(("row", line)))
    assert shown == result.text().splitlines() and result.unmeasured == 0
    # each cell's row comes once it is planned (and its program measured), before the next cell is planned
    kinds = [(kind, name if kind != "row" else None) for kind, name in events]
    assert kinds[0] == ("row", None)  # the head: how many cells
    rows = [i for i, (kind, _) in enumerate(kinds) if kind == "row"]
    plans = [i for i, (kind, _) in enumerate(kinds) if kind == "plan"]
    assert len(plans) == 4 and all(p < r < n for p, r, n in zip(plans, rows[1:], [*plans[1:], len(kinds)]))
    assert [kind for kind, _ in kinds].count("measure") == 2  # one per program (width), at its first cell
    assert result.text().count("pack 1") == 3 and "2 cells of one program as one ensemble of 4 seeds" in result.text()


def test_runs_pack_only_when_their_item_pools_hold_the_same_values():
    """The array constants' digest: equal for cells that share a pool (another K: one pool object, digested
    once), different for another pool seed (the same program, other values), and the same when computed
    afresh, without the digests kept of earlier calls."""
    from icl_race import config
    from icl_race.run import identity

    of = lambda **task: identity.of(RunPlan.of(config.from_dict(tiny.small(task={"K_max": 400, **task}))))
    a, other_K, other_pool = of(K=200, pool_seed=1), of(K=400, pool_seed=1), of(K=200, pool_seed=2)
    assert a.arrays and a.pack == other_K.pack
    assert other_pool.program == a.program and other_pool.arrays != a.arrays
    identity._DIGESTS.clear()
    assert of(K=200, pool_seed=1) == a
