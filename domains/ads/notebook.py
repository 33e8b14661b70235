# ruff: noqa: F821  (perf_daily and the other tables are preloaded by the python tool)
"""The teacher's analysis notebook: plain pandas and numpy, sent verbatim to the python tool.

The sandbox cannot import causaltrace (by design), so the teacher ships its analysis as source
text, like an analyst pasting a helper cell. It defines ``overview(t0)`` and ``scan(signal,
t0, ...)``, which print JSON the teacher reads back. Every number comes from the episode's
tables as the sandbox preloads them (``perf_daily``, ``site_analytics_daily``, ...).
"""

import json

import numpy as np
import pandas as pd

DIMS = ["campaign", "creative", "placement", "device", "browser_os", "geo", "audience"]
SITE_DIMS = ["campaign", "device", "browser_os", "geo"]
LAG = 3  # recent days still collect conversions: leave them out of conversion rates


def _dense(frame, keys, values):
    frame = frame.assign(date=pd.to_datetime(frame["date"]))
    days = np.sort(frame["date"].unique())
    wide = frame.pivot_table(
        index=keys, columns="date", values=values, aggfunc="sum", fill_value=0, observed=True
    )
    index = wide.index.to_frame(index=False)
    return (
        index,
        {v: wide[v].reindex(columns=days, fill_value=0).to_numpy(float) for v in values},
        days,
    )


CELLS, PERF, DAYS = _dense(
    perf_daily, DIMS, ["impressions", "clicks", "cost", "conversions", "invalid_clicks"]
)
SITE_INDEX, SITE, _ = _dense(
    site_analytics_daily.rename(columns={"utm_campaign": "campaign"}),
    SITE_DIMS,
    ["sessions", "backend_orders"],
)
_site_keys = CELLS[SITE_DIMS].astype(str).agg("|".join, axis=1)
_site_pos = {k: i for i, k in enumerate(SITE_INDEX[SITE_DIMS].astype(str).agg("|".join, axis=1))}
CELL_SITE = _site_keys.map(_site_pos).to_numpy()
SITE["conversions"] = np.zeros_like(SITE["backend_orders"])
np.add.at(SITE["conversions"], CELL_SITE, PERF["conversions"])
N = len(DAYS)


def _windows(t0, exclude_last=0):
    return slice(max(0, t0 - 21), t0), slice(t0, N - exclude_last)


def _log_change(num, den, t0, exclude_last=0):
    """log of (num/den after t0) over (num/den before), and its Poisson variance."""
    pre, post = _windows(t0, exclude_last)
    a, b, c, d = num[post].sum(), den[post].sum(), num[pre].sum(), den[pre].sum()
    effect = np.log((a + 0.5) / (b + 0.5)) - np.log((c + 0.5) / (d + 0.5))
    return effect, 1 / (a + 0.5) + 1 / (b + 0.5) + 1 / (c + 0.5) + 1 / (d + 0.5)


def _signal(signal, mask, t0):
    """(effect, z) of a signal on the leaf cells in mask against the rest of the account."""
    rest = ~mask
    if not mask.any() or not rest.any():
        return None
    if signal in ("tracking", "orders"):
        inside = np.bincount(CELL_SITE[mask], minlength=len(SITE_INDEX))
        whole = np.bincount(CELL_SITE, minlength=len(SITE_INDEX))
        site = (inside == whole) & (whole > 0)
        if not site.any() or site.all():
            return None
        if signal == "orders":
            num, den = SITE["backend_orders"][site].sum(0), SITE["backend_orders"][~site].sum(0)
            e, v = _log_change(num, den, t0)
            return e, e / np.sqrt(v)
        e1, v1 = _log_change(
            SITE["conversions"][site].sum(0), SITE["backend_orders"][site].sum(0), t0, LAG
        )
        e2, v2 = _log_change(
            SITE["conversions"][~site].sum(0), SITE["backend_orders"][~site].sum(0), t0, LAG
        )
        return e1 - e2, (e1 - e2) / np.sqrt(v1 + v2)
    if signal in ("volume", "creative_share", "placement_share"):
        if signal == "volume":
            ref = rest
        else:  # the same campaigns, other creatives or placements
            ref = CELLS["campaign"].isin(CELLS.loc[mask, "campaign"]).to_numpy() & rest
            if not ref.any():
                return None
        e, v = _log_change(PERF["impressions"][mask].sum(0), PERF["impressions"][ref].sum(0), t0)
        return e, e / np.sqrt(v)
    num, den, lag = {
        "ctr": ("clicks", "impressions", 0),
        "cvr": ("conversions", "clicks", LAG),
        "cpc": ("cost", "clicks", 0),
        "invalid": ("invalid_clicks", "clicks", 0),
    }[signal]
    e1, v1 = _log_change(PERF[num][mask].sum(0), PERF[den][mask].sum(0), t0, lag)
    e2, v2 = _log_change(PERF[num][rest].sum(0), PERF[den][rest].sum(0), t0, lag)
    return e1 - e2, (e1 - e2) / np.sqrt(v1 + v2)


