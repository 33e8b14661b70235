"""The ads domain's background: documented processes in both worlds, plausible decoy edits, and a
change history whose size never depends on the cause.

Each process is checked against the world without it (same noise seed): the node it intervenes on
moves by exactly the documented factor where and when it acts and is bit-identical elsewhere, and
the outcomes it is documented to move move in the documented direction. The count mechanisms
draw through inverse CDFs with shared uniform noise, so a larger rate or mean gives a count at
least as large cell by cell: one-sided cell-wise bounds are exact, not statistical.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _ads_support import PRESETS, background_of, domain_of

from causaltrace import InterventionDraw, Scale, Slice, Window
from causaltrace.errors import CausalTraceError
from causaltrace_domains.ads.account_state import StatePrior, sample_state
from causaltrace_domains.ads.background import (
    PROCESS_PRIORS,
    BackgroundPrior,
    Calendar,
    LearningPeriodPrior,
    sample_background,
)
from causaltrace_domains.ads.causes import CAUSES, account_change
from causaltrace_domains.ads.changes import COLUMNS, change_history, draw_edits

SEEDS = range(60)


def backgrounds(preset: str, seeds=SEEDS):
    return [background_of(preset, s) for s in seeds]


def items(bg):
    """Every process, twin and decoy of a background."""
    return (*bg.notes["processes"], *bg.notes["twins"], *bg.notes["decoys"])


def find(preset: str, kind: str, **details):
    """The first (seed, process) of ``kind`` (with these details) over the seeds."""
    for seed in range(2000):
        for item in items(background_of(preset, seed)):
            if item.kind == kind and all(item.details.get(k) == v for k, v in details.items()):
                return seed, item
    raise AssertionError(f"no {kind} {details} in 2000 backgrounds of {preset}")


def served(panel, campaign: str, target: str) -> bool:
    levels = dict(c.split("=") for c in target.split("&"))
    return bool(Slice.of(campaign=campaign, **levels).mask(panel).any())


@pytest.fixture(params=sorted(PRESETS))
def preset(request):
    return request.param


# -- structure ---------------------------------------------------------------------------------


def test_interventions_target_existing_nodes_and_cells(preset):
    scm = domain_of(preset).scm
    panel = scm.panel
    for bg in backgrounds(preset):
        # The background's interventions are the account's state, then exactly those of its
        # processes, twins and decoys.
        state = bg.notes["state"].interventions(panel)
        assert bg.interventions == (
            *state,
            *(iv for item in items(bg) for iv in item.interventions),
        )
        for iv in bg.interventions:
            assert isinstance(iv, Scale)
            assert iv.node in scm.nodes, iv
            iv.where.validate(panel)
            assert iv.where.mask(panel).any(), iv
            assert (iv.weight(panel) > 0).any(), iv  # it acts on some day of the panel


def test_every_process_kind_and_count_occurs(preset):
    kinds, counts = set(), set()
    for bg in backgrounds(preset):
        processes = bg.notes["processes"]
        counts.add(len(processes))
        kinds |= {p.kind for p in processes}
        assert len({p.kind for p in processes}) == len(processes)  # no kind twice
    assert kinds == set(PROCESS_PRIORS)
    assert counts == {1, 2, 3, 4}


def test_draws_stay_within_their_priors(preset):
    prior = BackgroundPrior()
    n = domain_of(preset).scm.panel.n_time
    for bg in backgrounds(preset):
        for p in bg.notes["processes"]:
            factors = {iv.node: iv.factor for iv in p.interventions}
            windows = {iv.window for iv in p.interventions}
            assert len(windows) == 1  # a process's interventions act together
            (window,) = windows
            length = None if window.end is None else window.end - window.onset
            if p.kind == "promotion":
                assert 1.15 <= factors["cvr"] <= 1.4 and 0.8 <= factors["order_value"] <= 0.92
                assert 3 <= length <= 14
            elif p.kind == "learning_period":
                assert 1.1 <= factors["expected_cpc"] <= 1.3 and 0.85 <= factors["cvr"] <= 0.95
                assert 5 <= length <= 14 and 2.0 <= window.profile.half_life <= 5.0
            elif p.kind == "auction_volatility":
                f = factors["competitor_pressure"]
                assert (1.1 <= f <= 1.3) or (0.8 <= f <= 0.9)
                assert 5 <= length <= 20
            elif p.kind == "campaign_pause":
                assert factors == {"campaign_enabled": 0.0}
                assert 1 <= length <= 3 and window.end <= n - 1
            elif p.kind == "pmax_cannibalisation":
                brand, pmax = p.interventions
                s = 1 - brand.factor
                assert 0.05 <= s <= 0.2
                assert 0.5 * s <= pmax.factor - 1 <= 1.5 * s + 1e-12
                assert 3 <= window.profile.steps <= 7 and window.end is None
            elif p.kind == "consent_change":
                assert 0.85 <= factors["consent_rate"] <= 0.95
                assert p.interventions[0].where.as_dict()["geo"] in prior.consent_change.geos
            else:
                assert p.kind == "enhanced_conversions"
                assert 1.02 <= factors["tag_fire_rate"] <= 1.04


def test_logged_edits_name_what_the_campaign_serves(preset):
    domain = domain_of(preset)
    panel, cfg = domain.scm.panel, domain.settings
    specs = {c.name: c for c in cfg.campaigns}
    kinds = {name: c.kind for name, c in specs.items()}
    cal = Calendar.of(panel, cfg)
    for bg in backgrounds(preset):
        edits = [*bg.notes["effectful"], *bg.notes["effect_free"]]
        assert edits
        for e in edits:
            assert cal.first_logged <= e.day < panel.n_time and 0 <= e.hour < 24
            if e.campaign == "":  # account-level settings
                assert e.target == "account" and e.change_type in ("conversions", "billing")
                continue
            assert e.campaign in panel.dimension("campaign").levels
            assert e.target == "campaign" or served(panel, e.campaign, e.target), e
            if e.field in ("negative_keywords", "observed_audience_segments", "audience_setting"):
                assert kinds[e.campaign] == "search", e
            if e.field == "optimized_targeting":
                assert kinds[e.campaign] == "display", e
            if e.field == "final_url_expansion":
                assert kinds[e.campaign] == "performance_max", e
            if e.field == "bid_adjustment":
                assert specs[e.campaign].takes_bid_adjustments, e
            if e.field == "target_cpa":
                assert specs[e.campaign].smart_bidding, e
            if e.field == "promotion":
                assert kinds[e.campaign] in ("search", "performance_max"), e
        # Logged edits are exactly those of the processes, twins and decoys, inside the history.
        assert bg.notes["effectful"] == tuple(e for item in items(bg) for e in item.edits)


def test_harmless_edits_carry_no_intervention(preset):
    panel = domain_of(preset).scm.panel
    for bg in backgrounds(preset):
        assert all(e.harmless for e in bg.notes["effect_free"])
        assert not any(e.harmless for e in bg.notes["effectful"])
        assert not any(e.field == "target_cpa" for e in bg.notes["effect_free"])
        for item in items(bg):
            if any(e.harmless for e in item.edits):
                assert item.interventions == ()
        for decoy in bg.notes["decoys"]:  # an effectful decoy carries its own intervention
            (edit,), (iv,) = decoy.edits, decoy.interventions
            levels = {} if edit.target == "campaign" else dict([edit.target.split("=")])
            assert iv.where == Slice.of(campaign=edit.campaign, **levels)
            assert iv.window.onset == edit.day
            if decoy.kind == "bid_adjustment":
                assert iv.node == "bid_modifier"
                assert iv.factor == pytest.approx(1 + int(edit.new_value[:-1]) / 100, abs=1e-12)
                assert served(panel, edit.campaign, edit.target)
            else:
                assert decoy.kind == "budget_raise"
                assert iv.node == "budget_change" and 1.15 <= iv.factor <= 1.6


def test_edits_are_logged_when_their_process_acts(preset):
    panel = domain_of(preset).scm.panel
    dates = panel.time.values.astype("datetime64[D]")
    n = panel.n_time
    first = Calendar.of(panel, domain_of(preset).settings).first_logged
    seen = set()
    for bg in backgrounds(preset, range(200)):
        for p in bg.notes["processes"]:
            window = p.interventions[0].window
            onset, end = window.onset, window.end
            by_day = {}
            for e in p.edits:
                by_day.setdefault(e.day, []).append(e)
            if p.kind in ("auction_volatility", "consent_change"):
                assert p.edits == ()  # not an ads-account edit
            elif p.kind == "promotion":
                carriers = p.details["carriers"]
                until = str(dates[0] + np.timedelta64(end - 1, "D"))
                starts = by_day.get(onset, []) if onset >= first else []
                ends = by_day.get(end, []) if first <= end < n else []
                assert len(starts) == (len(carriers) if onset >= first else 0)
                assert len(ends) == (len(carriers) if first <= end < n else 0)
                assert len(p.edits) == len(starts) + len(ends)
                for e in starts:
                    assert e.old_value == "" and e.new_value.endswith(f"until {until}")
                for e in ends:
                    assert e.new_value == "" and e.old_value.endswith(f"until {until}")
                seen.add("promotion")
            elif p.kind == "learning_period":
                assert [e.day for e in p.edits] == ([onset] if onset >= first else [])
                for e in p.edits:
                    assert e.campaign == p.interventions[0].where.as_dict()["campaign"]
                    assert e.change_type == "bidding" and 0.75 <= e.cpa_ratio <= 1.25
                    assert abs(e.cpa_ratio - 1) >= 0.1
                seen.add("learning_period")
            elif p.kind == "campaign_pause":
                assert sorted(e.day for e in p.edits) == [d for d in (onset, end) if d >= first]
                where = p.interventions[0].where.as_dict()
                for e in p.edits:
                    if p.details["scope"] == "account":
                        assert e.change_type == "billing" and e.user == "system" and not where
                    elif p.details["scope"] == "geo":
                        assert e.target == f"geo={where['geo']}" and e.field == "location"
                    else:
                        assert (e.field, e.campaign) == ("status", where["campaign"])
                    if e.field == "status":
                        expected = (
                            ("enabled", "paused") if e.day == onset else ("paused", "enabled")
                        )
                        assert (e.old_value, e.new_value) == expected
                seen.add("campaign_pause")
            elif p.kind == "pmax_cannibalisation":
                assert len(p.edits) == (1 if p.details["logged"] and onset >= first else 0)
                for e in p.edits:
                    assert e.day == onset and e.field == "search_themes"
            else:
                assert [e.day for e in p.edits] == ([onset] if onset >= first else [])
    assert seen == {"promotion", "learning_period", "campaign_pause"}


def test_alert_window_is_touched_in_about_half_of_the_episodes(preset):
    """By construction one process touches the alert window with probability 0.5: over 400
    episodes the share has a standard deviation of 0.025, so 0.4-0.6 is four of them."""
    domain = domain_of(preset)
    panel, cfg = domain.scm.panel, domain.settings
    n = panel.n_time
    alert, span = n - cfg.alert_window_days, n - cfg.alert_window_days - 7 * cfg.baseline_weeks
    touched, pauses, pauses_touching = 0, 0, 0
    for bg in backgrounds(preset, range(400)):
        flags = []
        for p in bg.notes["processes"]:
            weights = [iv.window.weights(n) for iv in p.interventions]
            flags.append(
                any((w[alert:] > 0).any() and np.ptp(w[max(span, 0) :]) > 0 for w in weights)
            )
            if p.kind == "campaign_pause":
                pauses += 1
                pauses_touching += flags[-1]
        assert sum(flags) <= 1  # the others are placed out of reach of the alert
        assert bg.notes["touches_alert_window"] == any(flags)
        touched += any(flags)
    assert 0.4 <= touched / 400 <= 0.6
    assert 0 < pauses_touching < 0.3 * pauses  # mostly outside the alert window, not always


# -- the change history ------------------------------------------------------------------------


def world_of(preset: str, seed: int):
    scm = domain_of(preset).scm
    bg = background_of(preset, seed)
    return scm.intervene(bg.interventions).simulate([], seed=seed, counterfactual=False).factual


def test_change_history_rows_do_not_depend_on_the_cause(preset):
    domain = domain_of(preset)
    scm, panel = domain.scm, domain.scm.panel
    dates = panel.time.values.astype("datetime64[D]")
    n_campaigns = len(panel.dimension("campaign").levels)
    for seed in range(4):
        bg, world = background_of(preset, seed), world_of(preset, seed)
        layouts, most = set(), 0
        every = {"campaigns": list(panel.dimension("campaign").levels)}
        draws = [InterventionDraw("BUDGET_CAP", Slice(), 0.5, Window(panel.n_time - 5), every)]
        specs = {c.name: c for c in domain.settings.campaigns}
        for cause in CAUSES:
            rng = np.random.default_rng(seed)
            draws += [scm.point(cause).sample(rng, panel) for _ in range(3)]
        for draw in draws:
            edits = draw_edits(account_change(draw.point), draw, panel, specs, hour=10)
            most = max(most, len(edits))
            frame = change_history(panel, world, bg, edits, np.random.default_rng(1))
            assert len(frame) == bg.notes["total_edits"]
            assert tuple(frame.columns) == COLUMNS
            layouts.add((frame.shape, tuple(map(str, frame.dtypes))))
            assert frame["change_time"].is_monotonic_decreasing
            assert (frame["change_time"] >= pd.Timestamp(dates[-30])).all()
            # Every edit the cause and the background logged is shown; harmless ones fill up.
            shown = set(frame[["campaign", "field", "target"]].itertuples(index=False, name=None))
            for e in [*edits, *bg.notes["effectful"]]:
                assert (e.campaign, e.field, e.target) in shown
        assert len(layouts) == 1
        assert most == n_campaigns  # the whole-account budget cut: one edit per campaign


def test_rendered_change_history_has_the_same_size_for_every_cause():
    """Through the domain's own renderer (small preset): same background, same sizes."""
    domain = domain_of("small")
    scm, panel = domain.scm, domain.scm.panel
    for seed in range(2):
        bg = background_of("small", seed)
        base = scm.intervene(bg.interventions)
        layouts = set()
        for cause in ("NO_ANOMALY", "BUDGET_CAP", "BID_MODIFIER_CHANGE", "TARGETING_EXPANSION"):
            draw = scm.point(cause).sample(np.random.default_rng(seed), panel)
            world = base.simulate(scm.interventions_for(draw), seed=seed, counterfactual=False)
            table = domain.render(world.factual, draw, bg, np.random.default_rng(seed))[
                "change_history"
            ]
            assert len(table) == bg.notes["total_edits"]
            layouts.add((table.shape, tuple(map(str, table.dtypes))))
        assert len(layouts) == 1


