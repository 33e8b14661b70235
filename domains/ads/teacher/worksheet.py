"""The teacher's worksheet: the statistics it cites, computed inside the row by the python tool.

An SFT row is imitated token by token, so a number the teacher quotes must be one the row
printed (issue 40). The teacher therefore runs its queries and its arithmetic in the episode's
``python`` namespace: its first python call defines this module's functions there
(:func:`notebook_source`), each probe then runs ``rows = q(sql)`` (the query through DuckDB over
the preloaded tables, printed as the ``sql`` tool prints it) and ``scan(...)`` or ``shares(...)``
(the signature's statistics over the cause's slices, printed). The host reads the same printed
table and computes its belief with these same functions, so what the row prints and what the
teacher decides on cannot differ.

The module imports only the standard library and names it can ship as source: everything it
needs from the package is bundled by :func:`notebook_source`, and a test executes that bundle in a
bare namespace.
"""

from __future__ import annotations

import ast
import csv
import functools
import inspect
import io
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from causaltrace.agents.result_tables import num, parse_table
from causaltrace_domains.ads.teacher.signatures import (
    ADVERSE,
    ALLOWED,
    KPI_COLUMNS,
    KPI_EFFECT,
    SLICE_DIMS,
    candidate_slices,
    compatible,
    conditions,
)
from causaltrace_domains.ads.teacher.stats import (
    MIN_SE,
    PRACTICAL_LOG,
    PRACTICAL_SHARE,
    Stat,
    alert_share,
    oe_stat,
    onset_scan,
    scan_threshold,
    share_stat,
)

# Type aliases (host only: the row's copy drops annotations).
Labels = Mapping[str, str]
Rows = list[tuple[dict[str, str], dict[str, float]]]
Pred = Callable[[Labels], bool]
# An alert as the page prints it: KPI, campaign (None: the account), current, baseline,
# direction ("up"/"down") and the move in percent.
Alert = tuple[str, "str | None", float, float, str, float]

PLACEMENT_DRIFT = 2.0  # automatic placement drifts by itself: a share must move twice the floor
SHOWN = 3  # slices printed per cause


# -- reading rows ----------------------------------------------------------------------------
def labeled(rows: list[dict[str, str]], dims: Sequence[str]) -> Rows:
    """Printed rows as (labels, values): the slice dimensions' text, every other column read
    as a number."""
    out = []
    for row in rows:
        labels = {d: row.get(d, "") for d in dims}
        values = {k: num(v) for k, v in row.items() if k not in dims}
        out.append((labels, values))
    return out


def matcher(slice_text: str) -> Pred:
    conds = conditions(slice_text)
    return lambda lab: all(lab.get(d) == v for d, v in conds)


def tot(rows: Rows, keep: Pred, col: str) -> float:
    return sum(v.get(col, 0.0) for lab, v in rows if keep(lab))


# -- the signatures, one footprint function per scan -------------------------------------------
def site_footprint(cause: str, rows: Rows, inside: Pred, outside: Pred) -> Stat | None:
    """Conversions against the orders' expectation (TRACKING_OUTAGE); orders against the rest
    AND against the slice's own sessions (LANDING_PAGE_BREAK: a drop in traffic moves only the
    first)."""

    def sums(keep):
        n = e = ob = on = eo = 0.0
        for lab, v in rows:
            if keep(lab):
                n += v.get("conv_now", 0.0)
                ob += v.get("orders_before", 0.0)
                on += v.get("orders_now", 0.0)
                if v.get("orders_before", 0.0) > 0:
                    e += v.get("orders_now", 0.0) * v["conv_before"] / v["orders_before"]
                if v.get("sessions_before", 0.0) > 0:
                    eo += (
                        v.get("sessions_now", 0.0)
                        * v.get("orders_before", 0.0)
                        / v["sessions_before"]
                    )
        return n, e, ob, on, eo

    n_in, e_in, ob_in, on_in, eo_in = sums(inside)
    n_out, e_out, ob_out, on_out, eo_out = sums(outside)
    if cause == "TRACKING_OUTAGE":
        return oe_stat(n_in, e_in, n_out, e_out, -1)
    return Stat.weakest(
        share_stat(ob_in, on_in, ob_out, on_out, -1),
        oe_stat(on_in, eo_in, on_out, eo_out, -1),
    )


