"""Dimension tables: campaigns and creatives (ads) as the account's settings pages show them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from causaltrace import Panel, World
from causaltrace_domains.ads.config import AdsConfig

FORMATS = {
    "search": "responsive_search_ad",
    "performance_max": "asset_group",
    "display": "responsive_display_ad",
}
HEADLINES = (
    "Spring styles, 20% off",
    "Free shipping over $50",
    "New arrivals weekly",
    "Members save more",
    "Last chance: winter sale",
    "Shop the lookbook",
)


def campaigns_table(panel: Panel, world: World, config: AdsConfig) -> pd.DataFrame:
    """One row per campaign with its current settings (budget as of the last day)."""
    budget = world["daily_budget"][:, -1]
    labels = panel.labels("campaign")
    rows = []
    for spec in config.campaigns:
        cell = int(np.flatnonzero(labels == spec.name)[0])
        rows.append(
            (
                spec.name,
                spec.kind,
                "enabled",
                spec.bidding,
                round(float(budget[cell])),
                config.currency,
                ", ".join(spec.placements),
                len(spec.geos),
            )
        )
    return pd.DataFrame(
        rows,
        columns=[
            "campaign",
            "campaign_type",
            "status",
            "bidding_strategy",
            "daily_budget",
            "currency",
            "networks",
            "geo_targets",
        ],
    )


def creatives_table(
    panel: Panel, world: World, config: AdsConfig, rng: np.random.Generator
) -> pd.DataFrame:
    """One row per ad, its policy status read from the world on the last day.

    An ad with no approved cell is ``disapproved``; one approved in some geos only is
    ``approved_limited``. Every account also carries old paused ads (some disapproved long ago)
    and ads limited in some countries without any effect, so a status alone proves nothing.
    """
    approval = world["creative_approval"][:, -1]
    labels = panel.labels("creative")
    rows = []
    for spec in config.campaigns:
        for creative in spec.creatives:
            cells = labels == creative
            approved_share = float(approval[cells].mean())
            if approved_share == 0.0:
                status = "disapproved"
            elif approved_share < 1.0 or rng.random() < 0.2:
                status = "approved_limited"
            else:
                status = "approved"
            rows.append(
                (
                    creative,
                    spec.name,
                    FORMATS[spec.kind],
                    HEADLINES[int(rng.integers(6))],
                    "enabled",
                    status,
                )
            )
        # An old paused ad per campaign, disapproved or approved.
        rows.append(
            (
                f"{spec.name}_old_ad",
                spec.name,
                FORMATS[spec.kind],
                HEADLINES[int(rng.integers(6))],
                "paused",
                "disapproved" if rng.random() < 0.5 else "approved",
            )
        )
    return pd.DataFrame(
        rows, columns=["creative", "campaign", "format", "headline", "status", "policy_status"]
    )
