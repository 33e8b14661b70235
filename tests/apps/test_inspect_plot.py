"""``causaltrace-inspect --plot``: the plotted series is the alerted KPI over the alerted scope.

The series come from ``alert_kpi_series`` (worlds rebuilt from the private spec, read through
the domain's monitor); each is checked against the KPI recomputed here, independently, from the
episode's own ``perf_daily`` table over the scope the prompt's ALERT line names, and the
factual and counterfactual lines must part inside the cause's window (and agree before it).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causaltrace import Dimension, Panel, TimeAxis
from causaltrace.apps.inspect import alert_kpi_series
from causaltrace.datasets.reading import (
    dataset_domain,
    load_labels,
    open_episode,
    rebuild_episode,
)
from causaltrace.datasets.storage import PROMPT_FILE, read_episode_tables
from causaltrace.episodes.alerts import scope_slice
from causaltrace.model.slices import Slice
from causaltrace.plotting import draw_kpi_series

ADS_TEST = Path(__file__).resolve().parents[2] / "data" / "ads_test"

# The ads KPIs as perf_daily columns: a count, or a ratio of two sums over the scope.
RATIOS = {"cost_per_conversion": ("cost", "conversions"), "roas": ("conversion_value", "cost")}

pytestmark = pytest.mark.skipif(
    not (ADS_TEST / "private" / "specs").is_dir(), reason="data/ads_test is not here"
)


def prompt_alerts(prompt: str) -> list[tuple[str, str]]:
    """(kpi, scope) of each ALERT line, in the prompt's order, in the monitor's scope words."""
    out = []
    for kpi, where in re.findall(r"^ALERT: (\w+) for (.+?) is (?:up|down) ", prompt, re.M):
        out.append((kpi, "account" if where == "the account" else where.replace(" ", "=", 1)))
    return out


def kpi_from_table(perf_daily: pd.DataFrame, kpi: str, scope: str) -> np.ndarray:
    """The KPI per day over the scope, from the agent's table: sums, ratios of sums."""
    rows = perf_daily
    if scope != "account":
        dim, level = scope.split("=")
        rows = rows[rows[dim].astype(str) == level]
    daily = rows.groupby("date", observed=True).sum(numeric_only=True).sort_index()
    if kpi in RATIOS:
        num, den = RATIOS[kpi]
        return daily[num].to_numpy(np.float64) / daily[den].to_numpy(np.float64)
    return daily[kpi].to_numpy(np.float64)


@pytest.fixture(scope="module")
def domain():
    return dataset_domain(ADS_TEST)


# test-000012: campaign-scoped (clicks and cost per conversion of pmax_prospecting, cost of
# remarketing); test-000001: account-scoped ratios and a campaign's conversions; test-000007:
# generic_search clicks among campaign-scoped alerts.
@pytest.mark.parametrize("episode", ["test-000012", "test-000001", "test-000007"])
def test_series_is_the_alerted_kpi_over_the_alerted_scope(domain, episode, tmp_path):
    directory = open_episode(ADS_TEST, episode, cache_dir=tmp_path)  # never writes to data/
    tables = read_episode_tables(directory)
    alerts = prompt_alerts((directory / PROMPT_FILE).read_text(encoding="utf-8"))
    assert alerts, "the prompt has no ALERT line"
    built = rebuild_episode(ADS_TEST, episode)
    series = alert_kpi_series(domain, built)
    assert [(s.kpi, s.scope) for s in series] == alerts

    label = load_labels(ADS_TEST)[episode]
    onset, n_time = int(label["onset"]), domain.scm.panel.n_time
    for one in series:
        expected = kpi_from_table(tables["perf_daily"], one.kpi, one.scope)
        assert one.factual.shape == expected.shape == (n_time,)
        np.testing.assert_allclose(one.factual, expected, rtol=1e-9, atol=1e-9)
        assert one.where == ("whole panel" if one.scope == "account" else one.scope)
        assert one.alert_window == (domain.alert_onset(), n_time)
        assert one.interventions == ((onset, n_time),)
        # Shared noise: the worlds agree before the cause acts.
        np.testing.assert_allclose(one.factual[:onset], one.counterfactual[:onset], rtol=1e-9)
    # The first alert is the one the cause explains (the generator's gate): it moved.
    first = series[0]
    inside = slice(onset, n_time)
    assert not np.allclose(first.factual[inside], first.counterfactual[inside], rtol=1e-3)

    path = draw_kpi_series(series, tmp_path / "kpi.png", title=episode)
    assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_scope_slice_reads_the_monitors_scope_words():
    panel = Panel.cross(
        [
            Dimension("service", ("frontend", "checkout", "order_queue")),
            Dimension("region", ("us_east", "eu_west")),
        ],
        TimeAxis("2026-01-01", 4, "D"),
    )
    assert scope_slice("account", panel) == Slice()
    assert scope_slice("service=checkout", panel) == Slice.of(service="checkout")
    assert scope_slice("checkout@eu_west", panel) == Slice.of(service="checkout", region="eu_west")
    assert scope_slice("eu_west", panel) == Slice.of(region="eu_west")
    assert scope_slice("service=nowhere", panel) is None  # an unknown level
    assert scope_slice("checkout@mars", panel) is None  # a level next to a word that is none
    assert scope_slice("frontend@checkout", panel) is None  # two levels of one dimension


SERVICES_TEST = Path(__file__).resolve().parents[2] / "data" / "services_test"


@pytest.mark.skipif(
    not (SERVICES_TEST / "private" / "specs").is_dir(), reason="data/services_test is not here"
)
def test_services_error_rate_is_plotted_in_the_pages_percent(tmp_path):
    """The page states an error rate in percent ("0.84% against 0.21%"); the plot's series is
    the same quantity in the same unit: 100 x errors / requests per bucket over the paged
    service and region, recomputed here from the agent's service_metrics table."""
    domain = dataset_domain(SERVICES_TEST)
    labels = load_labels(SERVICES_TEST)
    for episode in sorted(labels):
        directory = open_episode(SERVICES_TEST, episode, cache_dir=tmp_path)
        page = (directory / PROMPT_FILE).read_text(encoding="utf-8")
        found = re.search(r"^ALERT: error rate of (\w+) in (\w+) is up .*?: ([\d.]+)%", page, re.M)
        if found:
            break
    else:
        pytest.fail("no services_test episode pages an error rate")
    service, region, stated = found.group(1), found.group(2), float(found.group(3))
    series = alert_kpi_series(domain, rebuild_episode(SERVICES_TEST, episode))
    (one,) = [s for s in series if s.kpi == "error_rate" and s.scope == f"{service}@{region}"]
    metrics = read_episode_tables(directory)["service_metrics"]
    rows = metrics[(metrics["service"] == service) & (metrics["region"] == region)]
    by_ts = rows.groupby("ts").sum(numeric_only=True).sort_index()
    expected = 100.0 * by_ts["errors"].to_numpy(np.float64) / np.maximum(by_ts["requests"], 1)
    np.testing.assert_allclose(one.factual, expected, rtol=1e-9, atol=1e-12)
    # The page's current value is a rate over the alert window's buckets, on the same scale
    # as the series there (a fraction would be 100 times smaller).
    window = one.factual[one.alert_window[0] : one.alert_window[1]]
    assert window.min() / 2 <= stated <= window.max() * 2, (stated, window.min(), window.max())
