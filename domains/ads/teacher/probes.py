"""The teacher's queries as probes of its hypotheses: what each covers, and how its rows move
the belief.

A probe's ``read`` turns the rows into signature statistics for the hypotheses it covers (host
arithmetic, :mod:`.stats`), enters them into the :class:`~.belief.Belief`, and returns a
:class:`Finding`: the sentences of the interpretation, each quoting numbers exactly as the
result printed them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from causaltrace.agents.result_tables import num, parse_table
from causaltrace_domains.ads.teacher.belief import RELEVANT, Belief, Hypothesis
from causaltrace_domains.ads.teacher.page import Page
from causaltrace_domains.ads.teacher.queries import Sql
from causaltrace_domains.ads.teacher.signatures import (
    EDIT_KIND,
    KPI_COLUMNS,
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

# A bid adjustment the cause makes raises the segment's bids by 80% or more (its prior); the
# account's everyday adjustments are 10-25% either way. An edit of at least this size is one
# the cause could have made.
BID_MIN_CHANGE = 50
# The log shows such an edit whenever its cause is at work, and otherwise only when a twin was
# drawn (about one episode in three per kind): seeing one multiplies the cause's odds.
EDIT_EVIDENCE = 3.0
WIDENING_FIELDS = (
    "location_options",
    "audience_setting",
    "optimized_targeting",
    "final_url_expansion",
)
REFINE_TOP = 4
PLACEMENT_DRIFT = 2.0  # hypotheses per cause whose parents and children are weighed

Labels = Mapping[str, str]
Values = dict[str, float]


@dataclass
class Finding:
    """What one result said: sentences quoting its numbers, and which hypotheses it moved."""

    sentences: list[str] = field(default_factory=list)
    strengthened: list[Hypothesis] = field(default_factory=list)
    weakened: list[str] = field(default_factory=list)  # causes or hypotheses, as text


@dataclass
class State:
    """What the teacher has learned besides the belief (edits, ad statuses, serving)."""

    edits: dict[Hypothesis, list[dict[str, str]]] = field(default_factory=dict)
    ad_campaign: dict[str, str] = field(default_factory=dict)
    serving: dict[str, set[str]] = field(default_factory=dict)  # placement -> campaigns
    other_edits: list[dict[str, str]] = field(default_factory=list)
    run: set[str] = field(default_factory=set)


def _fmt(x: float, digits: int = 1) -> str:
    return f"{x:.{digits}f}"


def _pct(effect: float) -> str:
    """A log effect as a percentage change."""
    return f"{100 * (math.exp(effect) - 1):+.0f}%"


def _labeled(rows: list[dict[str, str]], dims: tuple[str, ...]) -> list[tuple[Labels, Values]]:
    out = []
    for row in rows:
        labels = {d: row.get(d, "") for d in dims}
        values = {k: num(v) for k, v in row.items() if k not in dims}
        out.append((labels, values))
    return out


def _matcher(slice_text: str) -> Callable[[Labels], bool]:
    conds = conditions(slice_text)
    return lambda lab: all(lab.get(d) == v for d, v in conds)


def _llr(stat: Stat | None, threshold: float) -> float:
    """Evidence for the hypothesis against "no anomaly": a z at the query's scan threshold
    ties; a move practically too small cannot win."""
    if stat is None:
        return -0.5 * threshold**2
    llr = 0.5 * (max(stat.z, 0.0) ** 2 - threshold**2)
    if stat.snr < 1.0:
        llr = min(llr, -0.1)
    return llr


class Probe:
    """A query and what it covers. Subclasses set ``name``, ``causes`` and ``resolution``."""

    name = ""
    causes: tuple[str, ...] = ()
    resolution = 1.0
    tool = "sql"

    def available(self, state: State) -> bool:
        return self.name not in state.run

    def covered(self, belief: Belief, state: State) -> list[Hypothesis]:
        return [h for c in self.causes for h in belief.hypotheses(c)]

    def query(self, sql: Sql, state: State) -> str:
        raise NotImplementedError

    def read(self, text: str, belief: Belief, state: State, page: Page) -> Finding:
        raise NotImplementedError


# -- scans of a signature over every slice -----------------------------------------------------
class SliceScan(Probe):
    """A query grouped by the slice dimensions; each hypothesis's statistic sums its rows."""

    dims: tuple[str, ...] = ()

    def statistic(self, cause: str, rows, inside, outside) -> Stat | None:
        raise NotImplementedError

    def rows_for(self, slice_text: str, rows):
        """The rows that partition the slice's cells (a query with grouping sets has one set
        per slice shape)."""
        return rows

    def read(self, text, belief, state, page):
        rows = _labeled(parse_table(text), self.dims)
        covered = [h for h in self.covered(belief, state) if h.slice]
        threshold = belief.threshold
        stats: dict[Hypothesis, Stat | None] = {}
        for h in covered:
            mine = self.rows_for(h.slice, rows)
            inside = _matcher(h.slice)
            if not any(inside(lab) for lab, _ in mine):
                belief.cap(h, "no rows")
                continue
            stats[h] = self.statistic(h.cause, mine, inside, lambda lab, f=inside: not f(lab))
            belief.add(h, _llr(stats[h], threshold), stats[h])
        for cause in self.causes:
            best = sorted(
                (h for h in stats if h.cause == cause and stats[h] is not None),
                key=lambda h: -belief.readings[h].llr,
            )[:REFINE_TOP]
            for h in best:
                penalty = self.penalty(h, stats[h], rows)
                belief.add(h, belief.readings[h].llr - penalty, stats[h])
        return self.describe(rows, stats, belief, threshold)

    def penalty(self, h: Hypothesis, stat: Stat | None, rows) -> float:
        """The evidence against exactly this slice (the audit's oracle's rule): the rest of a
        parent should not move; the rest of the slice without one child should move as much."""
        if stat is None:
            return 0.0
        conds = conditions(h.slice)
        inside = _matcher(h.slice)
        penalty = 0.0
        if len(conds) == 2:
            for keep in conds:
                parent = _matcher(f"{keep[0]}={keep[1]}")
                rest = self.statistic(
                    h.cause,
                    self.rows_for(h.slice, rows),
                    lambda lab, p=parent: p(lab) and not inside(lab),
                    lambda lab, p=parent: not p(lab),
                )
                if rest is not None:
                    # Any footprint of the cause moving in the rest of the parent speaks
                    # against stopping at the child: a footprint diluted there (bots' CTR where
                    # humans click a lot) can be flat while the cause's own rate moves.
                    moved = max(max(part.z, 0.0) for part in rest.components())
                    penalty += 0.5 * moved**2
        worst = 0.0
        used = {d for d, _ in conds}
        for dim in self.dims:
            if dim in used:
                continue
            child_rows = self.rows_for(f"{h.slice}&{dim}=x", rows)
            levels = {lab[dim] for lab, _ in child_rows if inside(lab)} - {"", "NULL"}
            for level in sorted(levels):
                rest = self.statistic(
                    h.cause,
                    child_rows,
                    lambda lab, d=dim, v=level: inside(lab) and lab.get(d) != v,
                    lambda lab: not inside(lab),
                )
                if rest is None:
                    continue
                # Footprint by footprint: a child explains the slice only if in some footprint
                # the rest of the slice shows less than the slice's own effect.
                child = math.inf
                for mine, other in zip(stat.components(), rest.components()):
                    if other.z == 0 or other.effect == 0:
                        continue
                    se = other.effect / other.z
                    expected = max(mine.effect, 0.0) / se
                    child = min(child, expected * (0.5 * expected - other.z))
                if math.isfinite(child):
                    worst = max(worst, child)
        return penalty + worst

    def describe(self, rows, stats, belief, threshold) -> Finding:
        raise NotImplementedError


