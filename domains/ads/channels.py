"""The channels an ads cause's signal enters through, read from KPI totals (for the audit).

Each cause declares its channels (``CauseInfo.channels``): ``volume`` (how much the account
serves), ``mix`` (which segments it serves) and ``rate`` (per-impression and per-click rates).
These readings of one world's post-onset totals (inside the slice and over the account, as a
label records them for the factual and the counterfactual world) let the audit check the
declarations against what the causes do.
"""

from __future__ import annotations

from collections.abc import Mapping


def _ratio(num: float, den: float) -> float:
    return num / den if den else float("nan")


def channel_readings(
    in_slice: Mapping[str, float], overall: Mapping[str, float]
) -> dict[str, float]:
    """``volume``: the account's impressions; ``mix``: the slice's share of them (constant for
    a whole-account cause); ``rate:*``: CTR, CPC, conversion and order rates inside the slice."""
    return {
        "volume": float(overall.get("impressions", float("nan"))),
        "mix": _ratio(in_slice.get("impressions", 0.0), overall.get("impressions", 0.0)),
        "rate:ctr": _ratio(in_slice.get("clicks", 0.0), in_slice.get("impressions", 0.0)),
        "rate:cpc": _ratio(in_slice.get("cost", 0.0), in_slice.get("clicks", 0.0)),
        "rate:cvr": _ratio(in_slice.get("conversions", 0.0), in_slice.get("clicks", 0.0)),
        "rate:order_rate": _ratio(
            in_slice.get("real_conversions", 0.0), in_slice.get("sessions", 0.0)
        ),
    }