def fatigue_footprint(cause: str, rows: Rows, inside: Pred, outside: Pred) -> Stat | None:
    """Each ad's clicks against what its own CTR before predicts."""
    return oe_stat(
        tot(rows, inside, "clicks_now"),
        tot(rows, inside, "clicks_expected"),
        tot(rows, outside, "clicks_now"),
        tot(rows, outside, "clicks_expected"),
        -1,
    )


def invalid_footprint(cause: str, rows: Rows, inside: Pred, outside: Pred) -> Stat | None:
    """Invalid clicks per click AND CTR, each against the cell's own rate before."""

    def oe(obs, exp):
        return oe_stat(
            tot(rows, inside, obs), tot(rows, inside, exp), tot(rows, outside, obs),
            tot(rows, outside, exp), +1,
        )  # fmt: skip

    return Stat.weakest(oe("invalid_now", "invalid_expected"), oe("clicks_now", "clicks_expected"))


def placement_footprint(cause: str, rows: Rows, inside: Pred, outside: Pred) -> Stat | None:
    """A placement's impressions against the other placements of the campaigns serving it."""
    campaigns = {lab["campaign"] for lab, v in rows if inside(lab) and v["impressions_before"] > 0}
    ref = [(lab, v) for lab, v in rows if lab["campaign"] in campaigns and outside(lab)]
    mine = [(lab, v) for lab, v in rows if inside(lab)]
    stat = share_stat(
        sum(v["impressions_before"] for _, v in mine),
        sum(v["impressions_now"] for _, v in mine),
        sum(v["impressions_before"] for _, v in ref),
        sum(v["impressions_now"] for _, v in ref),
        +1,
    )
    if stat is None:
        return None
    z = min(stat.z, stat.effect / (PLACEMENT_DRIFT * MIN_SE))
    snr = min(stat.snr, stat.effect / (PLACEMENT_DRIFT * PRACTICAL_LOG))
    return Stat(stat.effect, z, snr, stat.parts, stat.direction)


def disapproval_footprint(cause: str, rows: Rows, inside: Pred, outside: Pred) -> Stat | None:
    """A flagged ad's impressions against the other ads of its campaigns (in its geo, for a
    slice of one geo)."""
    ads = {lab["creative"] for lab, _ in rows if inside(lab)}
    campaigns = {lab["campaign"] for lab, _ in rows if lab["creative"] in ads}
    geo = {lab["geo"] for lab, _ in rows if inside(lab)}
    narrow = len(geo) == 1 and len({lab["geo"] for lab, _ in rows}) > 1

    def ref(lab):
        same = lab["campaign"] in campaigns and not inside(lab)
        return same and (not narrow or lab["geo"] in geo)

    return share_stat(
        tot(rows, inside, "impressions_before"),
        tot(rows, inside, "impressions_now"),
        tot(rows, ref, "impressions_before"),
        tot(rows, ref, "impressions_now"),
        -1,
    )


# A scan: the columns that name its cells, and the footprint each of its causes leaves. One
# statement per scan, so that a row defines only the scans it runs (:func:`notebook_cell`).
SCANS = {}  # scan -> (the columns that name its cells, {cause: its footprint function})
SCANS["site"] = (
    ("device", "browser_os", "geo"),
    {"TRACKING_OUTAGE": site_footprint, "LANDING_PAGE_BREAK": site_footprint},
)
SCANS["creatives"] = (("creative", "device", "audience"), {"CREATIVE_FATIGUE": fatigue_footprint})
SCANS["invalid"] = (("placement", "geo"), {"INVALID_TRAFFIC": invalid_footprint})
SCANS["placements"] = (("campaign", "placement"), {"PLACEMENT_SHIFT": placement_footprint})
SCANS["ad_share"] = (("campaign", "creative", "geo"), {"AD_DISAPPROVAL": disapproval_footprint})


def scan_rows(scan_name: str, slice_text: str, rows: Rows) -> Rows:
    """The rows that partition a slice's cells: the creatives query has one grouping set per
    slice shape (by device, by audience)."""
    if scan_name != "creatives":
        return rows
    by = "audience" if "audience=" in slice_text else "device"
    return [(lab, v) for lab, v in rows if lab.get(by) not in ("", "NULL")]


