"""report/compare.py (`icl-race compare`) on two tiny real runs that differ in train.lr (conftest's
`lr_runs`): the Comparison record (the median ratio's direction, the log-rank p, the config differences),
its text and files, and every refusal one line, exit 2, nothing written."""

import json
import shutil

import numpy as np
import pytest
import tiny
from refusal import one_line_exit_2

from icl_race import rundir
from icl_race.analysis.survival import km_median, logrank, proportion_ci
from icl_race.cli import main
from icl_race.report import compare, compare_input
from icl_race.report.format import p_value

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
    assert [g.name for g in both.groups] == ["a", "b"]  # their folders' names
    assert [g.dir for g in both.groups] == [lr_runs / "a", lr_runs / "b"]
    for g in both.groups:
        run = rundir.load_run(g.dir)
        times, observed = run.censored(EVENT)
        assert (g.n, g.reached, g.diverged) == (times.size, int(observed.sum()), int(run.diverged.sum()))
        assert g.censor_at == run.censor_at(EVENT)
        assert g.km.n == g.n and sum(g.outcomes.values()) == g.n + g.diverged
    assert (both.event, both.n_boot, both.seed) == (EVENT, 200, 3)


def test_the_median_ratio_is_the_later_run_over_the_reference(lr_runs, both):
    """B / A, not A / B: swapping the runs inverts the ratio (the halved learning rate of b is slower)."""
    (pair,) = both.versus_first
    a, b = (both.groups[i].km.median for i in (0, 1))
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
    assert compare.label(both, 1) == "b: train.lr=0.05"
    verdict, line = compare.summary(both).splitlines()
    assert verdict == compare.verdict(both, 1) and line.startswith("b: train.lr=0.05 vs a: t_icl60 median ratio ")
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
    one_line_exit_2(["compare", a, a, "--label", "x", "--out", str(out)], out, capsys, "--label", "1 given for 2")
    one_line_exit_2(["compare", a, a, "--label", "x", "--label", "x", "--out", str(out)], out, capsys, "--label", "'x'")


