"""Concurrent causes (issue 13), scoring side: the several-causes answer form (parser round trip,
errors that name what is wrong), set rewards (exact set, one of two, extras), the degenerate
set answers under the documented floor on single-cause and concurrent labels, old labels."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from _scoring_data import example_space, synthetic_space

from causaltrace.env.contract import submit_tool
from causaltrace.episodes.answers import Answer, Candidate
from causaltrace.episodes.labels import ConcurrentCause, OracleLabel
from causaltrace.scoring import CompositeReward, parse_answer
from causaltrace.scoring.hacks import (
    correct_output,
    correct_set_output,
    degenerate_floor,
    degenerate_outputs,
    example_labels,
    set_degenerate_outputs,
)
from causaltrace.scoring.rewards import get_reward

TRACE = CompositeReward()


def label(cause, sl, *also, group="g"):
    return OracleLabel(
        "e-1",
        cause,
        group,
        sl,
        40,
        None,
        0.5,
        "step",
        also=tuple(ConcurrentCause(c, group, s, 42, None, 0.3, "step") for c, s in also),
    )


CHECKOUT = ("CHECKOUT_BUG", "channel=search")
TRACKING = ("TRACKING_LOSS", "region=north")
TRAFFIC = ("TRAFFIC_DROP", None)
PAIR = label(*CHECKOUT, TRAFFIC)


def causes(*pairs):
    return {"causes": [{"root_cause": c, "slice": s} for c, s in pairs]}


def score(output, lab, space=None, reward=TRACE):
    return reward.score_output(output, lab, space or example_space())


# -- parsing -----------------------------------------------------------------------------------
def test_round_trip_of_a_several_causes_answer():
    space = example_space()
    obj = causes(("CHECKOUT_BUG", "region=north&channel=search"), TRAFFIC)
    parsed = parse_answer(obj, space)
    assert parsed.ok, parsed.error
    answer = parsed.answer
    assert answer.root_cause == "CHECKOUT_BUG" and answer.slice == "channel=search&region=north"
    assert answer.also == (Candidate("TRAFFIC_DROP", None),)
    assert parse_answer(answer.to_dict(), space).answer == answer
    # The same answer in every place the parser reads: submit call, final message, Hermes.
    submitted = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "submit", "arguments": json.dumps(obj)}}],
        }
    ]
    assert parse_answer(submitted, space).answer == answer
    final = f"Both are at work.\n{json.dumps(obj)}"
    assert parse_answer(final, space).answer == answer
    hermes = f'<tool_call>\n{{"name": "submit", "arguments": {json.dumps(obj)}}}\n</tool_call>'
    assert parse_answer(hermes, space).answer == answer
    wrapped = {"name": "submit", "arguments": {"diagnosis": json.dumps(obj)}}
    assert parse_answer(wrapped, space).answer == answer


def test_one_entry_list_is_the_single_answer():
    space = example_space()
    one = parse_answer(causes(CHECKOUT), space).answer
    assert (
        one == parse_answer({"root_cause": "CHECKOUT_BUG", "slice": "channel=search"}, space).answer
    )
    assert one == Answer("CHECKOUT_BUG", "channel=search")


@pytest.mark.parametrize(
    "obj, error",
    [
        ({"causes": []}, "causes is an empty list"),
        ({"causes": "CHECKOUT_BUG"}, "causes must be a list"),
        ({"causes": ["CHECKOUT_BUG"]}, "causes[0] must be an object"),
        ({"causes": [{"slice": "channel=search"}]}, "causes[0] has no 'root_cause'"),
        (
            {"causes": [{"root_cause": "TRAFFIC_DROP"}, {"root_cause": "NOPE"}]},
            "causes[1]: unknown root cause 'NOPE'",
        ),
        (
            {"causes": [{"root_cause": "TRAFFIC_DROP", "why": "x"}]},
            "causes[0] has unknown key(s) 'why'",
        ),
        (
            {"causes": [{"root_cause": "CHECKOUT_BUG", "slice": "channel=fax"}]},
            "causes[0]: slice 'channel=fax': unknown level 'fax'",
        ),
        (
            causes(CHECKOUT, TRAFFIC, ("CHECKOUT_BUG", "channel=search")),
            "causes[2] names CHECKOUT_BUG again (first at causes[0]) with the same slice "
            "'channel=search'",
        ),
        (
            causes(TRAFFIC, ("TRAFFIC_DROP", "channel=search")),
            "causes[1] names TRAFFIC_DROP again (first at causes[0]); TRAFFIC_DROP takes no slice",
        ),
        (
            {"root_cause": "TRAFFIC_DROP", **causes(CHECKOUT)},
            "either 'root_cause' and 'slice' (one cause) or 'causes'",
        ),
    ],
)
def test_malformed_several_causes_answers_name_what_is_wrong(obj, error):
    parsed = parse_answer(obj, example_space())
    assert not parsed.ok
    assert error in parsed.error, parsed.error


def test_submit_tool_takes_causes_only_for_concurrent_datasets():
    space = example_space()
    plain = submit_tool(space)["function"]["parameters"]
    assert set(plain["properties"]) == {"root_cause", "slice"}
    assert plain["required"] == ["root_cause"]  # slice-free causes need no slice
    assert plain["properties"]["root_cause"]["enum"] == list(space.causes)
    several = submit_tool(space, concurrent=True)["function"]["parameters"]
    assert "causes" in several["properties"] and "required" not in several
    # Flat like every other parameter (verl keeps only type/description/enum): a JSON list.
    assert several["properties"]["causes"]["type"] == "string"
    assert several["properties"]["root_cause"]["enum"] == list(space.causes)


# -- labels ------------------------------------------------------------------------------------
def test_labels_without_also_still_load_and_keep_their_form():
    old = {
        "episode_id": "e",
        "cause": "TRAFFIC_DROP",
        "group": "site-wide",
        "slice": None,
        "onset": 3,
        "onset_time": None,
        "strength": 0.2,
        "profile": "step",
        "effect_in_slice": {"orders": {"factual": 1.0, "counterfactual": 2.0}},
        "effect_overall": {},
        "extra": {},
    }
    lab = OracleLabel.from_dict(old)
    assert lab.also == () and lab.causes == (("TRAFFIC_DROP", None),) and not lab.concurrent
    assert lab.to_dict() == old
    assert OracleLabel.from_dict(json.loads(PAIR.to_json())) == PAIR
    assert PAIR.causes == (CHECKOUT, TRAFFIC)


# -- rewards -----------------------------------------------------------------------------------
def test_rewards_of_sets_on_a_concurrent_label():
    # The exact set, in either order: 1.
    assert score(causes(CHECKOUT, TRAFFIC), PAIR).score == 1.0
    assert score(causes(TRAFFIC, CHECKOUT), PAIR).score == 1.0
    # One of two, exactly right: graded 1/2, full 0 -> 0.05 + 0.65 * 0.5.
    one = score(causes(CHECKOUT), PAIR)
    assert one.terms["graded_attribution"] == 0.5 and one.terms["full_attribution"] == 0.0
    assert one.score == pytest.approx(0.375)
    assert score(causes(TRAFFIC), PAIR).score == pytest.approx(0.375)
    # Both, one on a broader slice: (1 + 0.5 + 0.5 * 1/3) / 2.
    broad = score(causes(("CHECKOUT_BUG", None), TRAFFIC), PAIR)  # whole panel: J = 4/12
    assert broad.terms["graded_attribution"] == pytest.approx((1 + 0.5 + 0.5 / 3) / 2)
    assert broad.terms["full_attribution"] == 0.0
    # An extra cause costs 0.5 of graded: the truth plus one extra scores the same as half.
    extra = score(causes(CHECKOUT, TRAFFIC, TRACKING), PAIR)
    assert extra.terms["graded_attribution"] == 0.5 and extra.terms["full_attribution"] == 0.0
    # One right, one wrong: 1/2 - 1/2 = 0.
    mixed = score(causes(CHECKOUT, TRACKING), PAIR)
    assert mixed.terms["graded_attribution"] == 0.0 and mixed.score == pytest.approx(0.05)
    assert score(causes(TRACKING), PAIR).score == pytest.approx(0.05)
    # The other set terms.
    space = example_space()
    parsed = parse_answer(causes(CHECKOUT, TRAFFIC, TRACKING), space)
    assert get_reward("cause_accuracy").fn(parsed, PAIR) == 0.0
    assert get_reward("cause_accuracy").fn(parse_answer(causes(TRAFFIC, CHECKOUT), space), PAIR)
    assert get_reward("slice_jaccard").fn(parse_answer(causes(CHECKOUT), space), PAIR) == 0.5
    assert get_reward("graded_attribution").fn(parsed, PAIR, extra_penalty=0.25) == 0.75


def test_sets_on_a_single_cause_label():
    single = label(*CHECKOUT)
    assert score(causes(CHECKOUT), single).score == 1.0
    hedge = score(causes(CHECKOUT, TRAFFIC), single)  # a hedge: 1 - 0.5
    assert hedge.terms["graded_attribution"] == 0.5 and hedge.score == pytest.approx(0.375)
    assert score(causes(TRAFFIC, TRACKING), single).score == pytest.approx(0.05)
    # A hedge never beats its best single guess: with p(CHECKOUT)=0.6, p(TRAFFIC)=0.4
    # the single guess expects 0.6 x 1 + 0.4 x 0.05, the hedge 1.0 x 0.375.
    assert 0.6 * 1.0 + 0.4 * 0.05 > 0.375


@pytest.mark.parametrize("name", sorted(example_labels(example_space()), key=str))
def test_single_cause_scores_unchanged_by_the_set_form(name):
    """On every fixed single-cause label, each single answer scores the same as its
    one-entry list."""
    space = example_space()
    lab = name
    for cause in space.causes:
        for sl in space.candidate_slices(cause)[:4]:
            single = {"root_cause": cause, "slice": sl}
            assert score(single, lab).to_dict() == score(causes((cause, sl)), lab).to_dict()


# -- hacks -------------------------------------------------------------------------------------
def _concurrent_labels(space):
    """Pairs of causes of different groups, each on its first candidate slice of each order."""
    out = []
    for first in space.causes:
        for second in space.causes:
            if (
                second == first
                or space.group(first) == "no-signal"
                or space.group(second) == "no-signal"
            ):
                continue
            a = [s for s in space.candidate_slices(first)][:2]
            b = [s for s in space.candidate_slices(second)][-1:]
            for sa in a:
                for sb in b:
                    out.append(label(first, sa, (second, sb)))
    return out


REWARDS = {
    "trace": TRACE,
    "full": CompositeReward({"full_attribution": 1.0}),
    "graded": CompositeReward({"graded_attribution": 1.0}),
    "trace_tool_cost": CompositeReward(
        {
            **{"graded_attribution": 0.65, "full_attribution": 0.3, "format": 0.05},
            "tool_call_cost": 1.0,
        }
    ),
}


@pytest.mark.parametrize("reward_name", sorted(REWARDS))
@pytest.mark.parametrize("space_name", ["example", "synthetic"])
def test_degenerate_set_answers_stay_under_the_floor(reward_name, space_name):
    reward = REWARDS[reward_name]
    space = example_space() if space_name == "example" else synthetic_space()
    labels = [*example_labels(space), *_concurrent_labels(space)]
    assert any(lab.also for lab in labels) and any(not lab.also for lab in labels)
    checked = 0
    for lab in labels:
        floor = degenerate_floor(lab, space, reward)
        correct = reward.score_output(correct_set_output(lab), lab, space).score
        assert correct == reward.score_output(correct_set_output(lab), lab, space).score
        outputs = set_degenerate_outputs(space, lab)
        if lab.also:  # the single-answer hacks too, on concurrent labels
            outputs.update({f"single:{k}": v for k, v in degenerate_outputs(space, lab).items()})
        for hack, output in outputs.items():
            got = reward.score_output(output, lab, space).score
            assert got <= floor + 1e-12, (lab.causes, hack, got, floor)
            assert got < correct, (lab.causes, hack, got, correct)
            checked += 1
    assert checked > 100


def test_listing_every_cause_scores_below_the_single_right_cause():
    """On the synthetic six-cause space: every cause listed (true slices where known) scores
    below the right single cause, on single-cause and concurrent labels alike."""
    space = synthetic_space()
    for lab in [*example_labels(space), *_concurrent_labels(space)]:
        listed = set_degenerate_outputs(space, lab)["set_every_cause_true_slice"]
        all_score = score(listed, lab, space).score
        best_single = max(
            score({"root_cause": c, "slice": s}, lab, space).score for c, s in lab.causes
        )
        assert all_score < best_single, (lab.causes, all_score, best_single)
        if not lab.also:
            assert all_score == pytest.approx(0.05)  # graded clipped at 0: the format term


def test_concurrent_floor_closed_form():
    """Truth CHECKOUT_BUG@channel=search (4/12 cells) + TRAFFIC_DROP: the floor is the true
    pair on the whole panel, 0.05 + 0.65 * ((0.5 + 0.5 * 4/12) + 1) / 2."""
    floor = degenerate_floor(PAIR, example_space())
    assert floor == pytest.approx(0.05 + 0.65 * ((0.5 + 0.5 * 4 / 12) + 1) / 2)
    assert degenerate_floor(replace(PAIR, also=()), example_space()) == pytest.approx(
        0.375 + 0.325 * 4 / 12
    )
    assert correct_output(PAIR) == {"root_cause": "CHECKOUT_BUG", "slice": "channel=search"}


def test_full_attribution_of_a_concurrent_episode_needs_the_exact_set():
    """The evaluation's FullAttr@1 counts a concurrent episode solved only when the answered set
    is the true set (each cause with its slice): one of the two, or the two plus an extra, is
    not; a single-cause episode is scored as before, unless the answer names several causes."""
    from causaltrace.scoring import score_episodes

    space = example_space()
    single = label(*CHECKOUT)
    items = [
        (json.dumps(causes(CHECKOUT, TRAFFIC)), PAIR),
        (json.dumps(causes(TRAFFIC, CHECKOUT)), PAIR),  # order does not matter
        (json.dumps(causes(CHECKOUT)), PAIR),
        (json.dumps(causes(CHECKOUT, TRAFFIC, TRACKING)), PAIR),
        (json.dumps(causes(("CHECKOUT_BUG", "channel=social"), TRAFFIC)), PAIR),
        (json.dumps({"root_cause": "CHECKOUT_BUG", "slice": "channel=search"}), single),
        # a second cause added to a single-cause episode: not the exact set either
        (json.dumps(causes(CHECKOUT, TRAFFIC)), single),
        (json.dumps(causes(CHECKOUT)), single),  # a one-cause list is the single answer
    ]
    outcomes = score_episodes(items, space)
    assert [o.full_attribution for o in outcomes] == [
        *(True, True, False, False, False, True),
        *(False, True),
    ]
    assert outcomes[5].set_exact is None and outcomes[7].set_exact is None


def test_causes_as_json_text_parse_like_the_list():
    """The flat submit tool takes ``causes`` as a JSON string (verl and TRL keep only flat
    parameters); it parses to the same answer as the list itself."""
    as_list = parse_answer(causes(CHECKOUT, ("TRAFFIC_DROP", None)), example_space())
    text = json.dumps(causes(CHECKOUT, ("TRAFFIC_DROP", None))["causes"])
    as_text = parse_answer({"causes": text}, example_space())
    assert as_list.ok and as_text.ok and as_text.answer == as_list.answer
