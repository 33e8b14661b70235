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
from collections.abc import Mapping
from dataclasses import dataclass, field

from causaltrace.agents.result_tables import num
from causaltrace_domains.ads.teacher import worksheet
from causaltrace_domains.ads.teacher.belief import RELEVANT, Belief, Hypothesis
from causaltrace_domains.ads.teacher.page import Page
from causaltrace_domains.ads.teacher.queries import Sql
from causaltrace_domains.ads.teacher.signatures import (
    EDIT_KIND,
    KPI_COLUMNS,
    conditions,
)
from causaltrace_domains.ads.teacher.stats import (
    Stat,
    scan_threshold,
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
    defined: frozenset[str] = frozenset()  # the worksheet's names the row's cells defined


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

    def available(self, state: State) -> bool:
        return self.name not in state.run

    def covered(self, belief: Belief, state: State) -> list[Hypothesis]:
        return [h for c in self.causes for h in belief.hypotheses(c)]

    def query(self, sql: Sql, state: State) -> str:
        raise NotImplementedError

    @property
    def variable(self) -> str:
        return f"{self.name}_rows"  # never a table's name: the namespace holds the tables

    def cell(self, query: str, belief: Belief, state: State, page: Page) -> str:
        """The python call: the query run through the worksheet's ``q``, then the statistics
        the teacher will cite, computed from its rows (:mod:`.worksheet`)."""
        lines = [f'{self.variable} = q(r"""\n{query}\n""")', *self.worksheet(belief, state, page)]
        return "\n".join(lines)

    def worksheet(self, belief: Belief, state: State, page: Page) -> list[str]:
        return []

    def read(self, text: str, belief: Belief, state: State, page: Page) -> Finding:
        raise NotImplementedError


# -- scans of a signature over every slice -----------------------------------------------------
class SliceScan(Probe):
    """A query grouped by the slice dimensions; each hypothesis's statistic sums its rows."""

    dims: tuple[str, ...] = ()

    def statistic(self, cause: str, rows, inside, outside) -> Stat | None:
        return worksheet.SCANS[self.name][1][cause](cause, rows, inside, outside)

    def rows_for(self, slice_text: str, rows):
        """The rows that partition the slice's cells (a query with grouping sets has one set
        per slice shape)."""
        return worksheet.scan_rows(self.name, slice_text, rows)

    def worksheet(self, belief, state, page):
        return [f'scan({self.variable}, "{self.name}", {len(belief.log_prior)})']

    def read(self, text, belief, state, page):
        rows = worksheet.labeled(worksheet.result_rows(text), self.dims)
        covered = [h for h in self.covered(belief, state) if h.slice]
        threshold = belief.threshold
        stats: dict[Hypothesis, Stat | None] = {}
        for h in covered:
            mine = self.rows_for(h.slice, rows)
            inside = worksheet.matcher(h.slice)
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
        inside = worksheet.matcher(h.slice)
        penalty = 0.0
        if len(conds) == 2:
            for keep in conds:
                parent = worksheet.matcher(f"{keep[0]}={keep[1]}")
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
    h: Hypothesis | None,
    belief: Belief,
    threshold: float,
    cause: str,
    stats: Mapping[Hypothesis, Stat | None],
) -> tuple[bool, str]:
    """The reading of a cause's leading slice. Its numbers are quoted only where the cell
    printed them (``scan`` prints each cause's strongest slices by z; the leader by evidence,
    after the neighbouring slices are weighed, is nearly always among them)."""
    if h is None:
        return False, f"{cause} has no slice with enough volume to read"
    printed = worksheet.strongest({k.slice: v for k, v in stats.items() if k.cause == cause})
    stat = belief.readings[h].stat
    shown = stat is not None and h.slice in {s for s, _ in printed}
    reading = f"{worksheet.move(stat)} (z {stat.z:.1f})" if shown and stat else "a move"
    if stat is None or stat.z < threshold:
        if shown and stat:
            return False, (
                f"{cause}: nothing beyond noise (best {h.slice}, z {stat.z:.1f} < {threshold:.1f})"
            )
        return False, f"{cause}: nothing beyond noise"
    if stat.snr < 1.0:
        return False, f"{cause}: {h.slice} moves {reading}, too little for a cause: everyday drift"
    if belief.readings[h].llr <= 0:
        return False, (
            f"{cause}: {h.slice} moves {reading}, but a neighbouring slice explains it better"
        )
    if not shown:
        return True, f"{cause} on {h.slice}: its signature leads once its neighbours are weighed"
    return (
        True,
        f"{cause} on {h.slice}: its signature moved {worksheet.move(stat)}, z {stat.z:.1f}",
    )


