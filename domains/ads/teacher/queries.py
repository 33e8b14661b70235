"""The SQL the teacher types: short queries over the reports, as an analyst writes them.

Every query compares the alert's week (``now``) with the three weeks before the last two
(``before``); columns are named ``<metric>_before`` and ``<metric>_now`` so the teacher's own
code reads them back by name. Cosmetic choices (SUM with FILTER or CASE, the order of the rows,
line breaks, how a date literal is written, the case of function names) come from the episode's
rng, as two analysts would write the same query differently; none changes the numbers.
"""

from __future__ import annotations

import re

import numpy as np

from causaltrace_domains.ads.teacher.page import Windows
from causaltrace_domains.ads.teacher.signatures import conditions

MAX_CHARS = 1500
# How an analyst writes a date: DuckDB's typed literal, a cast, or (next to a date column) a
# bare string.
DATE_STYLES = ("DATE '{}'", "'{}'::DATE", None)
DATE_LITERAL = re.compile(r"DATE '(\d{4}-\d{2}-\d{2})'")
COMPARED_DATE = re.compile(r"(BETWEEN|AND|>=|<=|>|<|=) DATE '(\d{4}-\d{2}-\d{2})'")
FUNCTION_CALL = re.compile(
    r"\b(sum|round|avg|mad|ln|exp|nullif|coalesce|strftime|dayofweek|date_diff|count|max|min)\("
)