def slice_stat(scan_name: str, cause: str, slice_text: str, rows: Rows) -> Stat | None:
    """The cause's footprint on one slice, or None (no rows in it, or too little volume)."""
    mine = scan_rows(scan_name, slice_text, rows)
    inside = matcher(slice_text)
    if not any(inside(lab) for lab, _ in mine):
        return None
    return SCANS[scan_name][1][cause](cause, mine, inside, lambda lab: not inside(lab))


def pct(effect: float) -> str:
    """A log effect as a percentage change."""
    return f"{100 * (math.exp(effect) - 1):+.0f}%"


def move(stat: Stat) -> str:
    """The move a signature reads, as a percentage change in its own sign (a drop is negative)."""
    return pct(stat.direction * stat.effect)


def describe_stat(stat: Stat) -> str:
    return f"{move(stat)} z {stat.z:.1f} size {stat.snr:.1f}"


def strongest(stats: Mapping[str, Stat | None], shown: int = SHOWN) -> list[tuple[str, Stat]]:
    """The slices with the largest z (ties by name), as printed."""
    found = [(s, st) for s, st in stats.items() if st is not None]
    return sorted(found, key=lambda kv: (-kv[1].z, kv[0]))[:shown]


def slice_stats(
    scan_name: str, cause: str, rows: Rows, slices: Sequence[str] | None = None
) -> dict[str, Stat | None]:
    """Every candidate slice's footprint: ``slices`` if given, else every slice the cause may
    take over the levels present in the rows."""
    dims = SCANS[scan_name][0]
    if slices is None:
        levels = {}
        for lab, _ in rows:
            for d in dims:
                if lab.get(d) not in ("", "NULL", None):
                    levels.setdefault(d, set()).add(lab[d])
        slices = candidate_slices(cause, {d: tuple(sorted(v)) for d, v in levels.items()})
    return {s: slice_stat(scan_name, cause, s, rows) for s in slices}


def scan(
    rows: list[dict[str, str]], scan_name: str, tests: int, slices: Sequence[str] | None = None
) -> None:
    """Print each cause's strongest slices and the z a slice needs (one-sided Bonferroni over
    ``tests`` hypotheses); ``slices``: the candidates where a record narrowed them."""
    dims, footprints = SCANS[scan_name]
    lab = labeled(rows, dims)
    for cause in footprints:
        best = strongest(slice_stats(scan_name, cause, lab, slices))
        shown = "; ".join(f"{s} {describe_stat(st)}" for s, st in best) or "no slice to read"
        print(f"{cause}: {shown}")
    print(f"z needed over {tests} tests: {scan_threshold(tests):.1f}")


# -- a hypothesis's check: its share of each paged alert, and its signature where it acts -----
def pivot(rows: list[dict[str, str]], keys: Sequence[str]) -> Rows:
    """Rows with a ``period`` column become one row per key with ``<column>_<period>``."""
    merged = {}
    for row in rows:
        key = tuple(row.get(k, "") for k in keys)
        _, values = merged.setdefault(key, ({k: row.get(k, "") for k in keys}, {}))
        period = row.get("period", "")
        for col, value in row.items():
            if col not in keys and col != "period":
                values[f"{col}_{period}"] = num(value)
    return list(merged.values())


def in_region(region: Mapping[str, Sequence[str]]) -> Pred:
    """``{column: [values]}``: a row is in the hypothesis's region when each column holds one
    of its values (the check's flags, or the campaigns an ad or a placement serves in)."""
    return lambda lab: all(lab.get(k) in values for k, values in region.items())


def alert_shares(
    rows: Rows, region: Mapping[str, Sequence[str]], alerts: Sequence[Alert], weeks_before: int = 3
) -> dict[int, float]:
    """Each paged alert's share that the region accounts for; ``alerts``: (kpi, campaign or
    None, current, baseline) as the page prints them. An alert with no control is left out."""
    inside = in_region(region)
    out = {}
    for i, (kpi, campaign, current, baseline, *_) in enumerate(alerts):
        num_col, den_col = KPI_COLUMNS[kpi]
        scope = (
            (lambda lab: True)
            if campaign is None
            else (lambda lab, c=campaign: lab["campaign"] == c)
        )
        move = current / baseline - 1.0 if baseline else None
        share = alert_share(rows, scope, inside, num_col, den_col, weeks_before, move)
        if share is not None:
            out[i] = share
    return out


