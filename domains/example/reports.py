"""What the shop's analyst sees, its monitoring rule, and the evidence the verifier reads."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from causaltrace import AlertReading, CausalTraceError, Panel, World
from causaltrace.episodes.verify import Statistic

DIMS = ("channel", "region")


def render_tables(panel: Panel, world: World) -> dict[str, pd.DataFrame]:
    """One daily table at the channel x region grain (zero rows kept)."""
    n_days = panel.n_time
    frame = pd.DataFrame(
        {
            "date": np.tile(panel.time.values.astype("datetime64[D]"), panel.n_cells),
            **{
                d: pd.Categorical.from_codes(
                    np.repeat(panel.codes(d), n_days), categories=list(panel.dimension(d).levels)
                )
                for d in DIMS
            },
            "visits": world["visits"].reshape(-1),
            "orders": world["orders"].reshape(-1),
            "tracked_orders": world["tracked_orders"].reshape(-1),
        }
    )
    return {"shop_daily": frame}


# The monitoring rule: each KPI's last WINDOW days against the same weekdays of the (up to)
# WEEKS weeks before, over the whole shop and each channel; a fall of THRESHOLD or more fires.
# Orders are counted on the day they happen (no reporting lag), so a fall is never an artefact.
MONITOR_KPIS = {"orders": -1, "tracked_orders": -1}  # KPI -> adverse direction (a fall is bad)
# 15% rather than 10%: on this shop's volumes (about 100 orders a week on the social and email
# channels) a 10% rule fires in 40% of quiet weeks, a 15% rule in 19% (200 seeds, no cause).
WINDOW, WEEKS, THRESHOLD = 7, 4, 0.15
MONITOR_RULE = (
    f"The monitor compares orders and tracked orders, for the whole shop and for each channel, "
    f"over the last {WINDOW} days with the same weekdays of the weeks before, and raises the "
    f"largest fall of {THRESHOLD:.0%} or more."
)


def baseline_weeks(n_days: int) -> int:
    """Whole weeks of baseline before the alert window (at most WEEKS)."""
    weeks = min(WEEKS, (n_days - WINDOW) // 7)
    if weeks < 1:
        raise CausalTraceError(f"the monitor needs at least {WINDOW + 7} days, got {n_days}")
    return weeks


def alert_readings(tables: Mapping[str, pd.DataFrame]) -> list[AlertReading]:
    """Every (KPI, scope) reading of the rule: scope ``account``, then ``channel=<level>``."""
    frame = tables["shop_daily"]
    kpis = list(MONITOR_KPIS)
    channels = list(frame["channel"].cat.categories)
    by_day = frame.groupby(["date", "channel"], observed=False, sort=True)[kpis].sum()
    cube = by_day.to_numpy(np.float64).reshape(-1, len(channels), len(kpis))  # day, channel, kpi
    cube = np.concatenate([cube.sum(axis=1, keepdims=True), cube], axis=1)
    weeks = baseline_weeks(len(cube))
    current = cube[-WINDOW:].sum(axis=0)
    baseline = cube[-WINDOW - 7 * weeks : -WINDOW].sum(axis=0) / weeks
    scopes = ("account", *(f"channel={c}" for c in channels))
    return [
        AlertReading(kpi, scope, current[s, k], baseline[s, k], adverse, THRESHOLD)
        for k, (kpi, adverse) in enumerate(MONITOR_KPIS.items())
        for s, scope in enumerate(scopes)
    ]


def alert_text(reading: AlertReading, n_days: int) -> str:
    """The alert as the prompt states it (saying so if the reading did not fire)."""
    kpi = reading.kpi.replace("_", " ")
    where = "" if reading.scope == "account" else f" ({reading.scope})"
    direction = "down" if reading.move < 0 else "up"
    below = "" if reading.fired else " (the largest move; below the threshold)"
    return (
        f"{kpi}{where} {direction} {abs(reading.move):.1%} in the last {WINDOW} days{below}: "
        f"{reading.current:,.0f} against a weekly average of {reading.baseline:,.1f} over the "
        f"{baseline_weeks(n_days)} weeks before"
    )


class ExampleEvidence:
    """Signatures: visits for TRAFFIC_DROP, orders per visit for CHECKOUT_BUG, tracked per
    real order for TRACKING_LOSS; each a pooled log change with its Poisson noise."""

    def __init__(self, panel: Panel, tables: Mapping[str, pd.DataFrame]):
        frame = tables["shop_daily"]
        self.n_days = panel.n_time
        self.arrays = {
            c: frame[c].to_numpy(float).reshape(panel.n_cells, self.n_days)
            for c in ("visits", "orders", "tracked_orders")
        }

    def _change(self, num, den, onset):
        pre, post = slice(max(0, onset - 21), onset), slice(onset, self.n_days)
        a, b, c, d = num[post].sum(), den[post].sum(), num[pre].sum(), den[pre].sum()
        effect = np.log((a + 0.5) / (b + 0.5)) - np.log((c + 0.5) / (d + 0.5))
        variance = 1 / (a + 0.5) + 1 / (b + 0.5) + 1 / (c + 0.5) + 1 / (d + 0.5)
        daily_noise = np.sqrt(variance * (post.stop - post.start))
        return effect, variance, daily_noise

    def statistic(self, cause, cells, onset, reference=None):
        cells = np.ones(len(self.arrays["visits"]), bool) if cells is None else cells
        if cause == "TRAFFIC_DROP":
            visits = self.arrays["visits"][cells].sum(0)
            ones = np.full(self.n_days, visits[:onset].mean())
            effect, variance, noise = self._change(visits, ones, onset)
            return Statistic(-effect, max(noise, 0.05), np.sqrt(variance))
        num, den = {
            "CHECKOUT_BUG": ("orders", "visits"),
            "TRACKING_LOSS": ("tracked_orders", "orders"),
        }.get(cause, (None, None))
        if num is None or not cells.any() or cells.all():
            return None
        rest = ~cells if reference is None else reference
        e1, v1, n1 = self._change(
            self.arrays[num][cells].sum(0), self.arrays[den][cells].sum(0), onset
        )
        e2, v2, n2 = self._change(
            self.arrays[num][rest].sum(0), self.arrays[den][rest].sum(0), onset
        )
        return Statistic(-(e1 - e2), max(np.hypot(n1, n2), 0.05), np.sqrt(v1 + v2))
