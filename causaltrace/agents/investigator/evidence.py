"""What the teacher has read so far, the hypotheses it supports, and the bars that decide.

The bars are in z units of a signature's move (its mean move over the window against the
standard error no change would give, from the baseline's spread: with three weeks of daily
baseline about 21 degrees of freedom, so a z of 4 has a one-sided p near 3e-4, and the largest
of some twenty level-by-signature readings passes it by chance in under 1% of quiet tables).
A signature may also declare the smallest move that counts (``min_change``, a practical size:
on busy tables a tiny move can have a large z).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from causaltrace.agents.investigator.notebook import Reading
from causaltrace.agents.investigator.spec import Signature

Z_SEGMENT = 4.0  # a level's move against the rest that names a slice
Z_TABLE = 3.0  # a table-wide move (one reading per signature: fewer chances)
Z_CELL = 3.5  # a level of a second dimension inside the first (a handful of readings)
LEAD = 2.0  # the leader's z over the next cause's that decides


@dataclass
class Evidence:
    """What the cells printed so far, by cause."""

    table: dict[str, Reading] = field(default_factory=dict)  # cause -> its table-wide reading
    levels: dict[str, list[Reading]] = field(default_factory=dict)  # cause -> level readings

    def best_level(self, sig: Signature) -> Reading | None:
        found = self.levels.get(sig.cause, [])
        return max(found, key=lambda r: toward(sig, r), default=None)


@dataclass(frozen=True)
class Candidate:
    """A hypothesis with the reading that supports it (``reading.dim`` None: table-wide)."""

    sig: Signature
    reading: Reading

    @property
    def strength(self) -> float:
        return toward(self.sig, self.reading)

    @property
    def passes(self) -> bool:
        bar = Z_TABLE if self.reading.dim is None else Z_SEGMENT
        return (
            self.strength >= bar and self.sig.direction * self.reading.move >= self.sig.min_change
        )


def toward(sig: Signature, reading: Reading) -> float:
    """A reading's z in the direction the cause moves its signature."""
    return sig.direction * reading.z_value
