"""The monitoring rule and the task prompt.

The rule runs on the agent-visible tables, the same way in every episode, as an SLO monitor
would: for every application service in every region (the services users' requests touch) it
compares the last ``WINDOW`` buckets (two hours) with the same clock times on the previous
``DAYS_BACK`` days (so the daily traffic cycle cancels), for the error rate, the p99 latency and
(frontend only) the request rate, and the order queue's depth per region. A reading fires when
its adverse move reaches its threshold. The page shows the fired readings most severe first,
at most one per service (its most severe KPI and region: an incident per service, as on-call
tools group them), at most ``PAGE_LIMIT``; the first is the one ``raised_alert`` gives. So a
fault that moves a service and its callers pages for each, and two faults in different
services usually both page (not when one's callers outrank the other's own alert). An alert's existence says
nothing about the cause: noise, short latency blips and routine changes raise some on their
own.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from causaltrace import AlertReading, raised_alerts
from causaltrace_domains.services.causes import CAUSES, DESCRIPTIONS, GLOBAL, NO_SIGNAL
from causaltrace_domains.services.topology import APP, BUCKETS_PER_DAY, QUEUE, REGIONS, SERVICES

WINDOW = 8  # buckets: the last two hours
PAGE_LIMIT = 3
DAYS_BACK = 2
THRESHOLDS = {"error_rate": 0.5, "latency_p99_ms": 0.3, "requests": 0.3, "queue_depth": 1.0}
LABELS = {
    "error_rate": "error rate",
    "latency_p99_ms": "p99 latency",
    "requests": "request rate",
    "queue_depth": "queue depth",
}


def _windows(n: int) -> tuple[slice, list[slice]]:
    current = slice(n - WINDOW, n)
    back = [
        slice(n - WINDOW - d * BUCKETS_PER_DAY, n - d * BUCKETS_PER_DAY)
        for d in range(1, DAYS_BACK + 1)
    ]
    return current, back


def monitor_readings(tables: Mapping[str, pd.DataFrame]) -> list[AlertReading]:
    """Every (KPI, scope) reading; scope ``service@region``."""
    frame = tables["service_metrics"]
    n = frame["ts"].nunique()
    current, back = _windows(n)
    readings = []
    for service in APP:
        rows = frame[frame["service"] == service]
        for region in REGIONS:
            cell = rows[rows["region"] == region].sort_values("ts")
            req = cell["requests"].to_numpy(np.float64)
            err = cell["errors"].to_numpy(np.float64)
            p99 = cell["latency_p99_ms"].to_numpy(np.float64)
            scope = f"{service}@{region}"
            err_cur, req_cur = err[current].sum(), req[current].sum()
            err_base = np.mean([err[b].sum() for b in back])
            req_base = np.mean([req[b].sum() for b in back])
            noise = 4.0 * np.sqrt(1.0 / max(err_cur, 1.0) + 1.0 / max(err_base, 1.0))
            readings.append(
                AlertReading(
                    "error_rate",
                    scope,
                    100.0 * err_cur / max(req_cur, 1.0),
                    100.0 * err_base / max(req_base, 1.0),
                    +1,
                    max(THRESHOLDS["error_rate"], noise),
                )
            )
            readings.append(
                AlertReading(
                    "latency_p99_ms",
                    scope,
                    p99[current].mean(),
                    np.mean([p99[b].mean() for b in back]),
                    +1,
                    THRESHOLDS["latency_p99_ms"],
                )
            )
            if service == "frontend":
                readings.append(
                    AlertReading(
                        "requests",
                        scope,
                        req_cur / (WINDOW * 900.0),
                        req_base / (WINDOW * 900.0),
                        +1,
                        THRESHOLDS["requests"],
                    )
                )
    queues = tables["queue_metrics"]
    for region in REGIONS:
        cell = queues[(queues["queue"] == QUEUE) & (queues["region"] == region)].sort_values("ts")
        depth = cell["depth"].to_numpy(np.float64)
        readings.append(
            AlertReading(
                "queue_depth",
                f"{QUEUE}@{region}",
                depth[current].mean(),
                np.mean([depth[b].mean() for b in back]),
                +1,
                THRESHOLDS["queue_depth"],
            )
        )
    return readings


def alerted_service(reading: AlertReading) -> str:
    """The page's grouping: the service of a reading's scope (``service@region``). One line
    per service keeps the page short: a finer grouping (per service and region) shows every
    region a cause reaches, and the cascade of a fault across callers and regions reads as
    its fingerprint (measured with rule_probe.py: more causes then name themselves)."""
    return reading.scope.split("@")[0]


def raised_page(readings) -> list[AlertReading]:
    """The fired alerts the page shows (see the module docstring); empty if none fired."""
    return raised_alerts(readings, limit=PAGE_LIMIT, group=alerted_service)


def page(readings) -> list[AlertReading]:
    """The alerts the prompt shows: the raised page; with the explained-alert gate off an
    episode may raise none, and the largest move is shown instead."""
    return raised_page(readings) or [max(readings, key=lambda r: r.severity)]


def shown_alert(readings) -> AlertReading:
    """The page's first (most severe) alert."""
    return page(readings)[0]