class SiteScan(SliceScan):
    """Conversions against backend orders (tracking) and backend orders (landing page)."""

    name = "site"
    causes = ("TRACKING_OUTAGE", "LANDING_PAGE_BREAK")
    dims = ("device", "browser_os", "geo")

    def query(self, sql, state):
        return sql.site()

    def describe(self, rows, stats, belief, threshold):
        f = Finding()
        for cause, what in (
            ("TRACKING_OUTAGE", "conversions against orders"),
            ("LANDING_PAGE_BREAK", "orders"),
        ):
            h = _top(stats, belief, cause)
            ok, text = _verdict(h, belief, threshold, cause, stats)
            if ok:
                f.strengthened.append(h)
                f.sentences.append(text + f" ({what}).")
            else:
                f.weakened.append(cause)
                f.sentences.append(text + ".")
        lead = f.strengthened[0] if f.strengthened else _top(stats, belief, "TRACKING_OUTAGE")
        if lead is not None:
            inside = worksheet.matcher(lead.slice)
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

    def describe(self, rows, stats, belief, threshold):
        f = Finding()
        h = _top(stats, belief, "CREATIVE_FATIGUE")
        ok, text = _verdict(h, belief, threshold, "CREATIVE_FATIGUE", stats)
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

    def describe(self, rows, stats, belief, threshold):
        f = Finding()
        h = _top(stats, belief, "INVALID_TRAFFIC")
        ok, text = _verdict(h, belief, threshold, "INVALID_TRAFFIC", stats)
        (f.strengthened.append(h) if ok else f.weakened.append("INVALID_TRAFFIC"))
        f.sentences.append(text + (" (invalid clicks and CTR both up)." if ok else "."))
        if h is not None:
            inside = worksheet.matcher(h.slice)
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
        rows = worksheet.labeled(worksheet.result_rows(text), self.dims)
        for lab, v in rows:
            if v.get("impressions_before", 0) > 0:
                state.serving.setdefault(lab["placement"], set()).add(lab["campaign"])
        return super().read(text, belief, state, page)

    def penalty(self, h, stat, rows):
        return 0.0  # 1D slices only, and no child dimension in the rows

    def describe(self, rows, stats, belief, threshold):
        f = Finding()
        h = _top(stats, belief, "PLACEMENT_SHIFT")
        ok, text = _verdict(h, belief, threshold, "PLACEMENT_SHIFT", stats)
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


def _daily_args(belief: Belief, page: Page) -> tuple:
    """What a daily scan's reading takes besides its rows: the hypotheses tested (for the
    Bonferroni threshold), the page's alerts and the alert week's first day."""
    return len(belief.log_prior), _alert_args(page), str(page.windows.now_start)


class AccountScan(Probe):
    """Impression share lost to budget and to rank, and the CPC, per day against their
    weekday's usual level, each at the onset where it moved most: more lost to budget is a
    BUDGET_CAP; more lost to rank with dearer clicks is COMPETITIVE_PRESSURE (an ad that stops
    serving also loses rank, without raising what a click costs). The reading is the
    worksheet's (:func:`.worksheet.account_reading`), printed in the row."""

    name = "account"
    causes = ("BUDGET_CAP", "COMPETITIVE_PRESSURE")

    def query(self, sql, state):
        return sql.account()

    def worksheet(self, belief, state, page):
        return [f"account({self.variable}, {', '.join(map(repr, _daily_args(belief, page)))})"]

    def read(self, text, belief, state, page):
        f = Finding()
        reading = worksheet.account_reading(worksheet.result_rows(text), *_daily_args(belief, page))
        if reading is None:
            f.sentences.append("The impression-share report has too few days to compare.")
            return f
        for cause, stat in reading["stats"].items():
            h = Hypothesis(cause)
            belief.add(h, _llr(stat, reading["threshold"]), stat)
            belief.set_shares(h, reading["shares"][cause])
            (f.strengthened.append(h) if belief.score(h) > 0 else f.weakened.append(cause))
        f.sentences += worksheet.account_sentences(reading, _alert_args(page))
        return f


