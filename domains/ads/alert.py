"""The monitoring rule and the task prompt.

The alert is computed from the agent-visible daily report alone, by the same rule in every
episode: each KPI's last ``window`` complete days against the same weekdays of the ``weeks``
weeks before, and the largest adverse move is reported. With no cause injected the rule still
fires, on seasonality, conversion lag or noise, so an alert's existence, size or wording says
nothing about the cause.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from domains.ads.causes import CAMPAIGN_WIDE, CAUSES, NO_SIGNAL

# KPI -> (numerator, denominator or None, adverse direction: -1 means a fall is bad)
KPIS: dict[str, tuple[str, str | None, int]] = {
    "conversions": ("conversions", None, -1),
    "conversion_value": ("conversion_value", None, -1),
    "clicks": ("clicks", None, -1),
    "cost_per_conversion": ("cost", "conversions", +1),
    "roas": ("conversion_value", "cost", -1),
}


@dataclass(frozen=True)
class Alert:
    kpi: str
    current: float
    baseline: float
    relative_change: float
    window: tuple[str, str]
    baseline_window: tuple[str, str]

    def text(self) -> str:
        direction = "up" if self.relative_change > 0 else "down"
        return (
            f"{self.kpi} is {direction} {abs(self.relative_change):.1%}: {self.current:,.2f} "
            f"over {self.window[0]} to {self.window[1]} against {self.baseline:,.2f} for the "
            f"same weekdays on average over {self.baseline_window[0]} to "
            f"{self.baseline_window[1]}."
        )


def compute_alert(perf_daily: pd.DataFrame, window: int = 7, weeks: int = 4) -> Alert:
    """Apply the monitoring rule to the account's daily totals."""
    daily = perf_daily.groupby("date", sort=True)[
        ["clicks", "cost", "conversions", "conversion_value"]
    ].sum()
    dates = daily.index.to_numpy()
    current = daily.iloc[-window:].sum()
    baseline_rows = daily.iloc[-window * (weeks + 1) : -window]
    baseline = baseline_rows.sum() / weeks
    best = None
    for kpi, (num, den, adverse) in KPIS.items():
        cur = current[num] / current[den] if den else current[num]
        base = baseline[num] / baseline[den] if den else baseline[num]
        change = cur / base - 1.0 if base else 0.0
        score = adverse * change
        if best is None or score > best[0]:
            best = (score, kpi, float(cur), float(base), float(change))
    _, kpi, cur, base, change = best

    def day(value) -> str:
        return str(np.datetime64(value, "D"))

    return Alert(
        kpi,
        cur,
        base,
        change,
        (day(dates[-window]), day(dates[-1])),
        (day(baseline_rows.index[0]), day(baseline_rows.index[-1])),
    )


def task_prompt(
    alert: Alert, tables: dict[str, int], dimensions: dict[str, tuple[str, ...]], currency: str
) -> str:
    """The task as an account manager would frame it (no label, no seed, nothing cause-specific)."""
    no_slice = [c for c, s in CAUSES.items() if s.group in (CAMPAIGN_WIDE, NO_SIGNAL)]
    causes = "\n".join(f"- {name}: {spec.description}" for name, spec in CAUSES.items())
    table_list = ", ".join(sorted(tables))
    dims = "\n".join(f"- {d}: {', '.join(levels)}" for d, levels in dimensions.items())
    return f"""You are the analyst on call for an e-commerce advertiser's ads account ({currency}).
The monitoring rule compares each KPI over the last 7 complete days with the same weekdays of the
4 weeks before and raises the largest adverse move. It just fired:

ALERT: {alert.text()}

Find the root cause of the movement. The account's reports are DuckDB tables ({table_list});
the table data_dictionary describes every column. Investigate with the sql and python tools.

The root cause is exactly one of:
{causes}

Also name the affected slice: the segment where the cause acts, as dim=level or
dim=level&dim=level over these dimensions and levels:
{dims}
{", ".join(no_slice)} act on the whole account and take no slice (use null).

Answer by calling submit(root_cause, slice). If you cannot call tools, end your reply with a JSON
object such as {{"root_cause": "CAUSE_NAME", "slice": "dim=level"}}."""
