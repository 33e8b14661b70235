"""Scripted baselines for the ads domain, acting only through the agent tools.

The default ``teacher`` is the hypothesis-driven investigator of the ``teacher`` package beside
this module (``TeacherAgent`` below is that class, so the ``teacher`` entry point keeps
working); this module keeps the earlier playbook as ``scripted``.

- ``scripted``: an analyst's playbook. It looks at the tables, reads the change history, checks
  the account-level picture (impression share lost to budget and to rank, eligible auctions,
  CPC), and otherwise scans 1D and 2D slices for each segment signal (tracked conversions
  against backend orders, backend orders, invalid clicks, CTR, CVR, CPC, volume, creative and
  placement shares), picks the strongest, refines the slice (does the effect cover the whole
  1D slice or one 2D child?), and submits. Its analysis runs in the python tool
  (:mod:`causaltrace_domains.ads.notebook`), so its transcripts are real tool-use trajectories.
- ``localizer``: Adtributor (Bhagwan et al., NSDI 2014) on the alerted KPI: per dimension,
  each level's explanatory power (its share of the total change) and surprise (Jensen-Shannon
  divergence between its forecast and actual shares); the dimension with the most surprising
  elements that together explain most of the change gives the slice, and a fixed rule maps the
  dimension to a cause. What a non-agent localizer gets.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from causaltrace.agents import Agent, last_json_object
from causaltrace_domains.ads.teacher import InvestigatorAgent as TeacherAgent

NOTEBOOK = Path(__file__).with_name("notebook.py")
Z_SEGMENT = 5.0  # a segment signal must be this significant to be believed
EFFECT_MIN = 0.2  # and move at least ~20% (log scale)


class _Tools:
    """Thin helper: one tool call per turn, the way a careful analyst works."""

    def __init__(self, session):
        self.session = session

    async def call(self, name: str, arguments: dict, thought: str) -> str:
        results = await self.session.turn([{"name": name, "arguments": arguments}], thought)
        return results[0].observation

    async def python_json(self, code: str, thought: str) -> Any:
        return last_json_object(await self.call("python", {"code": code}, thought))

    async def submit(self, cause: str, slice_text: str, thought: str) -> None:
        if not self.session.done:
            await self.call("submit", {"root_cause": cause, "slice": slice_text}, thought)


# signal -> (cause, direction of the move that indicates it, dims its slices use)
SEGMENT_SIGNALS = {
    "tracking": ("TRACKING_OUTAGE", -1, ["device", "browser_os", "geo"]),
    "orders": ("LANDING_PAGE_BREAK", -1, ["device", "browser_os", "geo"]),
    "invalid": ("INVALID_TRAFFIC", +1, ["placement", "geo"]),
    "creative_share": ("AD_DISAPPROVAL", -1, ["creative", "geo"]),
    "ctr": ("CREATIVE_FATIGUE", -1, ["creative", "audience", "device"]),
    "placement_share": ("PLACEMENT_SHIFT", +1, ["placement"]),
    "cpc": ("BID_MODIFIER_CHANGE", +1, ["device", "geo", "audience"]),
    "cvr": ("TARGETING_EXPANSION", -1, ["audience", "geo"]),
}


class ScriptedAgent(Agent):
    """The scripted analyst (see the module docstring): the teacher before issue 24."""

    name = "scripted"

    async def run(self, session, rng: np.random.Generator) -> None:
        tools = _Tools(session)
        await tools.call(
            "sql", {"query": "SHOW TABLES"}, "First, what reports does this account have?"
        )
        await tools.call(
            "sql",
            {
                "query": (
                    "SELECT change_time, campaign, change_type, target, field, old_value, new_value "
                    "FROM change_history ORDER BY change_time DESC"
                )
            },
            "Any recent edits in the account that line up with the alert?",
        )
        setup = await tools.call(
            "python",
            {"code": NOTEBOOK.read_text(encoding="utf-8") + "\nprint(json.dumps({'days': N}))"},
            "Load the reports into daily arrays per leaf segment.",
        )
        if session.done:
            return
        n_days = last_json_object(setup)["days"]
        overview = await tools.python_json(
            "overview()",
            "Account level: impression share lost to budget and rank, eligible "
            "auctions and CPC, for onsets over the last weeks.",
        )
        cause = self._account_cause(overview)
        if cause is not None:
            await tools.submit(cause, "", f"The account-level picture points to {cause}.")
            return
        # Segment signals: scan each at the onset that moves it most, keep the strongest.
        best = None
        for signal, (cause, direction, dims) in SEGMENT_SIGNALS.items():
            if session.done:
                return
            for t0 in (n_days - 12, n_days - 7):
                found = await tools.python_json(
                    f"scan({signal!r}, {t0}, dims={dims!r}, direction={direction})",
                    f"Where does the {signal} signal move (onset day {t0})?",
                )
                for row in found["top"][:1]:
                    score = row["z"] if row["effect"] >= EFFECT_MIN else 0.0
                    if best is None or score > best[0]:
                        best = (score, signal, cause, direction, row["slice"], t0)
        if best is None or best[0] < Z_SEGMENT:
            await tools.submit(
                "NO_ANOMALY",
                "",
                "No segment moves beyond noise and the account "
                "level is steady: the alert is seasonality or conversion lag.",
            )
            return
        _, signal, cause, direction, slice_text, t0 = best
        slice_text = await self._refine(tools, signal, direction, slice_text, t0)
        await tools.submit(
            cause, slice_text, f"The strongest evidence is {signal} on {slice_text}: {cause}."
        )

    @staticmethod
    def _account_cause(overview: dict) -> str | None:
        budget = overview["lost_is_budget_pp"]["change"]
        rank = overview["lost_is_rank_pp"]["change"]
        eligible = overview["eligible_auctions_pct"]["change"]
        cpc = overview["cpc_pct"]["change"]
        if budget >= 8:
            return "BUDGET_CAP"
        if rank >= 5 and cpc >= 5:
            return "COMPETITIVE_PRESSURE"
        if eligible <= -15 and abs(budget) < 3 and abs(rank) < 3:
            return "DEMAND_SHIFT"
        return None

    async def _refine(self, tools, signal, direction, slice_text, t0) -> str:
        """A 1D slice becomes its 2D child when the effect sits in the child alone; a 2D slice
        becomes its 1D parent when the parent's rest moves as well."""
        conds = slice_text.split("&")
        if len(conds) == 2:
            for keep, drop in ((conds[0], conds[1]), (conds[1], conds[0])):
                rest = await tools.python_json(
                    f"rest_of({keep!r}, {slice_text!r}, {signal!r}, {t0}, {direction})",
                    f"Does {keep} outside {drop} move too (then the slice is {keep})?",
                )
                if (
                    rest["rest"]
                    and rest["rest"]["z"] >= Z_SEGMENT / 2
                    and rest["rest"]["effect"] >= EFFECT_MIN
                ):
                    return keep
        return slice_text


