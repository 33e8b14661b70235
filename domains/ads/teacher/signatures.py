"""What the ads domain declares about its causes, as the teacher uses it.

This is the model knowledge an analyst of this account has (docs/domain-ads.md: the causes'
descriptions, their signatures and the slices each can act on), the same knowledge the audit's
oracle is given; it says nothing about any episode. ``tests/domains/test_teacher_investigator.py``
checks ``SLICE_DIMS`` and ``ALLOWED`` against the domain's intervention priors, so the two
cannot drift apart.
"""

from __future__ import annotations

# Causes whose answer takes no slice.
ACCOUNT_WIDE = ("BUDGET_CAP", "COMPETITIVE_PRESSURE", "DEMAND_SHIFT")
NO_SIGNAL = "NO_ANOMALY"

# The slice shapes each segment cause can take (the domain's priors).
SLICE_DIMS: dict[str, tuple[tuple[str, ...], ...]] = {
    "TARGETING_EXPANSION": (("audience",), ("geo",), ("audience", "geo")),
    "PLACEMENT_SHIFT": (("placement",),),
    "BID_MODIFIER_CHANGE": (
        ("device",),
        ("geo",),
        ("campaign", "device"),
        ("campaign", "geo"),
        ("campaign", "audience"),
    ),
    "CREATIVE_FATIGUE": (("creative",), ("audience", "creative"), ("creative", "device")),
    "TRACKING_OUTAGE": (
        ("browser_os",),
        ("device",),
        ("geo",),
        ("browser_os", "geo"),
        ("device", "geo"),
    ),
    "LANDING_PAGE_BREAK": (
        ("device",),
        ("browser_os",),
        ("geo",),
        ("device", "geo"),
        ("browser_os", "geo"),
    ),
    "INVALID_TRAFFIC": (("placement",), ("geo",), ("geo", "placement")),
    "AD_DISAPPROVAL": (("creative",), ("creative", "geo")),
}

# Levels a cause's slice may use where the prior restricts them (other dimensions: any level).
ALLOWED: dict[str, dict[str, tuple[str, ...]]] = {
    "TARGETING_EXPANSION": {"audience": ("affinity", "custom_segment", "broad")},
    "PLACEMENT_SHIFT": {"placement": ("search_partners", "display", "video")},
    "CREATIVE_FATIGUE": {"device": ("mobile", "desktop")},
    "TRACKING_OUTAGE": {
        "device": ("mobile", "desktop", "tablet"),
        "browser_os": ("ios_safari", "android_chrome", "desktop_chrome", "mac_safari"),
    },
    "LANDING_PAGE_BREAK": {
        "device": ("mobile", "desktop", "tablet"),
        "browser_os": ("ios_safari", "android_chrome", "desktop_chrome", "mac_safari"),
    },
    "INVALID_TRAFFIC": {"placement": ("search_partners", "display")},
}

# The change-history edit a cause is (the platform logs it; a disapproval is not an edit).
EDIT_KIND = {
    "BUDGET_CAP": "budget",
    "BID_MODIFIER_CHANGE": "bid_modifier",
    "TARGETING_EXPANSION": "targeting",
}

# How each cause moves each KPI the monitor reads (+1 up, -1 down, 0 little or either way),
# from the causes' declared mechanisms. Alerts only page adverse moves.
KPI_EFFECT: dict[str, dict[str, int]] = {
    # A cut of 30% or more on a smart-bidding campaign also starts a learning period (CPC up,
    # CVR down: docs/domain-ads.md), so a budget cut can page a CPA rise or a ROAS drop.
    "BUDGET_CAP": {
        "clicks": -1,
        "cost": -1,
        "conversions": -1,
        "conversion_value": -1,
        "cost_per_conversion": 1,
        "roas": -1,
    },
    "COMPETITIVE_PRESSURE": {
        "clicks": -1,
        "conversions": -1,
        "conversion_value": -1,
        "cost_per_conversion": 1,
        "roas": -1,
    },
    "DEMAND_SHIFT": {"clicks": -1, "cost": -1, "conversions": -1, "conversion_value": -1},
    "TARGETING_EXPANSION": {"clicks": 1, "cost": 1, "cost_per_conversion": 1, "roas": -1},
    "PLACEMENT_SHIFT": {
        "conversions": -1,
        "conversion_value": -1,
        "cost_per_conversion": 1,
        "roas": -1,
    },
    "BID_MODIFIER_CHANGE": {"clicks": 1, "cost": 1, "cost_per_conversion": 1, "roas": -1},
    "CREATIVE_FATIGUE": {"clicks": -1, "cost": -1, "conversions": -1, "conversion_value": -1},
    "TRACKING_OUTAGE": {
        "conversions": -1,
        "conversion_value": -1,
        "cost_per_conversion": 1,
        "roas": -1,
    },
    "LANDING_PAGE_BREAK": {
        "conversions": -1,
        "conversion_value": -1,
        "cost_per_conversion": 1,
        "roas": -1,
    },
    "INVALID_TRAFFIC": {"clicks": 1, "cost": 1, "cost_per_conversion": 1, "roas": -1},
    "AD_DISAPPROVAL": {"clicks": -1, "cost": -1, "conversions": -1, "conversion_value": -1},
}
ADVERSE = {
    "conversions": -1,
    "conversion_value": -1,
    "clicks": -1,
    "cost": 1,
    "cost_per_conversion": 1,
    "roas": -1,
}
# A cause whose declared effects cannot make any paged KPI's adverse move keeps this much of
# its prior: the table is coarse (a learning period, a mix shift), so it is not ruled out.
INCOMPATIBLE_PRIOR = 0.25

# The columns of perf_daily each KPI is computed from.
KPI_COLUMNS = {
    "conversions": ("conversions", None),
    "conversion_value": ("conversion_value", None),
    "clicks": ("clicks", None),
    "cost": ("cost", None),
    "cost_per_conversion": ("cost", "conversions"),
    "roas": ("conversion_value", "cost"),
}
LAGGED = ("conversions", "conversion_value")


def compatible(cause: str, kpi: str) -> bool:
    """Whether the cause's declared effect can make this KPI's adverse move."""
    return KPI_EFFECT.get(cause, {}).get(kpi, 0) == ADVERSE[kpi]


def candidate_slices(cause: str, levels: dict[str, tuple[str, ...]]) -> list[str]:
    """Every slice (canonical text, conditions sorted by dimension) the cause may take."""
    out = []
    allowed = ALLOWED.get(cause, {})
    for dims in SLICE_DIMS.get(cause, ()):
        combos: list[list[str]] = [[]]
        for dim in dims:
            values = [v for v in levels.get(dim, ()) if v in allowed.get(dim, (v,))]
            combos = [[*c, f"{dim}={v}"] for c in combos for v in values]
        out += ["&".join(sorted(c)) for c in combos]
    return out


def conditions(slice_text: str) -> list[tuple[str, str]]:
    """``dim=level&dim=level`` as pairs."""
    return [tuple(part.split("=", 1)) for part in slice_text.split("&") if part]  # type: ignore[misc]