def test_target_cpa_values_are_read_from_the_world(preset):
    seed, process = next(
        (seed, p)
        for seed in range(2000)
        for p in items(background_of(preset, seed))
        if p.kind == "learning_period" and p.edits  # its edit inside the 30-day history
    )
    panel = domain_of(preset).scm.panel
    bg, world = background_of(preset, seed), world_of(preset, seed)
    frame = change_history(panel, world, bg, [], np.random.default_rng(0))
    rows = frame[frame["field"] == "target_cpa"]
    (edit,) = process.edits
    (row,) = rows.itertuples()
    mask = panel.labels("campaign") == edit.campaign
    lo, hi = max(edit.day - 14, 0), max(edit.day, 1)
    cpa = world["cost"][mask, lo:hi].sum() / max(world["conversions"][mask, lo:hi].sum(), 1)
    assert float(row.old_value) == max(round(cpa), 1)
    assert abs(float(row.new_value) - float(row.old_value) * edit.cpa_ratio) <= 0.005


def test_same_generator_same_background(preset):
    domain = domain_of(preset)
    panel = domain.scm.panel
    for seed in range(5):
        np.random.seed(seed + 99)  # the global generator must play no part
        first = domain.background(np.random.default_rng(seed))
        np.random.seed(seed + 7)
        second = sample_background(
            panel,
            domain.settings,
            np.random.default_rng(seed),
            points=domain.scm.intervention_points,
        )
        assert first == second
        assert first != domain.background(np.random.default_rng(seed + 1000))
        world = world_of(preset, seed)
        pd.testing.assert_frame_equal(
            change_history(panel, world, first, [], np.random.default_rng(3)),
            change_history(panel, world, second, [], np.random.default_rng(3)),
        )


