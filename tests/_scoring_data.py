"""Fixed labels and a synthetic, richer answer space shared by the tests/test_scoring_*.py files.

The synthetic space has three dimensions, nested cells (no desktop x samsung, no tablet x
firefox: 48 - 4 - 4 = 40 leaf cells), a no-signal cause, a campaign-wide cause, 1D and 2D sliced
causes, a cause restricted to some levels, and a sliced cause whose draw may be the whole panel.
"""

from __future__ import annotations

from functools import lru_cache

from causaltrace import load_domain
from causaltrace.episodes.labels import KpiEffect, OracleLabel
from causaltrace.scoring import AnswerSpace

DEVICES = ("mobile", "desktop", "tablet")
BROWSERS = ("chrome", "safari", "firefox", "samsung")
GEOS = ("us", "eu", "apac", "latam")
MISSING = {("desktop", "samsung"), ("tablet", "firefox")}


@lru_cache(maxsize=1)
def synthetic_space() -> AnswerSpace:
    cells = [(d, b, g) for d in DEVICES for b in BROWSERS for g in GEOS if (d, b) not in MISSING]
    return AnswerSpace.create(
        {
            "NO_ANOMALY": {"group": "no-signal"},
            "CAMPAIGN_PAUSED": {"group": "campaign-wide"},
            "BUDGET_CAP": {
                "group": "delivery",
                "slice_dims": [["device"], ["geo"], ["device", "geo"]],
            },
            "BID_DROP": {"group": "delivery", "slice_dims": [["geo"]]},
            "BROWSER_TRACKING": {
                "group": "measurement",
                "slice_dims": [["browser"], ["device", "browser"]],
                "allowed_levels": {"browser": ["safari", "samsung"]},
            },
            "CREATIVE_REJECTED": {"group": "creative", "slice_dims": [[], ["device"]]},
        },
        {"device": DEVICES, "browser": BROWSERS, "geo": GEOS},
        cells=cells,
        name="synthetic-ads",
    )


@lru_cache(maxsize=1)
def example_space() -> AnswerSpace:
    return AnswerSpace.from_scm(load_domain("example").scm)


def label(
    cause: str,
    slice_: str | None,
    group: str,
    *,
    episode_id: str | None = None,
    effects: dict[str, tuple[float, float]] | None = None,
) -> OracleLabel:
    eff = {k: KpiEffect(f, c) for k, (f, c) in (effects or {}).items()}
    return OracleLabel(
        episode_id=episode_id or f"{cause}:{slice_}",
        cause=cause,
        group=group,
        slice=slice_,
        onset=40,
        onset_time="2026-02-14",
        strength=0.5,
        profile="step",
        effect_in_slice=eff,
        effect_overall=eff,
    )


def synthetic_labels() -> dict[str, OracleLabel]:
    return {
        "none": label("NO_ANOMALY", None, "no-signal"),
        "pause": label("CAMPAIGN_PAUSED", None, "campaign-wide"),
        "budget_1d": label("BUDGET_CAP", "device=mobile", "delivery"),
        "budget_2d": label("BUDGET_CAP", "device=tablet&geo=eu", "delivery"),
        "bid": label("BID_DROP", "geo=apac", "delivery"),
        "browser_2d": label("BROWSER_TRACKING", "browser=samsung&device=mobile", "measurement"),
        "creative_whole": label("CREATIVE_REJECTED", None, "creative"),
    }


def example_labels() -> dict[str, OracleLabel]:
    return {
        "traffic": label("TRAFFIC_DROP", None, "site-wide", effects={"orders": (900.0, 1200.0)}),
        "checkout_2d": label(
            "CHECKOUT_BUG",
            "channel=search&region=north",
            "segment-specific",
            effects={"orders": (150.0, 400.0)},
        ),
        "tracking_1d": label("TRACKING_LOSS", "region=west", "segment-specific"),
    }
