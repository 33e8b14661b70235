"""Labels the data can support, on every committed split (issue 23): the oracle's answer (the
model known, the draw not; recorded in each label when it was generated) names a true cause
with its slice on at least 95% of the episodes, and every cause of a concurrent episode makes
at least a quarter of an alert its prompt shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from causaltrace.datasets.reading import load_labels

ROOT = Path(__file__).resolve().parents[2]
SPLITS = sorted(p for p in (ROOT / "data").iterdir() if (p / "manifest.json").exists())


def _truths(label: dict) -> set[tuple[str, str | None]]:
    parts = (label, *(label.get("also") or ()))
    return {(p["cause"], p.get("slice")) for p in parts}


def test_the_committed_splits_are_found():
    names = {p.name for p in SPLITS}
    assert {"ads_test", "ads_easy", "ads_hard", "ads_expert", "services_test"} <= names


@pytest.mark.parametrize("split", SPLITS, ids=lambda p: p.name)
def test_the_oracle_supports_the_labels(split):
    labels = load_labels(split)
    misses = []
    for label in labels.values():
        answer = label["extra"]["difficulty"]["measured"]["oracle_answer"]
        if (answer["cause"], answer["slice"]) not in _truths(label):
            misses.append((label["episode_id"], sorted(_truths(label), key=str), answer))
    assert len(misses) <= 0.05 * len(labels), misses


@pytest.mark.parametrize("split", SPLITS, ids=lambda p: p.name)
def test_every_labelled_cause_moves_a_paged_alert(split):
    for label in load_labels(split).values():
        if not label.get("also"):
            continue
        for part in (label, *label["also"]):
            shares = part["extra"]["alert_shares"]
            assert max(shares.values()) >= 0.25, (label["episode_id"], part["cause"], shares)
