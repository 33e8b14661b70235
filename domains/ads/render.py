"""What an ads analyst sees: report tables with the names, grains and columns of real platforms.

Every table is rendered from one world (the factual one, for the agent) with an explicit
generator for the randomness that reports add (the hourly split, auction-insights estimates).
The schema and row count of every table depend only on the config, never on the cause: zero
rows are kept, and change-history decoys use the same edit types as real changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from causaltrace import Panel, World
from domains.ads.config import AdsConfig

LEAF_DIMS = ("campaign", "creative", "placement", "device", "browser_os", "geo", "audience")
SITE_DIMS = ("campaign", "device", "browser_os", "geo")


def _dates(panel: Panel) -> np.ndarray:
    return panel.time.values.astype("datetime64[D]")


def grouped_frame(
    panel: Panel, world: World, dims: Sequence[str], columns: Mapping[str, str]
) -> pd.DataFrame:
    """Sum the nodes in ``columns`` (output column -> node) over cells within ``dims`` groups,
    one row per group and day, ordered by the groups' level codes then date."""
    dims = tuple(dims)
    idx, n_groups = panel.group_index(dims)
    first = np.zeros(n_groups, dtype=np.int64)
    first[idx[::-1]] = np.arange(panel.n_cells)[::-1]  # a representative cell per group
    n_days = panel.n_time
    data: dict[str, np.ndarray] = {"date": np.tile(_dates(panel), n_groups)}
    for d in dims:  # categorical: compact, and Parquet stores it dictionary-encoded
        codes = np.repeat(panel.codes(d)[first], n_days)
        data[d] = pd.Categorical.from_codes(codes, categories=list(panel.dimension(d).levels))
    for out, node in columns.items():
        total = panel.group_sum(world[node], dims).reshape(-1)
        data[out] = np.round(total, 2) if total.dtype.kind == "f" else total
    # The arrays are fresh and not shared: no need for pandas to copy them into blocks.
    return pd.DataFrame(data, copy=False)


def perf_daily(panel: Panel, world: World) -> pd.DataFrame:
    return grouped_frame(
        panel,
        world,
        LEAF_DIMS,
        {
            "impressions": "impressions",
            "clicks": "clicks",
            "cost": "cost",
            "conversions": "conversions",
            "conversion_value": "conversion_value",
            "invalid_clicks": "invalid_clicks",
        },
    )


def site_analytics_daily(panel: Panel, world: World) -> pd.DataFrame:
    frame = grouped_frame(
        panel,
        world,
        SITE_DIMS,
        {
            "sessions": "sessions",
            "backend_orders": "real_conversions",
            "backend_revenue": "backend_revenue",
        },
    )
    return frame.rename(columns={"campaign": "utm_campaign"})


def _hour_profile(device: np.ndarray) -> np.ndarray:
    """Share of a day's auctions by hour, per device: desktop by day, mobile in the evening."""
    hours = np.arange(24)
    desktop = np.exp(-0.5 * ((hours - 13.0) / 3.5) ** 2) + 0.05
    mobile = (
        np.exp(-0.5 * ((hours - 19.5) / 3.0) ** 2)
        + 0.5 * np.exp(-0.5 * ((hours - 12.5) / 2.5) ** 2)
        + 0.04
    )
    ctv = np.exp(-0.5 * ((hours - 21.0) / 2.0) ** 2) + 0.02
    table = {"desktop": desktop, "mobile": mobile, "tablet": mobile, "ctv": ctv}
    out = np.stack([table[d] for d in device])
    return out / out.sum(axis=1, keepdims=True)


def _served_profile(profile: np.ndarray, pacing: np.ndarray) -> np.ndarray:
    """Hourly shares of what was served when serving stops once ``pacing`` of the day's demand
    is spent: the hours after the budget ran out get nothing."""
    cumulative = np.cumsum(profile, axis=1)
    before = cumulative - profile
    served = np.clip(pacing[:, None] - before, 0.0, profile)
    return served / np.maximum(served.sum(axis=1, keepdims=True), 1e-12)


