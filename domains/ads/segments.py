"""Per-segment baselines of the account: relative volume, CTR, CVR, CPC and value by level.

These are the shape of a typical account (mobile has more traffic but converts worse, search
partners and display are cheap and low-intent, remarketing converts best). Each episode multiplies
them by time-constant random traits, so no two episodes share exact baselines.
"""

from __future__ import annotations

import numpy as np

from causaltrace import Panel

VOLUME = {
    "device": {"mobile": 1.0, "desktop": 0.6, "tablet": 0.15, "ctv": 0.5},
    "browser_os": {
        "ios_safari": 0.55,
        "android_chrome": 0.45,
        "desktop_chrome": 0.7,
        "mac_safari": 0.3,
        "other": 1.0,
    },
    "geo": {
        "us_west": 1.0,
        "us_central": 0.7,
        "us_east": 1.1,
        "us_south": 0.9,
        "canada": 0.35,
        "uk": 0.5,
        "germany": 0.4,
        "france": 0.3,
    },
    "audience": {
        "remarketing": 0.3,
        "customer_match": 0.2,
        "in_market": 1.0,
        "affinity": 0.9,
        "custom_segment": 0.8,
        "broad": 1.5,
    },
}
# How far a change in the market's demand level reaches each campaign kind: category search
# moves with it, Performance Max's search-and-feed mix less, remarketing banners (past
# visitors, wherever they browse) hardly.
DEMAND_ELASTICITY = {"search": 1.0, "performance_max": 0.8, "display": 0.35}
# How strongly rivals' bidding reaches a campaign's auctions (the exponent of the competition
# level): category terms most, display less, the brand's own name least.
RIVAL_SENSITIVITY = {"search": 1.0, "performance_max": 0.85, "display": 0.6, "brand": 0.45}
PLACEMENT_WEIGHT = {"search": 1.0, "search_partners": 0.25, "display": 1.5, "video": 0.8}

# Targeting: how much of a segment's audience the campaign is eligible for before expansion.
ELIGIBILITY = {
    "audience": {"broad": 0.3, "affinity": 0.5, "custom_segment": 0.5},
    "geo": {"canada": 0.6, "germany": 0.6, "france": 0.6},
}

# Device, audience and geo shape of CTR and CVR around each campaign's per-placement rates
# (config.CampaignSpec.ctr / .cvr). Connected TVs are not clickable.
CTR = {
    "device": {"mobile": 1.0, "desktop": 1.05, "tablet": 0.9, "ctv": 0.0},
    "audience": {
        "remarketing": 1.3,
        "customer_match": 1.25,
        "in_market": 1.1,
        "affinity": 0.9,
        "custom_segment": 0.9,
        "broad": 0.8,
    },
}
CVR = {
    "device": {"mobile": 0.75, "desktop": 1.3, "tablet": 1.0, "ctv": 0.0},
    "audience": {
        "remarketing": 1.5,
        "customer_match": 1.4,
        "in_market": 1.1,
        "affinity": 0.8,
        "custom_segment": 0.8,
        "broad": 0.7,
    },
    "geo": {"canada": 0.85, "uk": 0.9, "germany": 0.8, "france": 0.75},
}
CPC = {
    "placement": {"search": 1.0, "search_partners": 0.6, "display": 0.35, "video": 0.5},
    "device": {"mobile": 0.85, "desktop": 1.1, "tablet": 0.9, "ctv": 0.6},
    "geo": {"canada": 0.75, "uk": 0.8, "germany": 0.7, "france": 0.65},
}
ORDER_VALUE = {
    "audience": {"customer_match": 1.3, "remarketing": 1.2},
    "geo": {"uk": 0.9, "germany": 0.9, "france": 0.85},
}
BOT_RATE = {
    "placement": {"search": 0.5, "search_partners": 8.0, "display": 4.0, "video": 1.0},
    "device": {"ctv": 0.0},  # nothing to click on a TV
}
SAFARI = ("ios_safari", "mac_safari")


def multiplier(panel: Panel, table: dict[str, dict[str, float]]) -> np.ndarray:
    """Product over dimensions of the per-level multipliers (1 for unlisted levels), (n_cells, 1)."""
    out = np.ones(panel.n_cells)
    for dim, levels in table.items():
        lookup = np.array([levels.get(level, 1.0) for level in panel.dimension(dim).levels])
        out *= lookup[panel.codes(dim)]
    return out[:, None]


def by_campaign_placement(panel: Panel, values: dict[str, dict[str, float]]) -> np.ndarray:
    """A per-(campaign, placement) value broadcast to cells, (n_cells, 1)."""
    campaigns = panel.dimension("campaign").levels
    placements = panel.dimension("placement").levels
    lookup = np.array([[values[c].get(p, 0.0) for p in placements] for c in campaigns])
    return lookup[panel.codes("campaign"), panel.codes("placement")][:, None]


def by_level(panel: Panel, dim: str, values, default: float = 1.0) -> np.ndarray:
    """A per-level value of one dimension broadcast to cells, (n_cells, 1)."""
    lookup = np.array([float(values.get(level, default)) for level in panel.dimension(dim).levels])
    return lookup[panel.codes(dim)][:, None]


def by_campaign(panel: Panel, values: dict[str, float]) -> np.ndarray:
    """A per-campaign value broadcast to cells, (n_cells, 1)."""
    lookup = np.array([values[c] for c in panel.dimension("campaign").levels])
    return lookup[panel.codes("campaign")][:, None]


def count_within(panel: Panel, dims: tuple[str, ...], over: str) -> np.ndarray:
    """How many levels of ``over`` share each cell's group on ``dims`` (e.g. creatives per ad
    group), (n_cells, 1)."""
    idx, _ = panel.group_index((*dims, over))
    outer, _ = panel.group_index(dims)
    distinct = np.zeros(outer.max() + 1)
    pairs = np.unique(np.stack([outer, idx]), axis=1)
    np.add.at(distinct, pairs[0], 1.0)
    return distinct[outer][:, None]
