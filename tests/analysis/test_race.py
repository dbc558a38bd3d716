"""The race analyses (icl_race.analysis.race) on inputs with known answers."""

import json
from pathlib import Path

import numpy as np
import pytest

from icl_race import rundir
from icl_race.analysis import race, race_summary
from icl_race.analysis.compare import ratio_of_boots
from icl_race.analysis.draws import Bootstrap, Draws, generator
from icl_race.studies import race as race_study

STEPS = np.arange(1, 11) * 100


def boot(n: int) -> Bootstrap:
    return Bootstrap(n, generator(0))


def test_first_passage_above_below_and_after():
    v = np.array(
        [
            [0.1, 0.5, 0.97, 0.99, 0.8, 0.6, 0.95, 0.5, 0.5, 0.5],
            [0.1] * 10,
            [0.96, 0.99, 0.99, 0.99, 0.99, 0.99, 0.99, 0.99, 0.99, 0.95],
        ]
    )
    np.testing.assert_array_equal(race.first_passage(v, STEPS, 0.95), [300, -1, 100])
    t_icl = race.first_passage(v, STEPS, 0.95)
    # The fall is strictly after acquisition; a seed that never acquired cannot fall; 0.95 < 0.9 is false.
    np.testing.assert_array_equal(race.fall_times(v, STEPS, t_icl, level=0.9), [500, -1, -1])
    np.testing.assert_array_equal(race.fall_times(v, STEPS, t_icl, level=0.96), [500, -1, 1000])


def _synthetic_losses(slope, intercept, S=24, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.2, 3.0, (S, STEPS.size))
    t_icl = rng.choice([200, 400, 600, -1], size=S)
    icl = intercept + slope * x + noise * rng.standard_normal(x.shape)
    before = (t_icl[:, None] < 0) | (STEPS[None, :] < t_icl[:, None])
    icl = np.where(before, 5.0, icl)  # far off the line: must not enter the fit
    return icl, np.exp(-2 * x), t_icl


def test_loss_relation_is_exact_on_the_theory_line():
    icl, iwl, t_icl = _synthetic_losses(1.0, 0.0)
    out = race.loss_relation(icl, iwl, STEPS, t_icl, boot(200))
    assert out.slope == pytest.approx(1.0) and out.prop == pytest.approx(1.0)
    assert out.intercept == pytest.approx(0.0, abs=1e-9)
    assert out.seeds_used == np.sum(t_icl >= 0)
    assert out.points == sum(np.sum(STEPS >= t) for t in t_icl if t >= 0)
    high = race.loss_relation(icl, iwl, STEPS, t_icl, boot(0), min_x=1.0)
    assert high.points == np.sum(np.asarray(high.x) > 1.0) < out.points
    assert min(high.x) > 1.0 and high.slope == pytest.approx(1.0)
    # no replicates: no CIs written; no point after t_ICL: no fit
    assert "slope_ci" not in high.to_json() and "x" not in out.to_json() and out.slope_ci is not None
    none = race.loss_relation(icl, iwl, STEPS, np.full_like(t_icl, -1), boot(50)).to_json()
    assert none == {"seeds_used": 0, "points": 0, "confidence": 0.95, "slope": None, "intercept": None, "prop": None}


def test_loss_relation_recovers_a_known_slope_with_a_covering_ci():
    icl, iwl, t_icl = _synthetic_losses(0.6, 0.1, noise=0.05)
    out = race.loss_relation(icl, iwl, STEPS, t_icl, boot(500))
    assert out.slope == pytest.approx(0.6, abs=0.03)
    assert out.slope_ci[0] < 0.6 < out.slope_ci[1]
    assert out.intercept_ci[0] < 0.1 < out.intercept_ci[1]
    assert out.slope_ci[1] - out.slope_ci[0] < 0.1


def test_km_median_ratio_of_paired_scaled_samples_is_exact():
    b_times = np.array([50, 100, 150, 200, 250, 300, 350, 400, 450, 500, 550, 600])
    draws = Draws(0, 300)  # a fresh generator of one root per sample
    a = race.km_summary(2 * b_times, censor_at=5000, boot=draws.bootstrap())
    b = race.km_summary(b_times, censor_at=5000, boot=draws.bootstrap())
    assert a.median == 600 and b.median == 300  # smallest time with S <= 1/2
    r = ratio_of_boots(b.median, a.median, b.boot, a.boot)  # the one median ratio (analysis.compare)
    # Same seed positions resampled on both sides: every replicate's ratio is exactly 2.
    assert r.ratio == 2 and r.ci == (2.0, 2.0)
    censored = race.km_summary(np.array([100, -1, -1, -1]), censor_at=1000, boot=boot(50))
    assert censored.median is None and censored.observed == 1
    assert list(censored.to_json()) == ["n", "observed", "median", "median_ci"]  # the replicates are not written


def _write_cell(d, cfg, arrays):
    d.mkdir(parents=True)
    (d / "meta.json").write_text(json.dumps({"config": cfg}))
    np.savez(d / "results.npz", **arrays)


