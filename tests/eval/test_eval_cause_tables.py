"""The evaluation report reads every cause of an episode: on a synthetic run with single-cause
and concurrent episodes (answers of one cause and of several), the per-cause and per-group
tables count a concurrent episode under each of its causes, the confusion matrix pairs every
true cause with an answered one (same name first, then in order; the rest against
``(missed)`` / ``(extra)``; no answer against ``(no answer)``), FullAttr@1 is split by episode
type, and an answer of several causes is scored as the set it is."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from _scoring_data import label, synthetic_space

from causaltrace.episodes.labels import ConcurrentCause
from causaltrace.eval.harness import write_reports

GROUPS = {
    "NO_ANOMALY": "no-signal",
    "CAMPAIGN_PAUSED": "campaign-wide",
    "BUDGET_CAP": "delivery",
    "BID_DROP": "delivery",
    "CREATIVE_REJECTED": "creative",
}


def truth(episode: str, *causes: tuple[str, str | None]):
    (cause, sl), *also = causes
    first = label(cause, sl, GROUPS[cause], episode_id=episode)
    more = tuple(ConcurrentCause(c, GROUPS[c], s, 40, None, 0.5, "step") for c, s in also)
    return replace(first, also=more)


def one(cause: str, sl: str | None = None) -> dict:
    return {"root_cause": cause, "slice": sl}


def several(*causes: tuple[str, str | None]) -> dict:
    return {"causes": [one(c, s) for c, s in causes]}


# (episode, true causes, answer): single-cause episodes s*, concurrent ones c*.
EPISODES = [
    ("s1", [("BUDGET_CAP", "device=mobile")], one("BUDGET_CAP", "device=mobile")),
    ("s2", [("BID_DROP", "geo=eu")], one("BUDGET_CAP", "geo=eu")),
    (
        "c3",
        [("BUDGET_CAP", "device=tablet"), ("CAMPAIGN_PAUSED", None)],
        several(("BUDGET_CAP", "device=tablet"), ("CAMPAIGN_PAUSED", None)),
    ),
    (
        "c4",
        [("BID_DROP", "geo=us"), ("CREATIVE_REJECTED", "device=mobile")],
        one("BID_DROP", "geo=us"),
    ),
    (
        "c5",
        [("BUDGET_CAP", "geo=apac"), ("BID_DROP", "geo=latam")],
        several(("BUDGET_CAP", "geo=us"), ("CAMPAIGN_PAUSED", None)),
    ),
    ("s6", [("NO_ANOMALY", None)], None),
    ("s7", [("CAMPAIGN_PAUSED", None)], several(("CAMPAIGN_PAUSED", None), ("BID_DROP", "geo=eu"))),
]


class Source:
    """What write_reports reads of a dataset: the answer space and the labels."""

    def __init__(self):
        self.answer_space = synthetic_space()
        self.labels = {ep: truth(ep, *causes) for ep, causes, _ in EPISODES}

    def label(self, episode: str):
        return self.labels[episode]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cause-tables")
    records = [
        {
            "episode_id": ep,
            "answer": answer,
            "reason": "submitted" if answer else "turn budget exhausted",
            "parse_error": None if answer else "no answer",
            "error": None,
            "score": 0.0,
            "reward": {},
            "tool_calls": 3,
            "turns": 4,
        }
        for ep, _, answer in EPISODES
    ]
    info = {
        "agent": {"name": "scripted", "config": {}},
        "dataset": {"name": "synthetic", "split": "test"},
        "seed": 0,
        "env": {"max_tool_calls": 30, "max_turns": 40},
    }
    write_reports(out, Source(), records, info, n_boot=200)
    return out


def metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


def test_a_concurrent_episode_counts_under_each_of_its_causes(run_dir):
    by_cause = metrics(run_dir)["metrics"]["by_cause"]
    n = {c: m["full_attr_at_1"]["n"] for c, m in by_cause.items()}
    # 7 episodes, 3 of them with two causes: 10 (episode, cause) rows
    assert n == {
        "NO_ANOMALY": 1,
        "CAMPAIGN_PAUSED": 2,
        "BUDGET_CAP": 3,
        "BID_DROP": 3,
        "CREATIVE_REJECTED": 1,
    }
    assert metrics(run_dir)["metrics"]["concurrent_rows"] == {
        "NO_ANOMALY": 0,
        "CAMPAIGN_PAUSED": 1,
        "BUDGET_CAP": 2,
        "BID_DROP": 2,
        "CREATIVE_REJECTED": 1,
    }
    value = {c: {k: v["value"] for k, v in m.items()} for c, m in by_cause.items()}
    # BUDGET_CAP: s1 and c3 with their slices, c5 named with the wrong slice
    assert value["BUDGET_CAP"]["attributed"] == pytest.approx(2 / 3)
    assert value["BUDGET_CAP"]["cause_accuracy"] == pytest.approx(1.0)
    # BID_DROP: named only in c4 (s2 answered BUDGET_CAP, c5 left it out)
    assert value["BID_DROP"]["attributed"] == pytest.approx(1 / 3)
    assert value["BID_DROP"]["cause_accuracy"] == pytest.approx(1 / 3)
    # ... and its episodes solved whole: none (c4 missed CREATIVE_REJECTED)
    assert value["BID_DROP"]["full_attr_at_1"] == pytest.approx(0.0)
    assert value["CAMPAIGN_PAUSED"]["attributed"] == pytest.approx(1.0)
    assert value["CREATIVE_REJECTED"]["cause_accuracy"] == pytest.approx(0.0)
    assert value["NO_ANOMALY"]["parse_rate"] == pytest.approx(0.0)
    by_group = metrics(run_dir)["metrics"]["by_group"]
    assert by_group["delivery"]["attributed"]["n"] == 6
    assert by_group["delivery"]["attributed"]["value"] == pytest.approx(3 / 6)


def test_confusion_reads_every_true_and_every_answered_cause(run_dir):
    data = metrics(run_dir)["confusion"]
    counts = np.asarray(data["counts"])
    cell = {
        (t, p): int(counts[i, j])
        for i, t in enumerate(data["true"])
        for j, p in enumerate(data["predicted"])
        if counts[i, j]
    }
    assert cell == {
        ("BUDGET_CAP", "BUDGET_CAP"): 3,  # s1, c3, c5 (matched by name, whatever the slice)
        ("BID_DROP", "BUDGET_CAP"): 1,  # s2: a wrong one-cause answer, off the diagonal
        ("BID_DROP", "BID_DROP"): 1,  # c4
        ("BID_DROP", "CAMPAIGN_PAUSED"): 1,  # c5: the unmatched pair, in order
        ("CAMPAIGN_PAUSED", "CAMPAIGN_PAUSED"): 2,  # c3, s7
        ("CREATIVE_REJECTED", "(missed)"): 1,  # c4 named one cause of two
        ("NO_ANOMALY", "(no answer)"): 1,  # s6
        ("(extra)", "BID_DROP"): 1,  # s7 named a second cause
    }
    # every true cause once (10), every answered cause once (9 named by the 6 answers)
    rows = dict(zip(data["true"], counts.sum(axis=1)))
    assert sum(v for k, v in rows.items() if k != "(extra)") == 10
    named = counts[:, [j for j, p in enumerate(data["predicted"]) if not p.startswith("(")]]
    assert named.sum() == 9
    assert (run_dir / "confusion.png").read_bytes().startswith(b"\x89PNG")


def test_fullattr_split_by_episode_type(run_dir):
    by_type = metrics(run_dir)["metrics"]["by_episode_type"]
    single, concurrent = (
        by_type["single"]["full_attr_at_1"],
        by_type["concurrent"]["full_attr_at_1"],
    )
    # single: s1 of 4 (s7 added a second cause to a single-cause episode: not the exact set)
    assert single["n"] == 4 and single["value"] == pytest.approx(1 / 4)
    # concurrent: only c3 named the exact set (a list answer is scored as the set it is)
    assert concurrent["n"] == 3 and concurrent["value"] == pytest.approx(1 / 3)
    for row in (single, concurrent):
        assert 0.0 <= row["low"] <= row["value"] <= row["high"] <= 1.0
    overall = metrics(run_dir)["metrics"]["overall"]["full_attr_at_1"]
    assert overall["n"] == 7 and overall["value"] == pytest.approx(2 / 7)


def test_summary_and_page_show_every_cause(run_dir):
    summary = (run_dir / "summary.md").read_text()
    for heading in ("## Overall", "## By episode type", "## By cause group", "## By cause"):
        assert heading in summary
    assert "| single cause | 4 | 0.250" in summary and "| concurrent | 3 | 0.333" in summary
    assert "| BUDGET_CAP | 3 | 0.667" in summary  # n rows, then attributed
    page = (run_dir / "report.html").read_text()
    assert 'data-cause="BID_DROP CREATIVE_REJECTED"' in page  # c4 filters under both
    assert "By episode type" in page and "(missed)" in page