class LocalizerAgent(Agent):
    """Adtributor on the alerted KPI, with a dimension-to-cause rule (see module docstring)."""

    name = "localizer"
    EP_MIN = 0.1  # an element must explain at least 10% of the change
    EP_TOTAL = 0.6  # the chosen elements must explain at least 60% together

    async def run(self, session, rng: np.random.Generator) -> None:
        tools = _Tools(session)
        kpi, campaign = _alerted_kpi(session.prompt)
        scope = "" if campaign is None else f"p = p[p['campaign'] == {campaign!r}]\n"
        code = (
            "import json, pandas as pd\n"
            "p = perf_daily.assign(date=pd.to_datetime(perf_daily['date']))\n"
            f"{scope}"
            "last = p['date'].max()\n"
            "cur = p[p['date'] > last - pd.Timedelta(days=7)]\n"
            "base = p[(p['date'] <= last - pd.Timedelta(days=7)) & "
            "(p['date'] > last - pd.Timedelta(days=35))]\n"
            "out = {}\n"
            f"for dim in {_LOCALIZER_DIMS!r}:\n"
            "    a = cur.groupby(dim, observed=True)[['clicks','cost','conversions',"
            "'impressions','conversion_value']].sum()\n"
            "    b = base.groupby(dim, observed=True)[['clicks','cost','conversions',"
            "'impressions','conversion_value']].sum() / 4\n"
            "    out[dim] = {'actual': a.to_dict('index'), 'forecast': b.to_dict('index')}\n"
            "print(json.dumps(out))\n"
        )
        data = await tools.python_json(
            code,
            f"Break {kpi} down by every dimension: this week "
            "against the average of the 4 weeks before.",
        )
        dim, elements = _adtributor(data, kpi, self.EP_MIN, self.EP_TOTAL)
        if dim is None:
            await tools.submit(
                "DEMAND_SHIFT",
                "",
                "No dimension explains the change: account-wide, so the rule says demand.",
            )
            return
        cause = _LOCALIZER_RULE[dim]
        slice_text = f"{dim}={elements[0]}"
        await tools.submit(
            cause,
            slice_text,
            f"Adtributor: {dim} explains the change "
            f"({', '.join(elements)}); the rule maps {dim} to {cause}.",
        )


