"""Oracle labels hold what happened (issue 39): two causes of one kind on different slices are
two labelled causes, they round-trip through the dictionary and JSON forms, and every committed
label keeps its bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from causaltrace.episodes.labels import ConcurrentCause, KpiEffect, OracleLabel

ROOT = Path(__file__).resolve().parents[2]
SPLITS = sorted(p for p in (ROOT / "data").iterdir() if (p / "manifest.json").exists())

FIRST = ("BID_MODIFIER_CHANGE", "device=mobile")
SECOND = ("BID_MODIFIER_CHANGE", "geo=us_west")


def two_bid_changes() -> OracleLabel:
    other = ConcurrentCause(
        SECOND[0],
        "delivery",
        SECOND[1],
        31,
        "2024-02-01",
        0.4,
        "step",
        effect_in_slice={"clicks": KpiEffect(120.0, 80.0)},
    )
    return OracleLabel(
        "ads_x-000001",
        FIRST[0],
        "delivery",
        FIRST[1],
        28,
        "2024-01-29",
        0.6,
        "ramp",
        effect_in_slice={"clicks": KpiEffect(300.0, 200.0)},
        also=(other,),
    )


def test_a_label_holds_one_cause_on_two_slices():
    label = two_bid_changes()
    assert label.causes == (FIRST, SECOND)
    assert label.concurrent
    data = label.to_dict()
    assert [data["cause"], *(c["cause"] for c in data["also"])] == [FIRST[0], SECOND[0]]
    assert [data["slice"], *(c["slice"] for c in data["also"])] == [FIRST[1], SECOND[1]]


def test_a_label_with_one_cause_twice_round_trips():
    label = two_bid_changes()
    assert OracleLabel.from_dict(label.to_dict()) == label
    again = OracleLabel.from_dict(json.loads(label.to_json()))
    assert again == label and again.causes == (FIRST, SECOND)
    assert again.also[0].effect_in_slice["clicks"].effect == 40.0


@pytest.mark.parametrize("split", SPLITS, ids=lambda p: p.name)
def test_every_committed_label_keeps_its_bytes(split):
    """Each stored label line is rewritten byte for byte (the writer's ``json.dumps`` with sorted
    keys) from the label read back."""
    lines = [
        line
        for path in sorted((split / "private" / "labels").glob("shard-*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    assert lines
    for line in lines:
        label = OracleLabel.from_dict(json.loads(line))
        assert json.dumps(label.to_dict(), sort_keys=True, ensure_ascii=False) == line
