"""The domain-free teacher's words: what it checks next and why, and what the printed numbers
show. Each message has a few phrasings drawn from the episode's rng, and every number it
quotes is a string a cell printed (``Reading``'s fields), never one computed here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from causaltrace.agents.investigator.evidence import (
    Z_SEGMENT,
    Z_TABLE,
    Candidate,
    toward,
)
from causaltrace.agents.investigator.notebook import Reading
from causaltrace.agents.investigator.spec import InvestigationSpec, Signature


def _way(sig: Signature) -> str:
    return f"{sig.label} {'up' if sig.direction > 0 else 'down'}"


def _names(sigs: Sequence[Signature]) -> str:
    names = [s.cause for s in sigs]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _scope(r: Reading) -> str:
    return "the whole table" if r.dim is None else f"{r.dim}={r.level}"


class Voice:
    """Phrasings for one episode (drawn from its rng)."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def _pick(self, *options: str) -> str:
        return options[int(self.rng.integers(len(options)))]

    def opening(
        self,
        spec: InvestigationSpec,
        kpi: str | None,
        live: Sequence[Signature],
        out: Sequence[Signature],
    ) -> str:
        signatures = "; ".join(f"{s.cause}: {_way(s)}" for s in live)
        if kpi is None:
            head = self._pick(
                "The page names no KPI I can tie to a cause, so every cause stays open.",
                "Nothing on the page rules a cause out yet.",
            )
        else:
            words = spec.kpis[kpi]
            head = self._pick(
                f"The page is about {words}.",
                f"The alert is on {words}.",
                f"What moved is {words}.",
            )
        text = f"{head} Hypotheses and the signature each would leave: {signatures}."
        if out:
            text += f" {_names(out)} cannot move {spec.kpis.get(kpi or '', kpi)}, so I leave "
            text += "them out."
        return text

    def ask(self, by: str | None, measured: Sequence[Signature]) -> str:
        if by is None:
            return self._pick(
                "First question: does any signature move over the whole table, as a table-wide "
                f"cause would? That tests {_names(measured)} at once.",
                f"I measure {_names(measured)}'s signatures over the whole table, alert window "
                "against the baseline before it.",
            )
        return self._pick(
            f"Next, by {by}: {_names(measured)} can act on a {by}, and each level's signature "
            "against the rest of the table says which cause and where.",
            f"Splitting by {by} separates {_names(measured)}: a cause on one {by} moves its "
            "signature there and not in the rest.",
        )

    def reading(
        self,
        by: str | None,
        measured: Sequence[Signature],
        readings: Sequence[Reading],
    ) -> str:
        if not readings:
            return "The cell printed nothing I can read, so this question stays open."
        parts = []
        for sig in measured:
            mine = [r for r in readings if r.signature == sig.label]
            if not mine:
                continue
            top = max(mine, key=lambda r: toward(sig, r))
            strength = toward(sig, top)
            where = "over the whole table" if by is None else f"at {_scope(top)} against the rest"
            quote = (
                f"{sig.label} moved {top.change} {where} (z {top.z}; {top.before} to {top.after})"
            )
            if by is None and not sig.account_wide:
                parts.append(f"{quote}: {sig.cause} acts on a slice, so this only sizes it.")
            elif strength >= (Z_TABLE if by is None else Z_SEGMENT):
                parts.append(f"{quote}: strong evidence for {sig.cause}.")
            elif strength > 0:
                parts.append(f"{quote}: in {sig.cause}'s direction but within the noise.")
            else:
                parts.append(f"{quote}: against {sig.cause}'s direction, which rules it out here.")
        return " ".join(parts)

    def decided(self, leader: Candidate, saved: Sequence[str]) -> str:
        text = self._pick(
            f"That decides it: {leader.sig.cause} at {_scope(leader.reading)} leads every "
            "other hypothesis by a wide margin.",
            f"The evidence is decisive for {leader.sig.cause} at {_scope(leader.reading)}.",
        )
        if saved:
            text += f" The scans by {', '.join(saved)} could not change that; I skip them."
        return text

    def nothing(self) -> str:
        return "No signature moves beyond the noise anywhere I looked."

    def ask_cell(self, choice: Candidate, cross: str) -> str:
        if (choice.reading.dim,) not in choice.sig.slices:
            return (
                f"{choice.sig.cause} acts on one {cross} of a {choice.reading.dim}, so I split "
                f"{_scope(choice.reading)} by {cross} to find which."
            )
        return (
            f"Check before answering: {choice.sig.cause} can act on one {cross} inside "
            f"{_scope(choice.reading)}, so I split that level by {cross}."
        )

    def cell(
        self, choice: Candidate, inside: Reading | None, two_d: bool, required: bool = False
    ) -> str:
        if inside is None:
            return "The check printed nothing, so I keep the one-dimensional slice."
        if required:
            return (
                f"{choice.sig.cause} acts on one {inside.dim} inside {_scope(choice.reading)}; "
                f"the strongest is {inside.level}: {choice.sig.label} moved {inside.change} "
                f"there against the rest (z {inside.z})."
            )
        quote = f"{choice.sig.label} moved {inside.change} at {inside.dim}={inside.level} (z {inside.z})"
        if two_d:
            return f"Inside {_scope(choice.reading)}, {quote} against the rest: the slice is both."
        return (
            f"Inside {_scope(choice.reading)}, the strongest {inside.dim} is {inside.level}: "
            f"{quote}, within the noise, so the whole {choice.reading.dim} is hit."
        )

    def answer(self, choice: Candidate, slice_text: str) -> str:
        where = slice_text or "no slice (table-wide)"
        return f"Answer: {choice.sig.cause}, {where}."