def test_prior_overrides_from_a_mapping():
    prior = BackgroundPrior.from_mapping(
        {"learning_period": {"days": [7, 7]}, "count_weights": [0, 0, 0, 1]}
    )
    assert prior.learning_period == LearningPeriodPrior(days=(7, 7))
    assert prior.count_weights == (0, 0, 0, 1)
    panel, cfg = domain_of("default").scm.panel, domain_of("default").settings
    bg = sample_background(panel, cfg, np.random.default_rng(0), prior)
    assert len(bg.notes["processes"]) == 4
    with pytest.raises(CausalTraceError, match="unknown"):
        BackgroundPrior.from_mapping({"promotions": {}})
    with pytest.raises(CausalTraceError, match="unknown"):
        BackgroundPrior.from_mapping({"promotion": {"cvr": (1, 2)}})


# -- what each process moves -------------------------------------------------------------------


def compare(preset: str, iv, seed: int, account: bool = False):
    """Factual with the single intervention and counterfactual without, same noise; with
    ``account``, in the account the background of ``seed`` drew (its budget headroom, segment
    mix and ad rotation)."""
    scm = domain_of(preset).scm
    if account:
        state = background_of(preset, seed).notes["state"]
        scm = scm.intervene(state.interventions(scm.panel))
    worlds = scm.simulate([iv], seed=seed + 1000)
    return worlds.factual, worlds.counterfactual


