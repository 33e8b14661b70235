"""The ads domain: each cause moves the reports the documented way, the accounting holds, and
the prompt is cause-blind. (That no table's shape depends on the cause, and the other contracts
every domain keeps, is tests/episodes/test_domain_contracts.py's ``check_domain``.)

Per-cause effect tests and invariants use the default account over several seeds (prompt tests
the ``small`` preset), with a fixed strong draw per cause, rendered twice with
the same report generator: once from the factual world and once from the counterfactual, so
every difference between the two renderings is the cause's doing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _ads_support import STRONG

from causaltrace import InterventionDraw, Slice, Window, load_domain
from causaltrace_domains.ads import segments as seg
from causaltrace_domains.ads.causes import CAUSES, DESCRIPTIONS, GROUPS

# Per-cause effect tests run on the default account over several seeds.
SIGNATURE_SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def domain():
    return load_domain("ads", {"preset": "small"})


@pytest.fixture(scope="module")
def default_domain():
    return load_domain("ads")


def run(
    domain, cause: str, slice_text: str | None = None, strength: float | None = None, seed: int = 0
):
    scm = domain.scm
    text, top = STRONG[cause]
    draw = InterventionDraw(
        cause,
        Slice.of(
            dict(
                c.split("=")
                for c in filter(None, (slice_text if slice_text is not None else text).split("&"))
            )
        ),
        top if strength is None else strength,
        Window(onset=scm.panel.n_time - 12),
    )
    background = domain.background(np.random.default_rng(seed))
    worlds = scm.intervene(background.interventions).simulate(
        scm.interventions_for(draw), seed=seed + 100
    )
    factual = domain.render(worlds.factual, draw, background, np.random.default_rng(seed + 7))
    counterfactual = domain.render(
        worlds.counterfactual, draw, background, np.random.default_rng(seed + 7)
    )
    return draw, worlds, factual, counterfactual


def rows(frame: pd.DataFrame, slice_text: str, onset_date=None) -> pd.Series:
    mask = pd.Series(True, index=frame.index)
    for cond in filter(None, slice_text.split("&")):
        dim, level = cond.split("=")
        column = "utm_campaign" if dim == "campaign" and "utm_campaign" in frame else dim
        mask &= frame[column] == level
    if onset_date is not None:
        mask &= frame["date"] >= onset_date
    return mask


def totals(frame, mask, columns=("impressions", "clicks", "cost", "conversions", "invalid_clicks")):
    return frame.loc[mask, list(columns)].sum()


def onset_date(domain, draw):
    return pd.Timestamp(domain.scm.panel.time.values[draw.window.onset])


def test_twelve_causes_in_four_groups(domain):
    points = domain.scm.intervention_points
    assert len(points) == 12
    assert {p.info.group for p in points.values()} == set(GROUPS)
    for name, point in points.items():
        assert point.info is CAUSES[name]
        assert point.description == DESCRIPTIONS[name]
    assert [n for n, p in points.items() if p.info.no_signal] == ["NO_ANOMALY"]
    has_2d = {n for n, p in points.items() if any(len(d) == 2 for d in p.prior.slice_dims)}
    assert has_2d == {
        "TARGETING_EXPANSION",
        "BID_MODIFIER_CHANGE",
        "CREATIVE_FATIGUE",
        "TRACKING_OUTAGE",
        "LANDING_PAGE_BREAK",
        "INVALID_TRAFFIC",
        "AD_DISAPPROVAL",
    }
    no_slice = {n for n, p in points.items() if not p.prior.has_slice}
    assert no_slice == {"BUDGET_CAP", "COMPETITIVE_PRESSURE", "DEMAND_SHIFT", "NO_ANOMALY"}


@pytest.mark.parametrize("cause", ["TRACKING_OUTAGE", "LANDING_PAGE_BREAK", "INVALID_TRAFFIC"])
def test_unitwise_causes_leave_outside_rows_identical(domain, cause):
    _draw, _, fact, cf = run(domain, cause)
    inside = rows(fact["perf_daily"], STRONG[cause][0])
    pd.testing.assert_frame_equal(fact["perf_daily"][~inside], cf["perf_daily"][~inside])
    assert not fact["perf_daily"][inside].equals(cf["perf_daily"][inside])


@pytest.mark.parametrize("seed", SIGNATURE_SEEDS)
def test_tracking_outage_signature(default_domain, seed):
    domain = default_domain
    draw, _, fact, cf = run(domain, "TRACKING_OUTAGE", seed=seed)
    after = onset_date(domain, draw)
    perf = rows(fact["perf_daily"], "browser_os=ios_safari", after)
    f, c = totals(fact["perf_daily"], perf), totals(cf["perf_daily"], perf)
    assert f["conversions"] < 0.3 * c["conversions"]  # the tag stopped firing
    assert f["clicks"] == c["clicks"] and f["cost"] == c["cost"]
    # Backend orders are first-party: unchanged everywhere.
    pd.testing.assert_frame_equal(fact["site_analytics_daily"], cf["site_analytics_daily"])


@pytest.mark.parametrize("seed", SIGNATURE_SEEDS)
def test_landing_page_break_signature(default_domain, seed):
    domain = default_domain
    draw, _, fact, cf = run(domain, "LANDING_PAGE_BREAK", seed=seed)
    after = onset_date(domain, draw)
    sl = "device=mobile&geo=us_west"
    site = rows(fact["site_analytics_daily"], sl, after)
    f_orders = fact["site_analytics_daily"].loc[site, "backend_orders"].sum()
    c_orders = cf["site_analytics_daily"].loc[site, "backend_orders"].sum()
    assert f_orders < 0.35 * c_orders  # real orders fall (strength 0.9: about 10% remain)
    perf = rows(fact["perf_daily"], sl, after)
    assert totals(fact["perf_daily"], perf)["clicks"] == totals(cf["perf_daily"], perf)["clicks"]
    outside = ~rows(fact["site_analytics_daily"], sl)
    assert (
        fact["site_analytics_daily"].loc[outside, "backend_orders"]
        == cf["site_analytics_daily"].loc[outside, "backend_orders"]
    ).all()


@pytest.mark.parametrize("seed", SIGNATURE_SEEDS)
def test_invalid_traffic_signature(default_domain, seed):
    domain = default_domain
    draw, _, fact, cf = run(domain, "INVALID_TRAFFIC", seed=seed)
    perf = rows(fact["perf_daily"], "placement=display", onset_date(domain, draw))
    f, c = totals(fact["perf_daily"], perf), totals(cf["perf_daily"], perf)
    assert f["invalid_clicks"] > 5 * c["invalid_clicks"]
    assert f["clicks"] / f["impressions"] > 1.5 * c["clicks"] / c["impressions"]  # CTR up
    assert f["conversions"] / f["clicks"] < 0.8 * c["conversions"] / c["clicks"]  # CVR down


@pytest.mark.parametrize("seed", SIGNATURE_SEEDS)
def test_creative_fatigue_signature(default_domain, seed):
    domain = default_domain
    draw, _, fact, cf = run(domain, "CREATIVE_FATIGUE", seed=seed)
    perf = fact["perf_daily"]
    sl = rows(perf, "creative=brand_rsa_1", onset_date(domain, draw))
    f, c = totals(perf, sl), totals(cf["perf_daily"], sl)
    assert f["clicks"] / f["impressions"] < 0.8 * c["clicks"] / c["impressions"]
    assert abs(f["impressions"] / c["impressions"] - 1) < 0.1  # served about as often
    # The decay grows with exposure: the last week's CTR falls further than the first days'.
    daily = (
        perf[sl].groupby("date")[["clicks", "impressions"]].sum()
        / cf["perf_daily"][sl].groupby("date")[["clicks", "impressions"]].sum()
    )
    ratio = (daily["clicks"] / daily["impressions"]).to_numpy()
    assert ratio[-4:].mean() < ratio[:3].mean()


@pytest.mark.parametrize("seed", SIGNATURE_SEEDS)
def test_ad_disapproval_siblings_absorb(default_domain, seed):
    domain = default_domain
    draw, _, fact, cf = run(domain, "AD_DISAPPROVAL", seed=seed)
    after = onset_date(domain, draw)
    perf_f, perf_c = fact["perf_daily"], cf["perf_daily"]
    gone = rows(perf_f, "creative=pmax_asset_group_1", after)
    assert perf_f.loc[gone, "impressions"].sum() == 0 < perf_c.loc[gone, "impressions"].sum()
    sibling = rows(perf_f, "creative=pmax_asset_group_2", after)
    gained = perf_f.loc[sibling, "impressions"].sum() / perf_c.loc[sibling, "impressions"].sum()
    # One of two ads remains, with share s of the rotation (the account's own): it takes the ad
    # group's eligible auctions, which it wins s ** 0.6 as often (lower ad strength): s ** -0.4
    # times its own impressions, up to the noise of ~1e5 impressions (a few tenths of a
    # percent) and the per-cell spread of rotation shares around the account's (a few %).
    state = domain.background(np.random.default_rng(seed)).notes["state"]
    share = state.rotation_share(domain.scm.panel, "pmax_asset_group_2")
    assert gained >= share**-0.4 * 0.97  # (more where a freed budget lets it serve more)
    group = rows(perf_f, "campaign=pmax_prospecting", after)
    lost = perf_f.loc[group, "impressions"].sum() / perf_c.loc[group, "impressions"].sum()
    # The campaign keeps share ** 0.6 of its impressions, or more where it was budget-limited
    # (the spend it no longer makes lets the rest serve): it loses real volume all the same.
    assert share**0.6 * 0.97 < lost < 0.95
    status = fact["creatives"].set_index("creative")["policy_status"]
    assert status["pmax_asset_group_1"] == "disapproved"


@pytest.mark.parametrize("seed", SIGNATURE_SEEDS)
def test_segment_mix_causes_grow_their_slice(default_domain, seed):
    domain = default_domain
    for cause in ("TARGETING_EXPANSION", "PLACEMENT_SHIFT", "BID_MODIFIER_CHANGE"):
        draw, _, fact, cf = run(domain, cause, seed=seed)
        sl = rows(fact["perf_daily"], STRONG[cause][0], onset_date(domain, draw))
        after = rows(fact["perf_daily"], "", onset_date(domain, draw))
        share_f = (
            fact["perf_daily"].loc[sl, "impressions"].sum()
            / fact["perf_daily"].loc[after, "impressions"].sum()
        )
        share_c = (
            cf["perf_daily"].loc[sl, "impressions"].sum()
            / cf["perf_daily"].loc[after, "impressions"].sum()
        )
        # A bid raise saturates (the account already wins most auctions it bids in), so its
        # share grows least; expansion and placement shifts add volume outright. On a campaign
        # that is budget-limited in this account (allowed spend under its typical spend), a
        # bid raise buys dearer clicks, not more: its share need not grow.
        if cause == "BID_MODIFIER_CHANGE":
            state = domain.background(np.random.default_rng(seed)).notes["state"]
            limited = state.headroom["generic_search"] * domain.settings.overdelivery < 1.3
            if not limited:
                assert share_f > 1.1 * share_c, cause
        else:
            assert share_f > 1.3 * share_c, cause
    # A bid raise makes the slice's clicks dearer.
    draw, _, fact, cf = run(domain, "BID_MODIFIER_CHANGE", seed=seed)
    sl = rows(fact["perf_daily"], STRONG["BID_MODIFIER_CHANGE"][0], onset_date(domain, draw))
    f, c = totals(fact["perf_daily"], sl), totals(cf["perf_daily"], sl)
    assert f["cost"] / f["clicks"] > 1.1 * c["cost"] / c["clicks"]
    # Widening targeting brings low-intent users: the slice converts worse.
    draw, worlds, fact, cf = run(domain, "TARGETING_EXPANSION", seed=seed)
    mask = draw.slice.mask(domain.scm.panel)
    onset = draw.window.onset
    f_cvr = (
        worlds.factual["real_conversions"][mask][:, onset:].sum()
        / worlds.factual["human_clicks"][mask][:, onset:].sum()
    )
    c_cvr = (
        worlds.counterfactual["real_conversions"][mask][:, onset:].sum()
        / worlds.counterfactual["human_clicks"][mask][:, onset:].sum()
    )
    assert f_cvr < 0.8 * c_cvr


def campaign_sums(tables, after) -> pd.DataFrame:
    """perf_daily's impressions, clicks and cost per campaign from ``after`` on."""
    perf = tables["perf_daily"]
    return perf[perf["date"] >= after].groupby("campaign")[["impressions", "clicks", "cost"]].sum()