def _top(stats: Mapping[Hypothesis, Stat | None], belief: Belief, cause: str):
    found = [h for h in stats if h.cause == cause and stats[h] is not None]
    if not found:
        return None
    return max(found, key=lambda h: (belief.readings[h].llr, h.slice or ""))


def _verdict(
    h: Hypothesis | None, belief: Belief, threshold: float, cause: str
) -> tuple[bool, str]:
    if h is None:
        return False, f"{cause} has no slice with enough volume to read"
    stat = belief.readings[h].stat
    if stat is None or stat.z < threshold:
        z = 0.0 if stat is None else stat.z
        return False, f"{cause}: nothing beyond noise (best {h.slice}, z {z:.1f} < {threshold:.1f})"
    if stat.snr < 1.0:
        return False, (
            f"{cause}: {h.slice} moves {_pct(stat.effect)} (z {stat.z:.1f}), too little for a "
            "cause: everyday drift"
        )
    if belief.readings[h].llr <= 0:
        return False, (
            f"{cause}: {h.slice} moves {_pct(stat.effect)} (z {stat.z:.1f}), but a neighbouring "
            "slice explains it better"
        )
    return True, f"{cause} on {h.slice}: {_pct(stat.effect)} in its signature, z {stat.z:.1f}"


class SiteScan(SliceScan):
    """Conversions against backend orders (tracking) and backend orders (landing page)."""

    name = "site"
    causes = ("TRACKING_OUTAGE", "LANDING_PAGE_BREAK")
    dims = ("device", "browser_os", "geo")

    def query(self, sql, state):
        return sql.site()

    def statistic(self, cause, rows, inside, outside):
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
        # A broken page loses orders from the sessions that still arrive: orders fall against
        # the rest AND against the slice's own sessions (a drop in traffic moves only the first).
        return Stat.weakest(
            share_stat(ob_in, on_in, ob_out, on_out, -1),
            oe_stat(on_in, eo_in, on_out, eo_out, -1),
        )

    def describe(self, rows, stats, belief, threshold):
        f = Finding()
        for cause, what in (
            ("TRACKING_OUTAGE", "conversions against orders"),
            ("LANDING_PAGE_BREAK", "orders"),
        ):
            h = _top(stats, belief, cause)
            ok, text = _verdict(h, belief, threshold, cause)
            if ok:
                f.strengthened.append(h)
                f.sentences.append(text + f" ({what}).")
            else:
                f.weakened.append(cause)
                f.sentences.append(text + ".")
        lead = f.strengthened[0] if f.strengthened else _top(stats, belief, "TRACKING_OUTAGE")
        if lead is not None:
            inside = _matcher(lead.slice)
            mine = [r for r in rows if inside(r[0])]
            if mine:
                lab, v = max(mine, key=lambda r: r[1].get("orders_before", 0.0))
                where = "/".join(lab[d] for d in self.dims)
                f.sentences.insert(
                    0,
                    f"In {where}, conversions went {_raw(v, 'conv_before')} -> "
                    f"{_raw(v, 'conv_now')} and backend orders {_raw(v, 'orders_before')} -> "
                    f"{_raw(v, 'orders_now')} (three weeks before -> the alert week).",
                )
        return f


