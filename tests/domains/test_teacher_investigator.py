"""The investigating teacher's parts: what it declares matches the domain, the page is read as
printed, the belief moves with evidence, and the queries are short, valid SQL on the reports."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from causaltrace import load_domain
from causaltrace.agents.result_tables import parse_table
from causaltrace_domains.ads.causes import CAUSES
from causaltrace_domains.ads.teacher.belief import Belief, Hypothesis
from causaltrace_domains.ads.teacher.page import parse_page
from causaltrace_domains.ads.teacher.probes import InvalidScan, State
from causaltrace_domains.ads.teacher.queries import MAX_CHARS, Sql
from causaltrace_domains.ads.teacher.signatures import ALLOWED, SLICE_DIMS, candidate_slices
from causaltrace_domains.ads.teacher.stats import (
    alert_share,
    oe_stat,
    onset_scan,
    scan_threshold,
    share_stat,
)

PROMPT = """It just paged (2 alerts, most severe first):

ALERT: cost for campaign generic_search is up 99.8%: 9,818.28 over 2026-02-23 to 2026-03-01 against 4,912.95 for the same weekdays on average over 2026-01-26 to 2026-02-22.
ALERT: roas for the account is down 26.5%: 2.70 over 2026-02-23 to 2026-03-01 against 3.68 for the same weekdays on average over 2026-01-26 to 2026-02-22.

One or more root causes may be at work at the same time. Each is one of:
- BUDGET_CAP: daily budgets were cut
- campaign: brand_search, generic_search
- geo: us_west, uk
"""


def test_declared_slices_match_the_domain_priors():
    scm = load_domain("ads").scm
    for cause, dims in SLICE_DIMS.items():
        prior = scm.point(cause).prior
        assert {frozenset(d) for d in dims} == {frozenset(d) for d in prior.slice_dims}, cause
        for dim, levels in ALLOWED.get(cause, {}).items():
            assert set(levels) == set(prior.allowed_levels[dim]), (cause, dim)


def test_page_reads_alerts_windows_and_answer_form():
    page = parse_page(PROMPT)
    assert [a.describe() for a in page.alerts] == [
        "cost up 99.8% for campaign generic_search",
        "roas down 26.5% for the account",
    ]
    assert page.first.campaign == "generic_search"
    assert str(page.windows.now_start) == "2026-02-23"
    assert str(page.windows.before_end) == "2026-02-15"  # the week before the alert is left out
    assert page.windows.before_weeks == 3
    assert page.levels == {"campaign": ("brand_search", "generic_search"), "geo": ("us_west", "uk")}
    assert page.concurrent


def test_parse_table_keeps_printed_values():
    text = "a    | b\n-----+----\nx    | 1.5\ny    | NULL\n(2 rows)"
    assert parse_table(text) == [{"a": "x", "b": "1.5"}, {"a": "y", "b": "NULL"}]
    assert parse_table("Error: no such table") == []


def test_statistics_see_a_move_and_not_noise():
    moved = oe_stat(50, 200, 1000, 1000, -1)  # a quarter of the expected conversions
    assert moved.effect > 1 and moved.z > 5 and moved.snr > 1
    still = oe_stat(198, 200, 1000, 1000, -1)
    assert abs(still.z) < 1
    assert share_stat(300, 100, 3000, 1000, +1).z == pytest.approx(0, abs=0.1)


def _weekday_residuals(rng, shift=0.0, onset=7, sigma=0.1, base_days=42, after_days=14):
    """A daily log series read as the account probes read it: each day against the mean of
    its weekday over the baseline, and the baseline's own spread (ddof 1)."""
    series = rng.normal(0.0, sigma, base_days + after_days)
    series[base_days + onset :] += shift
    weekday = np.arange(base_days + after_days) % 7
    usual = np.array([series[:base_days][weekday[:base_days] == d].mean() for d in range(7)])
    resid = series - usual[weekday]
    return list(resid[base_days:]), float(np.std(resid[:base_days], ddof=1)), base_days


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_onset_scan_holds_its_false_alarm_rate_and_finds_a_shift(seed):
    """Under no shift the largest z over the 13 onsets beats the Bonferroni threshold for 13
    tests in at most alpha = 5% of series: 1,500 series give a binomial sd of 0.56 points, so
    6.7% is three sd above the bound (the onsets are positively correlated, so the true rate
    is below alpha). A drop of 1.5 daily sds over the last week is found (expected z about
    1.5 * sqrt(7 / 1.17) = 3.7, the threshold is 2.9) in most series, at an onset within two
    days of the true one."""
    rng = np.random.default_rng(seed)
    threshold = scan_threshold(13)
    alarms = 0
    for _ in range(1500):
        resid, sd, n = _weekday_residuals(rng)
        stat, _ = onset_scan(resid, sd, n, 0.0, -1)
        alarms += stat.z >= threshold
    assert alarms / 1500 <= 0.067
    found, near = 0, 0
    for _ in range(300):
        resid, sd, n = _weekday_residuals(rng, shift=-0.15)
        stat, onset = onset_scan(resid, sd, n, 0.0, -1)
        found += stat.z >= threshold
        near += abs(onset - 7) <= 2
    assert found / 300 >= 0.6 and near / 300 >= 0.6


