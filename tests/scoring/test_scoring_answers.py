import json

import numpy as np
import pytest
from _scoring_data import example_space, synthetic_space

from causaltrace.scoring import Answer, AnswerFormatError, AnswerSpace, Candidate, Impact


def test_from_scm_reads_points_and_panel():
    space = example_space()
    assert space.causes == ("TRAFFIC_DROP", "CHECKOUT_BUG", "TRACKING_LOSS")
    assert space.sliced == {"CHECKOUT_BUG", "TRACKING_LOSS"}
    assert space.group("TRAFFIC_DROP") == "site-wide"
    assert space.group("CHECKOUT_BUG") == "segment-specific"
    assert space.dimension_names == ("channel", "region")
    assert space.n_cells == 12
    # 3 channels + 4 regions + 12 channel x region slices.
    assert len(space.candidate_slices("CHECKOUT_BUG")) == 19
    assert space.candidate_slices("TRAFFIC_DROP") == [None]


@pytest.mark.parametrize("make", [example_space, synthetic_space])
def test_json_round_trip(make):
    space = make()
    again = AnswerSpace.from_json(space.to_json())
    assert again == space
    assert again.fingerprint() == space.fingerprint()
    np.testing.assert_array_equal(again.cells, space.cells)
    assert again.groups == space.groups
    assert again.candidate_slices("BUDGET_CAP" if "BUDGET_CAP" in space.causes else "CHECKOUT_BUG")


def test_cross_product_is_stored_compactly_and_nested_panels_are_not():
    assert json.loads(example_space().to_json())["cells"] is None
    assert len(json.loads(synthetic_space().to_json())["cells"]) == 40


def test_canonical_slice_forms():
    space = synthetic_space()
    assert space.canonical_slice(" geo=eu & device=tablet ") == "device=tablet&geo=eu"
    assert space.canonical_slice({"geo": "eu", "device": "tablet"}) == "device=tablet&geo=eu"
    for whole in (None, "", "*", {}):
        assert space.canonical_slice(whole) is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("os=ios", "unknown dimension 'os'"),
        ("device=phone", "unknown level 'phone'"),
        ("device=mobile&device=tablet", "more than once"),
        ("device:mobile", "not of the form"),
        ({"device": ["mobile", "tablet"]}, "one level"),
        (["device=mobile"], "got a list"),
        (7, "got a number"),
        ("device=desktop&browser=samsung", "matches no cell"),
        ("x" * 2000, "too long"),
    ],
)
def test_canonical_slice_rejects_with_a_reason(value, reason):
    with pytest.raises(AnswerFormatError, match=reason):
        synthetic_space().canonical_slice(value)


def test_jaccard_over_leaf_cells():
    space = synthetic_space()
    # device=mobile: 4 browsers x 4 geos = 16 cells; device=mobile&geo=us: 4 cells.
    assert space.coverage("device=mobile") == pytest.approx(16 / 40)
    assert space.jaccard("device=mobile", "device=mobile&geo=us") == pytest.approx(4 / 16)
    # Nested cells: tablet has no firefox, so device=tablet&geo=eu has 3 cells.
    assert space.coverage("device=tablet&geo=eu") == pytest.approx(3 / 40)
    assert space.jaccard(None, "device=tablet&geo=eu") == pytest.approx(3 / 40)
    assert space.jaccard("geo=us", "geo=eu") == 0.0
    assert space.jaccard(None, None) == 1.0
    ex = example_space()
    assert ex.jaccard("region=north", "channel=search&region=north") == pytest.approx(1 / 3)
    # Narrower than the truth: 1 of its 4 cells; partial overlap: 1 shared of 4 + 3 - 1 = 6.
    assert ex.jaccard("channel=search&region=north", "channel=search") == pytest.approx(1 / 4)
    assert ex.jaccard("region=north", "channel=search") == pytest.approx(1 / 6)


def test_candidate_slices_respect_allowed_levels_and_nesting():
    space = synthetic_space()
    cands = space.candidate_slices("BROWSER_TRACKING")
    assert "browser=safari" in cands and "browser=chrome" not in cands
    # samsung exists on mobile and tablet only.
    assert "browser=samsung&device=desktop" not in cands
    assert "browser=samsung&device=tablet" in cands
    assert space.candidate_slices("CREATIVE_REJECTED")[0] is None
    assert space.takes_slice("CREATIVE_REJECTED")


def test_answer_from_object_full_schema():
    space = synthetic_space()
    answer, notes = space.answer_from_object(
        {
            "root_cause": "BUDGET_CAP",
            "slice": "geo=eu&device=tablet",
            "ranking": ["BUDGET_CAP", {"root_cause": "BID_DROP", "slice": "geo=eu"}],
            "impact": {"kpi": "conversions", "lost": 120},
        }
    )
    assert answer == Answer(
        "BUDGET_CAP",
        "device=tablet&geo=eu",
        (Candidate("BUDGET_CAP", "device=tablet&geo=eu"), Candidate("BID_DROP", "geo=eu")),
        Impact(-120.0, "conversions"),
    )
    assert notes == ()
    assert [c.root_cause for c in answer.ranked] == ["BUDGET_CAP", "BID_DROP"]


def test_slice_of_an_unsliced_cause_is_dropped_with_a_note():
    answer, notes = synthetic_space().answer_from_object(
        {"root_cause": "CAMPAIGN_PAUSED", "slice": "geo=eu"}
    )
    assert answer.slice is None
    assert "ignored" in notes[0]


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        ([], "must be a JSON object"),
        ({"slice": "geo=eu"}, "no 'root_cause'"),
        ({"root_cause": "budget_cap"}, "unknown root cause"),
        ({"root_cause": ["BUDGET_CAP", "BID_DROP"]}, "one cause name"),
        ({"root_cause": "BUDGET_CAP", "confidence": 0.9}, "unknown answer key"),
        ({"root_cause": "BUDGET_CAP", "ranking": ["BID_DROP"]}, "first entry"),
        ({"root_cause": "BUDGET_CAP", "ranking": ["BUDGET_CAP", "BUDGET_CAP"]}, "twice"),
        ({"root_cause": "BUDGET_CAP", "ranking": ["BUDGET_CAP"] * 100}, "at most"),
        ({"root_cause": "BUDGET_CAP", "impact": "a lot"}, "must be a number"),
        ({"root_cause": "BUDGET_CAP", "impact": {"effect": 1, "lost": 1}}, "impact is"),
        ({"root_cause": "BUDGET_CAP", "impact": True}, "must be a number"),
    ],
)
def test_answer_from_object_rejects(obj, reason):
    with pytest.raises(AnswerFormatError, match=reason):
        synthetic_space().answer_from_object(obj)


def test_extra_keys_allowed_by_policy():
    answer, _ = synthetic_space().answer_from_object(
        {"root_cause": "BID_DROP", "slice": "geo=us", "why": "..."}, allow_extra_keys=True
    )
    assert answer.root_cause == "BID_DROP"


def test_json_schema_lists_causes():
    schema = example_space().answer_json_schema()
    assert schema["properties"]["root_cause"]["enum"] == list(example_space().causes)
    assert schema["required"] == ["root_cause"]
