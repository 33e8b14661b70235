"""The gcm baseline's pieces: the projected graph, its sandbox code, and its attribution on
synthetic reports with a planted cause (no episode, no tools)."""

import contextlib
import io
import itertools
import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dowhy", reason="the dowhy extra: pip install -e '.[dowhy]'")

from dowhy.gcm.util.general import set_random_seed

from causaltrace_domains.ads.agents_gcm import (
    DIMS,
    _series_code,
    cause_of,
    projected_graph,
    rank,
)


def test_projected_graph_follows_latent_paths():
    g = projected_graph(
        frozenset(
            {"impressions", "clicks", "invalid_clicks", "cost", "conversions", "real_conversions"}
        )
    )
    # impressions -> human_clicks (latent) -> clicks; clicks -> cost; real orders -> tracked
    # (latent) -> conversions; nothing flows back from conversions.
    assert {
        ("impressions", "clicks"),
        ("clicks", "cost"),
        ("real_conversions", "conversions"),
    } <= set(g.edges())
    assert not any(u == "conversions" for u, _ in g.edges())
    # Without backend orders, impressions reach conversions through latent nodes only.
    g2 = projected_graph(frozenset({"impressions", "clicks", "conversions"}))
    assert ("impressions", "conversions") in g2.edges()


def _reports(planted: str, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """35 days of leaf rows; from day 28 on, mobile loses half its real orders (``landing``)
    or half its tracked conversions (``tracking``)."""
    rng = np.random.default_rng(seed)
    levels = {
        "campaign": ["c1"],
        "creative": ["a1", "a2"],
        "placement": ["search", "display"],
        "device": ["mobile", "desktop"],
        "browser_os": ["chrome", "safari"],
        "geo": ["us", "uk"],
        "audience": ["broad", "in_market"],
    }
    dates = pd.date_range("2026-01-01", periods=35)
    rows = []
    for combo in itertools.product(*levels.values()):
        cell = dict(zip(levels, combo))
        imp = rng.poisson(2000, 35)
        clicks = rng.binomial(imp, 0.05)
        invalid = rng.binomial(imp, 0.001)
        rate = np.full(35, 0.1)
        tag = np.full(35, 0.95)
        if cell["device"] == "mobile":
            (rate if planted == "landing" else tag)[28:] *= 0.5
        real = rng.binomial(clicks, rate)
        conv = rng.binomial(real, tag)
        for t in range(35):
            rows.append(
                {
                    "date": dates[t],
                    **cell,
                    "impressions": imp[t],
                    "clicks": clicks[t],
                    "invalid_clicks": invalid[t],
                    "cost": clicks[t] * 1.2,
                    "conversions": conv[t],
                    "conversion_value": conv[t] * 50.0,
                    "real": real[t],
                }
            )
    perf = pd.DataFrame(rows)
    site = (
        perf.groupby(["date", "campaign", "device", "browser_os", "geo"], as_index=False)
        .agg(sessions=("clicks", "sum"), backend_orders=("real", "sum"))
        .rename(columns={"campaign": "utm_campaign"})
    )
    return perf.drop(columns="real"), site


def _run_sandbox_code(perf, site, dim):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(_series_code(None, dim), {"perf_daily": perf, "site_analytics_daily": site})
    return json.loads(out.getvalue())


@pytest.mark.parametrize(
    "planted,cause", [("landing", "LANDING_PAGE_BREAK"), ("tracking", "TRACKING_OUTAGE")]
)
@pytest.mark.slow
def test_planted_segment_cause_is_found(planted, cause):
    perf, site = _reports(planted)
    data = {dim: _run_sandbox_code(perf, site, dim) for dim in (None, *DIMS)}
    assert set(data["device"]) == {"mobile", "desktop"}
    assert len(data["device"]["mobile"]["conversions"]) == 35
    set_random_seed(0)
    best, cost_z = rank(data, "conversions")
    z, dim, level, node, value = best
    # Halving mobile's orders is about -0.69 in log1p on that slice, over 10 noise units.
    assert (dim, level) == ("device", "mobile")
    assert z > 10 and value < 0
    assert cause_of(node, dim, value, cost_z) == cause


def test_cause_rule_reads_the_domain_descriptions():
    assert cause_of("impressions", "creative", -1.0, 0.0) == "AD_DISAPPROVAL"
    assert cause_of("impressions", "placement", 1.0, 0.0) == "PLACEMENT_SHIFT"
    assert cause_of("clicks", "creative", -1.0, 0.0) == "CREATIVE_FATIGUE"
    assert cause_of("invalid_clicks", "geo", 1.0, 0.0) == "INVALID_TRAFFIC"
    assert cause_of("impressions", None, -1.0, 0.0) == "DEMAND_SHIFT"
    assert cause_of("impressions", None, -1.0, 5.0) == "COMPETITIVE_PRESSURE"
