"""`icl-race analyze STUDY SUBCOMMAND` for the race, memorization and levers studies (issue 28 item 1): on
tiny runs, each subcommand gives what the experiment script it replaces gave on the same directories.

The runs are stored (tests/golden/inputs/studies/, trained once by `train` below): a trained tiny run is
reproducible on one machine only, and stored inputs make every number here the same on any machine.
The race and memorization scripts were thin: their numbers are the analysis summaries themselves, which
the tests call directly. The levers script's own computations moved into icl_race/analysis/levers.py;
tests/golden/studies/levers_legacy.json is what the script's functions (experiments/levers/analyze.py at
commit 10e4dca) returned on the stored runs. Stored results whose inputs are in git (the ceiling's
options, kstar's counts) are recomputed exactly.

To store the runs again (a change to results.npz's layout): `python -c "import sys; sys.path.insert(0,
'tests'); from studies import test_studies as t; t.train(t.INPUTS)"` on an empty INPUTS, then delete the PNGs."""

import json
from pathlib import Path

import numpy as np
import pytest
import stored
from refusal import refused

from icl_race import config
from icl_race.analysis import memorization_summary as mem_summary
from icl_race.analysis import race, race_summary
from icl_race.analysis.draws import Draws
from icl_race.analysis.record import finite, record_json
from icl_race.config import ConfigError
from icl_race.run import runner
from icl_race.rundir import load_runs
from icl_race.studies import command, registry

ROOT = Path(__file__).parents[2]
LEVERS = ROOT / "experiments" / "levers" / "results"
GOLDEN = Path(__file__).parents[1] / "golden" / "studies" / "levers_legacy.json"
INPUTS = Path(__file__).parents[1] / "golden" / "inputs" / "studies"

_TRAIN = {
    "lr": 0.1,
    "batch_size": 64,
    "steps": 400,
    "eval_every": 50,
    "eval_size": 100,
    "stop_when_all_acquired": False,
    "early_stop": "off",
}
_ENS = {"seeds": 4, "block": 4}
RUNS = {  # name -> raw config: classification cells (two weight decays, Adam, another K, K = infinity),
    # MLP-only memorization cells at two K, minimal-model cells at two beta0
    "wd01": {"task": {"K": 1000, "N": 8}, "model": {"width": 32}, "train": _TRAIN | {"weight_decay_attn": 0.01}},
    "wd03": {"task": {"K": 1000, "N": 8}, "model": {"width": 32}, "train": _TRAIN | {"weight_decay_attn": 0.03}},
    "adam": {
        "task": {"K": 1000, "N": 8},
        "model": {"width": 32},
        "train": _TRAIN | {"optimizer": "adam", "lr": 0.003, "weight_decay_attn": 0.01},
    },
    "k200": {"task": {"K": 200, "N": 8}, "model": {"width": 32}, "train": _TRAIN},
    "kinf": {"task": {"variant": "infinite", "N": 8}, "model": {"width": 32}, "train": _TRAIN},
    "mlp64": {
        "task": {"kind": "memorization", "D": 63, "K": 64},
        "model": {"kind": "mlp", "width": 32},
        "train": _TRAIN,
    },
    "mlp128": {
        "task": {"kind": "memorization", "D": 63, "K": 128},
        "model": {"kind": "mlp", "width": 32},
        "train": _TRAIN,
    },
    "min0": {
        "task": {"variant": "infinite", "N": 8},
        "model": {"kind": "minimal", "width": 16, "beta0": 0.0},
        "train": _TRAIN | {"icl_threshold": 0.9},
    },
    "min1": {
        "task": {"variant": "infinite", "N": 8},
        "model": {"kind": "minimal", "width": 16, "beta0": 1.0},
        "train": _TRAIN | {"icl_threshold": 0.9},
    },
}