def acts(iv, panel) -> np.ndarray:
    """Where the intervention acts (slice x days of positive weight), and its weight."""
    w = iv.weight(panel)
    return w > 0, w


def assert_scaled_exactly(fact, cf, iv, panel):
    """The intervened node is the counterfactual scaled by 1 + w (factor - 1) where the
    intervention acts, and bit-identical elsewhere."""
    inside, w = acts(iv, panel)
    node_f, node_c = fact[iv.node], cf[iv.node]
    expected = node_c + w * (node_c * iv.factor - node_c)
    np.testing.assert_allclose(node_f[inside], expected[inside], rtol=1e-12, atol=0)
    assert np.array_equal(node_f[~inside], node_c[~inside])
    assert inside.any()


def test_promotion_raises_orders_and_lowers_order_value_in_its_window(preset):
    seed, p = find(preset, "promotion")
    panel = domain_of(preset).scm.panel
    for iv in p.interventions:
        fact, cf = compare(preset, iv, seed)
        assert_scaled_exactly(fact, cf, iv, panel)
        inside, _ = acts(iv, panel)
        if iv.node == "cvr":
            assert (fact["cvr"][inside] >= cf["cvr"][inside]).all()
            orders_f, orders_c = fact["real_conversions"], cf["real_conversions"]
            assert (orders_f[inside] >= orders_c[inside]).all()
            assert orders_f[inside].sum() > orders_c[inside].sum()
            assert np.array_equal(orders_f[~inside], orders_c[~inside])
        else:
            assert iv.node == "order_value"
            assert (fact["order_value"][inside] < cf["order_value"][inside]).all()
            assert np.array_equal(fact["real_conversions"], cf["real_conversions"])
            revenue_f, revenue_c = fact["backend_revenue"], cf["backend_revenue"]
            assert (revenue_f[inside] <= revenue_c[inside]).all()
            assert np.array_equal(revenue_f[~inside], revenue_c[~inside])


