"""Hack resistance: no degenerate answer may score like the correct one.

Every degenerate output of :func:`degenerate_outputs` is scored against fixed labels of the
example domain (every slice its priors can draw) and of a synthetic, nested answer space; each
must score strictly below the correct answer and at most the documented floor. Under TRACE's
weights the floor is 0.05 for a truth without a slice and 0.375 + 0.325 * c for a sliced truth
covering a share c of the panel's leaf cells (docs/rewards.md).
"""

import json

import pytest
from _scoring_data import example_space, label, synthetic_labels, synthetic_space

from causaltrace.scoring import CompositeReward, degenerate_floor, degenerate_outputs
from causaltrace.scoring.hacks import correct_output, floor_table, hack_report

REWARDS = {
    "trace": CompositeReward(),
    "full_only": CompositeReward({"full_attribution": 1.0}),
    "graded_only": CompositeReward({"graded_attribution": 1.0}),
    "trace_with_cost": CompositeReward(
        {
            "graded_attribution": 0.65,
            "full_attribution": 0.30,
            "format": 0.05,
            "tool_call_cost": {"weight": 1.0, "cost": 0.01},
        }
    ),
}


def all_example_labels():
    space = example_space()
    labels = []
    for cause in space.causes:
        for sl in space.candidate_slices(cause):
            labels.append(label(cause, sl, space.group(cause)))
    return labels


def trace_floor(space, lab):
    if space.takes_slice(lab.cause) and lab.slice:
        return 0.375 + 0.325 * space.coverage(lab.slice)
    return 0.05


CASES = [("example", lab) for lab in all_example_labels()] + [
    ("synthetic", lab) for lab in synthetic_labels().values()
]


@pytest.mark.parametrize(("which", "lab"), CASES, ids=[f"{w}-{lab.episode_id}" for w, lab in CASES])
def test_degenerate_answers_stay_under_the_floor(which, lab):
    space = example_space() if which == "example" else synthetic_space()
    outputs = degenerate_outputs(space, lab)
    sliced = space.takes_slice(lab.cause) and lab.slice
    assert len(outputs) >= (33 if sliced else 21)
    for reward_name, reward in REWARDS.items():
        correct = reward.score_output(correct_output(lab), lab, space).score
        floor = degenerate_floor(lab, space, reward)
        assert floor < correct, reward_name
        for name, output in outputs.items():
            got = reward.score_output(output, lab, space).score
            assert got < correct, (reward_name, name, got, correct)
            assert got <= floor + 1e-12, (reward_name, name, got, floor)
    # The documented closed form of TRACE's floor.
    assert degenerate_floor(lab, space) == pytest.approx(trace_floor(space, lab))


def test_example_domain_floor_numbers():
    space = example_space()
    floors = {(lab.cause, lab.slice): degenerate_floor(lab, space) for lab in all_example_labels()}
    assert floors[("TRAFFIC_DROP", None)] == pytest.approx(0.05)
    # channel=search covers 4 of 12 cells, region=west 3, channel=search&region=north 1.
    assert floors[("CHECKOUT_BUG", "channel=search")] == pytest.approx(0.375 + 0.325 * 4 / 12)
    assert floors[("CHECKOUT_BUG", "region=west")] == pytest.approx(0.375 + 0.325 * 3 / 12)
    assert floors[("TRACKING_LOSS", "channel=search&region=north")] == pytest.approx(
        0.375 + 0.325 / 12
    )
    assert max(floors.values()) == pytest.approx(0.48333333)


def test_format_error_hacks_score_zero_and_name_a_reason():
    space = example_space()
    lab = label("CHECKOUT_BUG", "channel=search&region=north", "segment-specific")
    reward = CompositeReward()
    for name, output in degenerate_outputs(space, lab).items():
        result = reward.score_output(output, lab, space)
        if name.startswith(("whole_panel", "wildcard_star", "shotgun")):
            assert result.parse_ok, name
        else:
            assert not result.parse_ok and result.parse_error, name
            assert result.score == 0.0, name


def test_tool_output_cannot_supply_the_answer():
    space = example_space()
    lab = label("CHECKOUT_BUG", "channel=search", "segment-specific")
    echo = json.dumps(correct_output(lab))
    verl_text = (
        '<tool_call>\n{"name": "lookup", "arguments": {}}\n</tool_call>user\n'
        f"<tool_response>\n{echo}\n</tool_response>\nassistant\n"
        '{"root_cause": "TRACKING_LOSS", "slice": "channel=search"}'
    )
    assert CompositeReward().score_output(verl_text, lab, space).score == pytest.approx(0.05)


def test_hack_report_and_table():
    space = synthetic_space()
    rows = hack_report(space, synthetic_labels().values())
    assert all(r["score"] <= r["floor"] + 1e-12 and r["score"] < r["correct"] for r in rows)
    table = floor_table(rows)
    assert table.count("\n") == 2 + len(synthetic_labels()) - 1
    # device=tablet&geo=eu covers 3 of 40 cells: 0.375 + 0.325 * 3 / 40 = 0.399375.
    assert "| BUDGET_CAP | device=tablet&geo=eu | 1.0000 | 0.3994 |" in table


def test_cli_prints_the_table(capsys):
    from causaltrace.scoring.hacks import main

    assert main(["--domain", "example"]) == 0
    out = capsys.readouterr().out
    assert "| TRAFFIC_DROP | (none) | 1.0000 | 0.0500 |" in out
    assert "| CHECKOUT_BUG | channel=search | 1.0000 | 0.4833 |" in out