def _copy(src, dst, t=None, seeds=None):
    """A copy of run `src` with every first passage replaced by `t` (e.g. -1: never reached) and/or its
    config's ensemble.seeds (config.json and meta.json alike, as a run of that size would store) set."""
    shutil.copytree(src, dst)
    if t is not None:
        res = rundir.read_results(dst)
        res = {k: (np.full_like(v, t) if k.startswith("t_") else v) for k, v in res.items()}
        rundir.atomic_write(dst / rundir.RESULTS, rundir.npz_bytes(res))
    if seeds is not None:  # the arrays too: a run's results hold its config's seeds (rundir/verify.py)
        res = rundir.read_results(dst)
        S = res["seed_ids"].size
        grown = {
            k: np.concatenate([v] * -(-seeds // S))[:seeds] if v.ndim and v.shape[0] == S else v for k, v in res.items()
        }
        grown["seed_ids"] = np.arange(seeds)
        rundir.atomic_write(dst / rundir.RESULTS, rundir.npz_bytes(grown))
        for name in (rundir.CONFIG, rundir.META):
            rec = json.loads((dst / name).read_text())
            (rec if name == rundir.CONFIG else rec["config"])["ensemble"]["seeds"] = seeds
            (dst / name).write_text(json.dumps(rec))
    return dst


def test_the_first_line_gives_the_verdict_with_both_numbers(lr_runs, tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", str(lr_runs / "a"), str(lr_runs / "b"), "--event", EVENT, "--out", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    rec = json.loads((out / "compare.json").read_text())
    (pair,) = rec["versus_first"]
    a, b = (rundir.load_run(lr_runs / n) for n in tiny.LR_RUNS)
    p = logrank(*a.censored(EVENT), *b.censored(EVENT)).p
    assert first == rec["verdict"][0]
    assert f"log-rank p {p_value(p)} (" in first and first.endswith("; b 4 seeds, a 4")
    ratio = pair["ratio"]["ratio"]
    v = pair["verdict"]
    if ratio is None:  # a median not reached in 400 steps: the fractions instead, and no difference called
        assert v["sooner"] is None and v["reason"] == "no ratio"
        assert "by step 400" in first and "no difference called" in first or first.startswith("Neither")
    elif v["sooner"] is None:
        assert first.startswith("No clear difference between b and a") and f"ratio b/a {ratio:.3g} [" in first
    else:
        assert " sooner than " in first and "agree" in first and f"ratio b/a {ratio:.3g} [" in first
    assert (out / "compare.md").read_text().splitlines()[2] == f"**{first}.**"


def test_labels_name_the_runs_everywhere(lr_runs, tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = ["compare", str(lr_runs / "a"), str(lr_runs / "b"), "--event", EVENT, "--boot", "50", "--out", str(out)]
    assert main([*argv, "--label", "SGD lr 0.1", "--label", "SGD lr 0.05"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "SGD lr 0.05" in first and "SGD lr 0.1" in first and " A " not in first
    rec = json.loads((out / "compare.json").read_text())
    assert [g["name"] for g in rec["groups"]] == ["SGD lr 0.1", "SGD lr 0.05"]
    md = (out / "compare.md").read_text()
    assert "| SGD lr 0.05 / SGD lr 0.1 |" in md and "| field | SGD lr 0.1 | SGD lr 0.05 |" in md


def test_default_names_are_the_folders_with_parents_where_they_clash(tmp_path):
    a, b = tmp_path / "sgd" / "cells" / "K=8", tmp_path / "adam" / "cells" / "K=8"
    assert compare_input.names([tmp_path / "sgd", tmp_path / "adam"]) == ["sgd", "adam"]
    assert compare_input.names([a, b]) == ["sgd/cells/K=8", "adam/cells/K=8"]
    assert compare_input.names([a, a, b]) == ["sgd/cells/K=8", "sgd/cells/K=8 (2)", "adam/cells/K=8"]
    assert compare_input.names([a, b], ["x", "y"]) == ["x", "y"]


def test_a_run_that_never_acquires_is_compared_by_fractions_with_wilson_cis(lr_runs, tmp_path, capsys):
    never = _copy(lr_runs / "a", tmp_path / "never", t=-1)
    out = tmp_path / "cmp"
    assert main(["compare", str(lr_runs / "a"), str(never), "--event", EVENT, "--out", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    a = rundir.load_run(lr_runs / "a")
    k = int(a.censored(EVENT)[1].sum())
    assert k > 0, "the fixture's run a reaches icl60 in some seeds"
    lo, hi = proportion_ci(k, 4)
    zero_hi = proportion_ci(0, 4)[1]
    assert first.startswith(
        f"No median ratio between never and a (a median not reached), so no difference called: a {k}/4 "
        f"({k / 4:.0%} [{lo:.0%}, {hi:.0%}]) by step {a.censor_at(EVENT):,}, never 0/4 (0% [0%, {zero_hi:.0%}]) "
        "by step 400; log-rank p "
    ), first
    assert "n/a" not in first
    rec = json.loads((out / "compare.json").read_text())
    assert rec["groups"][1]["acquired_ci"] == [0.0, pytest.approx(zero_hi)]
    assert rec["versus_first"][0]["verdict"]["sooner"] is None


def test_the_km_figure_draws_a_never_acquired_group_flat_at_1_over_its_whole_budget(lr_runs, tmp_path):
    never = _copy(lr_runs / "a", tmp_path / "never", t=-1)
    c = compare.compare([lr_runs / "a", never], event=EVENT, n_boot=20)
    ax = compare.figure(c).axes[0]
    lines = [ln for ln in ax.lines if "(n=" in ln.get_label()]
    assert len(lines) == 2
    first_eval = int(rundir.load_run(never).eval_steps[0])
    for ln, g in zip(lines, c.groups):
        x = ln.get_xdata()
        assert (x[0], x[-1]) == (first_eval, g.censor_at), "every group spans its whole observation"
    np.testing.assert_array_equal(lines[1].get_ydata(), 1.0)
    np.testing.assert_array_equal(lines[1].get_xdata(), [first_eval, 400])


def test_the_seed_count_is_a_size_not_a_difference(lr_runs, tmp_path, capsys):
    bigger = _copy(lr_runs / "a", tmp_path / "bigger", seeds=8)
    c = compare.compare([lr_runs / "a", bigger], event=EVENT, n_boot=20)
    assert "ensemble.seeds" not in c.differences and c.differences == {}
    assert "same config" in compare.summary(c)


@pytest.mark.parametrize(
    "option, words",
    [
        (["--boot", "1000000000"], ["--boot", "[1, 100,000]"]),
        (["--seed", "-1"], ["--seed", "[0, 4,294,967,295]"]),
        (["--seed", str(2**32)], ["--seed", "[0, 4,294,967,295]"]),
    ],
)
def test_compare_bounds_boot_and_seed_before_any_work(lr_runs, tmp_path, capsys, option, words):
    out = tmp_path / "out"
    a = str(lr_runs / "a")
    one_line_exit_2(["compare", a, a, *option, "--out", str(out)], out, capsys, *words)