class Sql:
    """Builds one episode's queries (its windows, its rng's style)."""

    def __init__(self, windows: Windows, rng: np.random.Generator):
        self.w = windows
        self.rng = rng
        self.filter_style = bool(rng.integers(2))
        self.indent = "  " if rng.integers(2) else "    "
        # Later cosmetic choices draw from a child generator, so the episode's own stream (the
        # choices above, the teacher's tie-breaks) is what it was without them.
        style = rng.spawn(1)[0]
        self.upper_functions = bool(style.integers(2))
        self.date_style = int(style.integers(len(DATE_STYLES)))

    def finish(self, query: str) -> str:
        """The query as this analyst types it: date literals and function names in their
        style (DuckDB reads every variant alike, so the numbers do not change)."""
        literal = DATE_STYLES[self.date_style]
        if literal is None:  # a bare string, which DuckDB casts where it meets a date column
            query = COMPARED_DATE.sub(r"\1 '\2'", query)
        elif literal != "DATE '{}'":
            query = DATE_LITERAL.sub(lambda m: literal.format(m.group(1)), query)
        if self.upper_functions:
            query = FUNCTION_CALL.sub(lambda m: m.group(1).upper() + "(", query)
        return query

    # -- building blocks -----------------------------------------------------------------------
    def before(self, col: str = "date") -> str:
        return f"{col} BETWEEN DATE '{self.w.before_start}' AND DATE '{self.w.before_end}'"

    def now(self, col: str = "date") -> str:
        return f"{col} >= DATE '{self.w.now_start}'"

    def periods(self, col: str = "date") -> str:
        return f"({self.before(col)} OR {self.now(col)})"

    def summed(
        self, expr: str, alias: str, period: str, digits: int | None = None, date_col="date"
    ):
        cond = self.before(date_col) if period == "before" else self.now(date_col)
        if self.filter_style:
            body = f"sum({expr}) FILTER (WHERE {cond})"
        else:
            body = f"sum(CASE WHEN {cond} THEN {expr} END)"
        if digits is not None:
            body = f"round({body}, {digits})"
        return f"{body} AS {alias}_{period}"

    def pair(self, expr: str, alias: str, digits: int | None = None, date_col="date") -> list[str]:
        return [
            self.summed(expr, alias, "before", digits, date_col),
            self.summed(expr, alias, "now", digits, date_col),
        ]

    def _lines(self, items: list[str]) -> str:
        return (",\n" + self.indent).join(items)

    @staticmethod
    def condition(slice_text: str, prefix: str = "") -> str:
        return " AND ".join(f"{prefix}{d} = '{v}'" for d, v in conditions(slice_text))

    # -- the queries ---------------------------------------------------------------------------
    def change_log(self) -> str:
        cols = "change_time, campaign, change_type, target, field, old_value, new_value"
        skip = "('ad', 'keywords')" if self.rng.integers(2) else "('keywords', 'ad')"
        order = "change_time" if self.rng.integers(2) else "change_time DESC"
        return (
            f"SELECT {cols}\nFROM change_history\nWHERE change_type NOT IN {skip}\nORDER BY {order}"
        )

    def ad_status(self) -> str:
        order = "campaign, creative" if self.rng.integers(2) else "creative"
        return (
            "SELECT creative, campaign, status, policy_status\nFROM creatives\n"
            f"WHERE policy_status <> 'approved' AND status = 'enabled'\nORDER BY {order}"
        )

    def account(self) -> str:
        """Impression share lost to budget and to rank, and the CPC, per day since the baseline
        ended, each against its weekday's usual level (points of share; log CPC), with the
        baseline days' robust spread and levels."""
        eligible = "impressions / search_impression_share"
        base = f"date <= DATE '{self.w.before_end}'"
        lost = [
            f"sum({eligible} * search_lost_is_{k}) / sum({eligible}) AS lost_{k}"
            for k in ("budget", "rank")
        ]
        cols = [f"CASE WHEN {base} THEN 'baseline' ELSE strftime(date, '%Y-%m-%d') END AS day"]
        for name, level, usual, scale in (
            ("budget", "lost_budget", "ub", 100),
            ("rank", "lost_rank", "ur", 100),
            ("cpc", "log_cpc", "uc", 1),
        ):
            digits, times = (2, "100 * ") if scale == 100 else (4, "")
            cols += [
                f"round({times}avg({level} - {usual}), {digits}) AS {name}_vs_weekday",
                f"round({times}1.4826 * mad({level} - {usual}), {digits}) AS {name}_sd",
            ]
        cols[1:1] = [
            "count(*) AS days",
            "round(100 * avg(lost_budget), 2) AS lost_budget_pct",
            "round(100 * avg(lost_rank), 2) AS lost_rank_pct",
            "round(avg(exp(log_cpc)), 3) AS cpc",
        ]
        return (
            "WITH daily AS (\n"
            f"  SELECT date, dayofweek(date) AS weekday, {', '.join(lost)}\n"
            "  FROM impression_share_daily WHERE search_impression_share > 0 GROUP BY ALL\n"
            "), cpcs AS (\n"
            "  SELECT date, ln(sum(cost) / sum(clicks)) AS log_cpc FROM perf_daily GROUP BY date\n"
            "), joined AS (SELECT * FROM daily JOIN cpcs USING (date)), usual AS (\n"
            "  SELECT weekday, avg(lost_budget) AS ub, avg(lost_rank) AS ur, avg(log_cpc) AS uc\n"
            f"  FROM joined WHERE {base} GROUP BY ALL\n)\n"
            f"SELECT {self._lines(cols)}\nFROM joined JOIN usual USING (weekday)\n"
            "GROUP BY 1\nORDER BY 1"
        )

    def demand(self) -> str:
        """Eligible auctions per day since the baseline ended, each against its weekday's usual
        level (log), with the baseline days' own spread (from the median absolute deviation: a
        campaign paused for a day or two must not pass for everyday noise): a week's rhythm
        moves a day's auctions by far more than a demand dip does, so the days are read against
        their weekday."""
        eligible = "impressions / search_impression_share"
        base = f"date <= DATE '{self.w.before_end}'"
        day = f"CASE WHEN {base} THEN 'baseline' ELSE strftime(date, '%Y-%m-%d') END"
        resid = "ln(eligible) - usual"
        return (
            "WITH daily AS (\n"
            f"  SELECT date, dayofweek(date) AS weekday, sum({eligible}) AS eligible\n"
            "  FROM impression_share_daily WHERE search_impression_share > 0 GROUP BY ALL\n"
            "), usual AS (\n"
            f"  SELECT weekday, avg(ln(eligible)) AS usual FROM daily WHERE {base} GROUP BY ALL\n"
            ")\n"
            f"SELECT {day} AS day,\n{self.indent}count(*) AS days,\n"
            f"{self.indent}round(avg(eligible)) AS eligible,\n"
            f"{self.indent}round(avg({resid}), 4) AS vs_weekday,\n"
            f"{self.indent}round(1.4826 * mad({resid}), 4) AS robust_sd\n"
            "FROM daily JOIN usual USING (weekday)\nGROUP BY 1\nORDER BY 1"
        )

    def site(self) -> str:
        keys = "device, browser_os, geo"
        orders = self._lines(
            self.pair("backend_orders", "orders") + self.pair("sessions", "sessions")
        )
        conv = self._lines(self.pair("conversions", "conv"))
        order = keys if self.rng.integers(2) else "geo, device, browser_os"
        return (
            f"WITH site AS (\n  SELECT {keys},\n{self.indent}{orders}\n"
            f"  FROM site_analytics_daily GROUP BY ALL\n), ads AS (\n"
            f"  SELECT {keys},\n{self.indent}{conv}\n  FROM perf_daily GROUP BY ALL\n)\n"
            f"SELECT * FROM site JOIN ads USING ({keys})\nORDER BY {order}"
        )

    def _observed_expected(
        self, cell: str, out: str, num: str, den: str, alias: str, extra: list[str] | None = None
    ) -> str:
        """Per ``out`` group: ``num`` now, ``num`` expected now at each ``cell``'s own rate
        before (mix-adjusted), and ``num`` before."""
        inner = [*self.pair(num, "n"), *self.pair(den, "d")]
        for e in extra or []:
            inner += self.pair(e, e)
        outer = [
            f"sum(n_now) AS {alias}_now",
            f"round(sum(d_now * n_before / nullif(d_before, 0)), 1) AS {alias}_expected",
            f"sum(n_before) AS {alias}_before",
        ]
        for e in extra or []:
            outer += [f"sum({e}_before) AS {e}_before", f"sum({e}_now) AS {e}_now"]
        return (
            f"WITH cells AS (\n  SELECT {cell},\n{self.indent}{self._lines(inner)}\n"
            f"  FROM perf_daily GROUP BY ALL\n)\nSELECT {out},\n{self.indent}"
            f"{self._lines(outer)}\nFROM cells\nGROUP BY {out}\nORDER BY {out}"
        )

    def creatives(self) -> str:
        inner = [*self.pair("clicks", "c"), *self.pair("impressions", "i")]
        outer = [
            "sum(c_now) AS clicks_now",
            "round(sum(i_now * c_before / nullif(i_before, 0)), 1) AS clicks_expected",
            "sum(i_before) AS impressions_before",
            "sum(i_now) AS impressions_now",
        ]
        sets = "(creative, device), (creative, audience)"
        if self.rng.integers(2):
            sets = "(creative, audience), (creative, device)"
        return (
            "WITH cells AS (\n  SELECT creative, device, audience, placement,\n"
            f"{self.indent}{self._lines(inner)}\n  FROM perf_daily GROUP BY ALL\n)\n"
            f"SELECT creative, device, audience,\n{self.indent}{self._lines(outer)}\n"
            f"FROM cells\nGROUP BY GROUPING SETS ({sets})\nORDER BY creative, device, audience"
        )

    def invalid(self) -> str:
        inner = [*self.pair("invalid_clicks", "v"), *self.pair("clicks", "c")]
        inner += self.pair("impressions", "i")
        outer = [
            "sum(v_now) AS invalid_now",
            "round(sum(c_now * v_before / nullif(c_before, 0)), 1) AS invalid_expected",
            "sum(c_now) AS clicks_now",
            "round(sum(i_now * c_before / nullif(i_before, 0)), 1) AS clicks_expected",
        ]
        return (
            "WITH cells AS (\n  SELECT campaign, placement, geo,\n"
            f"{self.indent}{self._lines(inner)}\n  FROM perf_daily GROUP BY ALL\n)\n"
            f"SELECT placement, geo,\n{self.indent}{self._lines(outer)}\n"
            "FROM cells\nGROUP BY placement, geo\nORDER BY placement, geo"
        )

    def ad_share(self, campaigns: list[str]) -> str:
        cols = self.pair("impressions", "impressions")
        where = ", ".join(f"'{c}'" for c in campaigns)
        return (
            f"SELECT campaign, creative, geo,\n{self.indent}{self._lines(cols)}\n"
            f"FROM perf_daily\nWHERE campaign IN ({where})\nGROUP BY ALL\nORDER BY ALL"
        )

    def placements(self) -> str:
        cols = self.pair("impressions", "impressions") + self.pair("clicks", "clicks")
        order = "campaign, placement" if self.rng.integers(2) else "placement, campaign"
        return (
            f"SELECT campaign, placement,\n{self.indent}{self._lines(cols)}\n"
            f"FROM perf_daily\nGROUP BY campaign, placement\nORDER BY {order}"
        )

    def check(self, flags: dict[str, str], columns: list[str], lag: bool) -> str:
        """Per campaign, flag (each ``alias: condition``) and period, the sums of ``columns``;
        conversions and conversion value divided by the share the lag curve says has been
        reported at each day's age (as the monitor does)."""
        period = f"CASE WHEN {self.now('p.date')} THEN 'now' ELSE 'before' END AS period"
        keys = ["p.campaign", *(f"({cond}) AS {alias}" for alias, cond in flags.items()), period]
        lagged = lag and any(c in ("conversions", "conversion_value") for c in columns)
        cols = []
        for c in columns:
            if c in ("impressions", "clicks"):
                cols.append(f"sum(p.{c}) AS {c}")
            elif lagged and c in ("conversions", "conversion_value"):
                cols.append(f"round(sum(p.{c} / coalesce(l.share_reported, 1)), 1) AS {c}")
            else:
                cols.append(f"round(sum(p.{c}), 1) AS {c}")
        join = ""
        if lagged:
            join = (
                "\nLEFT JOIN conversion_lag_curve l\n  ON l.days_since_click = "
                f"date_diff('day', p.date, DATE '{self.w.now_end}')"
            )
        return (
            f"SELECT {self._lines([*keys, *cols])}\nFROM perf_daily p{join}\n"
            f"WHERE {self.periods('p.date')}\nGROUP BY ALL\nORDER BY ALL"
        )