@pytest.mark.parametrize("seed", SIGNATURE_SEEDS)
def test_campaign_wide_signatures(default_domain, seed):
    domain = default_domain
    draw, _, fact, cf = run(domain, "BUDGET_CAP", seed=seed)
    after = onset_date(domain, draw)
    isf, isc = fact["impression_share_daily"], cf["impression_share_daily"]
    post = isf["date"] >= after
    assert (
        isf.loc[post, "search_lost_is_budget"].mean()
        > isc.loc[post, "search_lost_is_budget"].mean() + 0.2
    )
    # Standard delivery throttles every hour alike and runs out in the last hour or two: the
    # budget-limited days lose across the day, and the last hour loses more than midday.
    hf, hc = fact["perf_hourly"], cf["perf_hourly"]
    post = hf["date"] >= after
    by_hour_f = hf[post].groupby("hour")["impressions"].sum()
    by_hour_c = hc[post].groupby("hour")["impressions"].sum()
    ratio = by_hour_f / by_hour_c
    assert ratio[12] < 0.9  # throttled at midday too, not served in full then cut
    assert ratio[23] < ratio[12]
    late_share_f = by_hour_f[by_hour_f.index >= 20].sum() / by_hour_f.sum()
    late_share_c = by_hour_c[by_hour_c.index >= 20].sum() / by_hour_c.sum()
    assert 0.5 * late_share_c < late_share_f < late_share_c  # thinned, not cut off

    draw, _, fact, cf = run(domain, "COMPETITIVE_PRESSURE", seed=seed)
    after = onset_date(domain, draw)
    perf = rows(fact["perf_daily"], "", after)
    # CPC rises in every campaign, most where rivals bid on category terms (sensitivity 1.0)
    # and least on the brand's own name (0.45). Per campaign: the account's CPC rises less
    # than any campaign's, because the dearer campaigns lose the most clicks (mix).
    cpc_f, cpc_c = campaign_sums(fact, after), campaign_sums(cf, after)
    cpc = (cpc_f["cost"] / cpc_f["clicks"]) / (cpc_c["cost"] / cpc_c["clicks"])
    assert (cpc > 1.1).all(), cpc.to_dict()
    assert cpc["generic_search"] > cpc["brand_search"], cpc.to_dict()
    isf, isc = fact["impression_share_daily"], cf["impression_share_daily"]
    post = isf["date"] >= after
    assert (
        isf.loc[post, "search_lost_is_rank"].mean()
        > isc.loc[post, "search_lost_is_rank"].mean() + 0.05
    )
    ai_f, ai_c = fact["auction_insights_daily"], cf["auction_insights_daily"]
    rivals = (ai_f["competitor"] != "you") & (ai_f["date"] >= after)
    assert ai_f.loc[rivals, "impression_share"].mean() > ai_c.loc[rivals, "impression_share"].mean()

    draw, _, fact, cf = run(domain, "DEMAND_SHIFT", seed=seed)
    after = onset_date(domain, draw)
    perf = rows(fact["perf_daily"], "", after)
    f, c = totals(fact["perf_daily"], perf), totals(cf["perf_daily"], perf)
    # Demand falls to 1 - strength = 0.55, which reaches each campaign as 0.55 ** elasticity
    # (search 1.0, PMax 0.8, display 0.35). A campaign's impressions fall at least that far
    # down to count noise (millions of impressions: under 1%), or less where a budget-limited
    # campaign regains what pacing held back; never more.
    imp_f, imp_c = campaign_sums(fact, after), campaign_sums(cf, after)
    ratio = imp_f["impressions"] / imp_c["impressions"]
    specs = {spec.name: spec for spec in domain.settings.campaigns}
    level = pd.Series(
        {name: 0.55 ** seg.DEMAND_ELASTICITY[specs[name].kind] for name in ratio.index}
    )
    assert (ratio >= 0.99 * level).all() and (ratio < 1.0).all(), ratio.to_dict()
    # A campaign whose counterfactual spend stayed clear of its budget (under 0.8 of it on
    # every day, so pacing never held it back) falls to its level, up to count noise.
    budget = cf["campaigns"].set_index("campaign")["daily_budget"]
    daily = cf["perf_daily"][cf["perf_daily"]["date"] >= after]
    peak = daily.groupby(["campaign", "date"])["cost"].sum().groupby("campaign").max()
    clear = (peak < 0.8 * budget.reindex(peak.index)).reindex(ratio.index, fill_value=False)
    assert (ratio[clear] <= 1.01 * level[clear]).all(), (ratio.to_dict(), clear.to_dict())
    assert f["impressions"] < 0.85 * c["impressions"]
    isf, isc = fact["impression_share_daily"], cf["impression_share_daily"]
    post = isf["date"] >= after
    # Share holds: the fall is in the auctions, not in what the account wins of them. A
    # campaign that was losing share to its budget wins more of the fewer auctions (pacing
    # eases), so its share can only rise; the others' holds within 2 points.
    share_f = isf[post].groupby("campaign")["search_impression_share"].mean().dropna()
    share_c = isc[post].groupby("campaign")["search_impression_share"].mean().dropna()
    limited = isc[post].groupby("campaign")["search_lost_is_budget"].mean() > 0.02
    move = share_f - share_c
    assert not move.empty
    for name, delta in move.items():
        assert (delta > -0.02) if limited[name] else (abs(delta) < 0.02), (name, delta)
    # Prices hold in every campaign (the account's CPC moves with the mix: search, the dearer
    # clicks, loses the most).
    cpc = (imp_f["cost"] / imp_f["clicks"]) / (imp_c["cost"] / imp_c["clicks"])
    assert ((cpc - 1).abs() < 0.05).all(), cpc.to_dict()


