"""The loop: read the page, pick the most informative query, interpret, decide, submit.

Stage one looks for the cause that accounts for the page. It ends when one hypothesis holds
``DOMINANT`` of the posterior, its share of the alerts has been read (an account-wide cause's
by the scan of its daily series), and the queries that cover its declared confusers have run.
On a page that allows several causes, stage two conditions on that cause: the paged moves it leaves unexplained (an
alert it accounts for under ``1 - RELEVANT`` of) are the residual, and a second cause is named
only if one dominates the remaining hypotheses and accounts for a quarter of such an alert;
otherwise "no further cause" wins and one cause is submitted.
"""

from __future__ import annotations

import json

import numpy as np

from causaltrace.agents import Agent
from causaltrace_domains.ads.causes import CAUSES
from causaltrace_domains.ads.teacher.belief import RELEVANT, TIE, Belief, Hypothesis
from causaltrace_domains.ads.teacher.narrate import Voice
from causaltrace_domains.ads.teacher.page import Page, parse_page
from causaltrace_domains.ads.teacher.probes import (
    SCANS,
    Check,
    Finding,
    Probe,
    State,
    alert_columns,
    make_check,
)
from causaltrace_domains.ads.teacher.queries import Sql
from causaltrace_domains.ads.teacher.signatures import (
    ACCOUNT_WIDE,
    EDIT_KIND,
    NO_SIGNAL,
    compatible,
)
from causaltrace_domains.ads.teacher.worksheet import notebook_cell, share_text

DOMINANT = 0.9
# A second cause must also account for a quarter of a move the first leaves unexplained (its
# check): with that requirement met, it needs to lead the remaining hypotheses less strongly.
DOMINANT_SECOND = 0.75
MIN_GAIN = 0.02  # nats: below this a query is not worth its tokens
MAX_QUERIES = 14
CHECK_TOP = 3
# The opening: over the first OPEN_QUERIES queries, any query whose gain is at least OPEN_TIE of
# the best is as good a start (an analyst may read the log first, or the account's series, or
# the page's segments); a child of the episode's rng picks, so rows open in different orders
# while every later decision is drawn as before.
OPEN_QUERIES = 3
OPEN_TIE = 0.35
# An account-wide second cause whose share of the alerts was not read needs z of about 5.
SECOND_ACCOUNT_LLR = 8.0


