"""report/compare.py (`icl-race compare`) on two tiny real runs that differ in train.lr (conftest's
`lr_runs`): the Comparison record (the median ratio's direction, the log-rank p, the config differences),
its text and files, and every refusal one line, exit 2, nothing written."""

import json

import numpy as np
import pytest
import tiny
from refusal import one_line_exit_2

from icl_race import rundir
from icl_race.analysis.survival import km_median, logrank
from icl_race.cli import main
from icl_race.report import compare

EVENT = tiny.LR_RUN_EVENT


@pytest.fixture(scope="module")
def both(lr_runs):
    """The Comparison of b against a (few replicates: the record's shape, not its CI, is under test)."""
    return compare.compare([lr_runs / "a", lr_runs / "b"], event=EVENT, n_boot=200, seed=3)


def test_compare_a_run_with_itself_is_no_difference(lr_runs, tmp_path, capsys):
    out = tmp_path / "cmp"
    a = str(lr_runs / "a")
    assert main(["compare", a, a, "--event", EVENT, "--boot", "200", "--out", str(out)]) == 0
    assert "same config" in capsys.readouterr().out
    rec = json.loads((out / "compare.json").read_text())
    (pair,) = rec["versus_first"]
    assert pair["logrank"]["p"] == 1.0 and pair["ratio"]["ratio"] == 1.0
    assert rec["differences"] == {} and rec["event"] == EVENT
    assert sorted(p.name for p in (out / "figures").iterdir()) == ["km.pdf", "km.png"]
    assert (out / "figures" / "km.png").read_bytes()[:4] == b"\x89PNG"
    assert "identical" in (out / "compare.md").read_text()


def test_compare_two_runs_names_the_lr_and_matches_the_statistics(lr_runs, tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", str(lr_runs / "a"), str(lr_runs / "b"), "--event", EVENT, "--out", str(out)]) == 0
    assert "differ in train.lr" in capsys.readouterr().out
    rec = json.loads((out / "compare.json").read_text())
    assert rec["differences"] == {"train.lr": [0.1, 0.05]}
    assert "`train.lr` | `0.1` | `0.05`" in (out / "compare.md").read_text()
    a, b = (rundir.load_run(lr_runs / n) for n in tiny.LR_RUNS)
    (pair,) = rec["versus_first"]
    assert pair["logrank"]["p"] == pytest.approx(logrank(*a.censored(EVENT), *b.censored(EVENT)).p)
    ma, mb = km_median(*a.censored(EVENT)), km_median(*b.censored(EVENT))
    assert pair["ratio"]["ratio"] == (pytest.approx(mb / ma) if np.isfinite(ma * mb) else None)
    assert [g["n"] for g in rec["groups"]] == [4, 4]
    assert sum(rec["groups"][0]["outcomes"].values()) == 4


def test_the_groups_are_the_runs_in_order_with_their_own_counts(lr_runs, both):
    assert [g.name for g in both.groups] == ["A", "B"]
    assert [g.dir for g in both.groups] == [lr_runs / "a", lr_runs / "b"]
    for g in both.groups:
        run = rundir.load_run(g.dir)
        times, observed = run.censored(EVENT)
        assert (g.n, g.reached, g.diverged) == (times.size, int(observed.sum()), int(run.diverged.sum()))
        assert g.censor_at == run.censor_at(EVENT)
        assert g.km["n"] == g.n and sum(g.outcomes.values()) == g.n + g.diverged
    assert (both.event, both.n_boot, both.seed) == (EVENT, 200, 3)


def test_the_median_ratio_is_the_later_run_over_the_reference(lr_runs, both):
    """B / A, not A / B: swapping the runs inverts the ratio (the halved learning rate of b is slower)."""
    (pair,) = both.versus_first
    a, b = (both.groups[i].km["median"] for i in (0, 1))
    if a is None or b is None:
        pytest.skip(f"a median not reached in this run's 400 steps: A {a}, B {b}")
    assert pair.ratio.ratio == pytest.approx(b / a)
    swapped = compare.compare([lr_runs / "b", lr_runs / "a"], event=EVENT, n_boot=200, seed=3)
    assert swapped.versus_first[0].ratio.ratio == pytest.approx(a / b)
    assert swapped.versus_first[0].logrank.p == pytest.approx(pair.logrank.p)  # the test is symmetric


def test_the_log_rank_p_is_a_probability_and_the_differences_name_each_runs_value(both):
    (pair,) = both.versus_first
    assert 0.0 <= pair.logrank.p <= 1.0
    assert both.differences == {"train.lr": list(tiny.LR_RUNS.values())}
    assert compare.label(both, 1) == "B: train.lr=0.05"
    assert compare.summary(both).startswith("B: train.lr=0.05 vs A: t_icl60 median ratio ")
    md = compare.markdown(both)
    assert md.startswith(f"# Comparison of t_{EVENT} over 2 runs") and "## Config differences" in md


def test_the_event_defaults_to_the_first_runs_headline(lr_runs):
    c = compare.compare([lr_runs / "a", lr_runs / "a"], n_boot=20)
    assert c.event == rundir.load_run(lr_runs / "a").headline
    assert c.differences == {}


def test_bad_compare_input(lr_runs, tmp_path, capsys):
    out = tmp_path / "out"
    a, sweep = str(lr_runs / "a"), str(lr_runs / "sweep")
    one_line_exit_2(["compare", a, "--out", str(out)], out, capsys, "at least two")
    one_line_exit_2(["compare", a, sweep, "--out", str(out)], out, capsys, "sweep directory", "cells")
    one_line_exit_2(["compare", a, a, "--event", "grokked", "--out", str(out)], out, capsys, "grokked", EVENT)