class DemandScan(Probe):
    """Eligible auctions per day against their weekday's usual level, at the onset where they
    drop most (DEMAND_SHIFT), and what that drop makes of each paged move
    (:func:`.worksheet.demand_reading`, printed in the row)."""

    name = "demand"
    causes = ("DEMAND_SHIFT",)

    def query(self, sql, state):
        return sql.demand()

    def worksheet(self, belief, state, page):
        return [f"demand({self.variable}, {', '.join(map(repr, _daily_args(belief, page)))})"]

    def read(self, text, belief, state, page):
        f = Finding()
        reading = worksheet.demand_reading(worksheet.result_rows(text), *_daily_args(belief, page))
        if reading is None:
            f.sentences.append("The impression-share report has too few days to read demand.")
            return f
        h = Hypothesis("DEMAND_SHIFT")
        belief.add(h, _llr(reading["stat"], reading["threshold"]), reading["stat"])
        belief.set_shares(h, reading["shares"])
        f.sentences += worksheet.demand_sentences(reading, _alert_args(page))
        (f.strengthened.append(h) if belief.score(h) > 0 else f.weakened.append("DEMAND_SHIFT"))
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
        rows = worksheet.result_rows(text)
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
        rows = worksheet.result_rows(text)
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

    def worksheet(self, belief, state, page):
        slices = sorted(h.slice for h in self.covered(belief, state) if h.slice)
        return [f'scan({self.variable}, "{self.name}", {len(belief.log_prior)}, {slices!r})']

    def penalty(self, h, stat, rows):
        return 0.0

    def describe(self, rows, stats, belief, threshold):
        f = Finding()
        h = _top(stats, belief, "AD_DISAPPROVAL")
        ok, text = _verdict(h, belief, threshold, "AD_DISAPPROVAL", stats)
        (f.strengthened.append(h) if ok else f.weakened.append("AD_DISAPPROVAL"))
        f.sentences.append(text + (" (its share of its ad groups)." if ok else "."))
        if h is not None:
            inside = worksheet.matcher(h.slice)
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

    def region(self, state: State) -> dict[str, list[str]]:
        """Where the hypothesis acts, as ``{column: values}`` of the check's rows."""
        cause = self.h.cause
        if cause == "AD_DISAPPROVAL":
            creative = dict(conditions(self.h.slice))["creative"]
            region = {"campaign": [state.ad_campaign.get(creative, "")]}
            if "&" in self.h.slice:
                region["in_geo"] = ["True"]
            return region
        if cause == "PLACEMENT_SHIFT":
            placement = dict(conditions(self.h.slice))["placement"]
            return {"campaign": sorted(state.serving.get(placement, set()))}
        return {"in_slice": ["True"]}

    @property
    def variable(self) -> str:
        return "check_rows"

    def worksheet(self, belief, state, page):
        keys = ("campaign", *self.flags(state))
        alerts = _alert_args(page)
        cause = self.h.cause if self.h.cause in (*EDIT_KIND, "AD_DISAPPROVAL") else None
        args = f"{keys!r}, {self.region(state)!r}, {alerts!r}"
        return [f"shares(check_rows, {args}" + (f", {cause!r})" if cause else ")")]

    def query(self, sql, state):
        self._page_columns = getattr(self, "_page_columns", [])
        columns = list(dict.fromkeys([*self.signature_columns(), *self._page_columns]))
        return sql.check(self.flags(state), columns, lag=True)

    def prepare(self, page: Page) -> None:
        self._page_columns = alert_columns(page)

    def read(self, text, belief, state, page):
        keys = ("campaign", *self.flags(state))
        rows = worksheet.pivot(worksheet.result_rows(text), keys)
        f = Finding()
        region = self.region(state)
        shares = worksheet.alert_shares(rows, region, _alert_args(page))
        cause = self.h.cause
        stat = (
            worksheet.check_signature(cause, rows, region)
            if cause in (*EDIT_KIND, "AD_DISAPPROVAL")
            else None
        )
        if stat is not None:
            threshold = scan_threshold(max(len(state.edits), 1))
            belief.add(self.h, _llr(stat, threshold), stat)
        belief.set_shares(self.h, shares)
        inside = [r for r in rows if worksheet.in_region(region)(r[0])]
        if inside:
            lab, v = max(inside, key=lambda r: sum(r[1].values()))
            col = self._page_columns[0] if self._page_columns else next(iter(v))
            f.sentences.append(
                f"{lab['campaign']} in the hypothesis's region: {col} {_raw(v, col + '_before')} "
                f"over three weeks -> {_raw(v, col + '_now')} in the alert week."
            )
        if stat is not None:
            text = worksheet.signature_text(cause, stat)
            f.sentences.append(text[0].upper() + text[1:] + ".")
        parts = [
            f"{page.alerts[i].kpi} {worksheet.share_text(s)}" for i, s in sorted(shares.items())
        ] or ["no alert it can be compared with"]
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


class DisapprovalCheck(Check):
    def flags(self, state):
        conds = dict(conditions(self.h.slice))
        out = {"is_ad": f"creative = '{conds['creative']}'"}
        if "geo" in conds:
            out["in_geo"] = f"geo = '{conds['geo']}'"
        return out


def _alert_args(page: Page) -> list[tuple]:
    """The page's alerts as the worksheet takes them: KPI, campaign, current, baseline, the
    direction and the move in percent, all as the page prints them."""
    return [
        (
            a.kpi,
            a.campaign,
            num(a.current.replace(",", "")),
            num(a.baseline.replace(",", "")),
            a.direction,
            num(a.pct),
        )
        for a in page.alerts
    ]


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