_LEVEL_MASKS = {}


def _mask(conditions):
    mask = np.ones(len(CELLS), dtype=bool)
    for dim, level in conditions:
        if (dim, level) not in _LEVEL_MASKS:
            _LEVEL_MASKS[dim, level] = (CELLS[dim].astype(str) == level).to_numpy()
        mask &= _LEVEL_MASKS[dim, level]
    return mask


def scan(signal, t0, dims=DIMS, direction=1, two_d=True, top=5):
    """Print the slices where the signal moves most (in ``direction``), 1D and 2D."""
    rows = []
    singles = [(d, lv) for d in dims for lv in CELLS[d].unique()]
    for cond in singles:
        out = _signal(signal, _mask([cond]), t0)
        if out is not None:
            rows.append(("=".join(cond), direction * out[0], direction * out[1]))
    if two_d:
        for i, (d1, l1) in enumerate(singles):
            for d2, l2 in singles[i + 1 :]:
                if d1 == d2:
                    continue
                mask = _mask([(d1, l1), (d2, l2)])
                if mask.sum() == 0:
                    continue
                out = _signal(signal, mask, t0)
                if out is not None:
                    name = "&".join(sorted([f"{d1}={l1}", f"{d2}={l2}"]))
                    rows.append((name, direction * out[0], direction * out[1]))
    rows.sort(key=lambda r: -r[2])
    result = [
        {"slice": s, "effect": round(float(e), 3), "z": round(float(z), 1)}
        for s, e, z in rows[:top]
    ]
    print(json.dumps({"signal": signal, "t0": t0, "top": result}))


def rest_of(slice_text, child_text, signal, t0, direction=1):
    """The signal on a slice minus one of its children (does the effect cover the slice?)."""
    parse = [tuple(c.split("=")) for c in slice_text.split("&")]
    child = [tuple(c.split("=")) for c in child_text.split("&")]
    out = _signal(signal, _mask(parse) & ~_mask(child), t0)
    print(
        json.dumps(
            {
                "rest": None
                if out is None
                else {
                    "effect": round(float(direction * out[0]), 3),
                    "z": round(float(direction * out[1]), 1),
                }
            }
        )
    )


def overview():
    """Account-level shifts for onsets in the last weeks: where does the account break?"""
    shares = impression_share_daily.assign(date=pd.to_datetime(impression_share_daily["date"]))
    eligible = shares["impressions"] / shares["search_impression_share"].clip(lower=1e-6)
    by_day = (
        shares.assign(
            eligible=eligible,
            budget=eligible * shares["search_lost_is_budget"],
            rank=eligible * shares["search_lost_is_rank"],
        )
        .groupby("date")[["eligible", "budget", "rank"]]
        .sum()
    )
    lost_budget = (by_day["budget"] / by_day["eligible"]).to_numpy()
    lost_rank = (by_day["rank"] / by_day["eligible"]).to_numpy()
    eligible = by_day["eligible"].to_numpy()
    clicks, cost = PERF["clicks"].sum(0), PERF["cost"].sum(0)
    best = {}
    for t0 in range(N - 16, N - 3):
        pre, post = _windows(t0)
        cand = {
            "lost_is_budget_pp": 100 * (lost_budget[post].mean() - lost_budget[pre].mean()),
            "lost_is_rank_pp": 100 * (lost_rank[post].mean() - lost_rank[pre].mean()),
            "eligible_auctions_pct": 100 * (eligible[post].mean() / eligible[pre].mean() - 1),
            "cpc_pct": 100
            * ((cost[post].sum() / clicks[post].sum()) / (cost[pre].sum() / clicks[pre].sum()) - 1),
        }
        for key, value in cand.items():
            if key not in best or abs(value) > abs(best[key][0]):
                best[key] = (value, t0)
    print(
        json.dumps(
            {k: {"change": round(float(v), 2), "t0": int(t)} for k, (v, t) in best.items()}
            | {"n_days": N}
        )
    )
