"""The ads domain: the SCM, its 12 causes, and the reports an analyst reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

import numpy as np
import pandas as pd

from causaltrace import SCM, Background, Domain, InterventionDraw, World, raised_alerts
from causaltrace_domains.ads import render
from causaltrace_domains.ads.alert import (
    KPIS,
    alert_text,
    left_out_text,
    monitor_readings,
    scope_excluded,
    scope_totals,
    shown_alert,
    task_prompt,
)
from causaltrace_domains.ads.attribution import AlertAttribution
from causaltrace_domains.ads.causes import account_change, edit_hour, intervention_points
from causaltrace_domains.ads.changes import change_history, draw_edits, sample_background
from causaltrace_domains.ads.config import AdsConfig
from causaltrace_domains.ads.dictionary import DATA_DICTIONARY
from causaltrace_domains.ads.dimensions import campaigns_table, creatives_table
from causaltrace_domains.ads.evidence import AdsEvidence
from causaltrace_domains.ads.panel import build_panel
from causaltrace_domains.ads.scm import build_nodes, holiday_season, reported_share

# KPIs whose counterfactual effect each oracle label records.
LABEL_KPIS = (
    "impressions",
    "clicks",
    "cost",
    "conversions",
    "conversion_value",
    "real_conversions",
    "invalid_clicks",
    "sessions",
)


class AdsDomain(Domain):
    """A digital-advertising account: 12 root causes in four groups, 1D and 2D slices."""

    name = "ads"
    record_tables: ClassVar[tuple[str, ...]] = ("change_history", "campaigns", "creatives")
    difficulty_knobs: ClassVar[Mapping[str, str]] = {
        "auction_dispersion": "noise overdispersion: negative-binomial shape of daily auctions "
        "(lower is noisier)",
        "auction_volatility": "day-to-day noise of competitors' bids per campaign and network",
        "decoy_edits": "[low, high] harmless change-history edits per episode (decoys)",
        "background": "concurrent processes and decoys (BackgroundPrior overrides: "
        "count_weights, alert_probability, decoys.effectful, ...): their number and how often "
        "one touches the alert window (plausible confounders)",
    }

    def __init__(self, config: Mapping | None = None):
        super().__init__(config)
        self.settings = AdsConfig.from_mapping(self.config)

    def build_scm(self) -> SCM:
        cfg = self.settings
        panel = build_panel(cfg)
        nodes = build_nodes(cfg, panel)
        healthy_ctr = next(n.mechanism for n in nodes if n.name == "ctr")
        points = intervention_points(cfg, healthy_ctr, panel)
        return SCM(nodes, panel, points, name="ads")

    def background(
        self, rng: np.random.Generator, draws: Sequence[InterventionDraw] = ()
    ) -> Background:
        scm = self.scm
        return sample_background(
            scm.panel, self.settings, rng, points=scm.intervention_points, draws=draws
        )

    def render(
        self,
        world: World,
        draw: InterventionDraw,
        background: Background,
        rng: np.random.Generator,
        *,
        also: Sequence[InterventionDraw] = (),
    ) -> dict[str, pd.DataFrame]:
        panel, cfg = self.scm.panel, self.settings
        # One child stream per table, so adding a table never changes another table's bytes.
        streams = dict(zip(("hourly", "auction", "changes", "cause", "creatives"), rng.spawn(5)))
        edits = []
        specs = {c.name: c for c in cfg.campaigns}
        for each in (draw, *also):  # a concurrent episode's causes each log their own edit
            # An edit that acts from its hour (edit_timing="hour") drew it with the cause.
            hour = each.extras.get("hour")
            if hour is None:
                hour = edit_hour(streams["cause"])
            edits += draw_edits(account_change(each.point), each, panel, specs, int(hour))
        shares = render.impression_share_daily(panel, world)
        tables = {
            "perf_daily": render.perf_daily(panel, world),
            "perf_hourly": render.perf_hourly(panel, world, cfg, streams["hourly"]),
            "impression_share_daily": shares,
            "auction_insights_daily": render.auction_insights_daily(
                panel, world, cfg, streams["auction"], shares
            ),
            "reach_frequency_daily": render.reach_frequency_daily(panel, world, cfg),
            "site_analytics_daily": render.site_analytics_daily(panel, world),
            "change_history": change_history(
                panel, world, background, edits, streams["changes"], self._budget_after(world)
            ),
            "campaigns": campaigns_table(panel, world, cfg),
            "creatives": creatives_table(panel, world, cfg, streams["creatives"]),
            "conversion_lag_curve": render.conversion_lag_curve(cfg),
        }
        tables["data_dictionary"] = pd.DataFrame(
            [(t, c, d) for t, cols in self.data_dictionary().items() for c, d in cols.items()],
            columns=["table_name", "column_name", "description"],
        )
        return tables

    def _budget_after(self, world: World) -> np.ndarray | None:
        """The budget each day ends with, where edits act from their hour (the edit day's own
        value holds the part of the day before the edit): the next day's, the last day's own;
        None (the day's value) otherwise."""
        if self.settings.edit_timing != "hour":
            return None
        budget = world["daily_budget"]
        return np.concatenate([budget[:, 1:], budget[:, -1:]], axis=1)

    def data_dictionary(self) -> dict[str, dict[str, str]]:
        return DATA_DICTIONARY

    def task_prompt(self, tables: Mapping[str, pd.DataFrame]) -> str:
        cfg = self.settings
        readings = self.alert_readings(tables)
        alerts = self.shown_alerts(readings) or [shown_alert(readings)]
        dates = [str(d) for d in self.scm.panel.time.values.astype("datetime64[D]")]
        window, weeks = cfg.alert_window_days, cfg.baseline_weeks
        left_out = [None] * len(alerts)
        if cfg.alert_baseline_disclosed:
            _, season = self._monitor_calendar()
            totals = scope_totals(tables["perf_daily"])
            left_out = [
                left_out_text(totals[a.scope]["clicks"], season, dates, window, weeks)
                for a in alerts
            ]
        text = [alert_text(a, dates, window, weeks, w) for a, w in zip(alerts, left_out)]
        dims = {d.name: d.levels for d in self.scm.panel.dimensions}
        return task_prompt(
            text,
            {name: len(t) for name, t in tables.items()},
            dims,
            cfg.currency,
            window,
            weeks,
            concurrent=self.concurrent,
            disclosed_until=dates[-1] if cfg.alert_baseline_disclosed else None,
        )

    def _monitor_calendar(self) -> tuple[np.ndarray, np.ndarray]:
        """The conversion-delay curve (share reported by age in days) and the days the
        monitor's calendar leaves out (the holiday season: the ramp, the day and the next).
        With the baseline disclosed the curve is the conversion_lag_curve table as the agent
        reads it (rounded, its last row for older days), so the alert can be recomputed."""
        cfg = self.settings
        days = self.scm.panel.time.values.astype("datetime64[D]")
        demand, _ = holiday_season(days, cfg)
        season = (demand != 1.0) | np.roll(demand != 1.0, 1)
        if cfg.alert_baseline_disclosed:
            return render.conversion_lag_curve(cfg)["share_reported"].to_numpy(), season
        return reported_share(np.arange(400), cfg), season

    def shown_alerts(self, readings) -> list:
        """The page: up to three fired KPIs, most severe first, each at the scope where it moved
        most (a move seen in the account and in one of its campaigns pages once)."""
        return raised_alerts(readings)

    def alert_readings(self, tables: Mapping[str, pd.DataFrame]):
        cfg = self.settings
        curve, season = self._monitor_calendar()
        return monitor_readings(
            tables["perf_daily"],
            curve,
            season,
            cfg.alert_window_days,
            cfg.baseline_weeks,
            leave_out_idle=cfg.alert_baseline_disclosed,
        )

    def monitor_tables(self, world: World) -> dict[str, pd.DataFrame]:
        return {"perf_daily": render.perf_daily_monitor(self.scm.panel, world)}

    def evidence(self, tables: Mapping[str, pd.DataFrame]) -> AdsEvidence:
        cfg, panel = self.settings, self.scm.panel
        curve, season = self._monitor_calendar()
        alerts = self.shown_alerts(self.alert_readings(tables))
        age = np.arange(panel.n_time)[::-1]
        maturity = curve[np.minimum(age, curve.size - 1)]

        window, weeks = cfg.alert_window_days, cfg.baseline_weeks
        excluded: np.ndarray | dict[str, np.ndarray] = season
        if cfg.alert_baseline_disclosed:  # each alert's scope leaves out its own idle days
            totals = scope_totals(tables["perf_daily"])
            excluded = {
                a.scope: scope_excluded(totals[a.scope]["clicks"], season, window, weeks, True)
                for a in alerts
            }

        def attribution(daily):
            return AlertAttribution(panel, daily, alerts, maturity, excluded, window, weeks)

        return AdsEvidence(panel, tables, attribution)

    def alert_kpi(self, tables: Mapping[str, pd.DataFrame]) -> str:
        return shown_alert(self.alert_readings(tables)).kpi

    def kpi_daily(self, world: World, kpi: str) -> np.ndarray:
        num, den, _ = KPIS[kpi]
        numerator = world[num].sum(axis=0).astype(np.float64)
        if den is None:
            return numerator
        return numerator / np.maximum(world[den].sum(axis=0), 1e-9)

    def alert_onset(self) -> int:
        return self.scm.panel.n_time - self.settings.alert_window_days

    def kpi_totals(self, world: World, mask: np.ndarray, onset: int) -> dict[str, float]:
        return {k: float(world[k][mask][:, onset:].sum()) for k in LABEL_KPIS}

    def channel_readings(self, in_slice, overall) -> dict[str, float]:
        from causaltrace_domains.ads.channels import channel_readings

        return channel_readings(in_slice, overall)
