"""How much of the paged alerts a hypothesis accounts for, read off the daily report
(domains/ads/attribution.py), against the truth: the same alert read on the world without the
cause (same noise).

The estimate is a difference in differences: the region the cause can move against the rest of
the alert's scope. Its error is the region's own week-to-week noise relative to the alert's
move, plus, for causes whose effect spills outside the region (budget reallocated within a
campaign), the spill. The tests ask what the verifier and the oracle rely on: that the estimate
falls on the right side of the relevance share (0.25) whenever the truth is clearly on one side
(at least 0.5, or at most 0.05), and, for the causes that move conversions only (no spend, so no
budget to spill), that it is within 0.25 of the truth: the region's own week-to-week noise (a
few percent of its total, on a region of a quarter to a half of the scope) over an alerted move
of 15-30%. A spill makes the estimate larger, which errs on the side the verifier can afford
(one more rejected episode, never an accepted one whose competing cause was missed).
Default account, fixed strong draws, several seeds.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from causaltrace import InterventionDraw, Slice, Window, load_domain
from causaltrace.episodes.sampling import EpisodeSpec, build_episode

RELEVANCE = 0.25
DRAWS = {  # cause -> (slice, strength)
    "TRACKING_OUTAGE": ({"browser_os": "ios_safari"}, 0.9),
    "LANDING_PAGE_BREAK": ({"device": "mobile", "geo": "us_east"}, 0.8),
    "INVALID_TRAFFIC": ({"placement": "display"}, 15.0),
    "CREATIVE_FATIGUE": ({"creative": "generic_rsa_1"}, 3.0),
    "AD_DISAPPROVAL": ({"creative": "pmax_asset_group_1"}, 1.0),
    "TARGETING_EXPANSION": ({"audience": "broad"}, 3.0),
    "BID_MODIFIER_CHANGE": ({"campaign": "generic_search", "device": "mobile"}, 2.0),
}
CONVERSION_CAUSES = ("TRACKING_OUTAGE", "LANDING_PAGE_BREAK")
SEEDS = (0, 1, 2, 3)
# Accounts without twins. A twin acting inside the cause's region (two twin bid raises on
# remarketing's mobile segment, inside the ios_safari region, paging remarketing's cost on
# their own) moves the region against the rest of the scope, and the difference in
# differences credits that move to the cause: the estimator has no defence against it, by
# construction. Twins are placed near the incident on purpose (domains/ads/twins.py), so with
# them such accounts are common; generation still never shows their false pages (the gate reads
# the true shares from the worlds), and the oracle's agreement with the labels measures the
# cost (docs/audit). These tests are the estimator's properties where nothing else acts there.
NO_TWINS = {"background": {"twins": {"count_weights": [1.0]}}}


@functools.cache
def domain():
    return load_domain("ads", NO_TWINS)


@functools.cache
def pairs(cause: str, seed: int) -> list[tuple[float, float]]:
    """(true share, estimated share) of every paged alert of one episode."""
    d = domain()
    conditions, strength = DRAWS[cause]
    draw = InterventionDraw(
        cause, Slice.of(conditions), strength, Window(onset=d.scm.panel.n_time - 12)
    )
    episode = build_episode(d, EpisodeSpec(f"a-{seed}", "attr", seed, 31, cause, None), draw=draw)
    alerts = d.shown_alerts(d.alert_readings(episode.tables))
    without = {r.key: r for r in d.alert_readings(d.monitor_tables(episode.worlds.counterfactual))}
    attribution = d.evidence(episode.tables).attribution
    region = attribution.region(cause, draw.slice.mask(d.scm.panel))
    out = []
    for alert in alerts:
        true = (alert.move - without[alert.key].move) / alert.move
        estimate = attribution._share_of(alert, region)
        if estimate is not None:
            out.append((true, estimate))
    return out


@pytest.mark.parametrize("cause", sorted(DRAWS))
def test_estimate_is_on_the_right_side_of_the_relevance_share(cause):
    checked = 0
    for seed in SEEDS:
        for true, estimate in pairs(cause, seed):
            if true >= 0.5:
                assert estimate >= RELEVANCE, (seed, true, estimate)
                checked += 1
            elif abs(true) <= 0.05:
                assert estimate < RELEVANCE, (seed, true, estimate)
                checked += 1
    assert checked >= 1  # the draws are strong enough to page


@pytest.mark.parametrize("cause", CONVERSION_CAUSES)
def test_conversion_causes_are_estimated_within_a_tolerance(cause):
    errors = [abs(e - t) for seed in SEEDS for t, e in pairs(cause, seed) if abs(t) <= 1.5]
    assert errors and max(errors) <= 0.25, errors


def test_whole_account_hypotheses_are_not_estimated():
    d = domain()
    episode = build_episode(d, EpisodeSpec("a-9", "attr", 9, 31, "DEMAND_SHIFT", None))
    evidence = d.evidence(episode.tables)
    assert evidence.alert_share("DEMAND_SHIFT", None, d.alert_onset()) is None
    cells = np.zeros(d.scm.panel.n_cells, dtype=bool)
    cells[:5] = True
    assert evidence.alert_share("BUDGET_CAP", cells, d.alert_onset()) is None