def share_text(share: float) -> str:
    if share >= 2:
        return "far more than all"
    if share < 0:
        return "none (it moved the other way)"
    return f"{100 * share:.0f}%"


def cpc_stat(rows: Rows, inside: Pred, out: Pred) -> Stat | None:
    """Cost per click in the segment against each row's own CPC before, relative to the rest
    (cost is money: its noise is read off clicks, with a per-click spread of about a half)."""

    def oe(keep):
        obs = tot(rows, keep, "cost_now")
        exp = sum(
            v.get("clicks_now", 0.0) * v["cost_before"] / v["clicks_before"]
            for lab, v in rows
            if keep(lab) and v.get("clicks_before", 0.0) > 0
        )
        return obs, exp, tot(rows, keep, "clicks_now")

    o_in, e_in, c_in = oe(inside)
    o_out, e_out, c_out = oe(out)
    if e_in <= 0 or e_out <= 0 or c_in < 5 or c_out < 5:
        return None
    effect = math.log(o_in / e_in) - math.log(o_out / e_out)
    var = 2.0 * 0.25 * (1 / c_in + 1 / c_out)
    day = 2.0 * 0.25 * 7 / c_in
    return Stat(effect, effect / math.sqrt(var), effect / max(math.sqrt(day), PRACTICAL_LOG))


def expected_rate(
    rows: Rows, inside: Pred, out: Pred, num_col: str, den_col: str, direction: int
) -> Stat | None:
    def oe(keep):
        exp = sum(
            v.get(f"{den_col}_now", 0.0) * v[f"{num_col}_before"] / v[f"{den_col}_before"]
            for lab, v in rows
            if keep(lab) and v.get(f"{den_col}_before", 0.0) > 0
        )
        return tot(rows, keep, f"{num_col}_now"), exp

    o_in, e_in = oe(inside)
    o_out, e_out = oe(out)
    return oe_stat(o_in, e_in, o_out, e_out, direction)


def check_signature(cause: str, rows: Rows, region: Mapping[str, Sequence[str]]) -> Stat | None:
    """The cause's footprint where it acts: an edit's segment (``in_slice``) against the rest
    (more volume AND dearer clicks for a bid raise; more clicks AND fewer conversions per click
    for a widened targeting), or a flagged ad against its siblings in the region."""

    def share(keep, other, col, direction):
        return share_stat(
            tot(rows, keep, f"{col}_before"), tot(rows, keep, f"{col}_now"),
            tot(rows, other, f"{col}_before"), tot(rows, other, f"{col}_now"), direction,
        )  # fmt: skip

    inside = in_region({"in_slice": ["True"]})
    out = lambda lab: not inside(lab)  # noqa: E731
    if cause == "BID_MODIFIER_CHANGE":
        return Stat.weakest(share(inside, out, "impressions", +1), cpc_stat(rows, inside, out))
    if cause == "TARGETING_EXPANSION":
        rate = expected_rate(rows, inside, out, "conversions", "clicks", -1)
        return Stat.weakest(share(inside, out, "clicks", +1), rate)
    if cause == "AD_DISAPPROVAL":
        area = in_region(region)
        ad = lambda lab: lab.get("is_ad") == "True" and area(lab)  # noqa: E731
        sib = lambda lab: lab.get("is_ad") != "True" and area(lab)  # noqa: E731
        return share(ad, sib, "impressions", -1)
    return None


def signature_text(cause: str, stat: Stat) -> str:
    """The signature's reading as the row prints it and the narration quotes it."""
    if cause == "AD_DISAPPROVAL":
        return f"the ad's share of its ad groups moved {move(stat)} (z {stat.z:.1f})"
    return f"the signature on the edited segment reads {move(stat)} (z {stat.z:.1f})"


