"""experiments/scale/gpu_queue.py, the Python side of the GPU queue (issue 58): `done` reads a grid's cells
and a design's design.json, `tiny` makes the CPU-sized copies the queue's dry run trains. No training."""

import json
import sys
from pathlib import Path

import pytest

from icl_race.run.sweep import spec
from icl_race.run.sweep.design_spec import Design

SCALE = Path(__file__).parents[1] / "experiments" / "scale"


@pytest.fixture(scope="module")
def queue():
    sys.path.insert(0, str(SCALE))
    try:
        import gpu_queue
    finally:
        sys.path.pop(0)
    return gpu_queue


def _tiny(queue, name: str, tmp_path: Path):
    new = tmp_path / f"{name}.toml"
    assert queue.tiny(str(SCALE / f"{name}.toml"), str(new)) == 0
    return new, spec.load(new)


def test_a_tiny_median_design_keeps_its_rule_with_tiny_rounds_at_its_own_tiny_N(queue, tmp_path):
    _, d = _tiny(queue, "kinf_w512_N250_design", tmp_path)
    assert isinstance(d, Design) and d.kind == "median"
    assert (d.params.block, d.params.max_seeds, d.params.rel_width) == (2, 4, 0.25)
    # N = 250 is the paper's fifth N: the fifth tiny N, so the five designs stay five programs
    assert (d.cfg.task.N, d.cfg.model.width, d.cfg.train.steps, d.cfg.task.variant) == (16, 16, 1500, "infinite")


def test_a_tiny_kstar_design_has_a_prior_and_item_pool_a_tiny_model_reaches(queue, tmp_path):
    _, d = _tiny(queue, "kstar_w512_N200_design", tmp_path)
    assert isinstance(d, Design) and d.kind == "kstar"
    p = d.params
    assert (p.k_lo, p.k_hi, p.seeds_per_round, p.max_seeds, p.half_width) == (64, 4096, 2, 4, 0.05)
    assert d.cfg.task.N == 14 and d.cfg.task.K_max == 4096 == p.candidates()[-1]
    assert d.cfg.train.stop_threshold == 0.95 and d.cfg.train.settle_iwl == 0.0  # the file's levers kept


def test_a_tiny_grid_has_the_same_cells(queue, tmp_path):
    _, g = _tiny(queue, "precision_w512_N32", tmp_path)
    assert sorted(c.cfg.train.matmul_precision for c in g.cells) == sorted(["highest", "default", "BF16_BF16_F32"])
    assert {(c.cfg.task.N, c.cfg.model.width, c.cfg.ensemble.seeds) for c in g.cells} == {(8, 16, 2)}


def _record(out: Path, kind: str, stop: str | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    doc = {"kind": kind, "design": {}, "rounds": [{"round": 0}], "seeds": 2, "stop": stop}
    (out / "design.json").write_text(json.dumps(doc))


@pytest.mark.parametrize(
    "record, finished",
    [
        (None, False),  # never started
        (("median", None), False),  # a round recorded, no stop
        (("median", "max_seeds"), True),
        (("median", "precise"), True),
        (("kstar", "precise"), False),  # another design's record is not this one's stop
    ],
)
def test_a_design_is_done_when_its_design_json_names_a_stop(queue, tmp_path, record, finished):
    new, _ = _tiny(queue, "kinf_w512_N50_design", tmp_path)
    out = tmp_path / "out"
    if record is not None:
        _record(out, *record)
    assert queue.done(str(new), str(out)) == (0 if finished else 1)


def test_a_damaged_design_json_is_not_done(queue, tmp_path, capsys):
    new, _ = _tiny(queue, "kinf_w512_N50_design", tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "design.json").write_text("{not json")
    assert queue.done(str(new), str(tmp_path / "out")) == 1
    assert "not JSON" in capsys.readouterr().out


def test_a_grid_is_done_only_when_every_cell_is(queue, tmp_path, capsys):
    new, _ = _tiny(queue, "precision_w512_N32", tmp_path)
    assert queue.done(str(new), str(tmp_path / "none")) == 1
    assert "0/3 cells done" in capsys.readouterr().out
