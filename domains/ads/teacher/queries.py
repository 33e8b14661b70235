"""The SQL the teacher types: short queries over the reports, as an analyst writes them.

Every query compares the alert's week (``now``) with the three weeks before the last two
(``before``); columns are named ``<metric>_before`` and ``<metric>_now`` so the teacher's own
code reads them back by name. Cosmetic choices (SUM with FILTER or CASE, the order of the rows,
line breaks) come from the episode's rng, as two analysts would write the same query
differently; none changes the numbers.
"""

from __future__ import annotations

import numpy as np

from causaltrace_domains.ads.teacher.page import Windows
from causaltrace_domains.ads.teacher.signatures import conditions

MAX_CHARS = 1500


class Sql:
    """Builds one episode's queries (its windows, its rng's style)."""

    def __init__(self, windows: Windows, rng: np.random.Generator):
        self.w = windows
        self.rng = rng
        self.filter_style = bool(rng.integers(2))
        self.indent = "  " if rng.integers(2) else "    "

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
        eligible = "impressions / search_impression_share"
        daily = (
            f"SELECT date, sum({eligible}) AS eligible,\n"
            f"{self.indent}sum({eligible} * search_lost_is_budget) / sum({eligible}) AS lost_budget,\n"
            f"{self.indent}sum({eligible} * search_lost_is_rank) / sum({eligible}) AS lost_rank\n"
            "  FROM impression_share_daily\n  WHERE search_impression_share > 0\n  GROUP BY date"
        )
        cpc = "SELECT date, sum(cost) / sum(clicks) AS cpc FROM perf_daily GROUP BY date"
        period = f"CASE WHEN {self.now()} THEN 'now' ELSE 'before' END"
        stats = [
            f"{period} AS period",
            "count(*) AS days",
            "round(avg(eligible)) AS eligible_avg",
            "round(stddev(eligible)) AS eligible_sd",
            "round(100 * avg(lost_budget), 2) AS lost_budget_pct",
            "round(100 * stddev(lost_budget), 2) AS lost_budget_sd",
            "round(100 * avg(lost_rank), 2) AS lost_rank_pct",
            "round(100 * stddev(lost_rank), 2) AS lost_rank_sd",
            "round(avg(cpc), 3) AS cpc_avg",
            "round(stddev(cpc), 3) AS cpc_sd",
        ]
        return (
            f"WITH shares AS (\n  {daily}\n), cpcs AS (\n  {cpc}\n)\n"
            f"SELECT {self._lines(stats)}\nFROM shares JOIN cpcs USING (date)\n"
            f"WHERE {self.periods()}\nGROUP BY 1\nORDER BY 1"
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