def test_learning_period_raises_cpc_and_lowers_cvr_fading_out(preset):
    seed, p = find(preset, "learning_period")
    panel = domain_of(preset).scm.panel
    cpc_iv, cvr_iv = p.interventions
    assert (cpc_iv.node, cvr_iv.node) == ("expected_cpc", "cvr")
    assert cpc_iv.where == cvr_iv.where and cpc_iv.window == cvr_iv.window
    onset, end = cpc_iv.window.onset, cpc_iv.window.end
    for iv in p.interventions:
        fact, cf = compare(preset, iv, seed)
        assert_scaled_exactly(fact, cf, iv, panel)
        inside, _ = acts(iv, panel)
        cell = np.flatnonzero(iv.where.mask(panel) & (cf[iv.node] > 0).all(axis=1))[0]
        days = (fact[iv.node][cell] / cf[iv.node][cell])[onset : min(end, panel.n_time)]
        np.testing.assert_allclose(days[0], iv.factor, rtol=1e-12)  # full at the edit
        if iv is cpc_iv:
            assert (np.diff(days) < 0).all() and (days > 1).all()  # fading out
            assert (fact["cpc"][inside] > cf["cpc"][inside]).all()
            assert np.array_equal(fact["cpc"][~inside], cf["cpc"][~inside])
        else:
            assert (np.diff(days) > 0).all() and (days < 1).all()
            orders_f, orders_c = fact["real_conversions"], cf["real_conversions"]
            assert (orders_f[inside] <= orders_c[inside]).all()
            assert np.array_equal(orders_f[~inside], orders_c[~inside])


