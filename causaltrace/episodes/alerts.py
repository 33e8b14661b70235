"""Alerts: what a domain's monitoring rule reads, which reading it raises, and how much of the
raised move the hidden cause explains.

Every episode's prompt says a monitoring rule fired. A domain with a monitor (a
:class:`~causaltrace.episodes.domain.Monitor`: its ``alert_readings`` and ``monitor_tables``)
reports every ``(kpi, scope)`` reading of that rule as an :class:`AlertReading`; the engine reads the same rule on the factual tables
and on the counterfactual world's, so it can tell how much of the alerted move the cause made
(:func:`explain_alert`). The verifier uses that to reject episodes whose alert the cause does
not explain (``causaltrace.episodes.acceptance.verify_episode``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from causaltrace.errors import CausalTraceError, SliceError
from causaltrace.model.panel import Panel
from causaltrace.model.slices import Slice, parse_slice


@dataclass(frozen=True)
class AlertReading:
    """One reading of a monitoring rule: a KPI over one scope, current window against baseline.

    ``adverse`` is +1 if a rise of the KPI is bad (e.g. cost per conversion) and -1 if a fall is
    (e.g. conversions); ``threshold`` (> 0) is the adverse relative move at which the rule
    fires, e.g. 0.1 for "10% worse than the baseline".
    """

    kpi: str
    scope: str
    current: float
    baseline: float
    adverse: int
    threshold: float

    def __post_init__(self) -> None:
        # Plain Python numbers (domains compute them with numpy), so explanations are JSON data.
        for name in ("current", "baseline", "threshold"):
            object.__setattr__(self, name, float(getattr(self, name)))
        if self.adverse not in (-1, 1):
            raise CausalTraceError(
                f"alert reading {self.key}: adverse must be +1 or -1, got {self.adverse!r}"
            )
        object.__setattr__(self, "adverse", int(self.adverse))
        if not (self.threshold > 0 and math.isfinite(self.threshold)):
            raise CausalTraceError(
                f"alert reading {self.key}: threshold must be a finite number > 0, got "
                f"{self.threshold!r}"
            )

    @property
    def key(self) -> tuple[str, str]:
        """What identifies the reading in either world."""
        return (self.kpi, self.scope)

    @property
    def move(self) -> float:
        """current / baseline - 1; 0.0 where that is undefined (a zero or non-finite baseline,
        a non-finite current value), so a segment without a baseline never fires."""
        if self.baseline == 0 or not math.isfinite(self.baseline):
            return 0.0
        move = self.current / self.baseline - 1.0
        return move if math.isfinite(move) else 0.0

    @property
    def adverse_move(self) -> float:
        """The move in the bad direction (negative: the KPI got better)."""
        return self.adverse * self.move

    @property
    def fired(self) -> bool:
        return self.adverse_move >= self.threshold

    @property
    def severity(self) -> float:
        """The adverse move in units of the threshold (>= 1 when the rule fires)."""
        return self.adverse_move / self.threshold


def raised_alert(readings: Sequence[AlertReading]) -> AlertReading | None:
    """The alert the rule raises: the fired reading of the largest severity (the first in
    ``readings`` on ties, so a domain decides by its order); None if nothing fired.

    Args:
        readings: The monitor's readings, in the domain's order.
    """
    return max((r for r in readings if r.fired), key=lambda r: r.severity, default=None)


def raised_alerts(
    readings: Sequence[AlertReading],
    limit: int = 3,
    group: Callable[[AlertReading], Hashable] = lambda r: r.kpi,
) -> list[AlertReading]:
    """The alerts an on-call page shows: the fired readings, most severe first, at most one per
    ``group`` (default: per KPI, so a move seen in the account and in one of its campaigns pages
    once), at most ``limit``. The first is :func:`raised_alert`'s; a page with several alerts
    lets causes that move different KPIs each show where they act. Empty if nothing fired.

    Args:
        readings: The monitor's readings, in the domain's order.
        limit: The most alerts to show; 3 by default.
        group: The key of which at most one alert is shown; the KPI by default.
    """
    fired = sorted(
        (r for r in readings if r.fired),
        key=lambda r: r.severity,
        reverse=True,  # sorted is stable: equal severities keep the domain's order
    )
    shown: dict[Hashable, AlertReading] = {}
    for reading in fired:
        shown.setdefault(group(reading), reading)
        if len(shown) >= max(int(limit), 1):
            break
    return list(shown.values())


@dataclass(frozen=True)
class AlertExplanation:
    """How much of the raised alert's move the cause made.

    ``factual_move`` and ``counterfactual_move`` are the alerted reading's relative moves with
    and without the cause (the same noise in both worlds). ``explained_share`` is
    (factual - counterfactual) / factual: 1 when the alert would not have moved at all without
    the cause, 0 when the cause did nothing to it, above 1 when the cause more than made the
    move (the KPI would have improved without it), negative when the cause worked against it.
    ``fires_without_cause``: the same reading fires in the counterfactual world too, so the
    alert would have been raised anyway.
    """

    kpi: str
    scope: str
    factual_move: float
    counterfactual_move: float
    explained_share: float
    fires_without_cause: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def explain_alert(
    factual: Sequence[AlertReading], counterfactual: Sequence[AlertReading]
) -> AlertExplanation | None:
    """Compare the alert the factual readings raise with the counterfactual reading of the same
    ``(kpi, scope)``; None if the factual world raises no alert.

    Args:
        factual: The readings of the factual world (the agent's tables).
        counterfactual: The readings of the world without the cause.
    """
    alert = raised_alert(factual)
    if alert is None:
        return None
    matches = [r for r in counterfactual if r.key == alert.key]
    if len(matches) != 1:
        have = "no reading" if not matches else f"{len(matches)} readings"
        raise CausalTraceError(
            f"alert {alert.key}: the counterfactual world has {have} for it (the monitor must "
            f"give exactly one reading per (kpi, scope) in either world)"
        )
    other = matches[0]
    f, c = alert.move, other.move
    share = (f - c) / f + 0.0 if f != 0 else 0.0  # + 0.0: a share of -0.0 reads as 0.0
    return AlertExplanation(str(alert.kpi), str(alert.scope), f, c, share, bool(other.fired))


# What joins the levels of a scope that is not slice text (``checkout@eu_west``).
_SCOPE_SEPARATORS = re.compile(r"[@/|,;:\s]+")


def scope_slice(scope: str, panel: Panel) -> Slice | None:
    """The cells of ``panel`` a reading's scope covers, as a slice; None where the scope cannot
    be placed on the panel.

    A monitor names its scopes in its own words; the common forms are read without asking the
    domain:

    - slice text, ``dim=level&dim=level`` (``campaign=brand_search``): that slice;
    - levels joined by ``@``, ``/``, ``|``, ``,``, ``;`` or ``:``, each a level of exactly one
      dimension, no dimension twice (``checkout@eu_west``: ``region=eu_west&service=checkout``);
    - one word that is no level of any dimension (``account``, ``global``): the whole panel.

    Anything else (an unknown level in slice text, a word that is no level next to one that is,
    a level several dimensions share) is None: the caller says the scope was not placed.

    Args:
        scope: The reading's scope (:attr:`AlertReading.scope`).
        panel: The panel whose cells the scope selects.
    """
    text = str(scope).strip()
    if "=" in text:
        try:
            return parse_slice(text, panel)
        except SliceError:
            return None
    tokens = [t for t in _SCOPE_SEPARATORS.split(text) if t]
    owners = {t: [d.name for d in panel.dimensions if t in d.levels] for t in tokens}
    if len(tokens) == 1 and not owners[tokens[0]]:
        return Slice()  # a name for the whole panel
    if not tokens or any(len(dims) != 1 for dims in owners.values()):
        return None
    try:
        return Slice(tuple((dims[0], t) for t, dims in owners.items()))
    except SliceError:  # two levels of one dimension
        return None
