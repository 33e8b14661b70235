"""What every committed split's labels promise (issue 23), read from the labels and prompts as
committed: every signal episode's paged alert is at least half its causes' doing, and every
cause of a concurrent episode makes at least a quarter of an alert its prompt shows. The
generator's gates check this on fresh episodes (tests/generation/test_concurrent_generation.py);
this checks the splits people download and evaluate on, with the verifier's own thresholds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from causaltrace.datasets.reading import load_labels
from causaltrace.datasets.storage import DatasetLayout
from causaltrace.episodes.verify import VerifierConfig

ROOT = Path(__file__).resolve().parents[2]
SPLITS = sorted(p for p in (ROOT / "data").iterdir() if (p / "manifest.json").exists())
THRESHOLDS = VerifierConfig()


def alert_key(alert: dict) -> str:
    return f"{alert['kpi']}@{alert['scope']}"


@pytest.mark.parametrize("split", SPLITS, ids=[p.name for p in SPLITS])
def test_labels_keep_the_alert_gates(split):
    labels = load_labels(split)
    prompts = {r["episode_id"]: r["prompt"] for r in DatasetLayout(split).all_index()}
    signal = [lab for lab in labels.values() if lab["cause"] != "NO_ANOMALY"]
    assert signal, f"{split.name}: no signal episode"
    for lab in signal:
        parts = (lab, *lab.get("also", ()))
        paged = alert_key(lab["extra"]["alert"])
        # Shapley shares of the paged alert add up to the causes' explained share.
        explained = sum(part["extra"]["alert_shares"].get(paged, 0.0) for part in parts)
        assert explained >= THRESHOLDS.explained_share - 1e-9, (lab["episode_id"], explained)
        if len(parts) == 1:
            continue
        prompt = prompts[lab["episode_id"]]
        for part in parts:
            shares = part["extra"]["alert_shares"]
            best = max(shares, key=shares.get)
            assert shares[best] >= THRESHOLDS.concurrent_share, (lab["episode_id"], part["cause"])
            kpi = best.split("@")[0]
            shown = re.search(rf"^ALERT: .*({kpi}|{kpi.replace('_', ' ')})", prompt, re.M)
            assert shown, (lab["episode_id"], part["cause"], best)