@pytest.mark.parametrize("direction", ["entry", "exit"])
def test_auction_volatility_moves_the_campaigns_search_auctions(preset, direction):
    seed, p = find(preset, "auction_volatility", direction=direction)
    panel = domain_of(preset).scm.panel
    (iv,) = p.interventions
    assert iv.where.as_dict()["placement"] == "search"
    fact, cf = compare(preset, iv, seed)
    assert_scaled_exactly(fact, cf, iv, panel)
    inside, _ = acts(iv, panel)
    sign = 1 if direction == "entry" else -1
    win_f, win_c = fact["rank_win_rate"], cf["rank_win_rate"]
    cpc_f, cpc_c = fact["expected_cpc"], cf["expected_cpc"]
    assert (sign * (win_c[inside] - win_f[inside]) > 0).all()  # harder to win when it enters
    assert (sign * (cpc_f[inside] - cpc_c[inside]) >= 0).all()  # the price may hit the bid
    assert sign * (cpc_f[inside].sum() - cpc_c[inside].sum()) > 0
    for node in ("rank_win_rate", "expected_cpc"):
        assert np.array_equal(fact[node][~inside], cf[node][~inside])


@pytest.mark.parametrize("scope", ["campaign", "geo", "account"])
def test_pause_stops_the_slice_and_nothing_else(preset, scope):
    seed, p = find(preset, "campaign_pause", scope=scope)
    panel = domain_of(preset).scm.panel
    (iv,) = p.interventions
    fact, cf = compare(preset, iv, seed)
    assert_scaled_exactly(fact, cf, iv, panel)
    inside, _ = acts(iv, panel)
    assert (fact["campaign_enabled"][inside] == 0).all()
    assert (fact["impressions"][inside] == 0).all() and (cf["impressions"][inside] > 0).any()
    # Other campaigns serve as before, every day.
    campaign = p.details["campaign"]
    others = panel.labels("campaign") != campaign if campaign else np.zeros(panel.n_cells, bool)
    for node in ("impressions", "clicks", "cost", "real_conversions"):
        assert np.array_equal(fact[node][others], cf[node][others])
    # The paused campaign serves again once it is re-enabled (before the panel's end).
    end = iv.window.end
    assert end < panel.n_time and (fact["impressions"][iv.where.mask(panel), end:] > 0).any()