def train(root: Path) -> dict:
    out = {}
    for name, raw in RUNS.items():
        raw = {k: dict(v) for k, v in raw.items()} | {"ensemble": dict(_ENS)}
        if raw["task"].get("kind") == "memorization":
            raw["train"] = {k: v for k, v in raw["train"].items() if k != "eval_size"}
        runner.execute(config.from_dict(raw), root / name, progress=False)
        out[name] = str(root / name)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The stored runs, copied (a command may write beside its inputs)."""
    import shutil

    root = tmp_path_factory.mktemp("studies")
    return {name: shutil.copytree(INPUTS / name, root / name).as_posix() for name in RUNS}


def _same(a, b):
    """JSON equality (NaN equal to NaN), as the results are written; both sides computed in this process,
    so bit equality holds."""
    return json.dumps(a, sort_keys=True, default=float) == json.dumps(b, sort_keys=True, default=float)


def analyze(study, sub, dirs, tmp_path, **options):
    result, written = command.run(study, sub, dirs, tmp_path / f"{study}_{sub}.json", None, None, options)
    doc = json.loads(written[0].read_text())  # written by this process: bit equality holds
    assert doc["result"] == json.loads(json.dumps(finite(record_json(result))))  # what the command wrote
    return result, written


# ---- race: experiments/race/analyze.py called these summaries --------------------------------------


def test_race_transience_is_the_summary_with_its_figure(runs, tmp_path):
    result, written = analyze("race", "transience", [runs["wd01"], runs["wd03"]], tmp_path)
    cells = load_runs(runs["wd01"], runs["wd03"])
    assert _same(record_json(result), race_summary.summarize_transience(cells, Draws(0, 1000), 0.9).to_json())
    assert [p.suffix for p in written] == [".json", ".png"]
    assert "wd 0.01: acquired" in command.as_text("race", "transience", result)


def test_race_loss_is_the_loss_relation_per_cell(runs, tmp_path):
    result, written = analyze("race", "loss", [runs["wd01"], runs["wd03"]], tmp_path, min_x=0.5)
    for run, cell in zip(load_runs(runs["wd01"], runs["wd03"]), record_json(result)["cells"]):
        for m in (-np.inf, 0.5):
            old = race.loss_relation(
                run.curve("icl_loss"),
                run.curve("iwl_loss"),
                run.eval_steps,
                run.t("icl"),
                Draws(0, 1000).bootstrap(),
                m,
            )
            assert _same(cell[f"x > {m:g}"], old.to_json())
        assert cell["weight_decay_attn"] == run.cfg.train.weight_decay_attn
    # wd 0.03 acquires no ICL in 400 steps: no point after t_ICL, no figure
    assert [p.name for p in written[1:]] == ["race_loss_wd0.01.png"]


def test_race_independence_takes_its_directories_in_order(runs, tmp_path):
    result, _ = analyze("race", "independence", [runs["wd01"], runs["kinf"], runs["mlp64"], runs["mlp128"]], tmp_path)
    old = race_summary.summarize_independence(
        load_runs(runs["wd01"]),
        load_runs(runs["kinf"]),
        load_runs(runs["mlp64"], runs["mlp128"]),
        Draws(0, 1000),
        level=0.9,
    )
    assert _same(record_json(result), old.to_json())
    assert "memorization | none" in command.as_text("race", "independence", result)


# ---- memorization: experiments/memorization/analyze.py printed these summaries ---------------------


def test_memorization_mlp_minimal_and_race(runs, tmp_path):
    sweep = [runs["mlp64"], runs["mlp128"]]
    draws = Draws(0, 1000)  # the command's default --seed and the study's --boot
    result, _ = command.run("memorization", "mlp", [sweep[0]], tmp_path / "m.json", None, 0, {"T": [200.0, 400.0]})
    want = mem_summary.summarize_memorization(load_runs(sweep[0]), draws, [200.0, 400.0])
    assert _same(record_json(result), want.to_json()) and [b.T for b in result.cells[0].budgets] == [200.0, 400.0]
    result, _ = analyze("memorization", "minimal", [runs["min0"], runs["min1"]], tmp_path)
    want = mem_summary.summarize_minimal(load_runs(runs["min0"], runs["min1"]), draws)
    assert _same(record_json(result), want.to_json()) and "ln_t_vs_beta0" not in record_json(result)["cells"][0]
    assert "N 8, beta0 0:" in command.as_text("memorization", "minimal", result)
    report = tmp_path / "report.json"
    # A directory with K = infinity cells beside the K* grid labels the group by its fields; balanced
    # contexts are another group, never the race's K*.
    groups = [
        {
            "label": "infinite_bank=0, variant=standard",
            "variant": "standard",
            "kstar_slope": {"slope": 1.0},
            "acquisition": {"8": {"kstar": 900.0, "kstar_ci": [800.0, 1000.0]}},
        },
        {
            "label": "variant=balanced",
            "variant": "balanced",
            "kstar_slope": {"slope": 1.0},
            "acquisition": {"8": {"kstar": 2000.0, "kstar_ci": [1800.0, 2200.0]}},
        },
    ]
    report.write_text(json.dumps({"thresholds": groups}))
    for mlp_dir in sweep:  # one sweep directory in the old script: here each MLP-only cell in turn
        result, _ = analyze("memorization", "race", [mlp_dir, runs["kinf"]], tmp_path, T=400, kstar=str(report))
        want = mem_summary.summarize_race(load_runs(mlp_dir), load_runs(runs["kinf"]), 400.0, draws)
        assert _same(record_json(result)["predicted"], want.to_json())
        assert list(want.to_json())[:3] == ["T", "K", "N"] and want.per_N[0].t_icl_K == "inf"
        assert record_json(result)["measured"]["per_N"] == [{"N": 8, "k_star": 900.0, "k_star_ci": [800.0, 1000.0]}]
    two = tmp_path / "two.json"
    two.write_text(json.dumps({"thresholds": [groups[0], groups[0] | {"label": "lr=0.05"}]}))
    with pytest.raises(ConfigError, match=r"found 2 \(infinite_bank=0, variant=standard; lr=0.05\)"):
        analyze("memorization", "race", [sweep[0], runs["kinf"]], tmp_path, T=400, kstar=str(two))
    # t_ICL runs may come from several directories (a sweep's cell beside another sweep), one run per N
    with pytest.raises(ConfigError, match=r"repeat an N \(\[8, 8\]\)"):
        analyze("memorization", "race", [sweep[0], runs["kinf"], runs["k200"]], tmp_path, T=400)


# ---- levers: the computations moved from experiments/levers/analyze.py -----------------------------


def _levers(runs, tmp_path) -> dict:
    """What `icl-race analyze levers ...` gives on the tiny runs, JSON as written."""
    call = {
        "beta0": ("beta0", [runs["adam"], runs["wd01"]], {}),  # the old script's sweep read its cells by name
        "pair": ("pair", [runs["wd01"], runs["adam"]], {}),
        "race": (
            "race",
            [runs["kinf"]],
            {"field": "task.epsilon", "values": [0.0], "mlp": [f"{runs['mlp64']}"], "N": 8, "T": 400, "t_fixed": 300},
        ),
        "transience": ("transience", [runs["wd01"], runs["wd03"], runs["adam"]], {"level": 0.9, "lasting": 2}),
        "kstar": ("kstar", [runs["k200"], runs["wd01"], runs["kinf"]], {"field": "task.epsilon", "N": 8}),
    }
    return {
        name: json.loads(json.dumps(record_json(analyze("levers", sub, dirs, tmp_path, **opts)[0]), default=float))
        for name, (sub, dirs, opts) in call.items()
    }


def _relative(out: dict, runs: dict) -> dict:
    """Run directories as their names, so that the captured output does not hold a temporary path."""
    text = json.dumps(out)
    for name, d in runs.items():
        text = text.replace(d, name)
    return json.loads(text)


def test_levers_subcommands_give_what_the_script_gave(runs, tmp_path):
    new = _relative(_levers(runs, tmp_path), runs)
    stored.assert_matches(new, stored.load(GOLDEN), rel=stored.FITTED)  # beta0's and K*'s fits are optimizers'
    # beta0/pooled/slope_ci differs from the script since 2026-12-07: a resample of one seed repeated has no slope
    # and is dropped (it was a rank-deficient polyfit; with one beta0 of 0 it raised LinAlgError).


def test_levers_ceiling_reproduces_its_stored_result(tmp_path):
    want = stored.load(LEVERS / "ceiling.json")
    result, _ = command.run(
        "levers", "ceiling", [], tmp_path / "c.json", None, 0, {"epsilon": [r["epsilon"] for r in want["rows"]]}
    )
    # Fractions of counts over sampled sequences: a different count is a real change.
    stored.assert_matches(json.loads(json.dumps(record_json(result))), want, rel=stored.SAME_ARITHMETIC)


@pytest.mark.parametrize("name", ["kstar_epsilon", "kstar_zipf"])
def test_levers_kstar_reproduces_its_stored_results_from_their_counts(name, tmp_path):
    want = stored.load(LEVERS / f"{name}.json")
    result, written = command.run(
        "levers",
        "kstar",
        [],
        tmp_path / "k.json",
        2000,
        0,
        {"field": want["field"], "N": want["N"], "counts": str(LEVERS / f"{name}.json")},
    )
    # The logistic's MLE and its CI come from an optimizer; log10 K itself differs by an ulp between CPUs.
    stored.assert_matches(json.loads(json.dumps(record_json(result))), want, rel=stored.FITTED)
    again, _ = command.run(
        "levers",
        "kstar",
        [],
        tmp_path / "k2.json",
        2000,
        0,  # its own JSON taken back
        {"field": want["field"], "N": want["N"], "counts": str(written[0])},
    )
    assert again == result  # same process: bit equality holds


def test_options_are_checked(tmp_path):
    from icl_race.config import ConfigError

    with pytest.raises(ConfigError, match="no option bogus"):
        command.run("levers", "ceiling", [], None, None, 0, {"bogus": 1})
    # (with --out: without one and without input directories, analyze has no folder to write beside)
    with pytest.raises(ConfigError, match="needs --set field"):
        command.run("levers", "kstar", [], tmp_path / "kstar.json", None, 0, {})
    assert command.parse_option("values=0,1.5") == ("values", [0, 1.5])
    assert command.parse_option("field=task.epsilon") == ("field", "task.epsilon")
    assert command.parse_option("t-fixed=1200") == ("t_fixed", 1200)


def test_directories_are_checked_before_any_work(tmp_path):
    """A subcommand takes one or more directories unless its module's DIRECTORIES says "none" (it
    computes everything itself) or "any": one line, not an empty summary or a failure deep inside."""
    from icl_race.config import ConfigError

    with pytest.raises(ConfigError, match="analyze race transience: give one or more"):
        command.run("race", "transience", [], tmp_path / "t.json", None, 0, {})
    with pytest.raises(ConfigError, match="analyze levers beta0: give one or more"):
        command.run("levers", "beta0", [], tmp_path / "b.json", None, 0, {})
    with pytest.raises(ConfigError, match="analyze levers ceiling: takes no directories"):
        command.run("levers", "ceiling", [str(tmp_path)], tmp_path / "c.json", None, 0, {})
    assert not list(tmp_path.iterdir())
    for study in registry.STUDIES:  # every declaration is one of the three
        module = __import__(f"icl_race.studies.{study}", fromlist=["COMMANDS"])
        assert set(getattr(module, "DIRECTORIES", {}).values()) <= set(registry.DIRECTORIES)
        assert set(getattr(module, "DIRECTORIES", {})) <= set(module.COMMANDS)


def test_levers_collapse_reads_the_model_s_own_activations(runs, tmp_path):
    """One seed retrained and read at the asked steps through Transformer.activations (no second forward
    pass): one row per step, the recorded ICL accuracy of that evaluation, fractions in [0, 1]. Checked by
    hand against the old script's hand-written forward pass on these runs: equal to float32 rounding."""
    result, _ = analyze("levers", "collapse", [runs["kinf"]], tmp_path, seed_id=1, at=[100, 200])
    assert [r.step for r in result.rows] == [100, 200] and result.seed == 1
    # analysis/ returns records only: the study renders them, one line per inspected step
    assert not hasattr(result, "text")
    assert [line.split(":")[0] for line in command.as_text("levers", "collapse", result).splitlines()] == [
        "step 100",
        "step 200",
    ]
    for r in result.rows:
        assert 0 <= r.relu_active_fc1 <= 1 and 0 <= r.relu_active_fc2 <= 1 and r.score_spread > 0
        assert 0 <= r.icl_acc <= 1 and np.isfinite(r.train_loss)
    from icl_race.config import ConfigError

    with pytest.raises(ConfigError, match="not a seed"):
        command.run("levers", "collapse", [runs["kinf"]], tmp_path / "x.json", None, None, {"seed_id": 99})