def _raw(values: Values, key: str) -> str:
    """A value as the sql tool printed it (numbers read back keep their text form)."""
    x = values.get(key, 0.0)
    return str(int(x)) if float(x).is_integer() else f"{x:.10g}"


class CreativeScan(SliceScan):
    """Each ad's clicks against what its own CTR before predicts, cell by cell (fatigue)."""

    name = "creatives"
    causes = ("CREATIVE_FATIGUE",)
    dims = ("creative", "device", "audience")

    def query(self, sql, state):
        return sql.creatives()

    def rows_for(self, slice_text, rows):
        by = "audience" if "audience=" in slice_text else "device"
        return [(lab, v) for lab, v in rows if lab.get(by) not in ("", "NULL")]

    def statistic(self, cause, rows, inside, outside):
        return oe_stat(
            sum(v["clicks_now"] for lab, v in rows if inside(lab)),
            sum(v["clicks_expected"] for lab, v in rows if inside(lab)),
            sum(v["clicks_now"] for lab, v in rows if outside(lab)),
            sum(v["clicks_expected"] for lab, v in rows if outside(lab)),
            -1,
        )

    def describe(self, rows, stats, belief, threshold):
        f = Finding()
        h = _top(stats, belief, "CREATIVE_FATIGUE")
        ok, text = _verdict(h, belief, threshold, "CREATIVE_FATIGUE")
        (f.strengthened.append(h) if ok else f.weakened.append("CREATIVE_FATIGUE"))
        f.sentences.append(text + (" (CTR)." if ok else "."))
        if h is not None:
            creative = dict(conditions(h.slice)).get("creative")
            mine = [
                r
                for r in rows
                if r[0].get("creative") == creative and r[0].get("device") not in ("", "NULL")
            ]
            if mine:
                lab, v = max(mine, key=lambda r: r[1].get("clicks_expected", 0.0))
                f.sentences.insert(
                    0,
                    f"{creative} on {lab['device']}: {_raw(v, 'clicks_now')} clicks in the alert "
                    f"week where its CTR before would give {_raw(v, 'clicks_expected')} "
                    f"(impressions {_raw(v, 'impressions_before')} -> {_raw(v, 'impressions_now')}).",
                )
        return f


class InvalidScan(SliceScan):
    """Invalid clicks per click and CTR, each against the cell's own rate before."""

    name = "invalid"
    causes = ("INVALID_TRAFFIC",)
    dims = ("placement", "geo")

    def query(self, sql, state):
        return sql.invalid()

    def statistic(self, cause, rows, inside, outside):
        def oe(obs, exp):
            return oe_stat(
                sum(v[obs] for lab, v in rows if inside(lab)),
                sum(v[exp] for lab, v in rows if inside(lab)),
                sum(v[obs] for lab, v in rows if outside(lab)),
                sum(v[exp] for lab, v in rows if outside(lab)),
                +1,
            )

        return Stat.weakest(
            oe("invalid_now", "invalid_expected"), oe("clicks_now", "clicks_expected")
        )

    def describe(self, rows, stats, belief, threshold):
        f = Finding()
        h = _top(stats, belief, "INVALID_TRAFFIC")
        ok, text = _verdict(h, belief, threshold, "INVALID_TRAFFIC")
        (f.strengthened.append(h) if ok else f.weakened.append("INVALID_TRAFFIC"))
        f.sentences.append(text + (" (invalid clicks and CTR both up)." if ok else "."))
        if h is not None:
            inside = _matcher(h.slice)
            mine = [r for r in rows if inside(r[0])]
            lab, v = max(mine, key=lambda r: r[1].get("invalid_expected", 0.0))
            f.sentences.insert(
                0,
                f"{lab['placement']} in {lab['geo']}: {_raw(v, 'invalid_now')} invalid clicks "
                f"against {_raw(v, 'invalid_expected')} expected, {_raw(v, 'clicks_now')} clicks "
                f"against {_raw(v, 'clicks_expected')}.",
            )
        return f