def shares(
    rows: list[dict[str, str]],
    keys: Sequence[str],
    region: Mapping[str, Sequence[str]],
    alerts: Sequence[Alert],
    cause: str | None = None,
) -> None:
    """Print a hypothesis's share of each paged alert and, for an edit or an ad, its
    signature (``rows``: the check's query, one row per key and period)."""
    rows = pivot(rows, keys)
    found = alert_shares(rows, region, alerts)
    for i, (kpi, campaign, *_) in enumerate(alerts):
        where = f"campaign {campaign}" if campaign else "the account"
        part = share_text(found[i]) if i in found else "no control to compare with"
        print(f"{kpi} for {where}: the region accounts for {part} of the paged move")
    stat = check_signature(cause, rows, region) if cause else None
    if stat is not None:
        print(signature_text(cause, stat))


# -- account-wide readings: a daily series against its weekday's usual level ------------------
def _days(rows: list[dict[str, str]]) -> tuple[dict[str, str] | None, list[dict[str, str]]]:
    base = next((r for r in rows if r.get("day") == "baseline"), None)
    days = [r for r in rows if r.get("day") not in (None, "baseline")]
    return (base, days) if base is not None and len(days) >= 2 else (None, days)


def account_reading(
    rows: list[dict[str, str]], tests: int, alerts: Sequence[Alert], now_start: str
) -> dict[str, Any] | None:
    """Lost to budget, lost to rank and CPC, each scanned for an onset (Bonferroni over the
    hypotheses and the onsets); the share of each paged move each cause of the read size makes:
    volume lost over a volume alert's drop; the CPC rise over a cost-per-conversion rise; the
    ROAS it costs over a ROAS drop. None: too few days."""
    base, days = _days(rows)
    if base is None:
        return None
    n_base = int(num(base["days"]))

    def scan_of(name, scale, floor):
        series = [num(r[f"{name}_vs_weekday"]) / scale for r in days]
        return onset_scan(series, num(base[f"{name}_sd"]) / scale, n_base, floor, +1)

    budget, at_budget = scan_of("budget", 100, PRACTICAL_SHARE)
    rank, at_rank = scan_of("rank", 100, PRACTICAL_SHARE)
    cpc, _ = scan_of("cpc", 1, PRACTICAL_LOG)
    week = [r for r in days if r["day"] >= now_start] or days
    served = max(1 - (num(base["lost_budget_pct"]) + num(base["lost_rank_pct"])) / 100, 0.05)

    def mean(col):
        return sum(num(r[col]) for r in week) / len(week)

    moves = {
        "budget_loss": mean("budget_vs_weekday") / 100 / served,
        "rank_loss": mean("rank_vs_weekday") / 100 / served,
        "cpc_rise": math.exp(mean("cpc_vs_weekday")) - 1,
    }
    # Competition needs both footprints: lost rank alone also rises under a bid or targeting
    # change and under the account's background.
    stats = {"BUDGET_CAP": budget, "COMPETITIVE_PRESSURE": Stat.weakest(rank, cpc)}
    shares = {}
    for cause in stats:
        out = {}
        for i, (kpi, _, _, _, _, pct_moved) in enumerate(alerts):
            moved = pct_moved / 100
            size = 0.0
            if compatible(cause, kpi) and moved > 0:
                if kpi in ("clicks", "conversions", "conversion_value", "cost"):
                    size = moves["budget_loss" if cause == "BUDGET_CAP" else "rank_loss"]
                elif kpi == "cost_per_conversion":
                    size = moves["cpc_rise"]
                elif kpi == "roas":
                    size = 1 - 1 / (1 + max(moves["cpc_rise"], -0.5))
            out[i] = size / moved if moved > 0 else 0.0
        shares[cause] = out
    return {
        "base": base, "days": days, "budget": budget, "rank": rank, "cpc": cpc,
        "at_budget": at_budget, "at_rank": at_rank, "stats": stats, "shares": shares,
        "threshold": scan_threshold(tests + len(days) - 2),
    }  # fmt: skip


def _z(stat: Stat | None) -> str:
    return f"z {stat.z:.1f}" if stat is not None else "no reading"


def _points(stat: Stat | None) -> str:
    return f"{100 * stat.effect:+.1f} points" if stat is not None else "no change"


def _share_list(shares: Mapping[int, float], alerts: Sequence[Alert]) -> str:
    return ", ".join(f"{alerts[i][0]} {share_text(v)}" for i, v in sorted(shares.items()))


