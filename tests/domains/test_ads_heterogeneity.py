"""Effects that differ across segments where the mechanism says they should, and reactions to
edits (domains/ads/mechanisms.py, causes.py): competition by keyword theme and geo, demand by
campaign type, budget throttling by device (the budget runs out in the evening, where mobile
traffic is), smart bidding's learning period after a large budget edit, slow rate drift.

Each effect is read on the world with the cause against the world without it, same noise, so the
ratios below are the mechanism's own, not estimates: a node that the noise drives identically in
both worlds cancels exactly.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from causaltrace import InterventionDraw, Slice, Window, load_domain
from causaltrace_domains.ads.causes import LEARNING_EDIT

SEEDS = (0, 1, 2)


@functools.cache
def domain():
    return load_domain("ads")


def worlds(cause: str, strength: float, seed: int, extras=None, onset_back: int = 12):
    d = domain()
    draw = InterventionDraw(
        cause, Slice(), strength, Window(onset=d.scm.panel.n_time - onset_back), extras or {}
    )
    return d.scm.simulate(d.scm.interventions_for(draw), seed=seed), d.scm.panel.n_time - onset_back


def by(panel, values: np.ndarray, dim: str) -> dict[str, float]:
    labels = panel.labels(dim)
    return {level: float(values[labels == level].mean()) for level in np.unique(labels)}


@pytest.mark.parametrize("seed", SEEDS)
def test_competition_reaches_category_terms_most_and_geos_unevenly(seed):
    """The competition level x 1.5 raises each cell's competitor pressure by 1.5 ** sensitivity:
    generic search's theme sensitivity is 1, brand's 0.45, so the log rise on brand is under
    half of generic's; and the per-geo trait (log-sd 0.3) spreads the rise across geos."""
    w, onset = worlds("COMPETITIVE_PRESSURE", 0.5, seed)
    panel = domain().scm.panel
    rise = np.log(
        w.factual["competitor_pressure"][:, onset:]
        / w.counterfactual["competitor_pressure"][:, onset:]
    )
    per_cell = rise.mean(axis=1)
    campaigns = by(panel, per_cell, "campaign")
    assert campaigns["brand_search"] < 0.6 * campaigns["generic_search"]
    generic = panel.labels("campaign") == "generic_search"
    geos = [
        per_cell[generic & (panel.labels("geo") == g)].mean()
        for g in np.unique(panel.labels("geo")[generic])
    ]
    assert max(geos) / min(geos) > 1.05  # four US geos, traits with log-sd 0.3: not one number


@pytest.mark.parametrize("seed", SEEDS)
def test_demand_falls_most_on_category_search_least_on_remarketing(seed):
    """Demand level x (1 - 0.4): elasticity 1 (search), 0.8 (Performance Max), 0.35
    (remarketing), so market demand falls to 0.6, 0.6 ** 0.8 = 0.66 and 0.6 ** 0.35 = 0.84."""
    w, onset = worlds("DEMAND_SHIFT", 0.4, seed)
    panel = domain().scm.panel
    ratio = (
        w.factual["market_demand"][:, onset:] / w.counterfactual["market_demand"][:, onset:]
    ).mean(axis=1)
    campaigns = by(panel, ratio, "campaign")
    assert campaigns["generic_search"] == pytest.approx(0.6, abs=1e-9)
    assert campaigns["pmax_prospecting"] == pytest.approx(0.6**0.8, abs=1e-9)
    assert campaigns["remarketing"] == pytest.approx(0.6**0.35, abs=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_binding_budget_cuts_mobile_evenings_more_than_desktop_days(seed):
    """A deep cut on generic search binds every day; the budget runs out once 90-99% of the
    day's spend-weighted demand curve has passed, in the evening, where mobile traffic peaks
    (19:30) and desktop's (13:00) is long over: mobile keeps a smaller share of its won
    auctions than desktop."""
    w, onset = worlds("BUDGET_CAP", 0.8, seed, {"campaigns": ["generic_search"]})
    panel = domain().scm.panel
    generic = panel.labels("campaign") == "generic_search"
    pacing = w.factual["pacing"][:, onset:]
    cutoff = w.factual["budget_cutoff_hour"][generic, onset:]
    assert (cutoff < 24).all() and (cutoff > 15).all()
    mobile = pacing[generic & (panel.labels("device") == "mobile")].mean()
    desktop = pacing[generic & (panel.labels("device") == "desktop")].mean()
    assert mobile < desktop
    # and the other campaigns' pacing is untouched
    assert np.array_equal(w.factual["pacing"][~generic], w.counterfactual["pacing"][~generic])


def test_smart_bidding_relearns_after_a_large_budget_edit():
    """A cut of at least LEARNING_EDIT on a smart-bidding campaign (Performance Max, target CPA)
    starts a learning period: its expected CPC rises by 0.4 x the cut at the edit and fades;
    a manual-CPC campaign cut by as much does not relearn."""
    cut = max(LEARNING_EDIT, 0.5)
    w, onset = worlds("BUDGET_CAP", cut, 0, {"campaigns": ["pmax_prospecting", "generic_search"]})
    panel = domain().scm.panel
    ratio = w.factual["expected_cpc"] / w.counterfactual["expected_cpc"]
    pmax = panel.labels("campaign") == "pmax_prospecting"
    generic = panel.labels("campaign") == "generic_search"
    first = ratio[pmax, onset]
    np.testing.assert_allclose(first, 1 + 0.4 * cut, rtol=1e-12)
    assert ratio[pmax, onset + 3].mean() < first.mean()  # fading
    assert np.array_equal(ratio[generic], np.ones_like(ratio[generic]))


def test_conversion_rates_drift_slowly():
    """Each campaign's conversion rate drifts by a random walk of 0.6% a day: over the 8 weeks it
    wanders by about 0.6% x sqrt(55) = 4.5% (sd), not by jumps (a day's step stays small)."""
    d = domain()
    world = d.scm.simulate([], seed=3, counterfactual=False).factual
    drift = world["intent_drift"]
    steps = np.abs(np.diff(np.log(drift), axis=1))
    assert steps.max() < 0.05  # 8 sd of a 0.6% step
    spread = np.log(drift[:, -1]).std()
    assert 0.005 < spread < 0.15
