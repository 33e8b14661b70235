"""The monitoring rule and the task prompt.

The alert is computed from the agent-visible daily report alone, by the same rule in every
episode, the way an account's own monitoring would run it: each KPI of the account and of each
campaign over the last ``window`` complete days against the same weekdays of the ``weeks`` weeks
before, leaving out the holiday season (gift demand ramps and the holiday itself), with
conversions and conversion value divided by the share of them the account's conversion-delay
curve says has been reported at each day's age (recent days are still collecting conversions;
comparing them raw with matured weeks raises an alert on conversion lag alone). A reading fires
when its adverse move is at least ``MIN_MOVE`` and at least ``Z_FIRE`` times its noise (the larger
of the counts' sampling noise and the week-to-week variation of the baseline weeks themselves,
leaving out the most unusual week); the page shows up to three fired readings, most severe
first, one per KPI. An alert's existence, size or
wording therefore says nothing about the cause: without a cause the rule still fires on noise,
seasonality the calendar does not know, or a routine change (a promotion ending, a paused
campaign, a bidding learning period).

With the baseline disclosed (``AdsConfig.alert_baseline_disclosed``) each scope's baseline also
leaves out its days without delivery (:func:`idle_days`: a billing suspension, a paused campaign,
an outage, read off the report's clicks), the conversion-delay curve is the one the
conversion_lag_curve table prints, and every alert line names each baseline day it left out and
why (:func:`left_out_text`), so an analyst can recompute its numbers from the prompt and the
tables. Off, the rule and the prompt are those of the committed splits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from causaltrace import AlertReading, raised_alert
from causaltrace_domains.ads.causes import CAMPAIGN_WIDE, CAUSES, DESCRIPTIONS, NO_SIGNAL

# KPI -> (numerator, denominator or None, adverse direction: -1 means a fall is bad)
KPIS: dict[str, tuple[str, str | None, int]] = {
    "conversions": ("conversions", None, -1),
    "conversion_value": ("conversion_value", None, -1),
    "clicks": ("clicks", None, -1),
    "cost": ("cost", None, +1),  # an unexplained spend spike is the classic alert
    "cost_per_conversion": ("cost", "conversions", +1),
    "roas": ("conversion_value", "cost", -1),
}
# The count whose sampling noise limits each KPI's precision.
NOISE_COUNT = {
    "conversions": "conversions",
    "conversion_value": "conversions",
    "clicks": "clicks",
    "cost": "clicks",
    "cost_per_conversion": "conversions",
    "roas": "conversions",
}
LAGGED = ("conversions", "conversion_value")
MIN_MOVE = 0.05  # a move under 5% is not worth paging anyone
Z_FIRE = 3.0  # and it must be beyond three times its sampling noise
OVERDISPERSION = 1.5  # day-to-day counts vary more than Poisson (demand shocks, order values)
TOTALS = ("clicks", "cost", "conversions", "conversion_value")
# With the baseline disclosed: a baseline day on which a scope got under this share of the
# clicks of its median baseline day served nothing to speak of (a billing suspension, a paused
# campaign, an outage; also a day cut off in its first hour). Ordinary days never come near it:
# the deepest routine dip (a holiday, a budget-limited day) keeps over half a day's clicks.
IDLE_SHARE = 0.1
HOLIDAY, IDLE = "holiday season", "no delivery"


def scope_totals(perf_daily: pd.DataFrame) -> dict[str, dict[str, np.ndarray]]:
    """Daily totals per scope: the whole account and each campaign (column -> array over the
    scope's dates, in date order).

    The sums are pandas' own group sums (compensated, in row order) over integer keys made
    here: the same numbers as grouping by the date and campaign columns, at a quarter of the
    cost (the monitor reads both worlds of every generation attempt)."""
    day_values, day = np.unique(perf_daily["date"].to_numpy(), return_inverse=True)
    campaign = perf_daily["campaign"]
    if isinstance(campaign.dtype, pd.CategoricalDtype):
        names, codes = np.asarray(campaign.cat.categories), campaign.cat.codes.to_numpy()
    else:
        names, codes = np.unique(campaign.to_numpy(), return_inverse=True)
    values = perf_daily[list(TOTALS)]
    n_days = len(day_values)
    account = values.groupby(day, sort=True).sum()
    out = {"account": {c: account[c].to_numpy() for c in TOTALS}}
    known = codes >= 0  # a row without a campaign belongs to the account only
    key = codes[known].astype(np.int64) * n_days + day[known]
    by_campaign = values[known].groupby(key, sort=True).sum()
    which = by_campaign.index.to_numpy() // n_days
    starts = np.flatnonzero(np.r_[True, which[1:] != which[:-1]])
    ends = np.r_[starts[1:], which.size]
    columns = {c: by_campaign[c].to_numpy() for c in TOTALS}
    for start, end in zip(starts, ends):
        scope = f"campaign={names[which[start]]}"
        out[scope] = {c: columns[c][start:end] for c in TOTALS}
    return out


def baseline_keep(excluded: np.ndarray, window: int, weeks: int) -> tuple[np.ndarray, np.ndarray]:
    """The baseline's days, (weeks, window) positions in the report, and which of them the
    monitor averages: every day not ``excluded``, and where a weekday has every week excluded,
    all of that weekday's weeks (a weekday with no day left would have no baseline)."""
    n = excluded.size
    base_idx = np.arange(n - window * (weeks + 1), n - window).reshape(weeks, window)
    keep = ~excluded[base_idx]
    keep[:, ~keep.any(axis=0)] = True
    return base_idx, keep


def idle_days(clicks: np.ndarray, window: int, weeks: int) -> np.ndarray:
    """Per day of a scope's report, whether it served (next to) nothing: clicks under
    ``IDLE_SHARE`` of the scope's median baseline day. Read from the report the monitor sees,
    not from what caused it, so an analyst finds the same days."""
    clicks = np.asarray(clicks, dtype=np.float64)
    n = clicks.size
    median = float(np.median(clicks[n - window * (weeks + 1) : n - window]))
    return clicks < IDLE_SHARE * median


def scope_excluded(
    clicks: np.ndarray, season: np.ndarray, window: int, weeks: int, leave_out_idle: bool
) -> np.ndarray:
    """The days a scope's baseline leaves out: the holiday season, and with
    ``leave_out_idle`` the scope's days without delivery."""
    return season | idle_days(clicks, window, weeks) if leave_out_idle else season


def monitor_readings(
    perf_daily: pd.DataFrame,
    reported_share: np.ndarray,
    excluded_days: np.ndarray,
    window: int = 7,
    weeks: int = 4,
    *,
    leave_out_idle: bool = False,
) -> list[AlertReading]:
    """Every (KPI, scope) reading of the rule.

    ``reported_share[k]`` is the expected share of a day's conversions reported by age ``k``
    days (the conversion-delay curve); ``excluded_days`` flags (per day of the report) the
    holiday-season days the baseline leaves out; with ``leave_out_idle`` each scope's baseline
    also leaves out its days without delivery (:func:`idle_days`).
    """
    readings = []
    for scope, daily in scope_totals(perf_daily).items():
        n = len(daily["clicks"])
        if n < window * (weeks + 1):
            continue
        age = np.arange(n)[::-1]
        maturity = reported_share[np.minimum(age, reported_share.size - 1)]
        values = {c: np.asarray(daily[c], dtype=np.float64) for c in TOTALS}
        adjusted = {c: values[c] / maturity if c in LAGGED else values[c] for c in TOTALS}
        current = {c: adjusted[c][-window:].sum() for c in TOTALS}
        raw_current = {c: values[c][-window:].sum() for c in TOTALS}
        # Baseline: per weekday position, the mean over the weeks before of the days kept.
        excluded = scope_excluded(values["clicks"], excluded_days, window, weeks, leave_out_idle)
        base_idx, keep = baseline_keep(excluded, window, weeks)
        weight = keep / keep.sum(axis=0)
        profile = {c: (adjusted[c][base_idx] * weight).sum(axis=0) for c in TOTALS}
        baseline = {c: float(profile[c].sum()) for c in TOTALS}
        raw_base = {c: float(values[c][base_idx][keep].sum()) for c in TOTALS}
        # Each baseline week against the weekday profile, on its kept days: how much a week
        # moves by itself (demand shocks, drifting competition), so the rule is calibrated to
        # the scope's own history and not to counting noise alone.
        weekly = {c: (adjusted[c][base_idx] * keep).sum(axis=1) for c in TOTALS}
        expected = {c: (profile[c][None, :] * keep).sum(axis=1) for c in TOTALS}
        for kpi, (num, den, adverse) in KPIS.items():
            if den and (current[den] <= 0 or baseline[den] <= 0):
                cur = base = 0.0  # a ratio without a denominator (e.g. a paused week) is no move
            else:
                cur = current[num] / current[den] if den else current[num]
                base = baseline[num] / baseline[den] if den else baseline[num]
            count = NOISE_COUNT[kpi]
            rel_sd = OVERDISPERSION * np.sqrt(
                1.0 / max(raw_current[count], 1.0) + 1.0 / max(raw_base[count], 1.0)
            )
            with np.errstate(divide="ignore", invalid="ignore"):
                week_value = weekly[num] / weekly[den] if den else weekly[num]
                week_expected = expected[num] / expected[den] if den else expected[num]
                deviation = week_value / week_expected - 1.0
            history_sd = typical_week_move(deviation[np.isfinite(deviation)])
            threshold = max(MIN_MOVE, Z_FIRE * max(float(rel_sd), history_sd))
            readings.append(AlertReading(kpi, scope, float(cur), float(base), adverse, threshold))
    return readings


def typical_week_move(deviation: np.ndarray) -> float:
    """How much a baseline week moves by itself: the root mean square of the weeks' deviations
    from the weekday profile (n - 1 degrees of freedom, the profile being their mean), leaving
    out the most unusual week when there are more than two (a week with a paused campaign or a
    sale is not the scope's usual variation, and would otherwise raise the bar for a month)."""
    if deviation.size <= 1:
        return 0.0
    if deviation.size > 2:
        deviation = np.delete(deviation, int(np.argmax(np.abs(deviation))))
    return float(np.sqrt(np.sum(deviation**2) / max(deviation.size - 1, 1)))


def alert_text(
    reading: AlertReading,
    dates: Sequence[str],
    window: int,
    weeks: int,
    left_out: str | None = None,
) -> str:
    """The alert line of the prompt; ``left_out`` (:func:`left_out_text`) ends it with the
    baseline days the monitor left out."""
    direction = "up" if reading.move > 0 else "down"
    where = "the account" if reading.scope == "account" else reading.scope.replace("=", " ")
    clause = "" if left_out is None else f", {left_out}"
    return (
        f"{reading.kpi} for {where} is {direction} {abs(reading.move):.1%}: "
        f"{reading.current:,.2f} over {dates[-window]} to {dates[-1]} against "
        f"{reading.baseline:,.2f} for the same weekdays on average over "
        f"{dates[-window * (weeks + 1)]} to {dates[-window - 1]}{clause}."
    )


def left_out_text(
    clicks: np.ndarray, season: np.ndarray, dates: Sequence[str], window: int, weeks: int
) -> str:
    """Every baseline day a scope's reading leaves out, as runs of dates with the reason, e.g.
    "leaving out 2026-02-04..2026-02-15 (holiday season) and 2026-02-18 (no delivery)": the
    days :func:`monitor_readings` leaves out with ``leave_out_idle``, after the weekday rule of
    :func:`baseline_keep`. A day of the season without delivery counts as the season's."""
    excluded = scope_excluded(clicks, season, window, weeks, leave_out_idle=True)
    base_idx, keep = baseline_keep(excluded, window, weeks)
    out = np.zeros(len(dates), dtype=bool)
    out[base_idx[~keep]] = True
    parts = [
        f"{', '.join(_date_runs(out & mask, dates))} ({reason})"
        for reason, mask in ((HOLIDAY, season), (IDLE, ~season))
        if (out & mask).any()
    ]
    return "leaving out " + " and ".join(parts) if parts else "leaving out no day"


def _date_runs(days: np.ndarray, dates: Sequence[str]) -> list[str]:
    """Runs of consecutive flagged days as "first..last" (one date for a single day)."""
    edges = np.diff(np.r_[0, days.astype(np.int8), 0])
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
    return [dates[a] if a == b else f"{dates[a]}..{dates[b]}" for a, b in zip(starts, ends)]


def shown_alert(readings: Sequence[AlertReading]) -> AlertReading:
    """The first alert the prompt shows: the raised one; with the verifier's alert gate off,
    an episode may raise none, and the largest adverse move is shown instead."""
    raised = raised_alert(readings)
    return raised if raised is not None else max(readings, key=lambda r: r.severity)


def task_prompt(
    alerts: Sequence[str],
    tables: Mapping[str, int],
    dimensions: Mapping[str, tuple[str, ...]],
    currency: str,
    window: int,
    weeks: int,
    *,
    concurrent: bool = False,
    disclosed_until: str | None = None,
) -> str:
    """The task as an account manager would frame it (no label, no seed, nothing cause-specific).

    With ``concurrent`` (a dataset whose composition has episodes with two causes) every prompt
    says that one or more root causes may be at work and how to submit several, whatever the
    episode has; without it the prompt is the single-cause one. ``disclosed_until`` (the
    report's last day) says the baseline is disclosed: the rule is then stated so that each
    alert's numbers can be recomputed from the tables (:func:`left_out_text` ends each line)."""
    no_slice = [c for c, s in CAUSES.items() if s.group in (CAMPAIGN_WIDE, NO_SIGNAL)]
    alert_lines = "\n".join(f"ALERT: {line}" for line in alerts)
    plural = f"{len(alerts)} alert" + ("s" if len(alerts) > 1 else "")
    causes = "\n".join(f"- {name}: {text}" for name, text in DESCRIPTIONS.items())
    table_list = ", ".join(sorted(tables))
    dims = "\n".join(f"- {d}: {', '.join(levels)}" for d, levels in dimensions.items())
    if disclosed_until is None:
        rule = f"""The monitoring rule compares each KPI of the account and of each campaign over the last {window}
complete days with the same weekdays of the {weeks} weeks before, leaving out the holiday season.
Conversions keep arriving for weeks after the click, so conversions and conversion value are
first divided by the share the account's conversion-delay curve (table conversion_lag_curve)
expects to be reported at each day's age."""
    else:
        rule = _disclosed_rule(window, weeks, disclosed_until)
    header = f"""You are the analyst on call for an e-commerce advertiser's ads account ({currency}).
{rule} A KPI pages when its adverse move is at least
{MIN_MOVE:.0%} and beyond {Z_FIRE:.0f} times its noise (the larger of the counts' sampling noise and how much
the baseline weeks moved among themselves, leaving out the most unusual one); a page lists up to
three KPIs, each at the scope where it moved most. It just paged ({plural}, most severe first):

{alert_lines}

Find the root cause of the movement. The account's reports are DuckDB tables ({table_list});
the table data_dictionary describes every column. Investigate with the sql and python tools.

"""
    whole_account = f"{', '.join(no_slice)} act on the whole account and take no slice (use null)."
    if concurrent:
        return header + _several_causes_task(causes, dims, whole_account)
    return (
        header
        + f"""The root cause is exactly one of:
{causes}

Also name the affected slice: the segment where the cause acts, as dim=level or
dim=level&dim=level over these dimensions and levels:
{dims}
{whole_account}

Answer by calling submit(root_cause, slice). If you cannot call tools, end your reply with a JSON
object such as {{"root_cause": "CAUSE_NAME", "slice": "dim=level"}}."""
    )


def _disclosed_rule(window: int, weeks: int, last_day: str) -> str:
    """The rule as the prompt states it when the baseline is disclosed: enough to recompute
    every alert's current value and baseline from perf_daily and conversion_lag_curve."""
    return f"""The monitoring rule compares each KPI of the account and of each campaign over the last {window}
complete days with the same weekdays of the {weeks} weeks before: per weekday, the mean of its
days in those weeks, summed over the {window} weekdays (cost_per_conversion and roas are ratios
of such sums, cost / conversions and conversion_value / cost, as in the window). The baseline
leaves out the holiday season and, per account or campaign, days with under {IDLE_SHARE:.0%} of the
clicks of its median baseline day (no delivery: a billing suspension, a paused campaign, an
outage); each alert names every day it left out. Conversions keep arriving for weeks after the
click, so each day's conversions and conversion value are first divided by share_reported in
table conversion_lag_curve at the day's age (days_since_click: 0 for {last_day}, the last
day; older days take the last row)."""


def _several_causes_task(causes: str, dims: str, whole_account: str) -> str:
    """The answer part of a dataset with concurrent episodes: one or more root causes may be at
    work, and how to submit several."""
    return f"""One or more root causes may be at work at the same time. Each is one of:
{causes}

For each cause, also name the affected slice: the segment where it acts, as dim=level or
dim=level&dim=level over these dimensions and levels:
{dims}
{whole_account}

Name only the causes the data supports: every cause you list that is not at work costs reward.
Answer by calling submit(root_cause, slice) for one cause, or submit(causes) with a list of
{{"root_cause", "slice"}} objects for several. If you cannot call tools, end your reply with a
JSON object such as {{"root_cause": "CAUSE_NAME", "slice": "dim=level"}} or
{{"causes": [{{"root_cause": "CAUSE_A", "slice": "dim=level"}}, {{"root_cause": "CAUSE_B", "slice": null}}]}}."""
