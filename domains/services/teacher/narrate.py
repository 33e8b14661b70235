"""The services teacher's words: what it is about to check and what the numbers it got show.

Every interpretation quotes the numbers it relies on (the rows it just read) and says which
hypotheses they strengthen or rule out. Phrasing varies with the episode's rng, so that rows of
an SFT set do not recite one script.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from causaltrace_domains.services.teacher.footprints import Reading
from causaltrace_domains.services.teacher.page import Alert, Page

CAUSE_WORDS = {
    "TRAFFIC_SURGE": "a traffic surge",
    "CACHE_NODE_LOSS": "a cache that lost nodes",
    "DB_REPLICA_SATURATION": "a saturated database replica",
    "SLOW_DEPENDENCY": "a slow dependency",
    "NOISY_NEIGHBOUR": "a noisy neighbour on shared hosts",
    "BAD_DEPLOY": "a bad deploy",
    "CONFIG_CHANGE": "a shrunken connection pool",
    "QUEUE_CONSUMER_STALL": "stalled queue consumers",
}


class Voice:
    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def _pick(self, *options: str) -> str:
        return options[int(self.rng.integers(len(options)))]

    # -- before the first query ----------------------------------------------------------------
    def no_page(self) -> str:
        return "The page lists no alert I can read, so there is nothing to explain: a false alarm."

    def opening(self, page: Page, likely: Sequence[str]) -> str:
        alerts = "; ".join(a.text() for a in page.alerts)
        causes = ", ".join(CAUSE_WORDS[c] for c in likely)
        return self._pick(
            f"Paged: {alerts}. What can move that: {causes}. First, what the alerted services "
            "depend on.",
            f"The page: {alerts}. Candidates for that symptom: {causes}. I start from the call "
            "graph to see which services sit below the alert.",
            f"{alerts} paged. Before measuring anything I need the dependencies of the alerted "
            f"services; the symptom fits {causes}.",
        )

    def graph(self, page: Page, graph: list[dict[str, str]], reach: Sequence[str]) -> str:
        below = [s for s in reach if s not in page.services]
        calls = [
            f"{r['caller']} -> {r['callee']} ({r['calls_per_request']}/request"
            + (f" on a miss of {r['only_on_miss_of']})" if r.get("only_on_miss_of") else ")")
            for r in graph
            if r.get("caller") in reach and r.get("callee") in reach
        ][:4]
        how = f" ({'; '.join(calls)})" if calls else ""
        return self._pick(
            f"The call graph puts {', '.join(below) or 'nothing'} below the alert or loading "
            f"what is below it{how}: those are where a fault could sit.",
            f"Below the alerted services, or loading them: {', '.join(below) or 'nothing'}"
            f"{how}. Faults elsewhere could not reach this page.",
        )

    def when(self, alert: Alert) -> str:
        return self._pick(
            f"When did {alert.service} in {alert.region} start to move?",
            f"Next, the onset: the alerted KPI of {alert.service} in {alert.region} bucket by "
            "bucket.",
        )

    def onset(self, onset: str, last: str, first: str, before: float, after: float, z: float):
        """``last`` and ``first``: the printed values of the buckets either side of it."""
        return self._pick(
            f"The series steps at {onset[11:]}: {last} in the bucket before, {first} at it "
            f"(means {before:.3g} before and {after:.3g} after, z {z:.1f}). I compare every "
            "footprint before and after that bucket.",
            f"It moves at {onset[11:]} ({last} -> {first}; {before:.3g} on average before, "
            f"{after:.3g} after, z {z:.1f}): the onset I test against.",
        )

    def ask_changes(self, onset: str) -> str:
        return self._pick(
            f"Was anything deployed or reconfigured from an hour before {onset}?",
            f"Changes since an hour before {onset}:",
        )

    def changes(self, rows: list[dict[str, str]], near: list[dict[str, str]]) -> str:
        if not near:
            first = (
                f" (the first: {rows[0]['change_type']} of {rows[0]['service']} in "
                f"{rows[0]['region']}, {rows[0]['old_value']} -> {rows[0]['new_value']})"
                if rows
                else ""
            )
            return self._pick(
                f"{len(rows)} changes in that window{first}, none a deploy or config edit of a "
                "candidate in the alerted region: a bad deploy or a pool change is less likely.",
                f"Of {len(rows)} changes{first}, none touches a candidate service in the "
                "alerted region: deploys and config edits drop back.",
            )
        shown = "; ".join(
            f"{r['change_type']} of {r['service']} in {r['region']} at {r['change_time'][11:16]} "
            f"({r['old_value']} -> {r['new_value']})"
            for r in near[:3]
        )
        return self._pick(
            f"{len(near)} of {len(rows)} changes touch candidates: {shown}. Changes happen all "
            "the time, so the metrics still have to show the fault.",
            f"Near the onset: {shown} ({len(near)} of {len(rows)}). A change is only a lead "
            "until its footprint shows.",
        )

    def unreadable(self) -> str:
        return "The alerted series is too short to find an onset; I cannot tell a fault here."

    # -- the probes ----------------------------------------------------------------------------
    def ask(self, cause: str, services: Sequence[str]) -> str:
        where = f" on {', '.join(services)}" if services else ""
        return self._pick(
            f"Now {CAUSE_WORDS[cause]}{where}: the least settled hypothesis.",
            f"Testing {CAUSE_WORDS[cause]}{where}, before and after the onset.",
            f"Is it {CAUSE_WORDS[cause]}{where}?",
        )

    def reading(
        self, cause: str, found: list[Reading], strongest: Reading | None, fired: bool
    ) -> str:
        if strongest is None:
            return f"No rows came back for {CAUSE_WORDS[cause]}: it stays untested."
        place = strongest.slice_text().replace("service=", "").replace("&region=", " in ")
        place = place or "the frontend's traffic"
        numbers = ", ".join(
            f"{m.label}{' (log)' if m.log else ''} {s.shown[0]} -> {s.shown[1]} "
            f"({s.change_text()}, z {s.z:.1f})"
            for m, s in strongest.shifts
        )
        others = sorted((r for r in found if r is not strongest), key=lambda r: -r.z)[:1]
        other = (
            f"; next strongest {others[0].slice_text() or 'none'} at z {others[0].z:.1f}"
            if others
            else ""
        )
        if fired:
            return self._pick(
                f"{place}: {numbers}{other}. {CAUSE_WORDS[cause].capitalize()} there fits; "
                "what remains is whether a deeper cause explains it.",
                f"Clear footprint on {place}: {numbers}{other}. That strengthens "
                f"{cause} on {strongest.slice_text() or 'the whole system'}.",
            )
        return self._pick(
            f"Strongest on {place}: {numbers}{other}. Too weak for {CAUSE_WORDS[cause]}: "
            "ruled out.",
            f"{place} moves least convincingly: {numbers}{other}. {cause} is out.",
        )

    def conclude(self, inv) -> str:
        cause, slice_text = inv.answer()
        if cause == "NO_ANOMALY":
            return self._pick(
                "No footprint is beyond its noise: the page fired on noise.",
                "Nothing measured explains the page: a false alarm.",
            )
        deeper = [c for c in inv.measured if c not in inv.fired]
        return self._pick(
            f"{cause} on {slice_text or 'the whole system'} is the deepest footprint; "
            f"{len(deeper)} other causes showed none.",
            f"Submitting {cause} ({slice_text or 'no slice'}): the deeper candidates are ruled "
            "out.",
        )