def page_text(alerts, times: np.ndarray) -> str:
    """The page as the prompt shows it: one ``ALERT:`` line per alert, most severe first."""
    return "\n".join(f"ALERT: {alert_text(a, times)}" for a in alerts)


def alert_text(reading: AlertReading, times: np.ndarray) -> str:
    service, region = reading.scope.split("@")
    n = len(times)
    unit = {
        "error_rate": "%",
        "latency_p99_ms": " ms",
        "requests": " req/s",
        "queue_depth": " messages",
    }[reading.kpi]
    fmt = ".2f" if reading.kpi == "error_rate" else ",.0f"
    below = "" if reading.fired else " (the largest move; below its threshold)"
    start = str(times[n - WINDOW])[:16].replace("T", " ")
    end = str(times[-1] + np.timedelta64(15, "m"))[:16].replace("T", " ")
    return (
        f"{LABELS[reading.kpi]} of {service} in {region} is up {reading.move:.0%} over "
        f"{start} to {end} UTC: {reading.current:{fmt}}{unit} against {reading.baseline:{fmt}}{unit} "
        f"at the same times of day on the previous {DAYS_BACK} days{below}."
    )


def task_prompt(
    alerts: str, n_alerts: int, tables: Mapping[str, int], concurrent: bool = False
) -> str:
    whole = [c for c, s in CAUSES.items() if s.group in (GLOBAL, NO_SIGNAL)]
    causes = "\n".join(f"- {name}: {text}" for name, text in DESCRIPTIONS.items())
    table_list = ", ".join(sorted(tables))
    thresholds = ", ".join(f"{LABELS[k]} +{v:.0%}" for k, v in THRESHOLDS.items())
    paged = "one alert" if n_alerts == 1 else f"{n_alerts} alerts"
    header = f"""You are the SRE on call for an online shop's backend, deployed the same way in {len(REGIONS)}
regions ({", ".join(REGIONS)}): application services ({", ".join(APP)}) and, behind
them, caches, databases, a search cluster, an external payment provider and an order queue.
Metrics come in 15-minute buckets over the last days. For every application service in every
region the monitor compares the last {WINDOW} buckets with the same times of day on the previous
{DAYS_BACK} days (error rate, p99 latency, and the frontend's request rate), and likewise the
order queue's depth per region. It pages with the moves beyond their thresholds
({thresholds}),
most severe first, at most one per service. It just paged with {paged}:

{alerts}

Find the root cause. The observability data are DuckDB tables ({table_list}); the table
data_dictionary describes every column, and call_graph says which service calls which.
Investigate with the sql and python tools.

"""
    whole_text = f"{', '.join(whole)} take no slice (use null)."
    slice_text = (
        "service=level or service=level&region=level, over these levels:\n"
        f"- service: {', '.join(SERVICES)}\n"
        f"- region: {', '.join(REGIONS)}"
    )
    if concurrent:
        return header + _several_causes_task(causes, slice_text, whole_text)
    return (
        header
        + f"""The root cause is exactly one of:
{causes}

Also name the affected slice: where the cause acts, as {slice_text}
A fault of one service in one region is service=X&region=Y; a dependency slow in every region is
service=X. {whole_text}

Answer by calling submit(root_cause, slice). If you cannot call tools, end your reply with a JSON
object such as {{"root_cause": "CAUSE_NAME", "slice": "service=level&region=level"}}."""
    )


def _several_causes_task(causes: str, slice_text: str, whole_text: str) -> str:
    """The answer part of a split with concurrent episodes: one or more root causes may be at
    work (each may page for its own services), and how to submit several."""
    return f"""One or more root causes may be at work at the same time, each in its own services
(a page's alerts may come from one fault, which also moves its callers, or from several).
Each cause is one of:
{causes}

For each cause, also name the affected slice: {slice_text}
A fault of one service in one region is service=X&region=Y; a dependency slow in every region is
service=X. {whole_text}

Name only the causes the data supports: every cause you list that is not at work costs reward.
Answer by calling submit(root_cause, slice) for one cause, or submit(causes) with a list of
{{"root_cause", "slice"}} objects for several. If you cannot call tools, end your reply with a
JSON object such as {{"root_cause": "CAUSE_NAME", "slice": "service=level&region=level"}} or
{{"causes": [{{"root_cause": "CAUSE_A", "slice": "service=level&region=level"}}, {{"root_cause": "CAUSE_B", "slice": null}}]}}."""
