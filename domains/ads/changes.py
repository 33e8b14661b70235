"""The change history: the cause's own edits (when the cause is an account edit) among the edits
the background processes logged and plausible decoy edits.

The background itself (processes in both worlds, decoys, their edits) is drawn in
:mod:`causaltrace_domains.ads.background`; this module renders the rows. Decoy edits use the same change
types as the causes that are account edits (budget, bid adjustment, targeting), so the existence
of an edit never gives a cause away: an analyst has to check whether the data moved where and
when the edit says.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from causaltrace import Background, Panel, World
from causaltrace_domains.ads.background import (
    PEOPLE,
    RULE_FIELDS,
    RULES_USER,
    USERS,
    BackgroundPrior,
    Edit,
    sample_background,
)
from causaltrace_domains.ads.edits import draw_edits
from causaltrace_domains.ads.records import HISTORY_DAYS

DecoyEdit = Edit  # the former name of a change-history row
COLUMNS = (
    "change_time",
    "user",
    "campaign",
    "change_type",
    "target",
    "field",
    "old_value",
    "new_value",
)
CPA_DAYS = 14  # a target-CPA edit's old value: the campaign's CPA over the days before it

__all__ = [
    "COLUMNS",
    "HISTORY_DAYS",
    "USERS",
    "BackgroundPrior",
    "DecoyEdit",
    "Edit",
    "draw_edits",
    "change_history",
    "sample_background",
]


def change_history(
    panel: Panel,
    world: World,
    background: Background,
    cause: list[Edit],
    rng: np.random.Generator,
    budget_after: np.ndarray | None = None,
) -> pd.DataFrame:
    """Exactly ``total_edits`` edits, newest first.

    Budget values are read from the world (the day before and the day of the edit, or
    ``budget_after``'s value of the edit day where given: the budget a day ends with when its
    own value is a partial day's); a target-CPA edit's old value is the campaign's CPA over
    the 14 days before it and its new value that times the edit's ratio. One draw from ``rng``
    per row (the minute).
    """
    notes = background.notes
    fill = notes["total_edits"] - len(cause) - len(notes["effectful"])
    edits = [*cause, *notes["effectful"], *notes["effect_free"][: max(fill, 0)]]
    dates = panel.time.values.astype("datetime64[D]")
    campaigns = panel.labels("campaign")
    stamps = [
        pd.Timestamp(dates[e.day]) + pd.Timedelta(hours=e.hour, minutes=int(rng.integers(0, 60)))
        for e in edits
    ]
    budget = world["daily_budget"]
    budgets = _budget_values(
        edits, stamps, budget, campaigns, budget if budget_after is None else budget_after
    )
    rows = []
    for i, (edit, drawn_user) in enumerate(zip(edits, notes["users"])):
        old, new = budgets.get(i, (edit.old_value, edit.new_value))
        ratio = getattr(edit, "cpa_ratio", None)
        if ratio is not None:
            mask = campaigns == edit.campaign
            lo, hi = max(edit.day - CPA_DAYS, 0), max(edit.day, 1)
            cost = float(world["cost"][mask, lo:hi].sum())
            conversions = float(world["conversions"][mask, lo:hi].sum())
            target = max(round(cost / max(conversions, 1.0)), 1)  # targets in whole units
            old, new = f"{target:.2f}", f"{target * ratio:.2f}"
        user = getattr(edit, "user", "") or drawn_user
        if user == RULES_USER and edit.field not in RULE_FIELDS:
            # Automated rules cannot make this kind of edit: the same draw names a person.
            user = PEOPLE[len(rows) % len(PEOPLE)]
        rows.append(
            (stamps[i], user, edit.campaign, edit.change_type, edit.target, edit.field, old, new)
        )
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    frame["change_time"] = pd.to_datetime(frame["change_time"]).astype("datetime64[us]")
    return frame.sort_values("change_time", ascending=False, kind="stable").reset_index(drop=True)


def _budget_values(
    edits, stamps, budget: np.ndarray, campaigns: np.ndarray, after_day: np.ndarray
) -> dict:
    """Old and new value of every budget edit, read from the world's daily budget (the day
    before and the day of the edit). Several edits of one campaign on one day chain in time
    order: each starts where the one before ended (its own ``factor`` applied, rounded to 10
    as budgets are set), and the last ends at the day's budget, so the history always adds up
    to the budget the campaigns table shows."""
    by_day: dict[tuple[str, int], list[int]] = {}
    for i, edit in enumerate(edits):
        if edit.field == "daily_budget":
            by_day.setdefault((edit.campaign, edit.day), []).append(i)
    out = {}
    for (campaign, day), indices in by_day.items():
        cell = int(np.flatnonzero(campaigns == campaign)[0])
        value = float(budget[cell, max(day - 1, 0)])
        ordered = sorted(indices, key=lambda i: stamps[i])
        for k, i in enumerate(ordered):
            if k == len(ordered) - 1:
                after = float(after_day[cell, day])
            else:
                factor = edits[i].factor if edits[i].factor is not None else 1.0
                after = max(round(value * factor / 10.0) * 10.0, 10.0)
            out[i] = (_money(value), _money(after))
            value = after
    return out


def _money(value: float) -> str:
    return f"{value:.0f}"  # budgets are set in whole currency units