def account_sentences(reading: Mapping[str, Any], alerts: Sequence[Alert]) -> list[str]:
    r = reading
    base, days, cpc = r["base"], r["days"], r["cpc"]
    b, k = days[r["at_budget"]], days[r["at_rank"]]
    out = [
        f"Against each weekday's usual level: lost to budget {base['lost_budget_pct']}% usually, "
        f"{b['budget_vs_weekday']} points on {b['day']} and {_points(r['budget'])} from then on "
        f"({_z(r['budget'])}); lost to rank {base['lost_rank_pct']}% usually, "
        f"{k['rank_vs_weekday']} points on {k['day']} and {_points(r['rank'])} from then on "
        f"({_z(r['rank'])}); CPC {base['cpc']} usually, {pct(cpc.effect) if cpc else '+0%'} at "
        f"its most ({_z(cpc)}); {r['threshold']:.1f} needed."
    ]
    for cause, shares in r["shares"].items():
        out.append(
            f"Over the alert week, {cause} at that size would account for "
            f"{_share_list(shares, alerts)} of the paged moves."
        )
    return out


def account(
    rows: list[dict[str, str]], tests: int, alerts: Sequence[Alert], now_start: str
) -> None:
    """Print the account-wide reading (:func:`account_reading`)."""
    r = account_reading(rows, tests, alerts, now_start)
    if r is None:
        print("too few days")
        return
    for name, at in (("budget", r["at_budget"]), ("rank", r["at_rank"])):
        stat = r[name]
        if stat is not None:
            day = r["days"][at]["day"]
            print(f"lost to {name}: {100 * stat.effect:+.1f} points from {day}, z {stat.z:.1f}")
    if r["cpc"] is not None:
        print(f"cpc: {pct(r['cpc'].effect)} at its most, z {r['cpc'].z:.1f}")
    print(f"z needed: {r['threshold']:.1f}")
    for cause, found in r["shares"].items():
        print(cause, {alerts[i][0]: share_text(v) for i, v in found.items()})


def demand_reading(
    rows: list[dict[str, str]], tests: int, alerts: Sequence[Alert], now_start: str
) -> dict[str, Any] | None:
    """Eligible auctions scanned for the onset of a drop; the alert week's drop over each
    adverse volume alert's move is the share demand accounts for. None: too few days."""
    base, days = _days(rows)
    if base is None:
        return None
    residuals = [num(r["vs_weekday"]) for r in days]
    stat, onset = onset_scan(
        residuals, num(base["robust_sd"]), int(num(base["days"])), PRACTICAL_LOG, -1
    )
    week = [num(r["vs_weekday"]) for r in days if r["day"] >= now_start]
    drop = 1 - math.exp(sum(week) / max(len(week), 1))
    shares = {}
    for i, (kpi, _, _, _, direction, pct_moved) in enumerate(alerts):
        moved = pct_moved / 100
        adverse = compatible("DEMAND_SHIFT", kpi) and direction == "down"
        shares[i] = drop / moved if adverse and moved > 0 else 0.0
    return {
        "base": base, "days": days, "stat": stat, "onset": onset, "drop": drop,
        "shares": shares, "threshold": scan_threshold(tests + len(days) - 2),
    }  # fmt: skip


def demand_sentences(reading: Mapping[str, Any], alerts: Sequence[Alert]) -> list[str]:
    r = reading
    stat, day = r["stat"], r["days"][r["onset"]]
    z = stat.z if stat is not None else 0.0
    level = pct(-stat.effect) if stat is not None else "+0%"
    return [
        f"Against their weekday's usual level (a day's spread {r['base']['robust_sd']} in logs), "
        f"eligible auctions read {day['vs_weekday']} on {day['day']} and run {level} from then "
        f"on (z {z:.1f} at that onset; {r['threshold']:.1f} needed); the alert week as a whole "
        f"runs {100 * -r['drop']:+.0f}% against usual.",
        f"Demand alone would account for {_share_list(r['shares'], alerts)} of the paged moves.",
    ]