def test_pmax_cannibalisation_moves_brand_auctions_to_pmax_search(preset):
    seed, p = find(preset, "pmax_cannibalisation")
    panel = domain_of(preset).scm.panel
    brand, pmax = p.interventions
    assert brand.where.as_dict() == {"campaign": "brand_search"}
    assert pmax.where.as_dict() == {"campaign": "pmax_prospecting", "placement": "search"}
    for iv, sign in ((brand, -1), (pmax, 1)):
        fact, cf = compare(preset, iv, seed)
        assert_scaled_exactly(fact, cf, iv, panel)
        inside, w = acts(iv, panel)
        onset, steps = iv.window.onset, iv.window.profile.steps
        ramp = w[iv.where.mask(panel)][0, onset : onset + steps]
        assert (np.diff(ramp) > 0).all()  # ramping up
        auctions_f, auctions_c = fact["auctions"], cf["auctions"]
        assert (sign * (auctions_f[inside] - auctions_c[inside]) >= 0).all()
        assert sign * (auctions_f[inside].sum() - auctions_c[inside].sum()) > 0
        assert np.array_equal(auctions_f[~inside], auctions_c[~inside])


def test_consent_change_lowers_tracked_conversions_and_sessions_in_its_geo(preset):
    seed, p = find(preset, "consent_change")
    panel = domain_of(preset).scm.panel
    (iv,) = p.interventions
    fact, cf = compare(preset, iv, seed)
    assert_scaled_exactly(fact, cf, iv, panel)
    inside, _ = acts(iv, panel)
    for node in ("tracked_conversions", "sessions"):
        assert (fact[node][inside] <= cf[node][inside]).all()
        assert fact[node][inside].sum() < cf[node][inside].sum()
        assert np.array_equal(fact[node][~inside], cf[node][~inside])
    assert np.array_equal(fact["real_conversions"], cf["real_conversions"])


def test_enhanced_conversions_record_more_conversions(preset):
    seed, p = find(preset, "enhanced_conversions")
    panel = domain_of(preset).scm.panel
    (iv,) = p.interventions
    fact, cf = compare(preset, iv, seed)
    assert_scaled_exactly(fact, cf, iv, panel)
    inside, _ = acts(iv, panel)
    assert fact["tag_fire_rate"].max() <= 1.0
    tracked_f, tracked_c = fact["tracked_conversions"], cf["tracked_conversions"]
    assert (tracked_f[inside] >= tracked_c[inside]).all()
    assert tracked_f[inside].sum() > tracked_c[inside].sum()
    assert np.array_equal(tracked_f[~inside], tracked_c[~inside])