def test_alert_share_of_a_region_that_made_the_move():
    # cost: the region doubled, the rest held: the region made all of the move
    rows = [
        ({"campaign": "a", "in_slice": "True"}, {"cost_before": 300.0, "cost_now": 200.0}),
        ({"campaign": "a", "in_slice": "False"}, {"cost_before": 900.0, "cost_now": 300.0}),
    ]
    share = alert_share(
        rows, lambda lab: True, lambda lab: lab["in_slice"] == "True", "cost", None, 3
    )
    assert share == pytest.approx(1.0)
    none = alert_share(
        rows, lambda lab: True, lambda lab: lab["in_slice"] == "False", "cost", None, 3
    )
    assert none < 0.25  # a region that held while the rest moved accounts for none of it


def test_alert_share_is_a_share_of_the_paged_move():
    # The rows compare with three clean weeks: the region's part is +25% of the scope's level
    # (it went 100 -> 200 a week while the rest held at 300). The page compares with four weeks
    # that may already hold the fault's start, so it can print a smaller move: the share is of
    # what the page shows (the label's rule), here 0.25 / 0.20.
    rows = [
        ({"campaign": "a", "in_slice": "True"}, {"cost_before": 300.0, "cost_now": 200.0}),
        ({"campaign": "a", "in_slice": "False"}, {"cost_before": 900.0, "cost_now": 300.0}),
    ]
    region = lambda lab: lab["in_slice"] == "True"  # noqa: E731
    on_rows = alert_share(rows, lambda lab: True, region, "cost", None, 3)
    paged = alert_share(rows, lambda lab: True, region, "cost", None, 3, paged_move=0.20)
    assert on_rows == pytest.approx(1.0)
    assert paged == pytest.approx(0.25 / 0.20)
    # a page that moved the other way than the rows is no denominator: the rows' move is kept
    assert alert_share(rows, lambda lab: True, region, "cost", None, 3, -0.2) == on_rows
    alert = parse_page(PROMPT).first
    assert alert.move == pytest.approx(9818.28 / 4912.95 - 1)


def test_a_slice_stops_where_a_footprint_stops():
    """Bots in one geo (INVALID_TRAFFIC on geo=us_west, ``hard-000061``'s real scan): invalid
    clicks rise about tenfold on every placement there, CTR clearly only on display, where bots
    are a large share of the clicks. The rest of the geo moves in one footprint, so the answer
    is the geo, not geo and display."""
    prompt = PROMPT.replace(
        "- geo: us_west, uk",
        "- placement: search, search_partners, display, video\n- geo: us_west, us_central, us_east, us_south, canada, uk, germany, france",
    )
    page = parse_page(prompt)
    belief = Belief(CAUSES, page.levels, [a.kpi for a in page.alerts])
    text = (Path(__file__).parents[1] / "data" / "teacher_invalid_scan.txt").read_text()
    InvalidScan().read(text, belief, State(), page)
    found = [h for h, _ in belief.ranked() if h.cause == "INVALID_TRAFFIC"]
    assert found[0].slice == "geo=us_west", found[:3]


def test_belief_moves_with_evidence_and_information_gain_prefers_uncertainty():
    page = parse_page(PROMPT)
    belief = Belief(CAUSES, page.levels, [a.kpi for a in page.alerts])
    tracking = [h for h in belief.hypotheses("TRACKING_OUTAGE")]
    before = belief.cause_mass()["TRACKING_OUTAGE"]
    gain_before = belief.information_gain(tracking, 1.0)
    belief.add(tracking[0], 20.0, None)
    assert belief.cause_mass()["TRACKING_OUTAGE"] > max(0.9, before)
    assert belief.information_gain(tracking, 1.0) < gain_before
    belief.set_shares(tracking[0], {0: 0.1})  # accounts for too little of every alert
    assert belief.ranked()[0][0] != tracking[0]
    belief.restrict("BID_MODIFIER_CHANGE", {"geo=uk"})
    assert {
        h.slice for h in belief.hypotheses("BID_MODIFIER_CHANGE") if belief.log_prior[h] > -np.inf
    } == {"geo=uk"}


def test_candidate_slices_are_canonical():
    levels = {"creative": ("ad_1",), "audience": ("broad",), "device": ("mobile", "ctv")}
    assert candidate_slices("CREATIVE_FATIGUE", levels) == [
        "creative=ad_1",
        "audience=broad&creative=ad_1",
        "creative=ad_1&device=mobile",
    ]


def test_queries_run_on_the_reports_and_stay_short():
    from causaltrace.episodes.sampling import EpisodeSpec, build_visible

    domain = load_domain("ads", {"preset": "small"})
    spec = EpisodeSpec("t-0", "t", 0, 3, "LANDING_PAGE_BREAK", 1)
    tables, prompt = build_visible(domain, spec)
    con = duckdb.connect()
    for name, frame in tables.items():
        con.register(name, pd.DataFrame(frame))
    page = parse_page(prompt)
    for seed in range(3):
        sql = Sql(page.windows, np.random.default_rng(seed))
        queries = [
            sql.change_log(),
            sql.ad_status(),
            sql.account(),
            sql.site(),
            sql.creatives(),
            sql.invalid(),
            sql.placements(),
            sql.ad_share(["brand_search"]),
            sql.check(
                {"in_slice": "geo = 'uk'"},
                ["impressions", "clicks", "cost", "conversions", "conversion_value"],
                True,
            ),
        ]
        for query in queries:
            assert len(query) <= MAX_CHARS
            con.execute(query).fetchall()  # valid SQL on the episode's reports
        assert con.execute(sql.site()).fetchall()
    assert Hypothesis("DEMAND_SHIFT").text() == "DEMAND_SHIFT"
