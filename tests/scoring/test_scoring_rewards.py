from pathlib import Path

import pytest
from _scoring_data import example_labels, example_space, synthetic_labels, synthetic_space

from causaltrace.core.registry import RegistryError
from causaltrace.scoring import (
    TRACE_WEIGHTS,
    Answer,
    CompositeReward,
    Impact,
    ParsedAnswer,
    available_rewards,
    get_reward,
    parse_answer,
    register_reward,
    score_output,
    unregister_reward,
)

CONFIG = Path(__file__).resolve().parents[2] / "causaltrace" / "conf" / "reward" / "trace.yaml"


def term(name, answer, label, **params):
    return get_reward(name).fn(answer, label, **params)


def wrap(space, cause, slice_=None, **kw):
    return ParsedAnswer.of(Answer(cause, slice_, **kw), space)


def test_builtin_terms_are_registered():
    names = set(available_rewards())
    assert {
        "format",
        "cause_accuracy",
        "full_attribution",
        "slice_jaccard",
        "graded_attribution",
        "composite",
        "tool_call_cost",
        "impact_estimation",
    } <= names


def test_terms_on_a_2d_label_of_the_example_domain():
    space, lab = example_space(), example_labels()["checkout_2d"]
    exact = wrap(space, "CHECKOUT_BUG", "channel=search&region=north")
    parent = wrap(space, "CHECKOUT_BUG", "region=north")  # 3 cells, truth is 1 of them
    whole = wrap(space, "CHECKOUT_BUG", None)  # 12 cells
    wrong = wrap(space, "TRACKING_LOSS", "channel=search&region=north")
    bad = ParsedAnswer.of(None, space)
    assert [term("full_attribution", a, lab) for a in (exact, parent, whole, wrong, bad)] == [
        1,
        0,
        0,
        0,
        0,
    ]
    assert [term("cause_accuracy", a, lab) for a in (exact, parent, whole, wrong, bad)] == [
        1,
        1,
        1,
        0,
        0,
    ]
    assert term("slice_jaccard", parent, lab) == pytest.approx(1 / 3)
    assert term("slice_jaccard", whole, lab) == pytest.approx(1 / 12)
    assert term("slice_jaccard", wrong, lab) == 1.0  # localization only, cause-blind
    assert term("graded_attribution", exact, lab) == 1.0
    assert term("graded_attribution", parent, lab) == pytest.approx(0.5 + 0.5 / 3)
    assert term("graded_attribution", whole, lab) == pytest.approx(0.5 + 0.5 / 12)
    assert term("graded_attribution", wrong, lab) == 0.0
    assert term("format", bad, lab) == 0.0 and term("format", wrong, lab) == 1.0
    # A broader slice is penalized, never rewarded: exact > parent > whole panel.
    reward = CompositeReward()
    scores = [reward(a, lab).score for a in (exact, parent, whole, wrong, bad)]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 5
    assert scores[0] == pytest.approx(1.0)
    assert scores[1] == pytest.approx(0.65 * (0.5 + 0.5 / 3) + 0.05)
    assert scores[3] == pytest.approx(0.05)


def test_unsliced_causes_ignore_the_slice():
    space, lab = example_space(), example_labels()["traffic"]
    parsed = parse_answer({"root_cause": "TRAFFIC_DROP", "slice": "region=west"}, space)
    assert parsed.notes and parsed.answer.slice is None
    assert CompositeReward()(parsed, lab).score == pytest.approx(1.0)


def test_sliced_cause_drawn_on_the_whole_panel_needs_no_slice():
    space, lab = synthetic_space(), synthetic_labels()["creative_whole"]
    assert term("full_attribution", wrap(space, "CREATIVE_REJECTED"), lab) == 1.0
    narrow = wrap(space, "CREATIVE_REJECTED", "device=mobile")
    assert term("full_attribution", narrow, lab) == 0.0
    assert term("graded_attribution", narrow, lab) == pytest.approx(0.5 + 0.5 * 16 / 40)


def test_synthetic_nested_jaccard():
    space, lab = synthetic_space(), synthetic_labels()["budget_2d"]
    # Truth device=tablet&geo=eu has 3 cells (no tablet firefox); device=tablet has 12.
    assert term("slice_jaccard", wrap(space, "BUDGET_CAP", "device=tablet"), lab) == pytest.approx(
        3 / 12
    )
    assert term("slice_jaccard", wrap(space, "BUDGET_CAP", "geo=eu"), lab) == pytest.approx(3 / 10)


def test_tool_call_cost():
    space, lab = example_space(), example_labels()["traffic"]
    parsed = parse_answer({"root_cause": "TRAFFIC_DROP"}, space, tool_calls=12)
    assert term("tool_call_cost", parsed, lab) == pytest.approx(-0.12)
    assert term("tool_call_cost", parsed, lab, cost=0.1, free_calls=10) == pytest.approx(-0.2)
    assert term("tool_call_cost", parsed, lab, cost=0.1, max_penalty=0.5) == pytest.approx(-0.5)


