"""The domain-free teacher: from the page to the cause, one python cell per question.

It reads which KPI the page raised and keeps the causes whose declared signatures move it (the
hypotheses come from the page). Each call answers one question that separates the live
hypotheses: the whole table (does a table-wide cause's signature move?) or one dimension
(which level's signature moves against the rest?), the dimension shared by the most live
causes first, ties and the order of the first two steps drawn per episode. After each result it
says what the numbers show, and it stops as soon as one hypothesis leads by the margin that
decides (reporting the calls it saved); the only call after that is the stated check of a
two-dimensional slice. Every number it writes is one a cell printed (:mod:`.notebook`).

A domain declares its signatures as data (:mod:`.spec`); the example domain's and the
tutorial's ``conf/agent`` files are worked cases (docs/teacher.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from causaltrace.agents.base import Agent
from causaltrace.agents.investigator.evidence import (
    LEAD,
    Z_CELL,
    Candidate,
    Evidence,
    toward,
)
from causaltrace.agents.investigator.notebook import Reading, read_shift, shift_cell
from causaltrace.agents.investigator.spec import (
    InvestigationSpec,
    Signature,
    investigation_spec,
)
from causaltrace.agents.investigator.voice import Voice
from causaltrace.errors import CausalTraceError


def alerted_kpi(prompt: str, spec: InvestigationSpec) -> str | None:
    """The KPI the page raised: the declared KPI whose words appear first on the alert line
    (longest words first, so "tracked orders" is not read as "orders"); None if none does."""
    lines = prompt.splitlines() or [""]
    line = next((x for x in lines if spec.alert_marker and spec.alert_marker in x), lines[0])
    line = line.split(spec.alert_marker, 1)[-1].lower() if spec.alert_marker else line.lower()
    best: tuple[int, int, str] | None = None
    for kpi, words in spec.kpis.items():
        at = line.find(words.lower())
        if at >= 0 and (best is None or (at, -len(words)) < best[:2]):
            best = (at, -len(words), kpi)
    return None if best is None else best[2]


def dims_to_scan(live: Sequence[Signature], rng: np.random.Generator) -> list[str]:
    """The dimensions the live causes can be sliced on, those shared by most causes first
    (they separate the most hypotheses per call); ties in a drawn order."""
    dims = list(dict.fromkeys(d for s in live for d in s.dims))
    draw = rng.permutation(len(dims))
    count = {d: sum(d in s.dims for s in live) for d in dims}
    return [d for _, _, d in sorted((-count[d], int(draw[i]), d) for i, d in enumerate(dims))]


class SignatureInvestigator(Agent):
    """The domain-free hypothesis-driven teacher (module docstring).

    Config: ``spec``, the domain's :class:`~.spec.InvestigationSpec` as data.
    """

    name = "investigator"

    def __init__(self, config=None):
        super().__init__(config)
        if "spec" not in self.config:
            raise CausalTraceError(
                "agent investigator: its config needs a 'spec' (the domain's signatures; see "
                "docs/teacher.md), e.g. agent=example_teacher"
            )
        spec = self.config["spec"]
        if hasattr(spec, "items") and not isinstance(spec, dict):  # a Hydra DictConfig
            from omegaconf import OmegaConf  # lazy: only for a config composed by Hydra

            spec = OmegaConf.to_container(spec, resolve=True)
        self.spec = investigation_spec(spec)

    async def run(self, session, rng: np.random.Generator) -> None:
        spec, voice = self.spec, Voice(rng)
        kpi = alerted_kpi(session.prompt, spec)
        live = [s for s in spec.signatures if kpi is None or kpi in s.moves]
        out = [s for s in spec.signatures if s not in live]
        steps: list[str | None] = list(dims_to_scan(live, rng))
        steps.insert(0 if not steps or rng.random() < 0.5 else 1, None)  # None: the table
        found = await self._scan(session, voice, live, steps, voice.opening(spec, kpi, live, out))
        if found is None:
            return
        evidence, text = found
        choice = self._choice(evidence, live)
        if choice is None:
            await self._submit(session, spec.no_signal or "", "", text + " " + voice.nothing())
            return
        slice_text = (
            "" if choice.reading.dim is None else f"{choice.reading.dim}={choice.reading.level}"
        )
        cross = self._second_dim(choice)
        if cross is not None:
            checked = await self._check_cell(session, voice, choice, cross, text)
            if checked is None:
                return
            two_d, text = checked
            slice_text = two_d or slice_text
        await self._submit(
            session, choice.sig.cause, slice_text, text + " " + voice.answer(choice, slice_text)
        )

    async def _scan(
        self, session, voice: Voice, live: Sequence[Signature], steps: list[str | None], text: str
    ) -> tuple[Evidence, str] | None:
        """Ask the steps' questions in order until one hypothesis decides; the evidence and
        the words so far (None once the episode is over)."""
        evidence, defined = Evidence(), False
        for i, by in enumerate(steps):
            measured = [s for s in live if by is None or by in s.dims]
            if not measured:
                continue
            text += " " + voice.ask(by, measured)
            cell = shift_cell(self.spec, measured, by, define=not defined)
            readings = await self._python(session, cell, text, by)
            if readings is None:
                return None
            defined = True
            self._record(evidence, measured, by, readings)
            text = voice.reading(by, measured, readings)
            leader = self._decided(evidence, live)
            # decided once the table was read and every dimension the leader can act on was
            # scanned (a level of another dimension could carry its move more strongly)
            asked = steps[: i + 1]
            if leader is not None and None in asked and set(leader.sig.dims) <= set(asked):
                saved = [d for d in steps[i + 1 :] if d is not None]
                return evidence, text + " " + voice.decided(leader, saved)
        return evidence, text

    async def _check_cell(
        self, session, voice: Voice, choice: Candidate, cross: str, text: str
    ) -> tuple[str, str] | None:
        """The stated check of a two-dimensional slice: the chosen level split by ``cross``.
        Returns (the two-dimensional slice, or "" to keep the level's; the words), or None
        once the episode is over."""
        text += " " + voice.ask_cell(choice, cross)
        within = (choice.reading.dim, choice.reading.level)
        cell = shift_cell(self.spec, [choice.sig], cross, within=within)
        readings = await self._python(session, cell, text, cross)
        if readings is None:
            return None
        inside = max(readings, key=lambda r: toward(choice.sig, r), default=None)
        # a cause with no one-dimensional shape on this dimension takes a cell whatever the
        # check shows; otherwise the cell must stand out inside the level
        required = (choice.reading.dim,) not in choice.sig.slices
        two_d = inside is not None and (required or toward(choice.sig, inside) >= Z_CELL)
        text = voice.cell(choice, inside, two_d, required)
        if not two_d:
            return "", text
        dims = sorted([within, (cross, inside.level)])
        return "&".join(f"{d}={v}" for d, v in dims), text

    # -- reading the evidence ------------------------------------------------------------
    @staticmethod
    def _record(
        evidence: Evidence, measured: Sequence[Signature], by: str | None, rows: list[Reading]
    ) -> None:
        for sig in measured:
            mine = [r for r in rows if r.signature == sig.label]
            if by is None:
                if mine:
                    evidence.table[sig.cause] = mine[0]
            else:
                evidence.levels.setdefault(sig.cause, []).extend(mine)

    @staticmethod
    def _candidates(evidence: Evidence, live: Sequence[Signature]) -> list[Candidate]:
        found = []
        for sig in live:
            if sig.account_wide and sig.cause in evidence.table:
                found.append(Candidate(sig, evidence.table[sig.cause]))
            best = evidence.best_level(sig) if any(sig.slices) else None
            if best is not None:
                found.append(Candidate(sig, best))
        return sorted(found, key=lambda c: -c.strength)

    def _decided(self, evidence: Evidence, live: Sequence[Signature]) -> Candidate | None:
        """The leader once it passes its bar and leads every other cause by ``LEAD``x (never
        before every question is asked when the spec prefers the declared order)."""
        ranked = self._candidates(evidence, live)
        if self.spec.prefer == "declared" or not ranked or not ranked[0].passes:
            return None
        others = [c.strength for c in ranked[1:] if c.sig.cause != ranked[0].sig.cause]
        return ranked[0] if not others or ranked[0].strength >= LEAD * max(others[0], 0) else None

    def _choice(self, evidence: Evidence, live: Sequence[Signature]) -> Candidate | None:
        """The answer: the candidate past its bar that the spec prefers (the strongest, or
        the first declared); with none past it, the domain's cause for no signal (None), or
        else the strongest candidate."""
        ranked = self._candidates(evidence, live)
        passing = [c for c in ranked if c.passes]
        if passing and self.spec.prefer == "declared":
            order = {s.cause: i for i, s in enumerate(self.spec.signatures)}
            return min(passing, key=lambda c: (order[c.sig.cause], -c.strength))
        if passing:
            return passing[0]
        if self.spec.no_signal is not None or not ranked:
            return None
        return ranked[0]

    @staticmethod
    def _second_dim(choice: Candidate) -> str | None:
        """The other dimension of a two-dimensional shape the chosen cause can take around
        the level it was found on (None: no such shape)."""
        dim = choice.reading.dim
        if dim is None:
            return None
        for shape in choice.sig.slices:
            if len(shape) == 2 and dim in shape:
                return shape[1] if shape[0] == dim else shape[0]
        return None

    # -- the tools -------------------------------------------------------------------------
    @staticmethod
    async def _python(session, code: str, text: str, by: str | None) -> list[Reading] | None:
        """Run one cell; its readings ([] if it printed none), or None once the episode is
        over."""
        if session.done:
            return None
        results = await session.turn([{"name": "python", "arguments": {"code": code}}], text)
        if session.done:
            return None
        return read_shift(results[0].observation, by) if results else []

    @staticmethod
    async def _submit(session, cause: str, slice_text: str, thought: str) -> None:
        if not session.done:
            await session.turn(
                [{"name": "submit", "arguments": {"root_cause": cause, "slice": slice_text}}],
                thought.strip(),
            )
