"""The alert line(s) of an episode's prompt, and the alert window they name.

The rule probe (:mod:`causaltrace.audit.rules`) may read the alert, since the agent is meant to
read it, but nothing else of the prompt (the rest is the same text in every episode of a
domain, apart from the table sizes the leakage probe already covers). An alert is a line that
starts with ``ALERT`` (``ALERT: ...``, ``ALERT 2: ...``) or a line listed under an alerts header
(a line such as ``ALERTS:`` or ``Active alerts:`` with nothing after the colon), up to the next
blank line, so a prompt that lists several alerts is read whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

_ALERT_LINE = re.compile(r"^ALERT\b")
_HEADER = re.compile(r"^(?:[A-Za-z]+\s+){0,2}alerts?\b[^:]*:\s*$", re.IGNORECASE)
_BULLET = re.compile(r"^(?:[-*\u2022]|\d+[.)])\s+")
_STAMP = r"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?)?"
_RANGE = re.compile(rf"({_STAMP})\s+(?:to|-|until|through)\s+({_STAMP})")
_DATE = re.compile(_STAMP)
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9_@\-]*(?:\.[A-Za-z0-9_@\-]+)*")


def alert_lines(prompt: str) -> list[str]:
    """The prompt's alert lines, in order (module docstring), without bullets or a leading
    ``ALERT:``-style tag's surrounding whitespace."""
    out: list[str] = []
    listing = False  # inside the lines under an alerts header
    started = False  # a line has been read under the current header
    for raw in prompt.splitlines():
        line = raw.strip()
        if _HEADER.match(line):
            listing, started = True, False
            continue
        if listing:
            if not line:
                if started:
                    listing = False
                continue
            out.append(_BULLET.sub("", line))
            started = True
            continue
        if _ALERT_LINE.match(line):
            out.append(line)
    return out


def alert_tokens(lines: list[str]) -> list[str]:
    """The words of the alert lines, lower-cased (numbers and dates left out): the KPI, the
    scope (``campaign``, a campaign's name, a service, a region), the direction (``up``,
    ``down``)."""
    words: list[str] = []
    for line in lines:
        for token in _TOKEN.findall(_DATE.sub(" ", line)):
            token = token.lower().rstrip(".-")
            if token and token != "alert":
                words.append(token)
    return words


@dataclass(frozen=True)
class AlertWindow:
    """The alert window the alert lines name (``None`` where they name no date)."""

    start: np.datetime64 | None
    end: np.datetime64 | None


def _stamp(text: str, end: bool) -> np.datetime64:
    value = np.datetime64(text.replace(" ", "T"), "m")
    # A date without a time of day is a whole day: as an end, it ends at the next midnight.
    return value + np.timedelta64(1, "D") if end and len(text) == 10 else value


def alert_window(lines: list[str]) -> AlertWindow:
    """The earliest start and latest end of the first date range (``A to B``) of each alert
    line; failing that, the earliest and latest date the lines mention."""
    starts, ends = [], []
    for line in lines:
        found = _RANGE.search(line)
        if found:
            starts.append(_stamp(found.group(1), end=False))
            ends.append(_stamp(found.group(2), end=True))
    if not starts:
        dates = [d for line in lines for d in _DATE.findall(line)]
        if not dates:
            return AlertWindow(None, None)
        starts = [_stamp(d, end=False) for d in dates]
        ends = [_stamp(d, end=True) for d in dates]
    return AlertWindow(min(starts), max(ends))
