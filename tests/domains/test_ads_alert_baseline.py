"""The disclosed alert baseline (``alert_baseline_disclosed``): every number an ALERT line
prints can be recomputed from the prompt and the agent-visible tables alone.

The recomputation here is independent of ``domains/ads/alert.py``: it parses the prompt's
text (the alert window, the baseline window, every left-out date, the report's last day) and
runs DuckDB SQL over ``perf_daily`` and ``conversion_lag_curve`` as an analyst would. With the
flag off (the committed splits' config) the prompt keeps its bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from causaltrace import load_domain
from causaltrace.datasets.reading import dataset_domain, load_index, rebuild_episode
from causaltrace.episodes.sampling import EpisodeSpec, build_episode

ROOT = Path(__file__).resolve().parents[2]
ALERT = re.compile(
    r"^ALERT: (?P<kpi>\w+) for (?:the account|campaign (?P<campaign>\w+)) is "
    r"(?P<direction>up|down) (?P<pct>[\d.]+)%: (?P<current>[\d,.]+) over "
    r"(?P<c0>\d{4}-\d{2}-\d{2}) to (?P<c1>\d{4}-\d{2}-\d{2}) against (?P<baseline>[\d,.]+) "
    r"for the same weekdays on average over (?P<b0>\d{4}-\d{2}-\d{2}) to "
    r"(?P<b1>\d{4}-\d{2}-\d{2})(?:, leaving out (?P<left_out>.+))?\.$",
    re.MULTILINE,
)
RUN = re.compile(r"(\d{4}-\d{2}-\d{2})(?:\.\.(\d{4}-\d{2}-\d{2}))?")
REASON = re.compile(r"\(([^)]*)\)")
LAST_DAY = re.compile(r"days_since_click: 0 for (\d{4}-\d{2}-\d{2}), the last\s+day")
# The causes drawn, one per seed: a deep budget cut and a demand fall page at the account or a
# campaign, a tracking outage pages on conversions (the lag-adjusted KPIs), no anomaly shows
# the largest move of a quiet account.
CAUSES = ("BUDGET_CAP", "TRACKING_OUTAGE", "DEMAND_SHIFT", "NO_ANOMALY")
# Every background process a billing suspension or a campaign pause placed before the alert
# window, four per episode: baselines with days without delivery, at the account and at a
# campaign.
SUSPENSIONS = {
    "count_weights": (0.0, 0.0, 0.0, 1.0),
    "alert_probability": 0.0,
    "campaign_pause": {"weight": 1000.0, "billing_probability": 0.5, "geo_probability": 0.0},
}


@dataclass(frozen=True)
class Alert:
    """One ALERT line as printed."""

    kpi: str
    campaign: str | None
    direction: str
    pct: float
    current: float
    baseline: float
    window: tuple[str, str]
    base: tuple[str, str]
    clause: str  # what follows "leaving out"

    def named(self, reason: str | None = None) -> list[str]:
        """The dates the line names as left out (for ``reason`` only, if given)."""
        days = []
        for part in self.clause.split(" and "):
            if reason is not None and not part.endswith(f"({reason})"):
                continue
            for first, last in RUN.findall(part):
                start, end = date.fromisoformat(first), date.fromisoformat(last or first)
                days += [str(start + timedelta(k)) for k in range((end - start).days + 1)]
        return days

    @property
    def reasons(self) -> list[str]:
        return REASON.findall(self.clause)


def parse_alerts(prompt: str) -> list[Alert]:
    alerts = []
    for m in ALERT.finditer(prompt):
        alerts.append(
            Alert(
                m["kpi"],
                m["campaign"],
                m["direction"],
                float(m["pct"]),
                float(m["current"].replace(",", "")),
                float(m["baseline"].replace(",", "")),
                (m["c0"], m["c1"]),
                (m["b0"], m["b1"]),
                m["left_out"] or "",
            )
        )
    return alerts


SQL = """
WITH days AS (
    SELECT date::DATE AS day, SUM(clicks)::DOUBLE AS clicks, SUM(cost) AS cost,
           SUM(conversions)::DOUBLE AS conversions, SUM(conversion_value) AS conversion_value
    FROM perf_daily WHERE $campaign IS NULL OR campaign::VARCHAR = $campaign GROUP BY 1
), adjusted AS (
    SELECT day, clicks, cost, conversions / share_reported AS conversions,
           conversion_value / share_reported AS conversion_value
    FROM days JOIN conversion_lag_curve ON days_since_click = LEAST(
        date_diff('day', day, $last::DATE),
        (SELECT MAX(days_since_click) FROM conversion_lag_curve))
), current_window AS (
    SELECT SUM(clicks) AS clicks, SUM(cost) AS cost, SUM(conversions) AS conversions,
           SUM(conversion_value) AS conversion_value
    FROM adjusted WHERE day BETWEEN $c0::DATE AND $c1::DATE
), weekdays AS (
    SELECT dayofweek(day) AS weekday, AVG(clicks) AS clicks, AVG(cost) AS cost,
           AVG(conversions) AS conversions, AVG(conversion_value) AS conversion_value
    FROM adjusted
    WHERE day BETWEEN $b0::DATE AND $b1::DATE AND day NOT IN (SELECT day FROM left_out)
    GROUP BY 1
), baseline AS (
    SELECT SUM(clicks) AS clicks, SUM(cost) AS cost, SUM(conversions) AS conversions,
           SUM(conversion_value) AS conversion_value
    FROM weekdays
)
SELECT 'current' AS side, * FROM current_window UNION ALL SELECT 'baseline', * FROM baseline
"""
RATIOS = {"cost_per_conversion": ("cost", "conversions"), "roas": ("conversion_value", "cost")}


def recompute(tables, alert: Alert, last_day: str, left_out=None) -> tuple[float, float]:
    """(current, baseline) of the alert's KPI from the tables and the prompt's dates alone;
    ``left_out`` replaces the dates the line names (a control)."""
    con = duckdb.connect()
    con.register("perf_daily", tables["perf_daily"])
    con.register("conversion_lag_curve", tables["conversion_lag_curve"])
    days = alert.named() if left_out is None else left_out
    con.register("left_out", pd.DataFrame({"day": pd.to_datetime(list(days), format="%Y-%m-%d")}))
    params = {
        "campaign": alert.campaign,
        "last": last_day,
        "c0": alert.window[0],
        "c1": alert.window[1],
        "b0": alert.base[0],
        "b1": alert.base[1],
    }
    rows = con.execute(SQL, params).df().set_index("side")
    con.close()
    num, den = RATIOS.get(alert.kpi, (alert.kpi, None))
    values = [
        rows.loc[side, num] / rows.loc[side, den] if den else rows.loc[side, num]
        for side in ("current", "baseline")
    ]
    return float(values[0]), float(values[1])


def reproduces(alert: Alert, current: float, baseline: float) -> bool:
    """The printed numbers are the recomputed ones rounded: within half a unit of the last
    printed digit (2 decimals for the values, 0.1 point for the move), plus 1e-6 for the
    different summation order of DuckDB and pandas (float sums of ~60 terms differ by ~1e-10
    relative; the values are below 1e7)."""
    move = current / baseline - 1.0
    return (
        abs(current - alert.current) <= 0.005 + 1e-6
        and abs(baseline - alert.baseline) <= 0.005 + 1e-6
        and abs(100 * abs(move) - alert.pct) <= 0.05 + 1e-6
        and (move > 0) == (alert.direction == "up")
    )


def episodes(config):
    domain = load_domain("ads", config)
    return [
        build_episode(domain, EpisodeSpec(f"b-{seed}", "test", seed, 4000 + seed, cause, None))
        for seed, cause in enumerate(CAUSES)
    ]


@pytest.fixture(scope="module")
def plain():
    return episodes({"alert_baseline_disclosed": True})


@pytest.fixture(scope="module")
def suspended():
    return episodes({"alert_baseline_disclosed": True, "background": SUSPENSIONS})


@pytest.mark.parametrize("which", ["plain", "suspended"])
def test_every_shown_alert_reproduces_from_the_prompt_and_tables(which, request):
    for ep in request.getfixturevalue(which):
        alerts = parse_alerts(ep.prompt)
        assert alerts and len(alerts) == ep.prompt.count("\nALERT: "), ep.prompt
        last_day = LAST_DAY.search(ep.prompt)[1]
        for alert in alerts:
            assert alert.named(), alert  # the default account's holiday is in every baseline
            assert set(alert.reasons) <= {"holiday season", "no delivery"}, alert
            assert all(alert.base[0] <= d <= alert.base[1] for d in alert.named()), alert
            current, baseline = recompute(ep.tables, alert, last_day)
            assert reproduces(alert, current, baseline), (alert, current, baseline)


def test_suspension_days_are_left_out_and_named(suspended):
    """The suspensions' days are named "no delivery", have no clicks in the named scope (a
    whole day suspended or paused), and the statement is needed: averaging them in (leaving
    out the holiday season only) misses the printed baseline."""
    named, needed = 0, 0
    for ep in suspended:
        last_day = LAST_DAY.search(ep.prompt)[1]
        perf = ep.tables["perf_daily"]
        for alert in parse_alerts(ep.prompt):
            if "no delivery" not in alert.reasons:
                continue
            named += 1
            rows = perf if alert.campaign is None else perf[perf["campaign"] == alert.campaign]
            daily = rows.groupby(rows["date"].dt.strftime("%Y-%m-%d"))["clicks"].sum()
            usual = daily.loc[alert.base[0] : alert.base[1]].median()
            for day in alert.named("no delivery"):
                assert daily[day] < 0.1 * usual, (alert, day, daily[day], usual)
            holiday = alert.named("holiday season")
            current, baseline = recompute(ep.tables, alert, last_day, left_out=holiday)
            needed += not reproduces(alert, current, baseline)
    # Four pauses per episode before the alert window, over four episodes: at least two alert
    # lines name a day without delivery (measured: every episode's baselines hold some).
    assert named >= 2
    assert needed >= 1


def test_flag_off_prompt_keeps_its_bytes():
    """A committed split (its manifest does not record the key) rebuilds its stored prompt."""
    split = ROOT / "data" / "ads_expert"
    assert dataset_domain(split).settings.alert_baseline_disclosed is False
    row = load_index(split)[0]
    assert rebuild_episode(split, row["episode_id"]).prompt == row["prompt"]
    assert "leaving out 2026" not in row["prompt"]