def test_a_studys_bootstraps_are_rooted_at_its_seed(tmp_path):
    """--seed roots every bootstrap of a study (analysis.draws): the same seed, the same numbers; another
    seed, other resamples (race's transience and loss relation once ignored it and always drew from 0)."""
    dirs = [str(INPUTS / "wd01"), str(INPUTS / "wd03")]
    for sub in ("transience", "loss"):
        a, b, c = (
            command.run("race", sub, dirs, tmp_path / f"{sub}{i}.json", 200, s)[0] for i, s in enumerate((0, 0, 1))
        )
        text = [json.dumps(record_json(r), sort_keys=True) for r in (a, b, c)]
        assert text[0] == text[1] != text[2]


# ---- bad input: one line naming it, exit 2, before any work (issue 43 items 5 and 6) ------------------

REGRESSION = Path(__file__).parents[1] / "golden" / "inputs" / "regression_run"


@pytest.fixture(scope="module")
def unacquired(runs, tmp_path_factory):
    """wd01 as if no seed had acquired ICL (its t_icl all -1: a valid results file)."""
    import shutil

    from icl_race import rundir

    d = shutil.copytree(runs["wd01"], tmp_path_factory.mktemp("unacquired") / "wd01")
    res = rundir.read_results(d)
    (d / "results.npz").write_bytes(rundir.npz_bytes({**res, "t_icl": np.full_like(res["t_icl"], -1)}))
    return str(d)


