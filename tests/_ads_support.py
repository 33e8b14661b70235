"""Ads accounts and their backgrounds, built once per test session (shared by the background
and twin tests, which sample many backgrounds of the same two presets)."""

from __future__ import annotations

import functools

import numpy as np

from causaltrace import load_domain

PRESETS = {"default": {}, "small": {"preset": "small"}}
# Each cause at the top of its prior on a slice it can act on (the domain tests and the
# verifier tests plant these).
STRONG = {  # cause -> (slice, strength at the top of its prior)
    "BUDGET_CAP": ("", 0.8),
    "COMPETITIVE_PRESSURE": ("", 0.8),
    "DEMAND_SHIFT": ("", 0.45),
    "TARGETING_EXPANSION": ("audience=broad", 4.0),
    "PLACEMENT_SHIFT": ("placement=display", 6.0),
    "BID_MODIFIER_CHANGE": ("campaign=generic_search&device=desktop", 2.0),
    "CREATIVE_FATIGUE": ("creative=brand_rsa_1", 3.0),
    "TRACKING_OUTAGE": ("browser_os=ios_safari", 0.95),
    "LANDING_PAGE_BREAK": ("device=mobile&geo=us_west", 0.9),
    "INVALID_TRAFFIC": ("placement=display", 12.0),
    "AD_DISAPPROVAL": ("creative=pmax_asset_group_1", 1.0),
    "NO_ANOMALY": ("", 1.0),
}


@functools.cache
def domain_of(preset: str):
    return load_domain("ads", PRESETS[preset])


@functools.cache
def background_of(preset: str, seed: int):
    return domain_of(preset).background(np.random.default_rng(seed))
