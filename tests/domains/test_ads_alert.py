"""The ads monitor and the explained-alert gate on the default account, over several seeds.

The monitor must compare like with like (lag-adjusted conversions, the holiday season left
out), so that without a cause it raises no systematic alert; the gate must reject a cause that
does not make the alert and accept one that does.
"""

from __future__ import annotations

import numpy as np
import pytest

from causaltrace import InterventionDraw, Slice, Window, load_domain, raised_alert
from causaltrace.episodes.acceptance import verify_episode
from causaltrace.episodes.sampling import EpisodeSpec, build_episode
from causaltrace.episodes.verify import VerifierConfig

SEEDS = (1, 2, 3, 4)


@pytest.fixture(scope="module")
def domain():
    return load_domain("ads")


def episode(domain, cause, slice_text, strength, seed, onset_back=10):
    conditions = dict(c.split("=") for c in filter(None, slice_text.split("&")))
    draw = InterventionDraw(
        cause,
        Slice.of(conditions),
        strength,
        Window(onset=domain.scm.panel.n_time - onset_back),
    )
    order = len(conditions) or None
    spec = EpisodeSpec(f"t-{seed}", "test", seed, 1000 + seed, cause, order)
    return build_episode(domain, spec, draw=draw)


def reading(readings, kpi, scope="account"):
    return next(r for r in readings if r.kpi == kpi and r.scope == scope)


@pytest.mark.parametrize("seed", SEEDS)
def test_monitor_reads_the_same_from_tables_and_from_the_world(domain, seed):
    ep = episode(domain, "NO_ANOMALY", "", 1.0, seed)
    from_tables = domain.alert_readings(ep.tables)
    from_world = domain.alert_readings(domain.monitor_tables(ep.worlds.factual))
    assert [r.key for r in from_tables] == [r.key for r in from_world]
    for a, b in zip(from_tables, from_world):
        # perf_daily is rendered from the same world; only cost's cent rounding can differ.
        assert a.current == pytest.approx(b.current, rel=1e-9)
        assert a.baseline == pytest.approx(b.baseline, rel=1e-9)


def test_lag_adjusted_conversions_show_no_systematic_alert(domain):
    """Without a cause, raw last-week conversions are far below the matured weeks (the lag:
    about 72% of the last 7 days' conversions are reported against ~94-98% of the baseline
    weeks'), while the lag-adjusted reading the monitor uses is centred on 0.

    Tolerance: the account's weekly conversions (~9,000) vary by ~3-5% from demand shocks and
    background processes; the mean over 4 seeds of the adjusted move must be within 0.06 of 0
    (the raw move sits near -0.25, more than 4 standard deviations away)."""
    adjusted, raw = [], []
    for seed in SEEDS:
        ep = episode(domain, "NO_ANOMALY", "", 1.0, seed)
        adjusted.append(reading(domain.alert_readings(ep.tables), "conversions").move)
        perf = ep.tables["perf_daily"]
        daily = perf.groupby("date")["conversions"].sum().to_numpy()
        raw.append(daily[-7:].sum() / (daily[-35:-7].sum() / 4) - 1)
    assert abs(np.mean(adjusted)) < 0.06, adjusted
    assert np.mean(raw) < -0.15, raw


@pytest.mark.parametrize("seed", SEEDS)
def test_gate_rejects_a_cause_without_effect(domain, seed):
    ep = episode(domain, "TRACKING_OUTAGE", "browser_os=ios_safari", 0.0, seed)
    verdict = verify_episode(domain, ep, VerifierConfig())
    assert not verdict.accepted
    assert verdict.reason in ("no_alert", "alert_unexplained"), verdict.reasons
    if ep.alert is not None:  # a false alarm fired: the cause made none of it
        assert ep.alert.explained_share == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_gate_accepts_a_cause_that_makes_the_alert(domain, seed):
    """A deep account-wide budget cut makes the page and is accepted, unless the episode's
    background (twins, pauses, promotions) would have paged on its own: then the gate refuses
    the episode for that reason, whatever share the cause explains."""
    ep = episode(domain, "BUDGET_CAP", "", 0.8, seed, onset_back=8)
    verdict = verify_episode(domain, ep, VerifierConfig())
    assert ep.alert is not None
    assert ep.alert.explained_share >= 0.5
    if ep.alert.fires_without_cause:
        assert not verdict.accepted and verdict.reason == "alert_without_cause"
        return
    assert verdict.accepted, verdict.reasons
    assert ep.label.extra["alert"]["explained_share"] == ep.alert.explained_share
    # The prompt shows the alert the rule raised, the one the label explains.
    raised = raised_alert(domain.alert_readings(ep.tables))
    assert raised is not None and raised.key == (ep.alert.kpi, ep.alert.scope)
    alert_line = next(line for line in ep.prompt.splitlines() if line.startswith("ALERT:"))
    assert raised.kpi in alert_line


def test_most_budget_cut_episodes_page_for_the_cause_alone(domain):
    """The gate's refusal above is the exception: in most of these accounts the background
    stays below the monitor's bar without the cut (3 of the 4 seeds at least)."""
    clean = 0
    for seed in SEEDS:
        ep = episode(domain, "BUDGET_CAP", "", 0.8, seed, onset_back=8)
        clean += ep.alert is not None and not ep.alert.fires_without_cause
    assert clean >= 3


@pytest.mark.parametrize("seed", SEEDS)
def test_ad_disapproval_costs_the_account_real_volume(domain, seed):
    """The disapproved ad's siblings take its auctions but win fewer of them (ad strength
    falls): with the sibling at share s of the rotation, the ad group wins s ** 0.6 of what it
    did, so the campaign's impressions after the onset fall by a material share (not a
    reshuffle), and its clicks with them. Where the campaign was budget-limited, the spend it no
    longer makes lets it serve more elsewhere, so it keeps at least s ** 0.6 of its impressions
    up to a few percent (the placements' and geos' own spread around the account's rotation;
    with ~1e6 impressions the count noise is under 0.1%). The bound is on impressions, not
    clicks: clicks also change with the sibling's own CTR, which differs from the disapproved
    ad's by a few percent either way."""
    ep = episode(domain, "AD_DISAPPROVAL", "creative=pmax_asset_group_1", 1.0, seed)
    campaign = Slice.of(campaign="pmax_prospecting").mask(domain.scm.panel)
    onset = ep.draw.window.onset
    (imp_f, imp_c), (f, c) = (
        tuple(
            w[kpi][campaign][:, onset:].sum() for w in (ep.worlds.factual, ep.worlds.counterfactual)
        )
        for kpi in ("impressions", "clicks")
    )
    share = ep.background.notes["state"].rotation_share(domain.scm.panel, "pmax_asset_group_2")
    assert 0.97 * share**0.6 < imp_f / imp_c < 0.95, (imp_f, imp_c, share)
    assert f / c < 0.95, (f, c)


def test_no_anomaly_alert_is_never_unexplained(domain):
    for seed in SEEDS:
        ep = episode(domain, "NO_ANOMALY", "", 1.0, seed)
        verdict = verify_episode(domain, ep, VerifierConfig())
        assert not any(r.startswith("alert_unexplained") for r in verdict.reasons)
        assert verdict.accepted == (ep.alert is not None) or verdict.reason == "no_signal_detects"