class PlacementScan(SliceScan):
    """Each placement's impressions against the other placements of the campaigns serving it."""

    name = "placements"
    causes = ("PLACEMENT_SHIFT",)
    dims = ("campaign", "placement")

    def query(self, sql, state):
        return sql.placements()

    def read(self, text, belief, state, page):
        rows = _labeled(parse_table(text), self.dims)
        for lab, v in rows:
            if v.get("impressions_before", 0) > 0:
                state.serving.setdefault(lab["placement"], set()).add(lab["campaign"])
        return super().read(text, belief, state, page)

    def statistic(self, cause, rows, inside, outside):
        campaigns = {
            lab["campaign"] for lab, v in rows if inside(lab) and v["impressions_before"] > 0
        }
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
        # Automatic placement drifts by itself from week to week: a share must move beyond
        # twice the usual floor to be read as a shift.
        z = min(stat.z, stat.effect / (PLACEMENT_DRIFT * MIN_SE))
        return Stat(stat.effect, z, min(stat.snr, stat.effect / (PLACEMENT_DRIFT * PRACTICAL_LOG)))

    def penalty(self, h, stat, rows):
        return 0.0  # 1D slices only, and no child dimension in the rows

    def describe(self, rows, stats, belief, threshold):
        f = Finding()
        h = _top(stats, belief, "PLACEMENT_SHIFT")
        ok, text = _verdict(h, belief, threshold, "PLACEMENT_SHIFT")
        (f.strengthened.append(h) if ok else f.weakened.append("PLACEMENT_SHIFT"))
        f.sentences.append(text + (" (its share of impressions)." if ok else "."))
        if h is not None:
            placement = dict(conditions(h.slice))["placement"]
            mine = [r for r in rows if r[0]["placement"] == placement]
            lab, v = max(mine, key=lambda r: r[1]["impressions_before"])
            f.sentences.insert(
                0,
                f"{placement} in {lab['campaign']}: impressions {_raw(v, 'impressions_before')} "
                f"over three weeks -> {_raw(v, 'impressions_now')} in the alert week.",
            )
        return f


class AccountScan(Probe):
    """Impression share lost to budget and to rank, and the CPC, per day against their
    weekday's usual level, each at the onset where it moved most: more lost to budget is a
    BUDGET_CAP; more lost to rank with dearer clicks is COMPETITIVE_PRESSURE (an ad that stops
    serving also loses rank, without raising what a click costs)."""

    name = "account"
    causes = ("BUDGET_CAP", "COMPETITIVE_PRESSURE")

    def query(self, sql, state):
        return sql.account()

    def read(self, text, belief, state, page):
        rows = parse_table(text)
        f = Finding()
        base = next((r for r in rows if r.get("day") == "baseline"), None)
        days = [r for r in rows if r.get("day") not in (None, "baseline")]
        if base is None or len(days) < 2:
            f.sentences.append("The impression-share report has too few days to compare.")
            return f
        n_base = int(num(base["days"]))

        def scan(name: str, scale: float, floor: float):
            series = [num(r[f"{name}_vs_weekday"]) / scale for r in days]
            return onset_scan(series, num(base[f"{name}_sd"]) / scale, n_base, floor, +1)

        budget, at_budget = scan("budget", 100, PRACTICAL_SHARE)
        rank, at_rank = scan("rank", 100, PRACTICAL_SHARE)
        cpc, _ = scan("cpc", 1, PRACTICAL_LOG)
        # Competition needs both footprints: lost rank alone also rises under a bid or
        # targeting change and under the account's background (read on ads_hard and
        # ads_expert: rank alone named 3 false second causes for 2 true ones it recovered).
        stats = {"BUDGET_CAP": budget, "COMPETITIVE_PRESSURE": Stat.weakest(rank, cpc)}
        # Bonferroni over the onsets scanned, in the family of every hypothesis's test.
        threshold = scan_threshold(len(belief.log_prior) + len(days) - 2)
        moves = _account_moves(base, days, page)
        for cause, stat in stats.items():
            h = Hypothesis(cause)
            belief.add(h, _llr(stat, threshold), stat)
            belief.set_shares(h, _account_shares(cause, moves, page))
            (f.strengthened.append(h) if belief.score(h) > 0 else f.weakened.append(cause))

        def z(stat: Stat | None) -> str:
            return f"z {stat.z:.1f}" if stat is not None else "no reading"

        f.sentences.append(
            f"Against each weekday's usual level: lost to budget {base['lost_budget_pct']}% "
            f"usually, {days[at_budget]['budget_vs_weekday']} points on "
            f"{days[at_budget]['day']} and {_points(budget)} from then on ({z(budget)}); lost to "
            f"rank {base['lost_rank_pct']}% usually, {days[at_rank]['rank_vs_weekday']} points "
            f"on {days[at_rank]['day']} and {_points(rank)} from then on ({z(rank)}); CPC "
            f"{base['cpc']} usually, {_pct(cpc.effect) if cpc else '+0%'} at its most "
            f"({z(cpc)}); {threshold:.1f} needed."
        )
        for cause in stats:
            shares = belief.readings[Hypothesis(cause)].shares
            parts = [f"{page.alerts[i].kpi} {_share_text(v)}" for i, v in sorted(shares.items())]
            f.sentences.append(
                f"Over the alert week, {cause} at that size would account for "
                f"{', '.join(parts)} of the paged moves."
            )
        return f


def _points(stat: Stat | None) -> str:
    return f"{100 * stat.effect:+.1f} points" if stat is not None else "no change"


def _alert_week(days: list[dict[str, str]], page: Page) -> list[dict[str, str]]:
    return [r for r in days if r["day"] >= str(page.windows.now_start)]


def _account_moves(
    base: Mapping[str, str], days: list[dict[str, str]], page: Page
) -> dict[str, float]:
    """What the alert week did to served volume and to the price of a click, against each
    weekday's usual level: impressions lost to budget and to rank, as fractions of what is
    usually served, and the relative rise of the CPC."""
    week = _alert_week(days, page) or days
    served = max(1 - (num(base["lost_budget_pct"]) + num(base["lost_rank_pct"])) / 100, 0.05)

    def mean(col: str) -> float:
        return sum(num(r[col]) for r in week) / len(week)

    return {
        "budget_loss": mean("budget_vs_weekday") / 100 / served,
        "rank_loss": mean("rank_vs_weekday") / 100 / served,
        "cpc_rise": math.exp(mean("cpc_vs_weekday")) - 1,
    }