def demand(rows: list[dict[str, str]], tests: int, alerts: Sequence[Alert], now_start: str) -> None:
    """Print the demand reading (:func:`demand_reading`)."""
    r = demand_reading(rows, tests, alerts, now_start)
    if r is None:
        print("too few days")
        return
    if r["stat"] is not None:
        day = r["days"][r["onset"]]["day"]
        print(f"eligible: {pct(-r['stat'].effect)} from {day}, z {r['stat'].z:.1f}")
    print(f"z needed: {r['threshold']:.1f}; alert week {100 * -r['drop']:+.0f}%")
    print("DEMAND_SHIFT", {alerts[i][0]: share_text(v) for i, v in r["shares"].items()})


def q(sql: str) -> list[dict[str, str]]:
    """Run ``sql`` through DuckDB over the namespace's tables, print its rows separated by ``|``
    (numbers to ten significant digits, as the sql tool prints them; unpadded, so a row of the
    SFT set pays fewer tokens for a table; not commas, which read as thousands separators) and
    a row count, and return the rows as printed."""
    import csv
    import io

    import duckdb

    text = duckdb.sql(sql).df().to_csv(index=False, sep="|", float_format="%.10g")
    print(f"{text}({text.count(chr(10)) - 1} rows)")
    return list(csv.DictReader(io.StringIO(text), delimiter="|"))


def result_rows(text: str) -> list[dict[str, str]]:
    """The rows of a result as the host reads them: a ``q`` cell's CSV (up to its row count),
    or the sql tool's table."""
    lines = text.splitlines()
    if len(lines) > 1 and set(lines[1]) <= set("-+") and lines[1]:
        return parse_table(text)
    end = next((i for i, line in enumerate(lines) if re.fullmatch(r"\(\d+ rows\)", line)), None)
    if end is None:
        return []
    return list(csv.DictReader(io.StringIO("\n".join(lines[:end])), delimiter="|"))


# -- shipping it -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Statement:
    """One top-level statement of the bundle, as a cell writes it."""

    source: str
    defines: frozenset[str]
    entry: tuple[str, str] | None  # (registry, key) of ``REGISTRY["key"] = ...``
    reads: frozenset[str]

    @property
    def names(self) -> frozenset[str]:
        """What the row holds once it ran: the names it binds, or its registry entry."""
        if self.entry is None:
            return self.defines
        registry, key = self.entry
        return frozenset({f"{registry}[{key!r}]"})


_HEADER = "<imports>"
_HEADER_STATEMENTS = 4  # the bundle's header: its imports (see notebook_source)
_BUNDLED = (num, conditions, candidate_slices, compatible)
# Host-only names, and type aliases (annotations are dropped in the row).
_HOST_ONLY = {
    "notebook_source", "_compact", "_BUNDLED", "_HOST_ONLY", "Row", "Rows", "Pred", "Labels",
    "Alert", "result_rows", "Statement", "_HEADER", "_HEADER_STATEMENTS", "_statements",
    "_defined_by", "notebook_cell", "_free_names", "_bound_in",
    "account_sentences", "demand_sentences", "_share_list", "_points", "_z",
}  # fmt: skip


@functools.cache
def _statements() -> tuple[Statement, ...]:
    """The bundle as top-level statements, each with what it defines and what it reads."""
    out = []
    for i, node in enumerate(ast.parse(notebook_source()).body):
        defines, entry = _defined_by(node)
        reads = _free_names(node) - defines
        if i < _HEADER_STATEMENTS:
            defines = {_HEADER}  # the imports come with the row's first cell
        out.append(Statement(ast.unparse(node), frozenset(defines), entry, frozenset(reads)))
    return tuple(out)