def test_impact_estimation():
    space, lab = example_space(), example_labels()["checkout_2d"]  # orders effect: 150 - 400 = -250

    def score(effect, cause="CHECKOUT_BUG", kpi="orders", **params):
        return term(
            "impact_estimation",
            wrap(space, cause, "channel=search&region=north", impact=Impact(effect, kpi)),
            lab,
            **params,
        )

    assert score(-250) == 1.0
    assert score(-200) == pytest.approx(0.8)
    assert score(250) == 0.0  # wrong sign: relative error 2
    assert score(-250, cause="TRACKING_LOSS") == 0.0
    assert score(-250, cause="TRACKING_LOSS", require_cause=False) == 1.0
    assert score(-250, kpi=None) == 1.0  # the label's only KPI
    assert score(-250, kpi="visits") == 0.0
    assert term("impact_estimation", wrap(space, "CHECKOUT_BUG"), lab) == 0.0


def test_composite_breakdown_and_default_weights():
    space, lab = example_space(), example_labels()["tracking_1d"]
    result = score_output('{"root_cause": "TRACKING_LOSS", "slice": "region=west"}', lab, space)
    assert result.score == pytest.approx(1.0)
    assert dict(result.weights) == dict(TRACE_WEIGHTS)
    flat = result.to_dict()
    assert set(flat) == {
        "score",
        "graded_attribution",
        "full_attribution",
        "format",
        "parse_ok",
        "tool_calls",
        "turns",
    }
    assert all(isinstance(v, float) for v in flat.values())
    bad = score_output("no idea", lab, space)
    assert bad.score == 0.0 and not bad.parse_ok and bad.parse_error
    assert term(
        "composite",
        parse_answer({"root_cause": "TRACKING_LOSS", "slice": "region=west"}, space),
        lab,
    ) == pytest.approx(1.0)


def test_composite_from_config_with_params():
    reward = CompositeReward.from_config(
        {
            "terms": {
                "full_attribution": 1.0,
                "tool_call_cost": {"weight": 1.0, "cost": 0.05, "free_calls": 2},
            },
            "parse": {"max_answer_chars": 512},
        }
    )
    assert reward.policy.max_answer_chars == 512
    space, lab = example_space(), example_labels()["traffic"]
    res = reward.score_output({"root_cause": "TRAFFIC_DROP"}, lab, space, tool_calls=6)
    assert res.terms == {"full_attribution": 1.0, "tool_call_cost": pytest.approx(-0.2)}
    assert res.score == pytest.approx(0.8)
    assert CompositeReward.from_config(reward.config()).config() == reward.config()
    # A bare mapping is the terms.
    assert CompositeReward.from_config({"format": 1.0}).weights == {"format": 1.0}


@pytest.mark.parametrize(
    ("cfg", "error", "match"),
    [
        ({"nope": 1.0}, RegistryError, "unknown reward 'nope'"),
        ({"terms": {"tool_call_cost": {"weight": 1, "price": 2}}}, ValueError, "no parameter"),
        ({"terms": {"format": 1}, "extra": 1}, ValueError, "unknown reward config"),
        ({"terms": {}}, ValueError, "at least one term"),
        ({"terms": {"composite": 1.0}, "parse": {"oops": 1}}, ValueError, "unknown parse option"),
    ],
)
def test_bad_configs_name_the_culprit(cfg, error, match):
    with pytest.raises(error, match=match):
        CompositeReward.from_config(cfg)


def test_hydra_config_file_is_trace():
    omegaconf = pytest.importorskip("omegaconf", reason="hydra-core provides omegaconf")
    cfg = omegaconf.OmegaConf.load(CONFIG)
    reward = CompositeReward.from_config(cfg)
    assert reward.weights == dict(TRACE_WEIGHTS)
    assert sum(reward.weights.values()) == pytest.approx(1.0)


def test_register_a_custom_reward():
    @register_reward("test_slice_order_bonus")
    def bonus(answer, label, *, per_condition: float = 0.1) -> float:
        """Toy: a bonus per slice condition."""
        if answer.answer is None or answer.answer.slice is None:
            return 0.0
        return per_condition * (answer.answer.slice.count("&") + 1)

    try:
        assert available_rewards()["test_slice_order_bonus"] == "Toy: a bonus per slice condition."
        assert get_reward("test_slice_order_bonus").params == {"per_condition": 0.1}
        reward = CompositeReward(
            {"format": 1.0, "test_slice_order_bonus": {"weight": 2.0, "per_condition": 0.25}}
        )
        space, lab = example_space(), example_labels()["checkout_2d"]
        res = reward.score_output(
            {"root_cause": "CHECKOUT_BUG", "slice": "channel=search&region=north"}, lab, space
        )
        assert res.score == pytest.approx(1.0 + 2.0 * 0.5)
        with pytest.raises(ValueError, match="already registered"):
            register_reward("test_slice_order_bonus")(bonus)
    finally:
        unregister_reward("test_slice_order_bonus")
    assert "test_slice_order_bonus" not in available_rewards()


def test_register_rejects_bad_signatures():
    with pytest.raises(TypeError, match="positionally"):
        register_reward("test_bad")(lambda answer: 0.0)
    with pytest.raises(TypeError, match="positionally"):
        register_reward("test_bad")(lambda answer, label, extra: 0.0)
    assert "test_bad" not in available_rewards()
