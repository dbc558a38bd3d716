"""Every TOML under experiments/ still loads: a run config through the config loader (bases resolved), a
sweep file expanded to its cells and dry-run without measuring or training, so a change to a field or
its validation that breaks a study's config fails here, named by its path."""

import tomllib
from pathlib import Path

import pytest

from icl_race import config
from icl_race.run import sweep
from icl_race.run.sweep.design_cost import design_dry_run
from icl_race.run.sweep.design_spec import Design

ROOT = Path(__file__).parents[1]
TOMLS = sorted(p.relative_to(ROOT) for p in (ROOT / "experiments").rglob("*.toml"))


def _is_sweep(path: Path) -> bool:
    """Only sweep files take `base =` (a single-cell variant of another config is a sweep of one cell)."""
    table = tomllib.loads(path.read_text())
    return bool({"grid", "zip", "base", "design"} & set(table))


def test_every_study_has_its_configs_here():
    assert len(TOMLS) >= 80 and {p.parts[1] for p in TOMLS if len(p.parts) > 2} >= {
        "cpu",
        "levers",
        "linear_attention",
        "memorization",
        "race",
        "regime",
    }


@pytest.mark.parametrize("rel", TOMLS, ids=[str(p) for p in TOMLS])
def test_an_experiment_config_loads_and_its_sweep_expands(rel, tmp_path):
    path = ROOT / rel
    if not _is_sweep(path):
        cfg = config.load(path)
        assert cfg.train.steps > 0, rel
        return
    spec = sweep.load(path)
    if isinstance(spec, Design):  # a question, not cells: its first round's cells and its projection
        assert design_dry_run(tmp_path / "out", spec, False, False, "h200", log=lambda m: None).seconds
        assert not (tmp_path / "out").exists(), "a dry run writes nothing"
        return
    assert spec.cells, f"{rel}: a sweep of no cells"
    assert len({c.name for c in spec.cells}) == len(spec.cells), f"{rel}: two cells share a directory"
    plan = sweep.dry_run(tmp_path / "out", spec, measure=False)
    assert len(plan.cells) == len(spec.cells) and plan.unmeasured == len(spec.cells), rel
    assert not (tmp_path / "out").exists(), "a dry run writes nothing"


def test_fig_a6s_designs_are_one_median_design_on_the_fall_per_l2_of_its_grid():
    """design/paper/figA6_L01 ... L20: figA6.toml's config at each L2 of its grid, in its order, each seed
    retired at its fall and its median fall step's rule capped at the grid's 128 seeds."""
    grid = tomllib.loads((ROOT / "experiments/figA6.toml").read_text())["grid"]["train.weight_decay_attn"]
    designs = [sweep.load(p) for p in sorted((ROOT / "experiments/design/paper").glob("figA6_L*.toml"))]
    assert all(isinstance(d, Design) for d in designs)
    assert [d.cfg.train.weight_decay_attn for d in designs] == grid
    for d in designs:
        assert d.params.event == "fall" and d.cfg.train.retire_at_fall and d.params.max_seeds == 128
        assert d.cfg.train.steps == 4_690_000 and d.cfg.task.K == 15000 and d.cfg.task.N == 100