def _account_shares(cause: str, moves: Mapping[str, float], page: Page) -> dict[int, float]:
    """The share of each paged move an account-wide cause of the read size accounts for:
    volume lost (to budget or to rank) over a volume alert's drop; for competition, the CPC
    rise over a cost-per-conversion rise (conversions per click unchanged) and the ROAS it
    costs over a ROAS drop. An alert the cause cannot move gets 0."""
    out = {}
    for i, alert in enumerate(page.alerts):
        moved = num(alert.pct) / 100
        size = 0.0
        if compatible(cause, alert.kpi) and moved > 0:
            if alert.kpi in ("clicks", "conversions", "conversion_value", "cost"):
                size = moves["budget_loss" if cause == "BUDGET_CAP" else "rank_loss"]
            elif alert.kpi == "cost_per_conversion":
                size = moves["cpc_rise"]
            elif alert.kpi == "roas":
                size = 1 - 1 / (1 + max(moves["cpc_rise"], -0.5))
        out[i] = size / moved if moved > 0 else 0.0
    return out


class DemandScan(Probe):
    """Eligible auctions per day against their weekday's usual level, at the onset where they
    drop most (DEMAND_SHIFT), and what that drop makes of each paged move: fewer auctions cost
    clicks, spend and conversions in proportion, so the alert week's drop over an alert's move
    is the share of it that demand accounts for."""

    name = "demand"
    causes = ("DEMAND_SHIFT",)

    def query(self, sql, state):
        return sql.demand()

    def read(self, text, belief, state, page):
        rows = parse_table(text)
        f = Finding()
        base = next((r for r in rows if r.get("day") == "baseline"), None)
        days = [r for r in rows if r.get("day") not in (None, "baseline")]
        h = Hypothesis("DEMAND_SHIFT")
        if base is None or len(days) < 2:
            f.sentences.append("The impression-share report has too few days to read demand.")
            return f
        residuals = [num(r["vs_weekday"]) for r in days]
        stat, onset = onset_scan(
            residuals, num(base["robust_sd"]), int(num(base["days"])), PRACTICAL_LOG, -1
        )
        # Bonferroni over the onsets scanned, in the family of every hypothesis's test.
        threshold = scan_threshold(len(belief.log_prior) + len(days) - 2)
        belief.add(h, _llr(stat, threshold), stat)
        week = [num(r["vs_weekday"]) for r in days if r["day"] >= str(page.windows.now_start)]
        drop = 1 - math.exp(sum(week) / max(len(week), 1))
        shares = {}
        for i, alert in enumerate(page.alerts):
            moved = num(alert.pct) / 100
            adverse = compatible("DEMAND_SHIFT", alert.kpi) and alert.direction == "down"
            shares[i] = drop / moved if adverse and moved > 0 else 0.0
        belief.set_shares(h, shares)
        z = stat.z if stat is not None else 0.0
        level = _pct(-stat.effect) if stat is not None else "+0%"
        f.sentences.append(
            f"Against their weekday's usual level (a day's spread {base['robust_sd']} in logs), "
            f"eligible auctions read {days[onset]['vs_weekday']} on {days[onset]['day']} and "
            f"run {level} from then on (z {z:.1f} at that onset; {threshold:.1f} needed); the "
            f"alert week as a whole runs {100 * -drop:+.0f}% against usual."
        )
        parts = [f"{page.alerts[i].kpi} {_share_text(v)}" for i, v in sorted(shares.items())]
        f.sentences.append(f"Demand alone would account for {', '.join(parts)} of the paged moves.")
        score = belief.score(h)
        (f.strengthened.append(h) if score > 0 else f.weakened.append("DEMAND_SHIFT"))
        return f


