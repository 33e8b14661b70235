"""The grounding checker (issue 40): a number an assistant message cites counts as shown only
if the prompt or a tool output *before* it printed a number that rounds to it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from causaltrace.training.grounding import grounding_report, parse_numbers, row_grounding


def _row(*messages):
    return [{"role": r, "content": c} for r, c in messages]


def test_names_dates_and_small_counts_are_not_citations():
    text = "On 2026-02-16 at 16:44 us_west2 and brand_rsa_1 (test-000012) moved in 3 campaigns"
    result = row_grounding(_row(("user", "page"), ("assistant", text)))
    assert result.cited == 0


def test_rounding_percent_scale_and_sign():
    parsed = {n.written: n for n in parse_numbers("+26% 1,234,567 1.23M -0.31 3.2x 12.5pp")}
    assert parsed["1.23M"].value == pytest.approx(1.23e6) and parsed["1.23M"].decimals == -4
    assert parsed["-0.31"].value == pytest.approx(0.31) and parsed["+26%"].percent
    shown = "z\n4.1234\nshare -0.2612\ncost 1234567"
    cites = "z=4.12, share 26%, 26.1%, 0.261, fell 0.26, cost 1.23M and 1,234,567"
    result = row_grounding(_row(("user", "page"), ("tool", shown), ("assistant", cites)))
    assert result.cited == 7 and result.ok, result.ungrounded
    # One digit more than shown, or rounded the wrong way, is not the shown number.
    wrong = "z=4.13, share 26.2%, 0.2613"
    result = row_grounding(_row(("tool", shown), ("assistant", wrong)))
    assert [c.written for c in result.ungrounded] == ["4.13", "26.2%", "0.2613"]


def test_a_number_shown_only_later_is_not_grounded():
    messages = _row(
        ("user", "cost alert: +23.4%"),
        ("assistant", "Cost is up 23%; I expect z near 4.1."),
        ("tool", "z = 4.1234"),
        ("assistant", "z is 4.12."),
    )
    result = row_grounding(messages)
    assert [(c.message, c.written, c.grounded) for c in result.citations] == [
        (1, "23%", True),
        (1, "4.1", False),
        (3, "4.12", True),
    ]


def test_tool_call_arguments_are_neither_shown_nor_cited():
    messages = [
        {"role": "user", "content": "page"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"function": {"name": "sql", "arguments": {"query": "SELECT 0.75"}}}],
        },
        {"role": "tool", "content": "ok"},
        {"role": "assistant", "content": "The threshold 0.75 holds."},
    ]
    assert [c.grounded for c in row_grounding(messages).citations] == [False]


def test_report_and_command_line(tmp_path):
    good = {"messages": _row(("tool", "share 0.5123"), ("assistant", "51%")), "metadata": {}}
    bad = {
        "messages": _row(("tool", "share 0.5123"), ("assistant", "62% and 51.2%")),
        "metadata": {"episode_id": "ads_x-000001"},
    }
    report = grounding_report([good, bad])
    assert report["numbers_cited"] == 3 and report["numbers_grounded"] == 2
    assert report["rows_with_ungrounded"] == 1
    assert report["examples"] == [{"row": "ads_x-000001", "message": 1, "number": "62%"}]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (good, bad)))
    done = subprocess.run(
        [sys.executable, "-m", "causaltrace.training.grounding", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["grounded_share"] == pytest.approx(2 / 3)