def _free_names(node: ast.AST, bound: frozenset[str] = frozenset()) -> set[str]:
    """The global names ``node`` reads: a function's parameters and the names its body binds
    are its own (a local ``shares`` is not the function ``shares``); defaults and decorators
    are read in the enclosing scope."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = node.args
        params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
        params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        body = [node.body] if isinstance(node, ast.Lambda) else node.body
        outer = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
        outer += getattr(node, "decorator_list", [])
        inner = bound | params | _bound_in(body)
        free = set().union(*(_free_names(d, bound) for d in outer))
        return free.union(*(_free_names(stmt, inner) for stmt in body))
    if isinstance(node, ast.Name):
        return {node.id} if isinstance(node.ctx, ast.Load) and node.id not in bound else set()
    return set().union(*(_free_names(child, bound) for child in ast.iter_child_nodes(node)))


def _bound_in(body: Sequence[ast.AST]) -> frozenset[str]:
    """Names a function body binds in its own scope (not inside functions it defines)."""
    out, todo = set(), list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            out.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
            continue
        elif isinstance(node, ast.Lambda):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return frozenset(out)


def _defined_by(node: ast.stmt) -> tuple[set[str], tuple[str, str] | None]:
    """The names a top-level statement binds, and for ``REGISTRY["key"] = ...`` the entry."""
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return {node.name}, None
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    names, entry = set(), None
    for target in targets:
        if isinstance(target, ast.Name):
            names.add(target.id)
        elif (
            isinstance(target, ast.Subscript)
            and isinstance(target.value, ast.Name)
            and isinstance(target.slice, ast.Constant)
        ):
            entry = (target.value.id, str(target.slice.value))
    return names, entry


def notebook_cell(code: str, defined: frozenset[str] = frozenset()) -> tuple[str, frozenset[str]]:
    """``code`` preceded by the worksheet's definitions it needs that the row has not made yet
    (``defined``: what earlier cells defined), and what the row has defined after it.

    A row is imitated token by token: defining all of the worksheet in the first call (about
    6,800 tokens) taught a model to recite code it never runs. Each cell instead defines what
    it calls, and what that calls, in the module's order, before its own lines. A registry
    entry (``SCANS["site"] = ...``) is defined when the cell names its key (``scan(rows,
    "site", 5)``), since the lookup is by string."""
    tree = ast.parse(code)
    need = _free_names(tree) | {_HEADER}
    keys = {str(n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    statements = _statements()
    chosen: set[int] = set()
    grew = True
    while grew:  # what the cell calls, and what that calls, defined before or not
        grew = False
        for i, st in enumerate(statements):
            if i not in chosen and (
                st.defines & need
                if st.entry is None
                else st.entry[0] in need and st.entry[1] in keys
            ):
                chosen.add(i)
                need |= st.reads
                grew = True
    made = [st for i, st in enumerate(statements) if i in chosen and not st.names <= defined]
    now = defined.union(*(st.names for st in made))
    return "\n".join([*(st.source for st in made), code]), now


def notebook_source() -> str:
    """The python source the teacher's first python call runs: the stats and this module, with
    what they take from the package written out (the namespace cannot import it), compacted
    (docstrings, comments and function annotations dropped: a row pays for every token)."""
    header = (
        "from __future__ import annotations\nimport math\n"
        "from dataclasses import dataclass\nfrom statistics import NormalDist\n"
        f"SLICE_DIMS = {SLICE_DIMS!r}\nALLOWED = {ALLOWED!r}\nKPI_COLUMNS = {KPI_COLUMNS!r}\n"
        f"KPI_EFFECT = {KPI_EFFECT!r}\nADVERSE = {ADVERSE!r}"
    )
    sources = [inspect.getsource(fn) for fn in _BUNDLED]
    sources += [inspect.getsource(sys.modules[m]) for m in (Stat.__module__, __name__)]
    return "\n".join([header, *(_compact(s) for s in sources)])


def _compact(source: str) -> str:
    """Top-level definitions of ``source`` without imports, docstrings, comments and function
    annotations (a dataclass keeps its field annotations: they are its fields)."""
    tree = ast.parse(source)
    keep = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the module docstring
        names = {getattr(node, "name", None)}
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {getattr(t, "id", None) for t in targets}
        if names & _HOST_ONLY:
            continue
        for sub in ast.walk(node):
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                sub.returns = None
                for arg in (*sub.args.posonlyargs, *sub.args.args, *sub.args.kwonlyargs):
                    arg.annotation = None
                for arg in (sub.args.vararg, sub.args.kwarg):
                    if arg is not None:
                        arg.annotation = None
            if isinstance(sub, (ast.FunctionDef, ast.ClassDef)) and sub.body:
                first = sub.body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                    sub.body = sub.body[1:] or [ast.Pass()]
        keep.append(node)
    return ast.unparse(ast.Module(body=keep, type_ignores=[]))