@pytest.mark.slow
@pytest.mark.parametrize("seed", SIGNATURE_SEEDS)
def test_no_anomaly_carries_no_effect(default_domain, seed):
    domain = default_domain
    _, worlds, fact, cf = run(domain, "NO_ANOMALY", seed=seed)
    assert worlds.affected == frozenset()
    for name in worlds.factual:
        assert worlds.factual[name] is worlds.counterfactual[name]
    for table in fact:
        pd.testing.assert_frame_equal(fact[table], cf[table])


@pytest.mark.parametrize("seed", [5, 6])
@pytest.mark.parametrize("cause", sorted(STRONG))
def test_accounting_invariants(default_domain, cause, seed):
    """Accounting identities of the default account, every cause, two seeds."""
    domain = default_domain
    _, worlds, fact, _ = run(domain, cause, seed=seed)
    w, panel = worlds.factual, domain.scm.panel
    perf = fact["perf_daily"]
    assert (perf["clicks"] <= perf["impressions"]).all()
    assert (w["tracked_conversions"] <= w["real_conversions"]).all()
    # Reported conversions are the tagged and modelled ones, still maturing.
    assert (w["conversions"] <= w["tracked_conversions"] + w["modelled_conversions"]).all()
    assert (w["invalid_clicks"] <= w["bot_clicks"]).all()
    # Connected TVs are not clickable: no clicks, no sessions.
    ctv = panel.labels("device") == "ctv"
    assert ctv.any() and (w["clicks"][ctv] == 0).all() and (w["sessions"][ctv] == 0).all()
    # Search impression share + lost (budget) + lost (rank) = 1 for every campaign-day with
    # search auctions; campaigns without search report none.
    shares = fact["impression_share_daily"]
    cols = ["search_impression_share", "search_lost_is_budget", "search_lost_is_rank"]
    reported = shares[cols[0]].notna()
    np.testing.assert_allclose(shares.loc[reported, cols].sum(axis=1), 1.0, atol=1e-9)
    searchless = {c.name for c in domain.settings.campaigns} - {
        c.name
        for c in domain.settings.campaigns
        if {"search", "search_partners"} & set(c.placements)
    }
    assert set(shares.loc[~reported, "campaign"].astype(str)) == searchless
    # Pacing holds the expected spend within the day's overdelivery limit, and the billed cost
    # stays within the platform's daily limit of twice the budget.
    idx, n_campaigns = panel.group_index(("campaign",))
    first = np.array([np.flatnonzero(idx == g)[0] for g in range(n_campaigns)])
    budget = w["daily_budget"][first]
    expected = panel.group_sum(w["impressions"] * w["ctr"] * w["expected_cpc"], ("campaign",))
    assert (expected <= 1.2 * domain.settings.overdelivery * budget).all()
    assert (panel.group_sum(w["cost"], ("campaign",)) <= 2.0 * budget).all()
    # Leaf rows add up to every aggregate table, to the unit and to the cent.
    hourly = (
        fact["perf_hourly"]
        .groupby(["date", "campaign", "device"], observed=True)[
            ["impressions", "clicks", "cost", "conversions"]
        ]
        .sum()
    )
    daily = (
        perf[perf["date"].isin(fact["perf_hourly"]["date"].unique())]
        .groupby(["date", "campaign", "device"], observed=True)[
            ["impressions", "clicks", "cost", "conversions"]
        ]
        .sum()
    )
    daily = daily.loc[hourly.index]
    pd.testing.assert_frame_equal(
        hourly[["impressions", "clicks", "conversions"]],
        daily[["impressions", "clicks", "conversions"]],
    )
    np.testing.assert_allclose(hourly["cost"], daily["cost"], atol=0.005)
    by_campaign = perf.groupby(["campaign", "date"], observed=True)["impressions"].sum()
    share_imps = shares.set_index(["campaign", "date"])["impressions"]
    assert (by_campaign.loc[share_imps.index] == share_imps).all()
    reach = fact["reach_frequency_daily"].set_index(["campaign", "creative", "date"])
    by_creative = perf.groupby(["campaign", "creative", "date"], observed=True)["impressions"].sum()
    assert (by_creative.loc[reach.index] == reach["impressions"]).all()
    assert (reach["reach"] <= reach["impressions"]).all()
    # Backend orders at the site grain are the real conversions of the clicks there.
    site = fact["site_analytics_daily"]
    assert site["backend_orders"].sum() == w["real_conversions"].sum()


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(
    "cause, slice_text, strength",
    [
        ("TRACKING_OUTAGE", "browser_os=ios_safari", 0.95),
        ("LANDING_PAGE_BREAK", "device=mobile&geo=us_west", 0.9),
        ("INVALID_TRAFFIC", "placement=display", 12.0),
        ("INVALID_TRAFFIC", "geo=us_east&placement=search_partners", 12.0),
    ],
)
@pytest.mark.slow
def test_unitwise_causes_on_the_default_account(default_domain, cause, slice_text, strength, seed):
    """Unit-wise causes change nothing outside their slice, cost included (no per-campaign cap
    moves spend between cells), on the default account over several seeds."""
    draw, worlds, fact, cf = run(default_domain, cause, slice_text, strength, seed=seed)
    mask = draw.slice.mask(default_domain.scm.panel)
    for node in ("impressions", "clicks", "cost", "conversions", "real_conversions", "sessions"):
        f, c = worlds.factual[node], worlds.counterfactual[node]
        np.testing.assert_array_equal(f[~mask], c[~mask], err_msg=f"{cause} {node}")
    inside = rows(fact["perf_daily"], slice_text)
    pd.testing.assert_frame_equal(fact["perf_daily"][~inside], cf["perf_daily"][~inside])
    assert not fact["perf_daily"][inside].equals(cf["perf_daily"][inside])


def test_prompt_is_cause_blind(domain):
    """Same background and noise, different causes: the prompts differ only in the alerts (the
    lines that name them and their count)."""
    prompts = {}
    for cause in ("NO_ANOMALY", "TRACKING_OUTAGE", "BUDGET_CAP"):
        _, _, fact, _ = run(domain, cause, seed=2)
        prompts[cause] = domain.task_prompt(fact)
    strip = {
        c: [
            line
            for line in p.splitlines()
            if not line.startswith("ALERT:") and "It just paged (" not in line
        ]
        for c, p in prompts.items()
    }
    assert strip["NO_ANOMALY"] == strip["TRACKING_OUTAGE"] == strip["BUDGET_CAP"]
    for prompt in prompts.values():
        n = prompt.count("ALERT:")
        assert 1 <= n <= 3
        assert f"It just paged ({n} alert" in prompt
        for other in STRONG:  # every cause is listed once, in the same order
            assert prompt.count(f"- {other}:") == 1
