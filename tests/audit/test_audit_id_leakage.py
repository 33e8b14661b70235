"""Episode ids carry no label (issue 44 item 5). A hub or a trainer shows the task id to the
policy (OpenEnv's splits leaked the task index, PR 727), so every committed split is probed for
a rule from its ids to its causes: the index, its residues modulo 2 to 12 (a composition that
cycled causes would show there) and its digits, through the section-7 rule probe
(:func:`causaltrace.audit.rules.rule_probe`, forest and trees, one fold draw). The
composition draws causes from a stream of the dataset seed (``schedule_rng``) and shuffles
quotas, which no id shows; the probe must find nothing at precision 0.85 and recall 0.30.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causaltrace.audit.rules import rule_probe
from causaltrace.datasets.reading import load_index, load_labels

DATA = Path(__file__).resolve().parents[2] / "data"
SPLITS = ("ads_test", "services_test")
# One fold draw and 50 trees: an id rule is exact or absent (a composition cycling causes names
# every episode of a cause), so the probe's lighter settings find it (the planted test below).
LIGHT = {"repeats": 1, "trees": 50}


def id_features(episode_id: str) -> dict[str, float]:
    """What a policy can read off an id: its trailing index, residues and digits."""
    index = int(re.search(r"(\d+)$", episode_id).group(1))
    out = {"index": float(index), "tens": float(index // 10 % 10)}
    out.update({f"mod{k}": float(index % k) for k in range(2, 13)})
    return out


@pytest.mark.parametrize("split", SPLITS)
def test_no_rule_leads_from_an_episode_id_to_its_cause(split):
    ids = [row["episode_id"] for row in load_index(DATA / split)]
    labels = load_labels(DATA / split)
    truths = [{labels[i]["cause"], *(a["cause"] for a in labels[i].get("also") or ())} for i in ids]
    frame = pd.DataFrame([id_features(i) for i in ids])
    causes = sorted(set().union(*truths))
    probe = rule_probe(frame, truths, causes, np.random.default_rng(0), **LIGHT)
    assert probe.shortcuts == [], [(r.cause, r.hits, r.predicted, r.rule) for r in probe.shortcuts]
    assert len(probe.rules) == len(causes)  # every cause was probed


def test_a_composition_that_cycles_causes_is_found():
    """The probe can fail: ids of a composition that gives index i the cause i mod 6."""
    causes = [f"C{k}" for k in range(6)]
    ids = [f"planted-{i:06d}" for i in range(120)]
    truths = [{causes[i % 6]} for i in range(120)]
    frame = pd.DataFrame([id_features(i) for i in ids])
    probe = rule_probe(frame, truths, causes, np.random.default_rng(0), **LIGHT)
    assert {r.cause for r in probe.shortcuts} == set(causes)