def _run(cfg, steps, t_icl, **curves):
    """A finished run in memory (as rundir.load_run reads one): every seed kept, evaluated to the end."""
    S = t_icl.size
    return rundir.Run(
        dir=Path("mem"),
        config=rundir.with_defaults(cfg),
        seed_ids=np.arange(S),
        times={"icl": t_icl},
        headline="icl",
        diverged=np.zeros(S, bool),
        retired_at=np.full(S, -1),
        eval_steps=steps,
        curves=curves,
        budget=int(steps[-1]),
        steps_run=int(steps[-1]),
        meta={},
    )


def test_summarize_transience_on_constructed_cells(tmp_path):
    """Two weight decays; every seed acquires at 200; falls at 800 (wd 0.01) or 400 (wd 0.02); c3
    equals the step / 1000, so c3 at the fall is known."""
    for wd, fall in ((0.01, 800), (0.02, 400)):
        acc = np.where(STEPS >= 200, 0.99, 0.5) * np.ones((4, 1))
        acc[:, STEPS >= fall] = 0.6
        acc[3] = np.where(STEPS >= 200, 0.99, 0.5)  # never falls: censored at 1000
        loss = np.full_like(acc, 0.3)
        _write_cell(
            tmp_path / "cells" / str(wd),
            {"train": {"weight_decay_attn": wd}},
            {
                "eval_steps": STEPS,
                "t_icl": np.full(4, 200),
                "icl_acc": acc,
                "iwl_acc": acc,
                "icl_loss": loss,
                "iwl_loss": loss,
                "c3": np.tile(STEPS / 1000, (4, 1)),
            },
        )
    result = race_summary.summarize_transience(rundir.load_runs(tmp_path), Draws(0, 100))
    out = result.to_json()
    lo, hi = out["cells"]
    assert (lo["weight_decay_attn"], lo["fell"], lo["acquired"]) == (0.01, 3, 4)
    assert lo["rise"]["median"] == 200 and lo["fall"]["median"] == 800 and hi["fall"]["median"] == 400
    assert lo["at_fall"]["c3"] == [0.8] * 3 and hi["at_fall_median"]["c3"] == pytest.approx(0.4)
    assert lo["at_fall_median"]["iwl_loss"] == pytest.approx(0.3)
    trends = out["vs_wd_loglog"]
    assert trends["fall"]["slope"] == pytest.approx(-1.0)  # fall time halves as wd doubles
    assert trends["c3"]["slope"] == pytest.approx(-1.0)  # c3 at the fall halves too
    assert trends["iwl_loss"]["slope"] == pytest.approx(0.0, abs=1e-12)
    # the JSON: a cell's counts in its place, the slope's fit with its verdict beside it, no replicates
    assert list(lo)[:5] == ["weight_decay_attn", "seeds", "acquired", "fell", "budget"] and "at_fall_boot" not in lo
    assert trends["fall"]["ok"] and trends["fall"]["verdict"] == "agrees" and "verdict_slope_1" not in trends["fall"]
    # its text: the medians and the slope as computed, each with its CI
    text = race_study.transience_text(result)
    assert text.startswith("wd 0.01: acquired 4/4, rise 200 [200, 200], fell 3/4, fall 800 [")
    assert "\nlog10 fall median vs log10 wd: slope -1.00 [" in text and text.count("\n") == 4


def test_after_memorization_counts_the_seeds_a_settle_rule_would_stop_and_those_that_acquired_later():
    steps = np.array([10, 20, 30, 40, 50])
    iwl = np.array(
        [
            [0.5, 0.95, 0.97, 0.9, 0.99],  # memorizes at 20, never acquires
            [0.5, 0.92, 0.95, 0.95, 0.95],  # memorizes at 20, acquires at 40: a loss of the bet
            [0.5, 0.6, 0.95, 0.96, 0.97],  # acquires at 10, memorizes at 30: not first
            [0.5, 0.6, 0.7, 0.8, 0.85],
        ]
    )  # never memorizes
    icl = np.array(
        [
            [0.5, 0.6, 0.7, 0.65, 0.6],
            [0.5, 0.6, 0.8, 0.96, 0.97],
            [0.96, 0.97, 0.97, 0.97, 0.97],
            [0.5, 0.5, 0.5, 0.5, 0.5],
        ]
    )
    t_icl = np.array([-1, 40, 10, -1])
    out = race.after_memorization(t_icl, iwl, icl, steps, level=0.9)
    assert out.to_json() == {
        "K": None,
        "seeds": 4,
        "memorized_first": 2,
        "acquired_after": 1,
        "t_mem_range": [20, 20],
        "max_icl_after": 0.97,
        "acquired": 2,
    }
    runs = [
        _run({"task": {"K": 800}}, steps, t_icl, iwl_acc=iwl, icl_acc=icl),
        _run({"task": {"K": 400}}, steps, t_icl[:1], iwl_acc=iwl[:1], icl_acc=icl[:1]),
    ]
    pooled = race_summary.summarize_settling(runs, level=0.9)
    assert [c.K for c in pooled.cells] == [400, 800]
    assert (pooled.memorized_first, pooled.acquired_after) == (3, 1)
    lo, hi = pooled.fraction_ci
    assert 0 < lo < 1 / 3 < hi < 1  # Wilson 95% around 1/3
    assert "pooled: 1/3 memorized-first seeds acquired ICL later" in race_study.settle_text(pooled)