# -- records that narrow the hypotheses --------------------------------------------------------
class ChangeLog(Probe):
    """The edits: a budget cut, bid adjustment or widened targeting the cause would have made.

    Twins (the same edit that moved nothing) are here too, so the log narrows the hypotheses of
    the edit causes to the edited slices; only the metrics after each edit can tell them apart."""

    name = "changes"
    causes = tuple(EDIT_KIND)
    resolution = 0.6

    def query(self, sql, state):
        return sql.change_log()

    def read(self, text, belief, state, page):
        rows = parse_table(text)
        f = Finding()
        keep: dict[str, set[str | None]] = {c: set() for c in EDIT_KIND}
        groups: dict[tuple, list[dict[str, str]]] = {}
        for row in rows:
            kind = row.get("change_type")
            target = row.get("target", "")
            if kind == "budget":
                old, new = num(row.get("old_value")), num(row.get("new_value"))
                if 0 < new < old:
                    keep["BUDGET_CAP"].add(None)
                    state.edits.setdefault(Hypothesis("BUDGET_CAP"), []).append(row)
                else:
                    state.other_edits.append(row)
                continue
            if kind == "bid_modifier":
                change = re.fullmatch(r"([+-]\d+)%", row.get("new_value", ""))
                if change and int(change.group(1)) >= BID_MIN_CHANGE and "=" in target:
                    key = ("BID_MODIFIER_CHANGE", target, row.get("new_value"))
                    groups.setdefault(key, []).append(row)
                else:
                    state.other_edits.append(row)
                continue
            if kind == "targeting" and row.get("field") in WIDENING_FIELDS and "=" in target:
                groups.setdefault(("TARGETING_EXPANSION", _canon(target), ""), []).append(row)
                continue
            state.other_edits.append(row)
        for (cause, target, _), edit_rows in groups.items():
            # One edit written on every campaign serving the segment is a 1D slice; a bid
            # adjustment written on one campaign is that campaign's segment (the platform sets
            # adjustments per campaign; a 1D one reaches each manual campaign serving it).
            s = target
            if cause == "BID_MODIFIER_CHANGE" and len(edit_rows) == 1:
                two_d = _canon(f"campaign={edit_rows[0].get('campaign')}&{target}")
                if Hypothesis(cause, two_d) in belief.readings:
                    s = two_d
            keep[cause].add(s)
            state.edits.setdefault(Hypothesis(cause, s), []).extend(edit_rows)
        for cause, slices in keep.items():
            valid = {s for s in slices if Hypothesis(cause, s) in belief.readings}
            belief.restrict(cause, valid, boost=EDIT_EVIDENCE)
            if valid:
                f.strengthened += [Hypothesis(cause, s) for s in sorted(valid, key=str)]
            else:
                f.weakened.append(cause)
        described = []
        for _, edit_rows in sorted(state.edits.items()):
            row = edit_rows[0]
            campaigns = sorted({r.get("campaign", "") for r in edit_rows})
            described.append(
                f"{row.get('field')} {row.get('old_value')} -> {row.get('new_value')} on "
                f"{row.get('target')} ({', '.join(campaigns)}, {row.get('change_time', '')[:10]})"
            )
        if described:
            f.sentences.append(
                f"{len(rows)} edits that can move traffic; the ones a cause could be: "
                + "; ".join(described)
                + "."
            )
        else:
            f.sentences.append(
                f"{len(rows)} edits, none a budget cut, a large bid raise or a widened targeting."
            )
        others = [r for r in state.other_edits if r.get("change_type") in _NOTABLE]
        if others:
            r = others[0]
            f.sentences.append(
                f"Also {r.get('change_type')} {r.get('field')} {r.get('old_value') or '(none)'} -> "
                f"{r.get('new_value') or '(none)'} on {r.get('campaign') or 'the account'}: "
                "background that can move a KPI without a fault."
            )
        return f


_NOTABLE = ("asset", "billing", "campaign", "bidding", "conversions")


def _canon(slice_text: str) -> str:
    return "&".join(sorted(slice_text.split("&")))


class AdStatus(Probe):
    """Ads that are enabled but not fully approved: the only ones a disapproval can be."""

    name = "status"
    causes = ("AD_DISAPPROVAL",)
    resolution = 0.6

    def query(self, sql, state):
        return sql.ad_status()

    def read(self, text, belief, state, page):
        rows = parse_table(text)
        f = Finding()
        keep: set[str | None] = set()
        for row in rows:
            creative = row.get("creative", "")
            state.ad_campaign[creative] = row.get("campaign", "")
            if row.get("policy_status") == "disapproved":
                keep.add(f"creative={creative}")
            for h in belief.hypotheses("AD_DISAPPROVAL"):
                if h.slice and h.slice.startswith(f"creative={creative}&"):
                    keep.add(h.slice)
        belief.restrict("AD_DISAPPROVAL", keep)
        if rows:
            f.sentences.append(
                "Not fully approved: "
                + ", ".join(f"{r['creative']} ({r['policy_status']})" for r in rows)
                + "."
            )
            f.strengthened += [Hypothesis("AD_DISAPPROVAL", s) for s in sorted(keep, key=str)[:2]]
        else:
            f.sentences.append("Every enabled ad is approved (0 rows).")
            f.weakened.append("AD_DISAPPROVAL")
        return f