class InvestigatorAgent(Agent):
    """The hypothesis-driven teacher (module docstring; docs/teacher.md)."""

    name = "teacher"

    async def run(self, session, rng: np.random.Generator) -> None:
        page = parse_page(session.prompt)
        belief = Belief(CAUSES, page.levels, [a.kpi for a in page.alerts])
        state, sql, voice = State(), Sql(page.windows, rng), Voice(rng)
        opening = rng.spawn(1)[0]  # after Sql's child: its style draws stay the same
        scans = [cls() for cls in SCANS]
        text = voice.opening(page, belief)
        first: Hypothesis | None = None
        second_stage = False
        queries = 0
        decided: Hypothesis | None = None  # the leader once it holds DOMINANT: later calls check it
        while queries < MAX_QUERIES and not session.done:
            if first is None and self._ready(belief, state, scans, page):
                first = _leading(belief)[0]
                if first.cause == NO_SIGNAL or not self._residual(first, belief, page):
                    break
                belief.exclude(first.cause)
                second_stage = True
                decided = None
                text += " " + _explained(first, belief, page)
                continue
            if first is not None and self._ready(belief, state, scans, page, stage_two=True):
                break
            opening_rng = opening if queries < OPEN_QUERIES else None
            probe = self._choose(
                belief, state, scans, page, rng, stage_two=first is not None, opening=opening_rng
            )
            if probe is None:
                break
            if isinstance(probe, Check):
                probe.prepare(page)
            columns = _columns(probe, page)
            purpose = voice.decide(probe, belief, page, columns, checking=decided)
            content = " ".join(x for x in (text, purpose) if x)
            query = sql.finish(probe.query(sql, state))
            results = await session.turn([self._call(probe, query, belief, state, page)], content)
            queries += 1
            state.run.add(probe.name)
            if session.done:
                return
            finding: Finding = probe.read(results[0].observation, belief, state, page)
            text = voice.interpret(finding)
            standing = voice.standing(belief)
            if standing:
                text += " " + standing
            top, p = _leading(belief)
            if decided is None and p >= (DOMINANT_SECOND if second_stage else DOMINANT):
                decided = top
            elif decided is not None and top != decided:
                decided = None  # a check changed the leader: the investigation goes on
        if session.done:
            return
        answer, reason = self._answer(belief, first if second_stage else None, page)
        skipped = tuple(s.name for s in scans if s.name not in state.run)
        closing = voice.conclude(answer, reason, skipped)
        await _submit(session, answer, " ".join((text, closing)), page)

    @property
    def worksheet(self) -> bool:
        """``worksheet: true``: every query runs in the python namespace with the statistics the
        teacher cites printed beside its rows (:mod:`.worksheet`); otherwise plain SQL."""
        return bool(self.config.get("worksheet", False))

    def _call(self, probe: Probe, query: str, belief: Belief, state: State, page: Page) -> dict:
        if not self.worksheet:
            return {"name": "sql", "arguments": {"query": query}}
        # Each cell defines the worksheet's functions it calls that the row has not defined yet.
        code, state.defined = notebook_cell(probe.cell(query, belief, state, page), state.defined)
        return {"name": "python", "arguments": {"code": code}}

    # -- deciding ------------------------------------------------------------------------------
    def _owed(self, top: Hypothesis, state: State, scans, page: Page) -> list[Probe]:
        """The scans a conclusion on ``top`` still owes: those of its declared confusers, and
        those of every cause whose footprint can make a paged move (the alternatives the page
        allows are examined before one of them is called the cause)."""
        confusers = set(CAUSES[top.cause].confusers) | {top.cause} if top.cause in CAUSES else set()
        kpis = [a.kpi for a in page.alerts]
        return [
            s
            for s in scans
            if s.available(state)
            and (
                (set(s.causes) & confusers and s.name not in ("status", "ad_share"))
                or any(compatible(c, k) for c in s.causes for k in kpis)
            )
        ]

    def _ready(
        self, belief: Belief, state: State, scans, page: Page, stage_two: bool = False
    ) -> bool:
        top, p = _leading(belief)
        if p < (DOMINANT_SECOND if stage_two else DOMINANT):
            return False
        if top.cause == NO_SIGNAL:
            return True
        reading = belief.readings[top]
        if top.cause not in ACCOUNT_WIDE and not reading.checked:
            return False
        return stage_two or not self._owed(top, state, scans, page)

    def _choose(
        self, belief, state, scans, page: Page, rng, stage_two: bool, opening=None
    ) -> Probe | None:
        """The query with the largest expected information gain (ties within ``TIE`` drawn by
        ``rng``); in the opening, ``opening`` draws among those within ``OPEN_TIE`` of it."""
        candidates: list[Probe] = [s for s in scans if s.available(state)]
        ranked = [h for h, _ in belief.ranked()]
        checks = []
        for h in ranked:
            if len(checks) >= CHECK_TOP:
                break
            if h.cause in ACCOUNT_WIDE or h.cause == NO_SIGNAL or h.slice is None:
                continue
            if belief.readings[h].checked or belief.readings[h].capped:
                continue
            if _prerequisite(h) not in (None, *state.run):
                continue
            checks.append(make_check(h))
        candidates += [c for c in checks if c.available(state)]
        if not candidates:
            return None
        gains = {
            c: belief.information_gain(c.covered(belief, state), c.resolution) for c in candidates
        }
        best = max(gains.values())
        if best < MIN_GAIN:
            # Nothing left to learn cheaply: confirm the leading hypothesis before concluding
            # (what its check needs first, then the check, then its confusers' scans).
            top = _leading(belief)[0]
            needed = [s for s in candidates if s.name == _prerequisite(top)]
            needed = needed or [c for c in checks if c.h == top]
            if not needed and not stage_two:
                needed = self._owed(top, state, scans, page)
            return needed[int(rng.integers(len(needed)))] if needed else None
        near = [c for c in candidates if gains[c] >= (1 - TIE) * best]
        # Drawn in the opening too, so that rng's later draws are the same as without it.
        pick = near[int(rng.integers(len(near)))]
        if opening is not None:
            wide = [c for c in candidates if gains[c] >= OPEN_TIE * best]
            pick = wide[int(opening.integers(len(wide)))]
        return pick

    def _residual(self, first: Hypothesis, belief: Belief, page: Page) -> bool:
        """Whether a paged move is left for a second cause (only where the page allows several)."""
        if not page.concurrent:
            return False
        shares = belief.readings[first].shares
        if not shares:
            return True
        return any(1 - shares.get(i, 0.0) >= RELEVANT for i in range(len(page.alerts)))

    def _answer(self, belief: Belief, first: Hypothesis | None, page: Page):
        top, p = _leading(belief)
        if first is None:
            return [top], _reason(top, belief, p)
        if (
            top.cause == NO_SIGNAL
            or p < DOMINANT_SECOND
            or not self._second_fits(first, top, belief, page)
        ):
            return [first], _reason(
                first, belief, None
            ) + " Nothing else accounts for what is left."
        return [first, top], ""

    def _second_fits(
        self, first: Hypothesis, second: Hypothesis, belief: Belief, page: Page
    ) -> bool:
        mine = belief.readings[second].shares
        if second.cause in ACCOUNT_WIDE and not belief.readings[second].checked:
            # No share was read for this account-wide cause: only a strong signature counts.
            return belief.readings[second].llr >= SECOND_ACCOUNT_LLR
        left = belief.readings[first].shares
        return any(
            share >= RELEVANT and 1 - left.get(i, 0.0) >= RELEVANT for i, share in mine.items()
        )


