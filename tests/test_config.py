"""Bad config values, one table: each is a ConfigError of one line that names the field (and, where the
case says so, what is allowed), raised by `config.from_dict` before anything is built. The CLI's side of
the same errors (exit code 2, nothing written or compiled) is tests/test_errors.py."""

import pytest
import tiny

from icl_race import config
from icl_race.config import ConfigError

REG = tiny.regression()
MEM = {"task": {"kind": "memorization"}}


def _with(raw: dict, **fields) -> dict:
    """raw with fields given as section__key=value."""
    out = {sec: dict(v) for sec, v in raw.items()}
    for name, value in fields.items():
        sec, key = name.split("__")
        out.setdefault(sec, {})[key] = value
    return out


# (raw config, regex the message must match: the field, and for some what is allowed)
CASES = [
    # the classification race and its transformer
    (_with({}, model__freeze="attn"), r"^model\.freeze = 'attn': must be one of .*none.*attention.*mlp"),
    (
        _with({}, task__kind="regression"),
        r"^task\.kind = 'regression': must be one of 'classification', "
        r"'linear_regression', 'memorization'",
    ),
    (
        _with({}, model__kind="attn_s"),
        r"^model\.kind = 'attn_s': must be one of 'transformer', 'minimal' "
        r"with task\.kind = 'classification'",
    ),
    # the minimal model
    (_with({}, model__kind="minimal", model__beta0=float("nan")), r"model\.beta0"),
    (_with({}, model__kind="minimal", model__layers=2), r"model\.layers"),
    # memorization
    (_with(MEM, task__K=63), r"task\.K"),
    (_with(MEM, model__kind="transformer"), r"model\.kind"),
    (_with(MEM, model__kind="mlp", model__heads=2), r"model\.heads"),
    (_with(MEM, task__probe_size=0), r"task\.probe_size"),
    (_with(MEM, task__input_scale=0.0), r"task\.input_scale"),
    (_with(MEM, task__zipf_alpha=-0.5), r"^task\.zipf_alpha = -0\.5: must be a finite number >= 0$"),
    (_with(MEM, task__epsilon=-1.0), r"^task\.epsilon = -1\.0: must be a finite number >= 0$"),
    (_with(MEM, model__float64="yes"), r"model\.float64"),
    # linear regression
    (_with(REG, task__spectrum="zipf"), r"task\.spectrum"),
    (_with(REG, model__rank=5), r"model\.rank"),
    (_with(REG, model__kind="transformer"), r"model\.kind"),
    (_with(REG, task__K=100), r"task\.K"),
    (_with(REG, task__alpha=float("nan")), r"task\.alpha"),
    (_with(REG, model__temperature=0.0), r"model\.temperature"),
    (_with(REG, model__temperature=float("inf")), r"model\.temperature"),
    (
        _with(REG, task__P=100, task__test_size=3),
        r"task\.test_size = 3: must be 0 or > D \+ 1",
    ),  # whitening needs > D + 1
    (_with(REG, task__icl_fraction=1.5), r"task\.icl_fraction = 1\.5: must be in \[0, 1\]"),
    (_with(REG, model__in_weight=True), r"model\.in_weight = True: must be false unless"),
    (
        _with(REG, model__init_scheme="aligned"),
        r"^model\.init_scheme = 'aligned': must be \"balanced\" or "
        r"\"entrywise\" with model\.kind = \"attn_s\"",
    ),
    (_with(REG, train__optimizer="adam"), r"^train\.optimizer = 'adam': must be \"sgd\" with task\.kind"),
    # the shared [train] section
    *[(_with({}, train__icl_levels=v), r"train\.icl_levels") for v in ([0.9, 0.6], [0.6, 0.6], [1.2], [0.655])],
    (_with({}, train__settle_iwl=0.3), r"^train\.settle_iwl = 0\.3: must be 0 \(off\) or in \(0\.5, 1\)"),
    (_with({}, train__settle_iwl=1.0), r"^train\.settle_iwl = 1\.0: must be 0 \(off\) or in \(0\.5, 1\)"),
    (_with(MEM, train__settle_iwl=0.9), r"^train\.settle_iwl = 0\.9: must be 0 unless task\.kind = \"classification\""),
]


@pytest.mark.parametrize("raw, message", CASES)
def test_a_bad_value_is_one_line_naming_the_field(raw, message):
    with pytest.raises(ConfigError, match=message) as e:
        config.from_dict(raw)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "raw",
    [
        _with(REG, task__P=100, task__test_size=4),  # > D + 1: whitening works
        _with(REG, model__kind="attn_m", model__init_scheme="aligned"),
        _with(MEM, model__float64=True),
    ],
)
def test_the_edge_of_a_range_is_accepted(raw):
    config.from_dict(raw)


def test_linear_attention_built_in_python_is_validated_by_the_config():
    # One place validates these fields: the config's, which LinearAttentionRegression.build goes through,
    # with the config's defaults (train.lr = 0.01 is its dt).
    from icl_race.systems.linear_attention import LinearAttentionRegression

    with pytest.raises(ConfigError, match=r"^model\.rank = 9: must be in \[1, task\.D = 4\]"):
        LinearAttentionRegression.build(R=9)
    with pytest.raises(ConfigError, match=r"^model\.softmax = True: must be false unless"):
        LinearAttentionRegression.build(softmax=True, path="moments")
    with pytest.raises(TypeError, match="heads"):
        LinearAttentionRegression.build(heads=2)
