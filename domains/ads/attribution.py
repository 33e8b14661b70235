"""How much of the prompt's alerts a hypothesis could account for, read off the daily report.

An analyst who finds that an edit moved its segment still asks whether that movement is the
alert: whether it is in the alerted KPI and scope, in the adverse direction, and large enough.
For a hypothesis "cause c acts on cells S", this module measures what the alert measures (the
last ``window`` days against the same weekdays of the ``weeks`` weeks before, holiday season
left out, conversions lag-adjusted; :mod:`causaltrace_domains.ads.alert`) on the region the
cause can move inside the alert's scope, and compares it with a difference-in-differences
counterfactual: the region had it moved as the rest of the scope did (or, when the region is
nearly the whole scope, as the rest of the account did). The share is the alert's move minus
the move with that counterfactual region, over the alert's move. When the region is nearly the
whole account there is no control to compare it with, and the share is not estimated (None).

The region is where the cause's effect lands, not only its slice: a disapproved ad's ad groups
(its siblings absorb part of its traffic, so the group's net loss is what can show in a scope)
and a placement's campaign segments (volume moves between placements within them); rate causes
move their slice only. Campaign-wide causes have no slice to compare: their share is not
estimated (None), and their signatures (impression share lost to budget and rank, eligible
auctions) already speak for the whole account.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from causaltrace import AlertReading, Panel
from causaltrace_domains.ads.alert import KPIS, LAGGED, baseline_keep
from causaltrace_domains.ads.mechanisms import AD_GROUP, CAMPAIGN_SEGMENT

# The cells a cause acting on a slice can move: the groups (on these dimensions) its cells lie in.
REGION_DIMS: dict[str, tuple[str, ...]] = {
    "AD_DISAPPROVAL": AD_GROUP,
    "PLACEMENT_SHIFT": (*CAMPAIGN_SEGMENT, "creative"),
}
MIN_CONTROL = 0.05  # a rest of the scope under this share of its volume is no control


class AlertAttribution:
    """Shares of the prompt's ``alerts`` that hypotheses account for, on one episode's daily
    report (``daily``: column -> (n_cells, n_days) sums of the leaf rows). ``excluded_days``
    are the baseline days the monitor leaves out: one mask for every scope, or one per alert
    scope (a disclosed baseline also leaves out each scope's days without delivery)."""

    def __init__(
        self,
        panel: Panel,
        daily: Mapping[str, np.ndarray],
        alerts: Sequence[AlertReading],
        maturity: np.ndarray,
        excluded_days: np.ndarray | Mapping[str, np.ndarray],
        window: int,
        weeks: int,
    ):
        self.panel = panel
        self.alerts = tuple(alerts)
        n = panel.n_time
        self.daily = {
            c: daily[c] / maturity[None, :] if c in LAGGED else daily[c]
            for c in ("clicks", "cost", "conversions", "conversion_value")
        }
        # The alert's linear read-out: current = sum of the last ``window`` days; baseline =
        # per weekday position, the mean over the kept baseline weeks (monitor_readings).
        current = np.r_[np.zeros(n - window), np.ones(window)]

        def readout(excluded: np.ndarray) -> np.ndarray:
            base_idx, keep = baseline_keep(excluded, window, weeks)
            weights = np.zeros(n)
            np.add.at(weights, base_idx.reshape(-1), (keep / keep.sum(axis=0)).reshape(-1))
            return np.stack([current, weights])

        if isinstance(excluded_days, Mapping):
            self.readouts = {a.scope: readout(excluded_days[a.scope]) for a in self.alerts}
        else:
            shared = readout(excluded_days)
            self.readouts = {a.scope: shared for a in self.alerts}
        campaigns = panel.labels("campaign")
        self.scopes = {
            a.scope: (
                np.ones(panel.n_cells, dtype=bool)
                if a.scope == "account"
                else campaigns == a.scope.partition("=")[2]
            )
            for a in self.alerts
        }

    def _totals(self, cells: np.ndarray, column: str, scope: str) -> np.ndarray:
        """(current, baseline) of ``column`` summed over ``cells``, as the monitor reads the
        alert scope ``scope``."""
        series = cells.astype(np.float64) @ self.daily[column]
        return self.readouts[scope] @ series

    def region(self, cause: str, cells: np.ndarray) -> np.ndarray:
        """The cells ``cause`` acting on ``cells`` can move."""
        dims = REGION_DIMS.get(cause)
        if dims is None:
            return cells
        idx, n_groups = self.panel.group_index(dims)
        touched = np.bincount(idx, weights=cells.astype(np.float64), minlength=n_groups) > 0
        return touched[idx]

    def share(self, cause: str, cells: np.ndarray | None) -> float | None:
        """The largest share of one of the alerts the hypothesis accounts for (None for a
        hypothesis over the whole account or without a control, or without alerts)."""
        if cells is None or not self.alerts:
            return None
        region = self.region(cause, cells)
        shares = [self._share_of(alert, region) for alert in self.alerts]
        known = [s for s in shares if s is not None]
        return max(known) if known else None

    def _growth(
        self, column: str, region: np.ndarray, scope: np.ndarray, name: str
    ) -> float | None:
        """How ``column`` moved, current over baseline, in the control: the rest of the scope,
        or where that is too small the rest of the account (None: neither is a control)."""
        for control in (scope & ~region, ~region):
            (q_cur, q_base), (_, r_base) = (
                self._totals(control, column, name),
                self._totals(region & scope, column, name),
            )
            if q_base > 0 and q_base > MIN_CONTROL * (q_base + r_base):
                return q_cur / q_base
        return None

    def _share_of(self, alert: AlertReading, region: np.ndarray) -> float | None:
        num, den, _ = KPIS[alert.kpi]
        scope = self.scopes[alert.scope]
        inside, rest = region & scope, scope & ~region
        if not inside.any():
            return 0.0
        columns = (num,) if den is None else (num, den)
        factual, counterfactual, baseline = {}, {}, {}
        for column in columns:
            (r_cur, r_base), (q_cur, q_base) = (
                self._totals(inside, column, alert.scope),
                self._totals(rest, column, alert.scope),
            )
            growth = self._growth(column, region, scope, alert.scope)
            if growth is None:
                return None
            factual[column] = r_cur + q_cur
            counterfactual[column] = r_base * growth + q_cur
            baseline[column] = r_base + q_base

        def kpi(totals):
            return totals[num] if den is None else totals[num] / max(totals[den], 1e-9)

        base = kpi(baseline)
        if not base > 0:
            return 0.0
        move = kpi(factual) / base - 1.0
        without = kpi(counterfactual) / base - 1.0
        if move == 0.0:
            return 0.0
        return float((move - without) / move)