BAD = [  # (case id, study, subcommand, run names ("unacquired", "regression" or a stored run), options, text)
    ("no seed acquired", "levers", "beta0", ["unacquired"], [], "0 of 4 seeds reached t_icl"),
    ("memorization mlp on a classification run", "memorization", "mlp", ["wd01"], [], "reads runs of memorization"),
    ("minimal on a classification run", "memorization", "minimal", ["wd01"], [], "classification/minimal"),
    ("beta0 on a regression run", "levers", "beta0", ["regression"], [], "task.kind = linear_regression"),
    ("collapse on a regression run", "levers", "collapse", ["regression"], [], "task.kind = linear_regression"),
    ("race transience on a memorization run", "race", "transience", ["mlp64"], [], "task.kind = memorization"),
    ("scale lr on a regression run", "scale", "lr", ["regression"], [], "task.kind = linear_regression"),
    ("level=abc", "levers", "transience", ["wd01"], ["level=abc"], "--set level='abc': must be a finite number"),
    ("race level=abc", "race", "transience", ["wd01"], ["level=abc"], "--set level='abc'"),
    ("level=1e999", "levers", "transience", ["wd01"], ["level=1e999"], "--set level=inf: must be a finite number"),
    ("level=0", "race", "settle", ["wd01"], ["level=0"], "--set level=0: must be a finite number in (0, 1]"),
    ("lasting=-5", "levers", "transience", ["wd01"], ["lasting=-5"], "--set lasting=-5: must be an integer"),
    ("lasting=1.5", "levers", "transience", ["wd01"], ["lasting=1.5"], "--set lasting=1.5: must be an integer"),
    ("T=0", "memorization", "mlp", ["mlp64"], ["T=0"], "--set T=0: must be a finite number > 0"),
    ("T before the first evaluation", "memorization", "mlp", ["mlp64"], ["T=5"], "--set T=5: must be >= 50"),
    ("T=abc", "memorization", "race", ["mlp64", "kinf"], ["T=abc"], "--set T='abc'"),
    ("values=a,b", "levers", "race", ["kinf"], ["field=task.epsilon", "values=a,b", "mlp=x,y"], "--set values="),
    ("seed_id=-1", "levers", "collapse", ["kinf"], ["seed_id=-1"], "--set seed_id=-1"),
    ("N=1 for the ceiling", "levers", "ceiling", [], ["N=1"], "--set N=1: must be >= 2"),
    ("a huge ceiling", "levers", "ceiling", [], ["sequences=1e9"], "lower --set sequences"),
    ("scales=0", "linear_attention", "single_head", [], ["scales=0"], "--set scales=0"),
    ("--boot 1000000000", "levers", "transience", ["wd01"], ["--boot", "1000000000"], "argument --boot: must be"),
    ("--boot 0", "race", "loss", ["wd01"], ["--boot", "0"], "argument --boot"),
    ("--seed -1", "race", "loss", ["wd01"], ["--seed", "-1"], "argument --seed: must be an integer in [0,"),
    ("--seed where nothing is resampled", "race", "settle", ["wd01"], ["--seed", "3"], "takes no --boot or --seed"),
    ("--boot where nothing is resampled", "levers", "pair", ["wd01", "wd03"], ["--boot", "50"], "resamples nothing"),
]


