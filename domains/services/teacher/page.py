"""What the services teacher reads from the prompt: the page's alerts, and where to look.

A page line reads ``ALERT: error rate of catalog in us_west is up 1890% over 2026-03-04 22:00 to
2026-03-05 00:00 UTC: ...``. The alerted KPI says which causes can be behind it (a request-rate
alert is the frontend's traffic; a queue-depth alert the order queue's consumers or what they
write to), the service and region where to start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ALERT = re.compile(
    r"ALERT: (?P<kpi>request rate|error rate|p99 latency|queue depth) of (?P<service>\w+) in "
    r"(?P<region>\w+) is up (?P<move>[\d,.]+)% over (?P<start>[\d-]+ [\d:]+) to "
    r"(?P<end>[\d-]+ [\d:]+) UTC"
)
KPIS = {
    "request rate": "requests",
    "error rate": "error_rate",
    "p99 latency": "latency_p99_ms",
    "queue depth": "queue_depth",
}


@dataclass(frozen=True)
class Alert:
    kpi: str  # requests | error_rate | latency_p99_ms | queue_depth
    service: str
    region: str
    move: float  # relative, 0.5 = +50%
    start: str  # the alert window, "YYYY-MM-DD HH:MM" (UTC)
    end: str

    def text(self) -> str:
        label = next(k for k, v in KPIS.items() if v == self.kpi)
        return f"{label} of {self.service} in {self.region} (+{self.move:.0%})"


@dataclass(frozen=True)
class Page:
    alerts: tuple[Alert, ...]
    several: bool  # the prompt allows more than one cause

    @property
    def regions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.region for a in self.alerts))

    @property
    def services(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.service for a in self.alerts))


def parse_page(prompt: str) -> Page:
    alerts = tuple(
        Alert(
            KPIS[m["kpi"]],
            m["service"],
            m["region"],
            float(m["move"].replace(",", "")) / 100.0,
            m["start"],
            m["end"],
        )
        for m in ALERT.finditer(prompt)
    )
    return Page(alerts, "one or more" in prompt.lower())