def _split_exact(totals: np.ndarray, weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Multinomial split of integer totals over hours (rows sum exactly to the totals)."""
    return rng.multinomial(totals.astype(np.int64), weights)


def perf_hourly(
    panel: Panel, world: World, config: AdsConfig, rng: np.random.Generator
) -> pd.DataFrame:
    """Hourly campaign x device report for the last ``hourly_days`` days.

    Daily totals are split over hours by the device's demand curve truncated where the campaign's
    budget ran out, so budget-limited days show serving stopping in the evening.
    """
    dims = ("campaign", "device")
    daily = grouped_frame(
        panel,
        world,
        dims,
        {
            "impressions": "impressions",
            "clicks": "clicks",
            "cost": "cost",
            "conversions": "conversions",
        },
    )
    _, n_groups = panel.group_index(dims)
    pacing = panel.group_mean(world["pacing"], dims).reshape(-1)
    keep = np.tile(np.arange(panel.n_time) >= panel.n_time - config.hourly_days, n_groups)
    daily, pacing = daily[keep].reset_index(drop=True), pacing[keep]
    weights = _served_profile(_hour_profile(daily["device"].to_numpy()), pacing)
    n = len(daily)
    out = {
        "date": np.repeat(daily["date"].to_numpy(), 24),
        "hour": np.tile(np.arange(24), n),
        **{
            d: pd.Categorical.from_codes(
                np.repeat(daily[d].cat.codes.to_numpy(), 24), categories=daily[d].cat.categories
            )
            for d in dims
        },
    }
    impressions = _split_exact(daily["impressions"].to_numpy(), weights, rng)
    clicks = _split_exact(daily["clicks"].to_numpy(), weights, rng)
    conversions = _split_exact(daily["conversions"].to_numpy(), weights, rng)
    # Cost follows clicks, to the cent; the rounding remainder goes to the busiest hour.
    cost_cents = np.round(daily["cost"].to_numpy() * 100).astype(np.int64)
    share = clicks / np.maximum(clicks.sum(axis=1, keepdims=True), 1)
    share = np.where(clicks.sum(axis=1, keepdims=True) > 0, share, weights)
    hourly_cents = np.floor(share * cost_cents[:, None]).astype(np.int64)
    busiest = np.argmax(share, axis=1)
    hourly_cents[np.arange(n), busiest] += cost_cents - hourly_cents.sum(axis=1)
    out["impressions"] = impressions.reshape(-1)
    out["clicks"] = clicks.reshape(-1)
    out["cost"] = (hourly_cents / 100.0).reshape(-1)
    out["conversions"] = conversions.reshape(-1)
    return pd.DataFrame(out, copy=False)


def impression_share_daily(panel: Panel, world: World) -> pd.DataFrame:
    """Campaign-day impression share and the shares lost to budget and to rank (sum to 1)."""
    frame = grouped_frame(
        panel,
        world,
        ("campaign",),
        {"eligible": "auctions", "won": "won_auctions", "impressions": "impressions"},
    )
    eligible = np.maximum(frame.pop("eligible").to_numpy(), 1)
    won = frame.pop("won").to_numpy()
    share = np.round(frame["impressions"].to_numpy() / eligible, 4)
    lost_rank = np.round((eligible - won) / eligible, 4)
    frame["search_impression_share"] = share
    frame["search_lost_is_rank"] = lost_rank
    frame["search_lost_is_budget"] = np.round(1.0 - share - lost_rank, 4) + 0.0  # no -0.0
    return frame


def auction_insights_daily(
    panel: Panel,
    world: World,
    config: AdsConfig,
    rng: np.random.Generator,
    shares: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per campaign, day and competitor: the estimates an auction-insights report gives.

    Competitors' presence follows the competitive pressure of the campaign's segments, with
    report noise; the account's own row uses its measured impression share. ``shares`` is the
    impression-share table of the same world, if already rendered.
    """
    if shares is None:
        shares = impression_share_daily(panel, world)
    pressure = panel.group_mean(world["competitor_pressure"], ("campaign",)).reshape(-1)
    own = shares["search_impression_share"].to_numpy()
    strengths = rng.uniform(0.25, 0.6, size=len(config.competitors))
    names = ["you", *config.competitors]
    nan = np.full(own.size, np.nan)
    columns = [(own, nan, nan, nan)]  # one block of rows per competitor, "you" first
    for strength in strengths:
        noise = rng.normal(0.0, 0.03, size=(4, own.size))
        comp_share = np.clip(strength * pressure**2.0 + noise[0], 0.02, 0.95)
        overlap = np.clip(comp_share * 0.9 + noise[1], 0.01, 0.95)
        above = np.clip(0.35 * pressure**2.5 * strength / 0.4 + noise[2], 0.0, 0.98)
        outranking = np.clip(own * (1.0 - above) + noise[3] * 0.5, 0.0, 0.98)
        columns.append((comp_share, overlap, above, outranking))
    # Rows ordered by date, campaign (level order), competitor name; the keys are unique.
    dates = np.tile(shares["date"].to_numpy(), len(names))
    campaign = shares["campaign"].cat.codes.to_numpy()
    rank = np.argsort(np.argsort(np.array(names, dtype=object), kind="stable"), kind="stable")
    order = np.lexsort(
        (np.repeat(rank, own.size), np.tile(campaign, len(names)), dates.astype(np.int64))
    )
    values = np.array(columns).transpose(1, 0, 2).reshape(4, -1)[:, order]
    return pd.DataFrame(
        {
            "date": dates[order],
            "campaign": pd.Categorical.from_codes(
                np.tile(campaign, len(names))[order], dtype=shares["campaign"].dtype
            ),
            "competitor": np.repeat(np.array(names, dtype=object), own.size)[order],
            "impression_share": np.round(values[0], 4),
            "overlap_rate": np.round(values[1], 4),
            "position_above_rate": np.round(values[2], 4),
            "outranking_share": np.round(values[3], 4),
        },
        copy=False,
    )


def reach_frequency_daily(panel: Panel, world: World) -> pd.DataFrame:
    """Daily reach and frequency per campaign and creative (not additive across rows).

    Reach saturates in the creative's audience universe U: reach = U (1 - exp(-I / U)), with U
    set from the first two weeks' impressions, so frequency = I / reach rises with volume.
    """
    frame = grouped_frame(panel, world, ("campaign", "creative"), {"impressions": "impressions"})
    n_days = panel.n_time
    impressions = frame["impressions"].to_numpy().reshape(-1, n_days).astype(np.float64)
    universe = np.maximum(4.0 * impressions[:, :14].mean(axis=1, keepdims=True), 1.0)
    reach = np.floor(universe * (1.0 - np.exp(-impressions / universe)))
    frame["reach"] = reach.reshape(-1).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        frame["frequency"] = np.round(
            np.where(reach > 0, impressions / np.maximum(reach, 1), 0.0), 3
        ).reshape(-1)
    return frame