@pytest.mark.parametrize("study, sub, names, options, text", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_input_is_one_line_and_exit_2_before_any_work(
    runs, unacquired, study, sub, names, options, text, tmp_path, capsys
):
    from icl_race.cli import main

    given = {**runs, "unacquired": unacquired, "regression": str(REGRESSION)}
    args = [a for o in options for a in (["--set", o] if not o.startswith("--") and "=" in o else [o])]
    out = tmp_path / "out" / "result.json"
    capsys.readouterr()
    try:
        code = main(["analyze", study, sub, *[given[n] for n in names], *args, "--out", str(out)])
    except SystemExit as e:  # argparse's refusal of an option's type
        code = e.code
    assert code == 2
    err = refused(capsys.readouterr().err)  # after the line saying what it loads
    assert len(err) == 1 and text in err[0], err
    assert not (tmp_path / "out").exists()


def test_every_option_of_every_subcommand_is_checked():
    """Each study module's OPTIONS says what every --set option of its subcommands may be (command.run
    checks them before the subcommand runs): an option added without its entry fails here."""
    import importlib

    for study in registry.STUDIES:
        module = importlib.import_module(f"icl_race.studies.{study}")
        for sub, fn in module.COMMANDS.items():
            missing = {name for name, _ in registry.options_of(fn)} - set(getattr(module, "OPTIONS", {}))
            assert not missing, (study, sub, missing)


def test_levers_beta0_refuses_models_whose_config_sets_beta0(runs, tmp_path):
    """The minimal model's beta0 is its config, one value for every seed (it was a LinAlgError)."""
    with pytest.raises(ConfigError, match=r"levers beta0: .*min0 is a minimal model.*memorization minimal"):
        command.run("levers", "beta0", [runs["min0"], runs["min1"]], tmp_path / "b.json", None, 0, {})
    assert not (tmp_path / "b.json").exists()


def test_log_t_vs_beta0_has_no_slope_without_spread_in_beta0():
    """One beta0 for every seed: slope NaN, no error; three seeds: the resamples of one seed repeated
    (1 in 9) have no slope and are dropped, so the interval stays finite."""
    from icl_race.analysis.draws import Bootstrap, generator
    from icl_race.analysis.memorization import log_t_vs_beta0

    flat = log_t_vs_beta0([100.0, 200.0, 300.0], [0.0, 0.0, 0.0], Bootstrap(200, generator(0)))
    assert np.isnan(flat.slope) and flat.slope_ci == [None, None] and flat.n == 3
    # as a study's JSON writes it: null, not the token NaN that strict JSON readers refuse
    assert json.loads(json.dumps(finite(record_json(flat)), allow_nan=False))["slope"] is None
    three = log_t_vs_beta0(np.exp([3.0, 2.0, 1.0]), [0.0, 1.0, 2.0], Bootstrap(200, generator(0)))
    assert three.slope == pytest.approx(-1.0) and all(np.isfinite(three.slope_ci))
