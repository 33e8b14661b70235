"""The page the teacher starts from: the alerts, the answer's dimensions, and whether several
causes may be named. Everything here is read from the prompt text an LLM sees."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

_ALERT = re.compile(
    r"ALERT: (?P<kpi>\w+) for (?:the account|campaign (?P<campaign>\w+)) is "
    r"(?P<direction>up|down) (?P<pct>[\d.]+)%: (?P<current>[\d,.]+) over "
    r"(?P<c0>\d{4}-\d{2}-\d{2}) to (?P<c1>\d{4}-\d{2}-\d{2}) against (?P<baseline>[\d,.]+) "
    r"for the same weekdays on average over (?P<b0>\d{4}-\d{2}-\d{2}) to "
    r"(?P<b1>\d{4}-\d{2}-\d{2})"
)
_DIM = re.compile(r"^- (\w+): (.+)$")


@dataclass(frozen=True)
class Alert:
    """One paged KPI: what moved, where, which way and by how much (as the page says it)."""

    kpi: str
    scope: str  # "account" or "campaign=<name>"
    direction: str  # "up" or "down"
    pct: str  # the move as printed, e.g. "23.1"
    current: str
    baseline: str

    @property
    def campaign(self) -> str | None:
        return self.scope.partition("=")[2] or None

    @property
    def move(self) -> float | None:
        """The paged relative move (current over baseline, minus one), as the page prints it;
        None where the baseline is zero."""
        current, baseline = (float(x.replace(",", "")) for x in (self.current, self.baseline))
        return current / baseline - 1.0 if baseline else None

    @property
    def where(self) -> str:
        return "the account" if self.scope == "account" else f"campaign {self.campaign}"

    def describe(self) -> str:
        return f"{self.kpi} {self.direction} {self.pct}% for {self.where}"


@dataclass(frozen=True)
class Windows:
    """The periods the teacher compares, all whole weeks so weekdays balance.

    ``now`` is the alert's week; ``before`` the first three of the alert's four baseline weeks
    (the week just before the alert is left out: an onset there would blur the comparison)."""

    now_start: date
    now_end: date
    before_start: date
    before_end: date

    @classmethod
    def from_alert_dates(cls, c0: str, c1: str, b0: str) -> Windows:
        now_start = date.fromisoformat(c0)
        return cls(
            now_start, date.fromisoformat(c1), date.fromisoformat(b0), now_start - timedelta(days=8)
        )

    @property
    def before_weeks(self) -> int:
        return ((self.before_end - self.before_start).days + 1) // 7


@dataclass(frozen=True)
class Page:
    """The prompt, parsed."""

    alerts: tuple[Alert, ...]
    windows: Windows
    levels: dict[str, tuple[str, ...]]
    concurrent: bool

    @property
    def first(self) -> Alert:
        return self.alerts[0]


def parse_page(prompt: str) -> Page:
    """Read the alerts, the comparison windows, the dimensions' levels and the answer form."""
    alerts, windows = [], None
    for match in _ALERT.finditer(prompt):
        campaign = match.group("campaign")
        alerts.append(
            Alert(
                match.group("kpi"),
                "account" if campaign is None else f"campaign={campaign}",
                match.group("direction"),
                match.group("pct"),
                match.group("current"),
                match.group("baseline"),
            )
        )
        if windows is None:
            windows = Windows.from_alert_dates(
                match.group("c0"), match.group("c1"), match.group("b0")
            )
    if not alerts or windows is None:
        raise ValueError("the prompt has no ALERT line the teacher can read")
    levels: dict[str, tuple[str, ...]] = {}
    for line in prompt.splitlines():
        found = _DIM.match(line.strip())
        if found and found.group(1).islower() and found.group(1) not in levels:
            values = tuple(v.strip() for v in found.group(2).split(","))
            if all(re.fullmatch(r"[a-z0-9_]+", v) for v in values):
                levels[found.group(1)] = values
    concurrent = "One or more root causes may be at work" in prompt
    return Page(tuple(alerts), windows, levels, concurrent)
