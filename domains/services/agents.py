"""A scripted SRE for the services domain, acting only through the agent tools.

``services_scripted`` (the teacher before the investigating one, :mod:`.teacher`) reads the change log, loads the metrics into arrays in the python tool
(:mod:`causaltrace_domains.services.notebook`), measures every cause's footprint on every candidate slice
for onsets over the last three hours, and keeps the footprints that are large and significant.
Footprints that a deeper cause also produces are ranked below it (a cache that lost nodes loads
its database; a saturated or slow database backs up the order queue and the connection pools
of its callers; a traffic surge loads everything), so the first firing cause in ``PRIORITY``
wins. A slow dependency is named for every region when each region shows it. Nothing firing
means the alert is noise: NO_ANOMALY.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from causaltrace.agents import Agent, last_json_object

NOTEBOOK = Path(__file__).with_name("notebook.py")
SNR_MIN = 2.0  # a footprint must be two buckets' noise large
Z_MIN = 5.0  # and far beyond chance over the scan
PRIORITY = (
    "TRAFFIC_SURGE",
    "CACHE_NODE_LOSS",
    "DB_REPLICA_SATURATION",
    "SLOW_DEPENDENCY",
    "NOISY_NEIGHBOUR",
    "BAD_DEPLOY",
    "CONFIG_CHANGE",
    "QUEUE_CONSUMER_STALL",
)


class ServicesTeacherAgent(Agent):
    """The scripted SRE (see the module docstring)."""

    name = "services_scripted"

    async def _call(self, session, name: str, arguments: dict, thought: str) -> str:
        results = await session.turn([{"name": name, "arguments": arguments}], thought)
        return results[0].observation

    async def run(self, session, rng: np.random.Generator) -> None:
        await self._call(
            session,
            "sql",
            {"query": "SELECT * FROM change_log ORDER BY change_time DESC LIMIT 8"},
            "Anything deployed or reconfigured just before the alert?",
        )
        setup = await self._call(
            session,
            "python",
            {"code": NOTEBOOK.read_text(encoding="utf-8") + "\nprint(json.dumps({'n': N}))"},
            "Load the metrics into (service, region) x bucket arrays.",
        )
        if session.done:
            return
        n = last_json_object(setup)["n"]
        found = last_json_object(
            await self._call(
                session,
                "python",
                {"code": f"print(json.dumps(scan(range({n - 12}, {n - 4}))))"},
                "Measure every cause's footprint on every candidate slice, onsets over the "
                "last three hours.",
            )
        )
        if session.done:
            return
        fired = [
            c
            for c in PRIORITY
            if found[c] and found[c]["snr"] >= SNR_MIN and found[c]["z"] >= Z_MIN
        ]
        if not fired:
            await self._submit(
                session, "NO_ANOMALY", "", "No footprint beyond noise: a false alarm."
            )
            return
        cause = fired[0]
        best = found[cause]
        service, region = best["service"], best["region"]
        if cause == "TRAFFIC_SURGE":
            slice_text = ""
        elif cause == "SLOW_DEPENDENCY":
            regions = last_json_object(
                await self._call(
                    session,
                    "python",
                    {"code": f"print(json.dumps(by_region({cause!r}, {service!r}, {best['t0']})))"},
                    f"Is {service} slow in every region or in one?",
                )
            )
            if session.done:
                return
            strong = [r for r, s in regions.items() if s["snr"] >= SNR_MIN and s["z"] >= Z_MIN / 2]
            if len(strong) == len(regions):
                slice_text = f"service={service}"
            else:
                region = max(regions, key=lambda r: regions[r]["z"])
                slice_text = f"service={service}&region={region}"
        else:
            slice_text = f"service={service}&region={region}"
        await self._submit(
            session,
            cause,
            slice_text,
            f"The deepest footprint is {cause} on {slice_text or 'all'}.",
        )

    async def _submit(self, session, cause: str, slice_text: str, thought: str) -> None:
        if not session.done:
            await self._call(session, "submit", {"root_cause": cause, "slice": slice_text}, thought)


# What the alerted KPI says about the alerted service, if one blames it without investigating.
ALERT_RULE = {
    "request rate": "TRAFFIC_SURGE",
    "error rate": "BAD_DEPLOY",
    "p99 latency": "NOISY_NEIGHBOUR",
    "queue depth": "QUEUE_CONSUMER_STALL",
}
_ALERT = re.compile(
    r"ALERT: (request rate|error rate|p99 latency|queue depth) of (\w+) in (\w+) is"
)


class ServicesAlertRuleAgent(Agent):
    """Blames the service the page's first alert names, in the region it names, with a fixed
    rule from the alerted KPI to a cause (requests: a traffic surge; errors: a bad deploy; p99
    latency: a noisy neighbour; queue depth: stalled consumers); no tool call. What an alert
    router without an investigation gets: it is right only when the fault sits where the
    symptom shows."""

    name = "services_alert_rule"

    async def run(self, session, rng: np.random.Generator) -> None:
        match = _ALERT.search(session.prompt)
        if match is None:
            cause, slice_text = "NO_ANOMALY", ""
        else:
            kpi, service, region = match.groups()
            cause = ALERT_RULE[kpi]
            slice_text = "" if cause == "TRAFFIC_SURGE" else f"service={service}&region={region}"
        await session.turn(
            [{"name": "submit", "arguments": {"root_cause": cause, "slice": slice_text}}],
            "Blame the alerting service.",
        )
