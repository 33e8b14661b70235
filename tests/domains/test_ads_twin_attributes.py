"""Twins drawn from the accepted causes' measured attributes (issue 46 item 2): the table is
what its command measures, and a twin of a measured cause carries one of its rows jointly
(target, size, day) and, where the account allows, its reach and place."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from causaltrace import load_domain, parse_slice
from causaltrace.errors import CausalTraceError
from causaltrace_domains.ads.edits import touched_campaigns
from causaltrace_domains.ads.twin_attributes import (
    TABLES,
    AcceptedAttributes,
    load_table,
    measure,
    strength_at,
    strength_quantile,
)

ROOT = Path(__file__).resolve().parents[2]
SPLITS = [
    ROOT / "data" / s for s in ("ads_test", "ads_easy", "ads_medium", "ads_hard", "ads_expert")
]
TABLE = "committed_splits"


def test_the_shipped_table_is_what_its_command_measures(tmp_path):
    """docs/domain-ads.md's command, run in the repository root, writes the shipped table."""
    out = tmp_path / "table.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "causaltrace_domains.ads.measure_twin_attributes",
            *[f"data/{p.name}" for p in SPLITS],
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Warning" not in done.stderr, done.stderr
    assert out.read_bytes() == (TABLES / f"{TABLE}.json").read_bytes()
    assert measure(SPLITS).rows == load_table(TABLE).rows


def test_strength_quantiles_invert():
    domain = load_domain("ads", {})
    for cause in ("BID_MODIFIER_CHANGE", "TARGETING_EXPANSION"):
        prior = domain.scm.intervention_points[cause].prior
        for q in (0.0, 0.3, 0.77, 1.0):
            assert strength_quantile(prior, strength_at(prior, q)) == pytest.approx(q, abs=1e-12)


@pytest.mark.parametrize("seed0", [0, 1000])
def test_twins_carry_a_measured_row_jointly(seed0):
    """Over 150 episodes' backgrounds of the default preset (two seed ranges), every bid and
    targeting twin has the size (quantile) and day of one measured row together with that
    row's target; its reach is the row's in most twins (the account may have no slice of that
    target and reach: the closest draw is taken), and the targets' shares follow the table's."""
    domain = load_domain("ads", {"twin_attributes": TABLE})
    scm, table = domain.scm, load_table(TABLE)
    n = scm.panel.n_time
    seen = {c: [] for c in table.rows}
    for seed in range(seed0, seed0 + 150):
        rng = np.random.default_rng(seed)
        cause = scm.intervention_points["BID_MODIFIER_CHANGE"].sample(rng, scm.panel)
        background = domain.background(rng, (cause,))
        for twin in background.notes["twins"]:
            kind = twin.kind.removeprefix("twin:")
            if kind not in seen:
                continue
            prior = scm.intervention_points[kind].prior
            where = parse_slice(twin.details["slice"], scm.panel)
            seen[kind].append(
                (
                    tuple(sorted(where.dims)),
                    round(strength_quantile(prior, twin.details["strength"]), 9),
                    n - 1 - twin.details["onset"],
                    len(touched_campaigns(scm.panel, where)),
                )
            )
    for kind, twins in seen.items():
        rows = table.rows[kind]
        assert len(twins) >= 20, (kind, len(twins))
        # Size and day: a row's, exactly (the day clipped to the prior's onset range, which
        # every measured row lies in).
        by_size = {(round(r.strength_quantile, 9), r.days_before_end): r for r in rows}
        matched = [by_size.get((q, d)) for _, q, d, _ in twins]
        assert all(m is not None for m in matched), kind
        # Target: the row's own in every twin whose account has that target among the prior's.
        assert sum(m.dims == t[0] for m, t in zip(matched, twins)) >= 0.95 * len(twins), kind
        assert sum(m.reach == t[3] for m, t in zip(matched, twins)) >= 0.9 * len(twins), kind
        # The targets' shares: each target's count is Binomial(len(twins), its table share);
        # 4 standard deviations bound a miss at about 6e-5 per target.
        want = Counter(r.dims for r in rows)
        got = Counter(t[0] for t in twins)
        for dims, count in want.items():
            p = count / len(rows)
            sd = np.sqrt(len(twins) * p * (1 - p))
            assert abs(got[dims] - len(twins) * p) <= 4 * sd + 1, (kind, dims)


def test_without_a_table_twins_are_drawn_as_before():
    """The key is off by default: the committed splits' twins (their manifests do not record
    it) are drawn from the hand-fitted quantiles, the same draws as without the table code."""
    plain = load_domain("ads", {})
    assert plain.settings.twin_attributes is None
    rng = np.random.default_rng(3)
    cause = plain.scm.intervention_points["BID_MODIFIER_CHANGE"].sample(rng, plain.scm.panel)
    again = np.random.default_rng(3)
    plain.scm.intervention_points["BID_MODIFIER_CHANGE"].sample(again, plain.scm.panel)
    a = plain.background(rng, (cause,))
    b = plain.background(again, (cause,))
    assert [t.details for t in a.notes["twins"]] == [t.details for t in b.notes["twins"]]


def test_a_missing_or_malformed_table_is_named(tmp_path):
    with pytest.raises(
        CausalTraceError, match=r"no table 'nope' \(shipped: \['committed_splits'\]\)"
    ):
        load_table("nope")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rows": {"BID_MODIFIER_CHANGE": [{"dims": ["geo"]}]}}))
    with pytest.raises(CausalTraceError, match=r"bad.json: malformed table"):
        load_table(str(bad))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"rows": {"DEMAND_SHIFT": []}}))
    with pytest.raises(CausalTraceError, match=r"no twin reads causes \['DEMAND_SHIFT'\]"):
        AcceptedAttributes.from_dict(json.loads(other.read_text()), str(other))