class DisapprovalScan(SliceScan):
    """The flagged ads' impressions against the other ads of their campaign, by geo: an ad
    that stops serving loses its share of its ad groups."""

    name = "ad_share"
    causes = ("AD_DISAPPROVAL",)
    dims = ("campaign", "creative", "geo")

    def available(self, state):
        return super().available(state) and "status" in state.run and bool(state.ad_campaign)

    def covered(self, belief, state):
        return [h for h in belief.hypotheses("AD_DISAPPROVAL") if belief.log_prior[h] > -math.inf]

    def query(self, sql, state):
        return sql.ad_share(sorted(set(state.ad_campaign.values())))

    def statistic(self, cause, rows, inside, outside):
        ads = {lab["creative"] for lab, _ in rows if inside(lab)}
        campaigns = {lab["campaign"] for lab, _ in rows if lab["creative"] in ads}
        geo = {lab["geo"] for lab, _ in rows if inside(lab)}
        narrow = len(geo) == 1 and len({lab["geo"] for lab, _ in rows}) > 1

        def ref(lab):
            same = lab["campaign"] in campaigns and not inside(lab)
            return same and (not narrow or lab["geo"] in geo)

        def tot(keep, col):
            return sum(v.get(col, 0.0) for lab, v in rows if keep(lab))

        return share_stat(
            tot(inside, "impressions_before"),
            tot(inside, "impressions_now"),
            tot(ref, "impressions_before"),
            tot(ref, "impressions_now"),
            -1,
        )

    def penalty(self, h, stat, rows):
        return 0.0

    def describe(self, rows, stats, belief, threshold):
        f = Finding()
        h = _top(stats, belief, "AD_DISAPPROVAL")
        ok, text = _verdict(h, belief, threshold, "AD_DISAPPROVAL")
        (f.strengthened.append(h) if ok else f.weakened.append("AD_DISAPPROVAL"))
        f.sentences.append(text + (" (its share of its ad groups)." if ok else "."))
        if h is not None:
            inside = _matcher(h.slice)
            mine = [r for r in rows if inside(r[0])]
            if mine:
                lab, v = max(mine, key=lambda r: r[1].get("impressions_before", 0.0))
                f.sentences.insert(
                    0,
                    f"{lab['creative']} in {lab['geo']}: impressions "
                    f"{_raw(v, 'impressions_before')} over three weeks -> "
                    f"{_raw(v, 'impressions_now')} in the alert week.",
                )
        return f


# -- checks of one hypothesis: its signature where it is targeted, and its share of the alerts --
def alert_columns(page: Page) -> list[str]:
    out: list[str] = []
    for alert in page.alerts:
        for c in KPI_COLUMNS[alert.kpi]:
            if c is not None and c not in out:
                out.append(c)
    return out


def pivot(rows: list[dict[str, str]], keys: tuple[str, ...]) -> list[tuple[Labels, Values]]:
    """Rows with a ``period`` column become one row per key with ``<column>_<period>``."""
    merged: dict[tuple, tuple[dict, Values]] = {}
    for row in rows:
        key = tuple(row.get(k, "") for k in keys)
        _, values = merged.setdefault(key, ({k: row.get(k, "") for k in keys}, {}))
        period = row.get("period", "")
        for col, value in row.items():
            if col not in keys and col != "period":
                values[f"{col}_{period}"] = num(value)
    return list(merged.values())


class Check(Probe):
    """One hypothesis: its share of each paged alert (and, for an edit or an ad, its signature
    on the edited segment), read per campaign so any alert's scope can be taken."""

    resolution = 1.0

    def __init__(self, h: Hypothesis):
        self.h = h
        self.name = f"check:{h.cause}:{h.slice}"

    def covered(self, belief, state):
        return [self.h]

    def flags(self, state: State) -> dict[str, str]:
        return {"in_slice": Sql.condition(self.h.slice)}

    def signature_columns(self) -> list[str]:
        return {
            "BID_MODIFIER_CHANGE": ["impressions", "clicks", "cost"],
            "TARGETING_EXPANSION": ["clicks", "conversions"],
            "AD_DISAPPROVAL": ["impressions"],
        }.get(self.h.cause, [])

    def region(self, state: State) -> Callable[[Labels], bool]:
        cause = self.h.cause
        if cause == "AD_DISAPPROVAL":
            creative = dict(conditions(self.h.slice))["creative"]
            campaign = state.ad_campaign.get(creative, "")
            if "&" in self.h.slice:
                return lambda lab: lab["campaign"] == campaign and lab.get("in_geo") == "True"
            return lambda lab: lab["campaign"] == campaign
        if cause == "PLACEMENT_SHIFT":
            placement = dict(conditions(self.h.slice))["placement"]
            serving = state.serving.get(placement, set())
            return lambda lab: lab["campaign"] in serving
        return lambda lab: lab.get("in_slice") == "True"

    def query(self, sql, state):
        self._page_columns = getattr(self, "_page_columns", [])
        columns = list(dict.fromkeys([*self.signature_columns(), *self._page_columns]))
        return sql.check(self.flags(state), columns, lag=True)

    def prepare(self, page: Page) -> None:
        self._page_columns = alert_columns(page)

    def read(self, text, belief, state, page):
        keys = ("campaign", *self.flags(state))
        rows = pivot(parse_table(text), keys)
        f = Finding()
        weeks = 3
        region = self.region(state)
        shares: dict[int, float] = {}
        for i, alert in enumerate(page.alerts):
            num_col, den_col = KPI_COLUMNS[alert.kpi]
            scope = (
                (lambda lab: True)
                if alert.campaign is None
                else (lambda lab, c=alert.campaign: lab["campaign"] == c)
            )
            share = alert_share(rows, scope, region, num_col, den_col, weeks, alert.move)
            if share is not None:
                shares[i] = share
        stat = self.signature(rows)
        if stat is not None:
            threshold = scan_threshold(max(len(state.edits), 1))
            belief.add(self.h, _llr(stat, threshold), stat)
        belief.set_shares(self.h, shares)
        inside = [r for r in rows if region(r[0])]
        if inside:
            lab, v = max(inside, key=lambda r: sum(r[1].values()))
            col = self._page_columns[0] if self._page_columns else next(iter(v))
            f.sentences.append(
                f"{lab['campaign']} in the hypothesis's region: {col} {_raw(v, col + '_before')} "
                f"over three weeks -> {_raw(v, col + '_now')} in the alert week."
            )
        if stat is not None:
            f.sentences.append(
                f"On the edited segment the signature reads {_pct(stat.effect)} (z {stat.z:.1f})."
                if self.h.cause in EDIT_KIND
                else f"The ad's share of its ad groups moved {_pct(-stat.effect)} (z {stat.z:.1f})."
            )
        parts = [f"{page.alerts[i].kpi} {_share_text(s)}" for i, s in sorted(shares.items())] or [
            "no alert it can be compared with"
        ]
        best = max(shares.values()) if shares else None
        relevant = best is not None and best >= RELEVANT and belief.score(self.h) > 0
        f.sentences.append(
            f"{self.h.text()} accounts for "
            + ", ".join(parts)
            + " of the paged move"
            + ("s." if len(parts) > 1 else ".")
        )
        (f.strengthened.append(self.h) if relevant else f.weakened.append(self.h.text()))
        return f

    def signature(self, rows) -> Stat | None:
        cause = self.h.cause
        inside = self.region_of_slice()

        def tot(keep, col):
            return sum(v.get(col, 0.0) for lab, v in rows if keep(lab))

        out = lambda lab: not inside(lab)  # noqa: E731
        if cause == "BID_MODIFIER_CHANGE":
            volume = share_stat(
                tot(inside, "impressions_before"),
                tot(inside, "impressions_now"),
                tot(out, "impressions_before"),
                tot(out, "impressions_now"),
                +1,
            )
            return Stat.weakest(volume, _cpc(rows, inside, out))
        if cause == "TARGETING_EXPANSION":
            volume = share_stat(
                tot(inside, "clicks_before"),
                tot(inside, "clicks_now"),
                tot(out, "clicks_before"),
                tot(out, "clicks_now"),
                +1,
            )
            return Stat.weakest(
                volume, _expected_rate(rows, inside, out, "conversions", "clicks", -1)
            )
        if cause == "AD_DISAPPROVAL":
            region = self._region
            ad = lambda lab: lab.get("is_ad") == "True" and region(lab)  # noqa: E731
            sib = lambda lab: lab.get("is_ad") != "True" and region(lab)  # noqa: E731
            return share_stat(
                tot(ad, "impressions_before"),
                tot(ad, "impressions_now"),
                tot(sib, "impressions_before"),
                tot(sib, "impressions_now"),
                -1,
            )
        return None

    def region_of_slice(self) -> Callable[[Labels], bool]:
        return lambda lab: lab.get("in_slice") == "True"


