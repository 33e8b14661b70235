"""Records of an episode's background: the change-history rows the account logged and the
processes (background processes, decoys, twins of the causes) that logged them, and the
calendar that places them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from causaltrace import Intervention, Panel, Window
from causaltrace_domains.ads.config import AdsConfig

HISTORY_DAYS = 30  # platforms keep 30 days of edits


@dataclass(frozen=True)
class Edit:
    """One change-history row the account logged (rendered by ``changes.change_history``).

    ``user`` empty: a user is taken from the episode's users. ``harmless``: the edit changes
    nothing in the model and carries no intervention. ``cpa_ratio``: a target-CPA edit whose old
    value is read from the world (the campaign's CPA over the 14 days before) and whose new value
    is ``cpa_ratio`` times it. ``daily_budget`` edits read both values from the world (with
    ``factor``, the edit's own change, placing one of several edits of a day in its chain).
    """

    day: int
    hour: int
    campaign: str
    change_type: str
    target: str
    field: str
    old_value: str
    new_value: str
    user: str = ""
    harmless: bool = False
    cpa_ratio: float | None = None
    factor: float | None = None  # a budget edit's new budget over the old


@dataclass(frozen=True)
class Process:
    """A background process or a decoy: its interventions (in both worlds), the edits it logged
    inside the history window, and the parameters it was drawn with."""

    kind: str
    interventions: tuple[Intervention, ...] = ()
    edits: tuple[Edit, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    def touches_alert_window(self, calendar: Calendar) -> bool:
        return any(calendar.touches(iv.window) for iv in self.interventions)


@dataclass(frozen=True)
class Calendar:
    """The days that matter for placing a process: the history window, the alert window and
    the baseline weeks it is compared with."""

    n_time: int
    alert_days: int
    baseline_days: int

    @classmethod
    def of(cls, panel: Panel, config: AdsConfig) -> Calendar:
        return cls(panel.n_time, int(config.alert_window_days), 7 * int(config.baseline_weeks))

    @property
    def first_logged(self) -> int:
        return max(0, self.n_time - HISTORY_DAYS)

    @property
    def alert_start(self) -> int:
        return max(0, self.n_time - self.alert_days)

    @property
    def span_start(self) -> int:
        """First day of the baseline weeks the alert compares the alert window with."""
        return max(0, self.alert_start - self.baseline_days)

    def touches(self, window: Window) -> bool:
        """Non-zero weight on a day of the alert window, and not constant from the baseline
        weeks on (a change settled before them moves baseline and alert days alike)."""
        w = window.weights(self.n_time)
        span = w[self.span_start :]
        return bool((w[self.alert_start :] > 0).any() and not np.all(span == span[0]))

    def transient(
        self, rng: np.random.Generator, length: int, in_alert: bool, last_end: int | None = None
    ) -> int:
        """Onset of a process active ``length`` days: overlapping the alert window, or ending
        before it. ``last_end`` bounds ``onset + length`` (default: may run past the panel)."""
        latest = self.n_time - 1 if last_end is None else last_end - length
        if in_alert:
            lo, hi = max(self.alert_start - length + 1, 0), latest
        else:
            lo, hi = 0, min(self.alert_start - length, latest)
        return int(rng.integers(lo, max(hi, lo) + 1))

    def lasting(self, rng: np.random.Generator, settle: int, in_alert: bool) -> int:
        """Onset of a lasting change at full weight ``settle`` days after its onset: in the
        last two alert windows, or settled before the baseline weeks start."""
        if in_alert:
            lo, hi = max(self.alert_start - self.alert_days, self.span_start + 1), self.n_time - 1
        else:
            lo, hi = 0, self.span_start - settle
        lo = min(lo, self.n_time - 1)
        return int(rng.integers(lo, max(hi, lo) + 1))
