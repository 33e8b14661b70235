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
from causaltrace.model.distributions import binomial_icdf
from causaltrace_domains.ads.config import AdsConfig
from causaltrace_domains.ads.mechanisms import hour_profiles

LEAF_DIMS = ("campaign", "creative", "placement", "device", "browser_os", "geo", "audience")
SITE_DIMS = ("campaign", "device", "browser_os", "geo")


def _dates(panel: Panel) -> np.ndarray:
    return panel.time.values.astype("datetime64[D]")


def grouped_frame(
    panel: Panel,
    world: World,
    dims: Sequence[str],
    columns: Mapping[str, str],
    label_dims: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Sum the nodes in ``columns`` (output column -> node) over cells within ``dims`` groups,
    one row per group and day, ordered by the groups' level codes then date; the groups are
    labelled by ``label_dims`` (default: all of ``dims``)."""
    dims = tuple(dims)
    idx, n_groups = panel.group_index(dims)
    first = np.zeros(n_groups, dtype=np.int64)
    first[idx[::-1]] = np.arange(panel.n_cells)[::-1]  # a representative cell per group
    n_days = panel.n_time
    data: dict[str, np.ndarray] = {"date": np.tile(_dates(panel), n_groups)}
    for d in dims if label_dims is None else label_dims:  # categorical: compact, and
        codes = np.repeat(panel.codes(d)[first], n_days)  # Parquet stores it dictionary-encoded
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


def perf_daily_monitor(panel: Panel, world: World) -> pd.DataFrame:
    """The rows of :func:`perf_daily` with only what the monitor reads (date, campaign and the
    totals it compares): the same numbers in the same row order, for the alert gate of every
    generation attempt, at a third of the cost."""
    return grouped_frame(
        panel,
        world,
        LEAF_DIMS,
        {c: c for c in ("clicks", "cost", "conversions", "conversion_value")},
        label_dims=("campaign",),
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


def _served_profile(device: np.ndarray, cutoff: np.ndarray) -> np.ndarray:
    """Hourly shares of what was served: each device's demand curve up to the hour its
    campaign's budget ran out (``cutoff``, fractional; 24: not limited), renormalised. Up to
    the cutoff every hour is throttled by the same factor (standard delivery), which cancels."""
    profile = hour_profiles(device)
    hours = np.arange(24)[None, :]
    inside = np.clip(cutoff[:, None] - hours, 0.0, 1.0)  # the part of each hour before it
    served = profile * inside
    total = served.sum(axis=1, keepdims=True)
    return np.where(total > 0, served / np.maximum(total, 1e-12), profile)


def _split_exact(totals: np.ndarray, weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Multinomial split of integer totals over hours (rows sum exactly to the totals)."""
    return rng.multinomial(totals.astype(np.int64), weights)


HOURLY_DIMS = ("campaign", "device")
HOURLY_COUNTS = ("impressions", "clicks", "conversions")


def _hour_keys(daily: pd.DataFrame, dims) -> dict[str, object]:
    """The key columns of an hourly report: each daily row's date and ``dims`` repeated over
    its 24 hours."""
    return {
        "date": np.repeat(daily["date"].to_numpy(), 24),
        "hour": np.tile(np.arange(24), len(daily)),
        **{
            d: pd.Categorical.from_codes(
                np.repeat(daily[d].cat.codes.to_numpy(), 24), categories=daily[d].cat.categories
            )
            for d in dims
        },
    }


def perf_hourly(
    panel: Panel, world: World, config: AdsConfig, rng: np.random.Generator
) -> pd.DataFrame:
    """Hourly campaign x device report for the last ``hourly_days`` days.

    Daily totals are split over hours by the device's demand curve truncated at the hour the
    campaign's budget ran out (the SCM's ``budget_cutoff_hour``, the same cutoff its pacing
    used), so budget-limited days show serving stopping in the evening. With
    ``edit_timing="hour"`` the split is :func:`perf_hourly_timed`'s.
    """
    if config.edit_timing == "hour":
        return perf_hourly_timed(panel, world, config, rng)
    dims = HOURLY_DIMS
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
    cutoff = panel.group_mean(world["budget_cutoff_hour"], dims).reshape(-1)
    keep = np.tile(np.arange(panel.n_time) >= panel.n_time - config.hourly_days, n_groups)
    daily, cutoff = daily[keep].reset_index(drop=True), cutoff[keep]
    weights = _served_profile(daily["device"].to_numpy(), cutoff)
    n = len(daily)
    out = _hour_keys(daily, dims)
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


def perf_hourly_timed(
    panel: Panel, world: World, config: AdsConfig, rng: np.random.Generator
) -> pd.DataFrame:
    """:func:`perf_hourly` where edits act from their hour (``edit_timing="hour"``).

    Each row's day is split hour by hour (each hour takes a binomial share of what is left,
    from its own uniform), so a row's hours depend only on its own totals and profile: the
    same day in two worlds gives the same hours, and the hours before a point depend only on
    the day as it was. On a day where edits began part-way (their windows' ``start``), the
    day is built edit by edit in the order of their hours: the hours before an edit are those
    of the day as it stood before it (:meth:`World.as_of`, which rebuilds the day without the
    edits from that hour on), and the rest of the day's totals with it fills the hours from
    its hour on. So the hours before an edit match, hour for hour, a world without it, and the
    hours always sum to the daily totals perf_daily shows.
    """
    dims = HOURLY_DIMS
    first = panel.n_time - config.hourly_days
    daily, cutoff = _hourly_days(panel, world, first)
    n = len(daily)
    devices = daily["device"].to_numpy()
    # One uniform per count, row and hour, drawn whatever the counts are.
    uniforms = rng.random((len(HOURLY_COUNTS), n, 24))
    counts, cents = _split_rows(daily, cutoff, devices, uniforms)
    _, n_groups = panel.group_index(dims)
    days = panel.n_time - first
    for t in range(first, panel.n_time):
        hours = sorted({round(iv.window.start * 24) for iv in world.starting_within(t)})
        if not hours:
            continue
        at = np.arange(n_groups) * days + (t - first)  # the day's rows
        # Stage k: the day with the edits made before hours[k] (stage 0: none of them).
        stages = [world.as_of(t, h / 24.0) for h in hours] + [world]
        frame, cut = _hourly_days(panel, stages[0], first)
        day_counts, day_cents = _split_rows(frame.iloc[at], cut[at], devices[at], uniforms[:, at])
        for hour, stage in zip(hours, stages[1:]):
            later, later_cut = _hourly_days(panel, stage, first)
            moved = (
                later.iloc[at][list(COST_AND_COUNTS)].to_numpy()
                != frame.iloc[at][list(COST_AND_COUNTS)].to_numpy()
            ).any(axis=1) | (later_cut[at] != cut[at])
            if moved.any():
                rows = at[moved]
                day_counts[:, moved], day_cents[moved] = _join_rows(
                    later.iloc[rows],
                    later_cut[rows],
                    devices[rows],
                    uniforms[:, rows],
                    hour,
                    day_counts[:, moved],
                    day_cents[moved],
                )
            frame, cut = later, later_cut
        counts[:, at], cents[at] = day_counts, day_cents
    out = _hour_keys(daily, dims)
    out["impressions"] = counts[0].reshape(-1)
    out["clicks"] = counts[1].reshape(-1)
    out["cost"] = (cents / 100.0).reshape(-1)
    out["conversions"] = counts[2].reshape(-1)
    return pd.DataFrame(out, copy=False)


COST_AND_COUNTS = ("impressions", "clicks", "cost", "conversions")


def _hourly_days(panel: Panel, world: World, first: int) -> tuple[pd.DataFrame, np.ndarray]:
    """The campaign x device daily totals and budget cutoffs of the days from ``first`` on."""
    dims = HOURLY_DIMS
    daily = grouped_frame(panel, world, dims, {c: c for c in COST_AND_COUNTS})
    _, n_groups = panel.group_index(dims)
    cutoff = panel.group_mean(world["budget_cutoff_hour"], dims).reshape(-1)
    keep = np.tile(np.arange(panel.n_time) >= first, n_groups)
    return daily[keep].reset_index(drop=True), cutoff[keep]


def _split_rows(
    daily: pd.DataFrame, cutoff: np.ndarray, devices: np.ndarray, uniforms: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Rows' counts (count, row, hour) and cost cents (row, hour) split over their served
    profile (:func:`_split_chain`, cost following clicks: :func:`_split_cents`)."""
    weights = _served_profile(devices, cutoff)
    counts = np.stack(
        [
            _split_chain(daily[c].to_numpy(), weights, uniforms[k])
            for k, c in enumerate(HOURLY_COUNTS)
        ]
    )
    cents = np.round(daily["cost"].to_numpy() * 100).astype(np.int64)
    return counts, _split_cents(cents, counts[1], weights)


def _join_rows(daily, cutoff, devices, uniforms, hour: int, counts, cents):
    """Rows whose hours before ``hour`` stay ``counts`` and ``cents`` (the day as it stood)
    and whose rest of ``daily``'s totals fills the hours from ``hour`` on, by the served
    profile there (the device's own curve where the budget had run out before it). Where a
    total is below what the hours before already hold (the edit stopped delivery), all of it
    falls before ``hour``."""
    before = np.broadcast_to(np.arange(24)[None, :] < hour, (len(devices), 24))
    weights = np.where(before, 0.0, _served_profile(devices, cutoff))
    empty = weights.sum(axis=1, keepdims=True) <= 0
    weights = np.where(empty, np.where(before, 0.0, hour_profiles(devices)), weights)
    weights = weights / weights.sum(axis=1, keepdims=True)
    out = np.empty_like(counts)
    for k, c in enumerate(HOURLY_COUNTS):
        out[k] = _join(daily[c].to_numpy(), counts[k], before, weights, uniforms[k])
    total = np.round(daily["cost"].to_numpy() * 100).astype(np.int64)
    return out, _join_cents(total, cents, before, out[1], weights)


def _split_chain(totals: np.ndarray, weights: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Integer ``totals`` split over hours by ``weights`` (rows sum to 1), hour by hour: hour
    h takes a binomial share weights[h] / (weights[h] + ... + weights[23]) of what is left,
    from uniform ``uniforms[:, h]`` (its quantile), so the hours before h depend only on the
    total, the weights and those hours' uniforms. Rows sum exactly to the totals."""
    left = np.asarray(totals, dtype=np.int64).copy()
    tail = np.cumsum(weights[:, ::-1], axis=1)[:, ::-1]  # weight of hour h and later
    out = np.zeros(weights.shape, dtype=np.int64)
    for h in range(24):
        later = tail[:, h + 1] if h < 23 else np.zeros(len(left))
        with np.errstate(divide="ignore", invalid="ignore"):
            p = np.where(later > 0, weights[:, h] / tail[:, h], 1.0)
        p = np.clip(np.nan_to_num(p, nan=1.0), 0.0, 1.0)
        out[:, h] = binomial_icdf(left, p, uniforms[:, h])
        left -= out[:, h]
    return out


def _split_cents(cents: np.ndarray, clicks: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Cost in cents per hour following the hours' clicks (the weights where a row has none):
    each hour gets the cents its cumulative share of the day reaches, so the rows sum to the
    totals and the hours before h depend only on the total and those hours' clicks."""
    total = clicks.sum(axis=1, keepdims=True)
    share = np.where(total > 0, clicks / np.maximum(total, 1), weights)
    reached = np.floor(np.cumsum(share, axis=1) * cents[:, None]).astype(np.int64)
    reached[:, -1] = cents
    reached = np.maximum.accumulate(np.minimum(reached, cents[:, None]), axis=1)
    return np.diff(reached, axis=1, prepend=0)


def _join(total, pre, before, post_weights, uniforms) -> np.ndarray:
    """A day whose hours before an edit are ``pre``'s and whose rest fills the hours after by
    ``post_weights``; where the day holds less than those hours did (the edit stopped
    delivery, or a small count fell by more than its share), nothing falls after the edit and
    the shortfall comes off the hours nearest before it (:func:`_trim_latest`)."""
    kept = np.where(before, pre, 0)
    rest = total - kept.sum(axis=1)
    return _trim_latest(kept, -rest) + _split_chain(np.maximum(rest, 0), post_weights, uniforms)


def _join_cents(cents, pre_cost, before, clicks, post_weights) -> np.ndarray:
    """Cost cents of a joined day (:func:`_join`): the hours before the edit as the day stood,
    the rest following the clicks after it (trimmed as :func:`_join` trims counts)."""
    kept = np.where(before, pre_cost, 0)
    rest = cents - kept.sum(axis=1)
    post = _split_cents(np.maximum(rest, 0), np.where(before, 0, clicks), post_weights)
    return _trim_latest(kept, -rest) + post


def _trim_latest(hours: np.ndarray, excess: np.ndarray) -> np.ndarray:
    """``hours`` (rows of non-negative integers) with ``excess`` (per row; none where <= 0)
    taken off the latest hours first."""
    later = np.cumsum(hours[:, ::-1], axis=1)[:, ::-1] - hours  # what the later hours hold
    cut = np.clip(np.maximum(excess, 0)[:, None] - later, 0, hours)
    return hours - cut


SEARCH_NETWORK = ("search", "search_partners")


def impression_share_daily(panel: Panel, world: World) -> pd.DataFrame:
    """Campaign-day impressions, and the search impression share with the shares lost to budget
    and to rank (summing to 1) over the campaign's search-network auctions; campaigns that serve
    no search network report no search impression share (NaN)."""
    on_search = np.isin(panel.labels("placement"), SEARCH_NETWORK)[:, None]
    frame = grouped_frame(panel, world, ("campaign",), {"impressions": "impressions"})
    counts = {}
    for name, node in (("eligible", "auctions"), ("won", "won_auctions"), ("shown", "impressions")):
        counts[name] = panel.group_sum(np.where(on_search, world[node], 0), ("campaign",))
        counts[name] = counts[name].reshape(-1).astype(np.float64)
    eligible = counts["eligible"]
    served = eligible > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(served, np.round(counts["shown"] / eligible, 4), np.nan)
        lost_rank = np.where(served, np.round((eligible - counts["won"]) / eligible, 4), np.nan)
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
    """Per search campaign, day and competitor: the estimates an auction-insights report gives.

    Each campaign meets its own competitors (brand terms: a couple of coupon and reseller
    sites; generic terms: the category's retailers); display campaigns have no report.
    Competitors' presence follows the competitive pressure on the campaign's search auctions,
    with their own strength per campaign and report noise; the account's own row ("you") uses
    its measured search impression share. ``shares`` is the impression-share table of the same
    world, if already rendered.
    """
    if shares is None:
        shares = impression_share_daily(panel, world)
    on_search = np.isin(panel.labels("placement"), SEARCH_NETWORK)[:, None]
    pressure_sum = panel.group_sum(
        np.where(on_search, world["competitor_pressure"], 0.0), ("campaign",)
    )
    n_search = panel.group_sum(np.broadcast_to(on_search, panel.shape).astype(float), ("campaign",))
    pressure = pressure_sum / np.maximum(n_search, 1.0)
    n_days = panel.n_time
    own_all = shares["search_impression_share"].to_numpy().reshape(-1, n_days)
    dates = _dates(panel)
    campaign_levels = list(panel.dimension("campaign").levels)
    blocks = []
    for spec in config.campaigns:
        if not spec.competitors:
            continue
        g = campaign_levels.index(spec.name)
        own, p = np.nan_to_num(own_all[g]), pressure[g]
        # Brand terms are defended well: rivals there are weak; category terms are contested.
        lo, hi = (0.05, 0.25) if spec.rank_offset > 1.0 else (0.2, 0.6)
        strengths = rng.uniform(lo, hi, size=len(spec.competitors))
        rows = [
            ("you", own, np.full(n_days, np.nan), np.full(n_days, np.nan), np.full(n_days, np.nan))
        ]
        for name, strength in zip(spec.competitors, strengths):
            noise = rng.normal(0.0, 0.03, size=(4, n_days))
            comp_share = np.clip(strength * p**2.0 + noise[0], 0.02, 0.95)
            overlap = np.clip(comp_share * rng.uniform(0.6, 0.95) + noise[1], 0.01, 0.95)
            above = np.clip(0.35 * p**2.5 * strength / 0.4 + noise[2], 0.0, 0.98)
            outranking = np.clip(own * (1.0 - above) + noise[3] * 0.5, 0.0, 0.98)
            rows.append((name, comp_share, overlap, above, outranking))
        for name, *values in rows:
            blocks.append(
                pd.DataFrame(
                    {
                        "date": dates,
                        "campaign": spec.name,
                        "competitor": name,
                        "impression_share": np.round(values[0], 4),
                        "overlap_rate": np.round(values[1], 4),
                        "position_above_rate": np.round(values[2], 4),
                        "outranking_share": np.round(values[3], 4),
                    }
                )
            )
    columns = [
        "date",
        "campaign",
        "competitor",
        "impression_share",
        "overlap_rate",
        "position_above_rate",
        "outranking_share",
    ]
    frame = pd.concat(blocks, ignore_index=True) if blocks else pd.DataFrame(columns=columns)
    frame["campaign"] = pd.Categorical(frame["campaign"], categories=campaign_levels)
    return frame.sort_values(["date", "campaign", "competitor"], kind="stable", ignore_index=True)[
        columns
    ]


def reach_frequency_daily(panel: Panel, world: World, config: AdsConfig) -> pd.DataFrame:
    """Daily reach and frequency per campaign and creative (not additive across rows).

    Reach saturates in the creative's audience universe U: reach = U (1 - exp(-I / U)), with U
    the campaign's ``audience_universe`` times the first two weeks' daily impressions, so
    frequency = I / reach rises with volume: about 1.1 a day on search, 2-5 for remarketing
    banners shown again and again to a small list. Where the world has the creatives' fresh
    audience (node ``audience_size``, ``fatigue="frequency"``), U is scaled by its
    impression-weighted mean over the row's cells: a saturating audience shows as frequency
    rising.
    """
    dims = ("campaign", "creative")
    frame = grouped_frame(panel, world, dims, {"impressions": "impressions"})
    n_days = panel.n_time
    impressions = frame["impressions"].to_numpy().reshape(-1, n_days).astype(np.float64)
    factor = {c.name: c.audience_universe for c in config.campaigns}
    per_row = np.array([factor[c] for c in frame["campaign"].to_numpy()[::n_days]])[:, None]
    universe = np.maximum(per_row * impressions[:, :14].mean(axis=1, keepdims=True), 1.0)
    if "audience_size" in world:
        served = world["impressions"].astype(np.float64)
        weighted = panel.group_sum(served * world["audience_size"], dims)
        size = np.where(impressions > 0, weighted / np.maximum(impressions, 1.0), 1.0)
        universe = np.maximum(universe * size, 1.0)
    reach = np.floor(universe * (1.0 - np.exp(-impressions / universe)))
    frame["reach"] = reach.reshape(-1).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        frame["frequency"] = np.round(
            np.where(reach > 0, impressions / np.maximum(reach, 1), 0.0), 3
        ).reshape(-1)
    return frame


def conversion_lag_curve(config: AdsConfig, days: int = 35) -> pd.DataFrame:
    """The account's conversion-delay report: the expected share of a click day's conversions
    reported by each age (what platforms show as "days to conversion")."""
    from causaltrace_domains.ads.scm import reported_share

    age = np.arange(days + 1)
    return pd.DataFrame(
        {"days_since_click": age, "share_reported": np.round(reported_share(age, config), 4)}
    )
