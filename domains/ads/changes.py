"""The change history: real account edits among harmless decoy edits, and the background
(decoy edits plus small concurrent shifts) that every episode carries in both worlds.

Decoy edits use the same change types as the causes that are account edits (budget, bid
adjustment, targeting), so the existence of an edit never gives a cause away: an analyst has to
check whether the data moved where and when the edit says.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from causaltrace import Background, InterventionDraw, Panel, Scale, Slice, Window, World
from domains.ads.config import AdsConfig

USERS = ("anna.k@agency.example", "li.m@brand.example", "automated_rules", "j.osei@agency.example")
HISTORY_DAYS = 30  # platforms keep 30 days of edits
TEXT_EDITS = (
    ("ad", "headline_3", "Free shipping over $50", "Free returns, always"),
    ("keywords", "negative_keywords", "12 keywords", "15 keywords"),
    ("targeting", "placement_exclusions", "3 app categories", "4 app categories"),
    ("targeting", "audience_observation", "2 segments", "3 segments"),
    ("bidding", "target_cpa", "48.00", "46.00"),
    ("ad", "final_url_suffix", "utm_content=v1", "utm_content=v2"),
    ("campaign", "ad_schedule", "all day", "all day (edited labels)"),
)


@dataclass(frozen=True)
class DecoyEdit:
    """An edit the account made that the world also contains (or that changes nothing)."""

    day: int
    hour: int
    campaign: str
    change_type: str
    target: str
    field: str
    old_value: str
    new_value: str


def _pick(rng: np.random.Generator, items):
    return items[int(rng.integers(len(items)))]


def sample_background(panel: Panel, config: AdsConfig, rng: np.random.Generator) -> Background:
    """Decoy edits (logged) and small concurrent shifts (not logged) for one episode.

    The change history always holds ``total_edits`` rows: the cause's own edits (if any), the
    effectful decoys, and as many effect-free decoys as fill the rest. Its size therefore does
    not depend on the cause.
    """
    n_days = panel.n_time
    first_day = max(0, n_days - HISTORY_DAYS)
    campaigns = panel.dimension("campaign").levels
    lo, hi = config.decoy_edits
    total = int(rng.integers(lo, hi + 1)) + len(campaigns)  # room for a cause's edits
    interventions, effectful, effect_free = [], [], []

    def when():
        return int(rng.integers(first_day, n_days)), int(rng.integers(7, 20))

    for _ in range(int(rng.integers(1, 4))):  # effectful decoys: budget and bid edits
        (day, hour), campaign = when(), _pick(rng, campaigns)
        if rng.random() < 0.5:  # raising a budget that is not binding changes little or nothing
            interventions.append(
                Scale(
                    "daily_budget",
                    where=Slice.of(campaign=campaign),
                    window=Window(day),
                    factor=float(rng.uniform(1.1, 1.6)),
                )
            )
            effectful.append(
                DecoyEdit(day, hour, campaign, "budget", "campaign", "daily_budget", "", "")
            )
        else:  # a small bid adjustment: below what the data can show
            dim = _pick(rng, ("device", "geo", "audience"))
            level = _pick(rng, panel.dimension(dim).levels)
            pct = int(rng.choice([-8, -5, -3, 3, 5, 8]))
            where = Slice.of(campaign=campaign, **{dim: level})
            if where.mask(panel).any():
                interventions.append(
                    Scale("bid", where=where, window=Window(day), factor=1 + pct / 100)
                )
            effectful.append(
                DecoyEdit(
                    day,
                    hour,
                    campaign,
                    "bid_modifier",
                    f"{dim}={level}",
                    "bid_adjustment",
                    "+0%",
                    f"{pct:+d}%",
                )
            )
    for _ in range(total):  # effect-free decoys, of the same types as real edits
        (day, hour), campaign = when(), _pick(rng, campaigns)
        kind = _pick(rng, ("bid_modifier", "targeting", "text", "text"))
        device = _pick(rng, ("ctv", "tablet"))
        if kind == "bid_modifier" and Slice.of(campaign=campaign, device=device).mask(panel).any():
            kind = "text"  # the campaign serves that device: an adjustment would not be harmless
        if kind == "bid_modifier":  # a large adjustment on a device the campaign never serves
            pct = int(rng.choice([40, 60, 80, 100]))
            effect_free.append(
                DecoyEdit(
                    day,
                    hour,
                    campaign,
                    "bid_modifier",
                    f"device={device}",
                    "bid_adjustment",
                    "+0%",
                    f"+{pct}%",
                )
            )
        elif kind == "targeting":  # the fields a real expansion edits, on segments not served
            dim, level = _pick(
                rng,
                (
                    ("audience", "affinity_travel"),
                    ("geo", "mexico"),
                    ("audience", "life_events"),
                    ("geo", "spain"),
                ),
            )
            field, old, new = (
                ("optimized_targeting", "off", "on")
                if dim == "audience"
                else ("location_options", "presence", "presence_or_interest")
            )
            effect_free.append(
                DecoyEdit(day, hour, campaign, "targeting", f"{dim}={level}", field, old, new)
            )
        else:
            change_type, field, old, new = _pick(rng, TEXT_EDITS)
            effect_free.append(
                DecoyEdit(day, hour, campaign, change_type, "campaign", field, old, new)
            )
    # Small concurrent shifts below detection (not in the change history).
    for _ in range(int(rng.integers(1, 4))):
        node = _pick(rng, ("cvr", "ctr", "market_demand", "expected_cpc"))
        dim = _pick(rng, ("device", "geo", "audience", "placement"))
        level = _pick(rng, panel.dimension(dim).levels)
        factor = 1.0 + float(rng.choice([-1, 1])) * float(rng.uniform(0.01, 0.03))
        day = int(rng.integers(n_days // 2, n_days))
        interventions.append(
            Scale(node, where=Slice.of(**{dim: level}), window=Window(day), factor=factor)
        )
    users = tuple(_pick(rng, USERS) for _ in range(total + len(campaigns) + 4))
    return Background(
        tuple(interventions),
        {
            "total_edits": total,
            "effectful": tuple(effectful),
            "effect_free": tuple(effect_free),
            "users": users,
        },
    )


def cause_edits(
    draw: InterventionDraw, panel: Panel, account_change: str | None, hour: int
) -> list[DecoyEdit]:
    """The edit(s) the account itself made when the cause is an account edit."""
    if account_change is None:
        return []
    touched = [
        c
        for c in panel.dimension("campaign").levels
        if (Slice.of(campaign=c).mask(panel) & draw.slice.mask(panel)).any()
    ]
    day, target = draw.window.onset, draw.slice.canonical()
    if account_change == "budget":
        return [
            DecoyEdit(day, hour, c, "budget", "campaign", "daily_budget", "", "") for c in touched
        ]
    if account_change == "bid_modifier":
        pct = f"+{round(draw.strength * 100)}%"
        return [
            DecoyEdit(day, hour, c, "bid_modifier", target, "bid_adjustment", "+0%", pct)
            for c in touched
        ]
    if account_change == "targeting":
        field, old, new = (
            ("optimized_targeting", "off", "on")
            if "audience" in draw.slice.dims
            else ("location_options", "presence", "presence_or_interest")
        )
        return [DecoyEdit(day, hour, c, "targeting", target, field, old, new) for c in touched]
    return []


def change_history(
    panel: Panel,
    world: World,
    background: Background,
    cause: list[DecoyEdit],
    rng: np.random.Generator,
) -> pd.DataFrame:
    """Exactly ``total_edits`` edits, newest first; budget values are read from the world."""
    notes = background.notes
    fill = notes["total_edits"] - len(cause) - len(notes["effectful"])
    edits = [*cause, *notes["effectful"], *notes["effect_free"][: max(fill, 0)]]
    dates = panel.time.values.astype("datetime64[D]")
    budget = world["daily_budget"]
    rows = []
    for edit, user in zip(edits, notes["users"]):
        old, new = edit.old_value, edit.new_value
        if edit.field == "daily_budget":
            cell = int(np.flatnonzero(panel.labels("campaign") == edit.campaign)[0])
            old = _money(float(budget[cell, max(edit.day - 1, 0)]))
            new = _money(float(budget[cell, edit.day]))
        stamp = pd.Timestamp(dates[edit.day]) + pd.Timedelta(
            hours=edit.hour, minutes=int(rng.integers(0, 60))
        )
        rows.append(
            (stamp, user, edit.campaign, edit.change_type, edit.target, edit.field, old, new)
        )
    frame = pd.DataFrame(
        rows,
        columns=[
            "change_time",
            "user",
            "campaign",
            "change_type",
            "target",
            "field",
            "old_value",
            "new_value",
        ],
    )
    frame["change_time"] = pd.to_datetime(frame["change_time"]).astype("datetime64[us]")
    return frame.sort_values("change_time", ascending=False, kind="stable").reset_index(drop=True)


def _money(value: float) -> str:
    return f"{value:.0f}"  # budgets are set in whole currency units
