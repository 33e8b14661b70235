"""The data dictionary the agent reads: every table and column, with its meaning."""

from __future__ import annotations

_PERF = {
    "date": "report date (conversions are attributed to the click date)",
    "impressions": "times an ad was shown",
    "clicks": "billed clicks (invalid clicks excluded)",
    "cost": "spend in account currency",
    "conversions": "platform conversions reported so far: those the tag recorded plus modelled "
    "ones (consent modelling, cross-device and view-through); recent days keep growing for "
    "weeks (conversion lag, see conversion_lag_curve)",
    "conversion_value": "value of the recorded conversions",
    "invalid_clicks": "clicks the platform filtered as invalid (not billed)",
}
_SEGMENTS = {
    "campaign": "campaign name",
    "creative": "ad (creative or asset group) name",
    "placement": "network: search, search_partners, display or video",
    "device": "device class: mobile, desktop, tablet, ctv (connected TV)",
    "browser_os": "browser and operating system family",
    "geo": "user location (region)",
    "audience": "audience segment the user matched",
}

DATA_DICTIONARY: dict[str, dict[str, str]] = {
    "perf_daily": {
        **{k: v for k, v in _PERF.items() if k == "date"},
        **_SEGMENTS,
        **{k: v for k, v in _PERF.items() if k != "date"},
    },
    "perf_hourly": {
        "date": _PERF["date"],
        "hour": "hour of day (account time zone, 0-23)",
        "campaign": _SEGMENTS["campaign"],
        "device": _SEGMENTS["device"],
        "impressions": _PERF["impressions"],
        "clicks": _PERF["clicks"],
        "cost": _PERF["cost"],
        "conversions": _PERF["conversions"],
    },
    "impression_share_daily": {
        "date": "day",
        "campaign": _SEGMENTS["campaign"],
        "impressions": _PERF["impressions"],
        "search_impression_share": "search-network impressions / search auctions the campaign "
        "was eligible for (empty for campaigns that serve no search network)",
        "search_lost_is_rank": "share of eligible search auctions lost to ad rank (bid x quality)",
        "search_lost_is_budget": "share of eligible search auctions lost because the budget ran "
        "out; the three shares sum to 1",
    },
    "auction_insights_daily": {
        "date": "day",
        "campaign": _SEGMENTS["campaign"],
        "competitor": "competitor domain ('you' is this account); search campaigns only, each "
        "with the competitors of its own auctions",
        "impression_share": "the competitor's (or your) impression share in your auctions",
        "overlap_rate": "how often the competitor showed when you showed",
        "position_above_rate": "how often the competitor's ad ranked above yours",
        "outranking_share": "how often you ranked above the competitor or showed when it did not",
    },
    "reach_frequency_daily": {
        "date": "day",
        "campaign": _SEGMENTS["campaign"],
        "creative": _SEGMENTS["creative"],
        "impressions": _PERF["impressions"],
        "reach": "unique users reached that day (not additive across rows)",
        "frequency": "impressions per user reached that day",
    },
    "site_analytics_daily": {
        "date": "session date",
        "utm_campaign": "campaign from the landing URL's UTM tag",
        "device": _SEGMENTS["device"],
        "browser_os": _SEGMENTS["browser_os"],
        "geo": _SEGMENTS["geo"],
        "sessions": "site sessions started from ad clicks",
        "backend_orders": "orders recorded by the shop's backend (first-party truth, no tag)",
        "backend_revenue": "revenue of those orders",
    },
    "change_history": {
        "change_time": "when the edit was made",
        "user": "who made it",
        "campaign": _SEGMENTS["campaign"],
        "change_type": "budget, bid_modifier, targeting, ad, keywords, bidding, campaign, asset "
        "(promotions, search themes), conversions (conversion settings) or billing",
        "target": "what the edit applies to (a segment as dim=level, 'campaign', or 'account' "
        "for account-level rows, whose campaign is empty)",
        "field": "setting changed",
        "old_value": "value before",
        "new_value": "value after",
    },
    "campaigns": {
        "campaign": _SEGMENTS["campaign"],
        "campaign_type": "search, performance_max or display",
        "status": "serving status",
        "bidding_strategy": "automated or manual bidding",
        "daily_budget": "current average daily budget",
        "currency": "account currency",
        "networks": "placements the campaign may serve on",
        "geo_targets": "regions targeted",
    },
    "conversion_lag_curve": {
        "days_since_click": "age of a click day, in days",
        "share_reported": "expected share of that day's eventual conversions reported by this "
        "age (conversions are reported by click date and keep arriving for weeks)",
    },
    "creatives": {
        "creative": _SEGMENTS["creative"],
        "campaign": _SEGMENTS["campaign"],
        "format": "ad format",
        "headline": "a headline of the ad",
        "status": "enabled or paused",
        "policy_status": "approved, approved_limited (restricted in some places) or disapproved",
    },
}