__all__ = ["LocalizerAgent", "ScriptedAgent", "TeacherAgent"]

_LOCALIZER_DIMS = ["campaign", "creative", "placement", "device", "browser_os", "geo", "audience"]
_LOCALIZER_RULE = {
    "creative": "CREATIVE_FATIGUE",
    "placement": "PLACEMENT_SHIFT",
    "device": "LANDING_PAGE_BREAK",
    "browser_os": "TRACKING_OUTAGE",
    "geo": "LANDING_PAGE_BREAK",
    "audience": "TARGETING_EXPANSION",
    "campaign": "BUDGET_CAP",
}


def _alerted_kpi(prompt: str) -> tuple[str, str | None]:
    """The alerted KPI and, when the alert is on one campaign, that campaign."""
    match = re.search(r"ALERT: (\w+) for (?:the account|campaign (\w+)) is", prompt)
    if match is None:
        return "conversions", None
    return match.group(1), match.group(2)


def _kpi_value(row: dict, kpi: str) -> float:
    if kpi == "cost_per_conversion":
        return row["cost"] / max(row["conversions"], 1e-9)
    if kpi == "roas":
        return row["conversion_value"] / max(row["cost"], 1e-9)
    return float(row.get(kpi, 0.0))


def _js(p: float, q: float) -> float:
    """Jensen-Shannon divergence term of one element (Adtributor's surprise)."""
    m = (p + q) / 2
    out = 0.0
    for x in (p, q):
        if x > 0:
            out += 0.5 * x * np.log(x / m)
    return out


def _adtributor(data: dict, kpi: str, ep_min: float, ep_total: float):
    """The dimension whose most surprising elements explain the change, with those elements."""
    base_kpi = "conversions" if kpi in ("cost_per_conversion", "roas") else kpi
    best = None
    for dim, tables in data.items():
        actual = {k: _kpi_value(v, base_kpi) for k, v in tables["actual"].items()}
        forecast = {k: _kpi_value(v, base_kpi) for k, v in tables["forecast"].items()}
        total_a, total_f = sum(actual.values()), sum(forecast.values())
        change = total_a - total_f
        if total_a <= 0 or total_f <= 0 or change == 0:
            continue
        scored = []
        for key in set(actual) | set(forecast):
            a, f = actual.get(key, 0.0), forecast.get(key, 0.0)
            ep = (a - f) / change
            surprise = _js(f / total_f, a / total_a)
            scored.append((surprise, ep, key))
        scored.sort(reverse=True)
        chosen, explained, surprise = [], 0.0, 0.0
        for s, ep, key in scored:
            if ep < ep_min:
                continue
            chosen.append(key)
            explained += ep
            surprise += s
            if explained >= ep_total:
                break
        if explained >= ep_total and (best is None or surprise > best[0]):
            best = (surprise, dim, chosen)
    return (None, []) if best is None else (best[1], best[2])
