"""The services domain's settings: the panel, and the knobs a difficulty tier may dial.

Every field has a default (the nominal system); a domain config (``domains/services/conf/domain/services.yaml``)
or a tier's ``difficulty.domain`` block overrides any of them by name. Unknown keys are refused
by name, so a typo in a tier does not silently change nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from causaltrace.core.config import typed_config
from causaltrace.errors import CausalTraceError


def _pair(value: Any, name: str, *, integer: bool = False) -> tuple:
    try:
        low, high = value
        low, high = (int(low), int(high)) if integer else (float(low), float(high))
    except (TypeError, ValueError):
        raise CausalTraceError(
            f"services config: {name} must be [low, high], got {value!r}"
        ) from None
    if not 0 <= low <= high:
        raise CausalTraceError(f"services config: {name} needs 0 <= low <= high, got {value!r}")
    return low, high


@dataclass(frozen=True)
class AlertDecoys:
    """Mean number of harmless changes of each kind in every alerted application service and
    region (Poisson), at the times a cause's change would be (the causes' onset range): the
    alerted cell often had a deploy or a config edit just before the alert, whatever the cause.
    A cause that is a change of that kind in that cell takes the place of one of them."""

    deploy: float = 1.0
    pool: float = 1.5  # connection-pool resizes that bind nothing
    config: float = 0.3  # other keys (feature flags, timeouts, TTLs, log levels)

    def __post_init__(self) -> None:
        for f in fields(self):
            if not float(getattr(self, f.name)) >= 0:
                raise CausalTraceError(f"services config: alert_decoys.{f.name} must be >= 0")
            object.__setattr__(self, f.name, float(getattr(self, f.name)))


@dataclass(frozen=True)
class ServicesConfig:
    """Settings of one services system (see docs/domain-services.md, difficulty knobs)."""

    start: str = "2026-03-02T00:00"
    days: int = 3
    noise: float = 1.0  # scale of every per-bucket jitter
    traffic_level: tuple[float, float] = (0.5, 2.0)  # per-region level of the week (log-uniform)
    pool_headroom: tuple[float, float] = (1.5, 12.0)  # configured pool / peak in-flight requests
    decoy_changes: tuple[int, int] = (30, 40)  # harmless changes scattered over the panel
    recent_share: float = 0.35  # of those, the share in the last four hours
    change_rows: int = 24  # the change log shows the latest this many changes
    alert_decoys: AlertDecoys = field(default_factory=AlertDecoys)
    # Cells that get those changes: the alerted application cells, then random others up to
    # this many, so how many there are does not follow the page (which follows the cause).
    decoy_cells: int = 3
    # Weights of 0, 1, 2, ... short blips near the end (a p99 blip or an error burst on an app
    # service, a rebalance pausing the order queue's consumers).
    blips: tuple[float, ...] = (0.4, 0.4, 0.2)

    def __post_init__(self) -> None:
        object.__setattr__(self, "days", int(self.days))
        object.__setattr__(self, "noise", float(self.noise))
        object.__setattr__(self, "traffic_level", _pair(self.traffic_level, "traffic_level"))
        object.__setattr__(self, "pool_headroom", _pair(self.pool_headroom, "pool_headroom"))
        object.__setattr__(
            self, "decoy_changes", _pair(self.decoy_changes, "decoy_changes", integer=True)
        )
        if isinstance(self.alert_decoys, Mapping):
            object.__setattr__(self, "alert_decoys", AlertDecoys(**dict(self.alert_decoys)))
        if self.days < 3:
            raise CausalTraceError("services config: days must be >= 3 (the monitor's baseline)")
        if not self.noise > 0:
            raise CausalTraceError(f"services config: noise must be > 0, got {self.noise!r}")
        if self.traffic_level[0] <= 0 or self.pool_headroom[0] < 1.0:
            raise CausalTraceError(
                "services config: traffic_level must be > 0 and pool_headroom >= 1"
            )
        if not 0.0 <= float(self.recent_share) <= 1.0:
            raise CausalTraceError("services config: recent_share must be in [0, 1]")
        blips = tuple(float(w) for w in self.blips)
        if not blips or min(blips) < 0 or sum(blips) <= 0:
            raise CausalTraceError(f"services config: blips must be weights, got {self.blips!r}")
        object.__setattr__(self, "blips", blips)
        if int(self.decoy_cells) < 0:
            raise CausalTraceError("services config: decoy_cells must be >= 0")
        object.__setattr__(self, "decoy_cells", int(self.decoy_cells))
        if int(self.change_rows) < 1:
            raise CausalTraceError("services config: change_rows must be >= 1")
        object.__setattr__(self, "change_rows", int(self.change_rows))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> ServicesConfig:
        """Build from a domain config (``name`` and engine keys are not settings)."""
        data = {k: v for k, v in dict(data or {}).items() if k != "name"}
        return typed_config(cls, data, "services config")


# What each knob dials (the domain's ``difficulty_knobs``).
KNOBS: dict[str, str] = {
    "noise": "scale of every per-bucket jitter (traffic shocks, I/O, failures, gauges, latency "
    "quantiles); 1 is the nominal system",
    "traffic_level": "[low, high] per-region traffic level of the week (log-uniform); capacity "
    "follows it, connection pools do not, so it moves how close each pool is to binding",
    "pool_headroom": "[low, high] configured connection pool over the peak in-flight requests "
    "(log-uniform per service and region)",
    "decoy_changes": "[low, high] harmless deploys and config edits scattered over the panel",
    "alert_decoys": "mean harmless deploys, pool resizes and other config edits in each alerted "
    "service and region, at the times a cause's change would be ({deploy, pool, config})",
    "decoy_cells": "cells that get the alert_decoys changes: the alerted application cells, then "
    "random other ones up to this many",
    "blips": "weights of 0, 1, 2, ... short blips near the end, in both worlds: a p99 blip (a GC "
    "storm, a slow node being drained) or a burst of errors (a bad node before the load "
    "balancer drains it) on one application service in one region, or a consumer-group "
    "rebalance pausing the order queue's consumers in one region (false alarms, extra alerts)",
    "recent_share": "share of the scattered changes in the last four hours",
}