def _leading(belief: Belief) -> tuple[Hypothesis, float]:
    """The leading cause (by its posterior mass over all its slices) with its best slice: two
    readings of one cause's slice do not make the cause less certain."""
    ranked = belief.ranked()
    mass = belief.cause_mass()
    cause = max(mass, key=lambda c: (mass[c], c))
    best = next(h for h, _ in ranked if h.cause == cause)
    return best, mass[cause]


def _prerequisite(h: Hypothesis) -> str | None:
    """The query a hypothesis's check needs first (the edit, the ad's campaign, the placement's
    campaigns)."""
    if h.cause in EDIT_KIND:
        return "changes"
    return {"AD_DISAPPROVAL": "ad_share", "PLACEMENT_SHIFT": "placements"}.get(h.cause)


def _columns(probe: Probe, page: Page) -> list[str]:
    if isinstance(probe, Check):
        return list(dict.fromkeys([*probe.signature_columns(), *alert_columns(page)]))
    return []


def _reason(h: Hypothesis, belief: Belief, p: float | None) -> str:
    reading = belief.readings[h]
    if h.cause == NO_SIGNAL:
        return "No hypothesis shows a signature that accounts for the alerts: a false alarm."
    parts = []
    if reading.stat is not None:
        parts.append(f"its signature at z {reading.stat.z:.1f}")
    if reading.shares:
        parts.append(f"{share_text(max(reading.shares.values()))} of a paged move")
    what = " and ".join(parts) or "the strongest evidence"
    return f"{h.text()} stands alone: {what}."


def _explained(first: Hypothesis, belief: Belief, page: Page) -> str:
    shares = belief.readings[first].shares
    if not shares:
        return (
            f"{first.text()} explains the account-wide move; other causes may still be at work, "
            "so I look for what remains."
        )
    parts = ", ".join(f"{page.alerts[i].kpi} {share_text(s)}" for i, s in sorted(shares.items()))
    return (
        f"{first.text()} accounts for {parts}: what it leaves unexplained may be a second cause, "
        "so I keep looking with it set aside."
    )


async def _submit(session, answer: list[Hypothesis], content: str, page: Page) -> None:
    if len(answer) == 1 or not page.concurrent:
        h = answer[0]
        args = {"root_cause": h.cause, "slice": h.slice or ""}
    else:
        args = {"causes": json.dumps([{"root_cause": h.cause, "slice": h.slice} for h in answer])}
    await session.turn([{"name": "submit", "arguments": args}], content)
