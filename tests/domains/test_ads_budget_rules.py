"""The platform's budget rules (``AdsConfig.budget_rules``, issue 39): with them on, no
campaign-day spends more than twice its budget, no month more than its budgets, and every day a
budget binds shows impression share lost to budget; with them off (the committed splits) the
same episodes break those rules, so the checks below can fail.

Episodes of the small preset over four seeds and four causes: a deep budget cut (the cause that
binds budgets), a surge of bot clicks (billed clicks the pacing must count), a demand shift
(more demand against the same budgets) and no cause, each rendered from the factual world.
"""

from __future__ import annotations

import numpy as np
import pytest
from _ads_support import STRONG

from causaltrace import CausalTraceError, InterventionDraw, Slice, Window, load_domain
from causaltrace_domains.ads import realism
from causaltrace_domains.ads.mechanisms import BudgetRules

SEEDS = (0, 1, 2, 3)
CAUSES = ("BUDGET_CAP", "INVALID_TRAFFIC", "DEMAND_SHIFT", "NO_ANOMALY")


def _episodes(rules: bool) -> list[tuple]:
    """(panel, factual world, tables) per seed and cause, the cause at its strong draw."""
    domain = load_domain("ads", {"preset": "small", "budget_rules": rules})
    scm = domain.scm
    out = []
    for seed in SEEDS:
        background = domain.background(np.random.default_rng(seed))
        model = scm.intervene(background.interventions)
        for cause in CAUSES:
            text, strength = STRONG[cause]
            where = Slice.of(dict(c.split("=") for c in text.split("&") if c))
            draw = InterventionDraw(cause, where, strength, Window(onset=scm.panel.n_time - 12))
            world = model.simulate(scm.interventions_for(draw), seed=seed + 100).factual
            tables = domain.render(world, draw, background, np.random.default_rng(seed + 7))
            out.append((scm.panel, world, tables))
    return out


@pytest.fixture(scope="module")
def on():
    return _episodes(True)


@pytest.fixture(scope="module")
def off():
    return _episodes(False)


def _by_campaign(panel, world):
    """Cost, budget and whether pacing throttled any cell, per (campaign, day)."""
    idx, n = panel.group_index(("campaign",))
    first = np.array([np.flatnonzero(idx == g)[0] for g in range(n)])
    cost = panel.group_sum(world["cost"], ("campaign",))
    throttled = panel.group_sum((world["pacing"] < 1.0).astype(float), ("campaign",)) > 0
    return cost, world["daily_budget"][first], throttled


def _month_excess(cost: np.ndarray, budget: np.ndarray, lengths=range(28, 32)) -> float:
    """The largest cost minus budget over every window of ``lengths`` days inside the panel
    (positive: some month spent more than its budgets)."""
    c = np.concatenate([np.zeros((cost.shape[0], 1)), np.cumsum(cost, axis=1)], axis=1)
    b = np.concatenate([np.zeros((budget.shape[0], 1)), np.cumsum(budget, axis=1)], axis=1)
    worst = -np.inf
    for length in lengths:
        excess = (c[:, length:] - c[:, :-length]) - (b[:, length:] - b[:, :-length])
        worst = max(worst, float(excess.max()))
    return worst


def _bound_days_without_lost_is(panel, world, tables) -> int:
    """Campaign-days of search campaigns that pacing throttled or that spent their budget,
    with no impression share lost to budget."""
    cost, budget, throttled = _by_campaign(panel, world)
    lost = tables["impression_share_daily"]["search_lost_is_budget"].to_numpy()
    lost = lost.reshape(cost.shape)  # rows per campaign, then date, in the panel's order
    bound = (throttled | (cost >= budget)) & np.isfinite(lost)
    return int((bound & (lost <= 0)).sum())


def test_no_campaign_day_spends_more_than_twice_its_budget(on):
    for panel, world, _ in on:
        cost, budget, _ = _by_campaign(panel, world)
        assert (cost <= 2.0 * budget).all(), float((cost / budget).max())


def test_no_month_spends_more_than_its_budgets(on, off):
    worst = [_month_excess(*_by_campaign(p, w)[:2]) for p, w, _ in on]
    assert max(worst) <= 0.0, worst
    # Off, the old pacing spends up to 1.2x the budget day after day: some months overspend.
    assert max(_month_excess(*_by_campaign(p, w)[:2]) for p, w, _ in off) > 0.0


def test_every_bound_day_loses_impression_share_to_budget(on, off):
    assert [_bound_days_without_lost_is(*e) for e in on] == [0] * len(on)
    # Off, days that spend up to 1.2x their budget unthrottled show none lost to budget.
    assert sum(_bound_days_without_lost_is(*e) for e in off) > 0


def test_budget_binds_in_these_episodes(on):
    """The checks above are not vacuous: budgets bind on many campaign-days."""
    bound = sum(int(_by_campaign(p, w)[2].sum()) for p, w, _ in on)
    assert bound >= 50, bound


def test_realism_quantities_in_range_with_the_rules(on):
    tables = [t for _, _, t in on]
    names = {
        realism.days_over_twice_budget,
        realism.months_over_budget,
        realism.lost_is_when_budget_binds,
        realism.spend_over_budget,
    }
    quantities = [q for q in realism.QUANTITIES if q.measure in names]
    assert len(quantities) == len(names)
    for row in realism.measure_all(tables, quantities):
        assert row.in_range, (row.quantity.name, row.value, row.note)


def test_allowance_keeps_a_limited_campaign_within_its_month():
    """A campaign whose demand is twice its budget every day, with a weekly cycle: every day is
    bound and served under its demand, no day above the day cap, no 28-31-day window above
    the budgets less the margin; a campaign far under its budget spends its demand."""
    rules = BudgetRules()
    days = np.arange(60)
    budget = np.full((2, days.size), 100.0)
    demand = np.stack([200.0 * (1 + 0.3 * np.sin(2 * np.pi * days / 7)), np.full(days.size, 50.0)])
    allowed, binds = rules.allowance(demand, budget)
    assert binds[0].all() and not binds[1].any()
    assert (allowed[0] <= (1 - rules.min_throttle) * demand[0] + 1e-9).all()
    assert (allowed[0] <= rules.day_cap * budget[0]).all()
    np.testing.assert_array_equal(allowed[1], demand[1])
    assert _month_excess(allowed[:1], (1 - rules.margin) * budget[:1]) <= 1e-9
    # Busy days spend more than quiet ones (the month is balanced, not flat).
    assert allowed[0].max() > 1.1 * allowed[0].min()


def test_bad_rules_are_named():
    domain = load_domain(
        "ads", {"preset": "small", "budget_rules": True, "budget_pacing_onset": 1.5}
    )
    with pytest.raises(CausalTraceError, match=r"budget_pacing_onset = 1\.5 \(must be"):
        domain.build_scm()


def test_unthrottled_spend_follows_the_rules():
    off = load_domain("ads", {"preset": "small"}).settings
    on = load_domain("ads", {"preset": "small", "budget_rules": True}).settings
    assert off.unthrottled_spend == off.overdelivery
    assert on.unthrottled_spend == on.budget_pacing_onset