class DisapprovalCheck(Check):
    def flags(self, state):
        conds = dict(conditions(self.h.slice))
        out = {"is_ad": f"creative = '{conds['creative']}'"}
        if "geo" in conds:
            out["in_geo"] = f"geo = '{conds['geo']}'"
        return out

    def read(self, text, belief, state, page):
        self._region = self.region(state)
        return super().read(text, belief, state, page)


def _share_text(share: float) -> str:
    if share >= 2:
        return "far more than all"
    if share < 0:
        return "none (it moved the other way)"
    return f"{100 * share:.0f}%"


def _cpc(rows, inside, out) -> Stat | None:
    """Cost per click in the segment against each row's own CPC before, relative to the rest
    (cost is money: its noise is read off clicks, with a per-click spread of about a half)."""

    def oe(keep):
        obs = sum(v.get("cost_now", 0.0) for lab, v in rows if keep(lab))
        exp = sum(
            v.get("clicks_now", 0.0) * v["cost_before"] / v["clicks_before"]
            for lab, v in rows
            if keep(lab) and v.get("clicks_before", 0.0) > 0
        )
        clicks = sum(v.get("clicks_now", 0.0) for lab, v in rows if keep(lab))
        return obs, exp, clicks

    o_in, e_in, c_in = oe(inside)
    o_out, e_out, c_out = oe(out)
    if e_in <= 0 or e_out <= 0 or c_in < 5 or c_out < 5:
        return None
    effect = math.log(o_in / e_in) - math.log(o_out / e_out)
    var = 2.0 * 0.25 * (1 / c_in + 1 / c_out)
    day = 2.0 * 0.25 * 7 / c_in
    return Stat(effect, effect / math.sqrt(var), effect / max(math.sqrt(day), PRACTICAL_LOG))


def _expected_rate(rows, inside, out, num_col, den_col, direction) -> Stat | None:
    def oe(keep):
        obs = sum(v.get(f"{num_col}_now", 0.0) for lab, v in rows if keep(lab))
        exp = sum(
            v.get(f"{den_col}_now", 0.0) * v[f"{num_col}_before"] / v[f"{den_col}_before"]
            for lab, v in rows
            if keep(lab) and v.get(f"{den_col}_before", 0.0) > 0
        )
        return obs, exp

    o_in, e_in = oe(inside)
    o_out, e_out = oe(out)
    return oe_stat(o_in, e_in, o_out, e_out, direction)


def make_check(h: Hypothesis) -> Check:
    return DisapprovalCheck(h) if h.cause == "AD_DISAPPROVAL" else Check(h)


SCANS: tuple[type[Probe], ...] = (
    ChangeLog,
    AdStatus,
    DisapprovalScan,
    AccountScan,
    DemandScan,
    SiteScan,
    CreativeScan,
    InvalidScan,
    PlacementScan,
)