def test_budget_raise_decoy_changes_the_budget_not_the_delivery(preset):
    """A campaign-day's impressions are Binomial(won auctions, pacing), pacing = min(1, allowed /
    unconstrained spend) and nothing else reads the budget: where pacing was 1 a higher budget
    keeps it at 1 and every delivered count stays the same, elsewhere delivery can only grow.
    The raised campaigns are not budget-limited: pacing is below 1 on under 5% of their days."""
    panel = domain_of(preset).scm.panel
    limited = []
    for nth in range(3):
        seed, decoy = find_nth(preset, "budget_raise", nth)
        (iv,) = decoy.interventions
        fact, cf = compare(preset, iv, seed, account=True)
        assert_scaled_exactly(fact, cf, iv, panel)
        cells = iv.where.mask(panel)
        free = np.broadcast_to(cf["pacing"] == 1.0, panel.shape) | ~cells[:, None]
        limited.append(1.0 - free[cells].mean())
        for node in ("impressions", "clicks", "cost", "conversions", "conversion_value"):
            assert np.array_equal(fact[node][free], cf[node][free]), node
        assert (fact["impressions"][~free] >= cf["impressions"][~free]).all()
    assert max(limited) < 0.05
    # A budget-limited campaign (by the account's drawn headroom) is never raised.
    for bg in backgrounds(preset):
        headroom = bg.notes["state"].headroom
        for decoy in bg.notes["decoys"]:
            if decoy.kind == "budget_raise":
                assert headroom[decoy.details["campaign"]] >= 1.35


@pytest.mark.parametrize("applied", [True, False], ids=["manual_cpc", "smart_bidding"])
def test_bid_adjustment_decoy_moves_its_slice_only(preset, applied):
    """A bid adjustment moves the auctions won on its slice where the campaign bids manually,
    and nothing where smart bidding ignores it (the platform applies only -100% there)."""
    specs = {c.name: c for c in domain_of(preset).settings.campaigns}
    seed, decoy = next(
        (seed, item)
        for seed in range(2000)
        for item in items(background_of(preset, seed))
        if item.kind == "bid_adjustment"
        and specs[item.details["campaign"]].applies_bid_adjustments == applied
    )
    panel = domain_of(preset).scm.panel
    (iv,) = decoy.interventions
    fact, cf = compare(preset, iv, seed)
    assert_scaled_exactly(fact, cf, iv, panel)
    inside, _ = acts(iv, panel)
    sign = 1 if iv.factor > 1 else -1
    win_f, win_c = fact["rank_win_rate"], cf["rank_win_rate"]
    if applied:
        assert (sign * (win_f[inside] - win_c[inside]) > 0).all()
    else:
        assert np.array_equal(win_f[inside], win_c[inside])
    assert np.array_equal(win_f[~inside], win_c[~inside])


def find_nth(preset: str, kind: str, nth: int):
    found = 0
    for seed in range(2000):
        for item in items(background_of(preset, seed)):
            if item.kind == kind:
                if found == nth:
                    return seed, item
                found += 1
    raise AssertionError(f"fewer than {nth + 1} {kind} in 2000 backgrounds of {preset}")


def test_account_size_scales_volume_and_budgets_alike():
    """The account's size multiplies every segment's volume by one log-uniform factor in
    ``StatePrior.size_range``: the same draws with the size fixed at 1 give volumes that differ
    by exactly that factor, in every cell, and over 200 accounts its log is spread as a
    uniform's (sd = log(high / low) / sqrt(12): 0.53 for (0.4, 2.5); the sample sd of 200
    draws has a standard error of sd x sqrt((1.8 - 1) / 800) = 0.017, so 0.06 is about 3.5 of
    them). Budgets are set against the account's own spend (``DailyBudget``), so spend
    against budget does not depend on the size."""
    domain = domain_of("default")
    panel, cfg = domain.scm.panel, domain.settings
    low, high = StatePrior().size_range
    sizes = []
    for seed in range(200):
        sized = sample_state(panel, cfg, np.random.default_rng(seed), StatePrior())
        plain = sample_state(
            panel, cfg, np.random.default_rng(seed), StatePrior(size_range=(1.0, 1.0))
        )
        ratio = sized.volume / plain.volume
        assert np.allclose(ratio, ratio[0, 0], rtol=1e-12)
        assert sized.headroom == plain.headroom
        sizes.append(float(ratio[0, 0]))
    logs = np.log(sizes)
    assert np.log(low) <= logs.min() and logs.max() <= np.log(high)
    assert abs(logs.std() - np.log(high / low) / np.sqrt(12)) < 0.06
