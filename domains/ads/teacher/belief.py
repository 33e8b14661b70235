"""The hypotheses still in play and how much the teacher believes each.

A hypothesis is a cause with its slice (None for account-wide causes and for no anomaly). Its
log-weight is its prior (uniform over causes, a cause's prior spread evenly over its slices,
lowered for a cause that cannot make any paged KPI's adverse move) plus the evidence read so far:
each query that covered it adds ``(z+^2 - t^2) / 2`` with ``t`` that query's scan threshold (a
z at the threshold ties with "no anomaly"; below it the hypothesis loses), minus the evidence
against exactly this slice (a parent or child that explains the move better). A hypothesis
whose move is practically too small, or that accounts for under a quarter of every paged alert,
is capped below "no anomaly": it is the account's everyday change, not the root cause.

The next query is the one with the largest expected information gain: the entropy of the
partition of the current posterior that its result would reveal (each hypothesis it covers
told apart from the others, and all it does not cover in one cell), times the query's declared
resolution (a scan of a signature resolves its slices; the change log only narrows them, twins
included). Queries within ``TIE`` of the best are equally useful: the episode's rng picks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from causaltrace_domains.ads.teacher.signatures import (
    ACCOUNT_WIDE,
    INCOMPATIBLE_PRIOR,
    NO_SIGNAL,
    SLICE_DIMS,
    candidate_slices,
    compatible,
)
from causaltrace_domains.ads.teacher.stats import Stat, scan_threshold

RELEVANT = 0.25  # the share of an alert a root cause accounts for (the domain's rule)
RULED_OUT = -3.0
# A cause accounts for at least a quarter of a paged move by construction; a segment that merely
# moved does so far less often (about one in four): a passing check multiplies the odds.
RELEVANCE_EVIDENCE = 4.0  # the capped log-likelihood ratio of a hypothesis that cannot be the cause
TIE = 0.1


@dataclass(frozen=True, order=True)
class Hypothesis:
    cause: str
    slice: str | None = None

    def text(self) -> str:
        return self.cause if not self.slice else f"{self.cause} on {self.slice}"


@dataclass
class Reading:
    """What the evidence says about one hypothesis so far."""

    llr: float = 0.0
    stat: Stat | None = None
    shares: dict[int, float] = field(default_factory=dict)  # alert index -> share
    checked: bool = False  # its share of the alerts has been read
    capped: str | None = None  # why it cannot be the root cause

    @property
    def best_share(self) -> float | None:
        return max(self.shares.values()) if self.shares else None


class Belief:
    """Prior, evidence and posterior over every hypothesis of an episode."""

    def __init__(self, causes: Iterable[str], levels: dict[str, tuple[str, ...]], kpis: list[str]):
        self.levels = levels
        self.log_prior: dict[Hypothesis, float] = {}
        self.readings: dict[Hypothesis, Reading] = {}
        causes = list(causes)
        n_slices = [len(candidate_slices(c, levels)) for c in causes if c in SLICE_DIMS]
        # "No anomaly" competes with fewer than a whole cause's slices (the audit's oracle lets
        # it compete with one slice of a typical cause; half that multiplicity, in logs, keeps
        # a lone significant segment from beating it too easily).
        typical = math.exp(sum(math.log(max(n, 1)) for n in n_slices) / max(len(n_slices), 1))
        for cause in causes:
            weight = 1.0 / len(causes)
            if cause != NO_SIGNAL and not any(compatible(cause, k) for k in kpis):
                weight *= INCOMPATIBLE_PRIOR
            slices: list[str | None] = [None] if cause in ACCOUNT_WIDE or cause == NO_SIGNAL else []
            if cause in SLICE_DIMS:
                slices = list(candidate_slices(cause, levels))
            share = math.sqrt(typical) if cause == NO_SIGNAL else len(slices)
            for s in slices:
                h = Hypothesis(cause, s)
                self.log_prior[h] = math.log(weight / share)
                self.readings[h] = Reading()
        # One family-wise threshold for every scan (as the audit's oracle has): a z must beat
        # what the largest of all the tests would reach by chance.
        self.threshold = scan_threshold(len(self.log_prior))

    # -- reading evidence ----------------------------------------------------------------------
    def hypotheses(self, cause: str | None = None) -> list[Hypothesis]:
        return [h for h in self.log_prior if cause is None or h.cause == cause]

    def restrict(
        self, cause: str, keep: set[str | None], factor: float = 0.02, boost: float = 1.0
    ) -> None:
        """Only ``keep`` of the cause's slices stay possible (its mass, times ``boost``, moves
        to them); with none left, the cause keeps ``factor`` of its mass (a record may be
        incomplete)."""
        hyps = self.hypotheses(cause)
        mass = sum(math.exp(self.log_prior[h]) for h in hyps) * (boost if keep else 1.0)
        kept = [h for h in hyps if h.slice in keep]
        for h in hyps:
            if kept:
                self.log_prior[h] = math.log(mass / len(kept)) if h in kept else -math.inf
            else:
                self.log_prior[h] = math.log(mass * factor / len(hyps))

    def exclude(self, cause: str) -> None:
        """Condition on ``cause`` being at work already: its hypotheses leave the posterior,
        so what remains is the belief about a further cause ("no anomaly": none)."""
        for h in self.hypotheses(cause):
            self.log_prior[h] = -math.inf

    def add(self, h: Hypothesis, llr: float, stat: Stat | None) -> None:
        reading = self.readings[h]
        reading.llr = llr
        reading.stat = stat

    def set_shares(self, h: Hypothesis, shares: dict[int, float]) -> None:
        reading = self.readings[h]
        reading.shares = dict(shares)
        reading.checked = True

    def cap(self, h: Hypothesis, why: str) -> None:
        self.readings[h].capped = why

    def score(self, h: Hypothesis) -> float:
        reading = self.readings[h]
        llr = reading.llr
        irrelevant = reading.checked and (reading.best_share or 0.0) < RELEVANT
        if reading.capped is not None or irrelevant:
            llr = min(llr, RULED_OUT)
        elif reading.checked and llr > 0:
            llr += math.log(RELEVANCE_EVIDENCE)
        return llr

    def log_weight(self, h: Hypothesis) -> float:
        return self.log_prior[h] + self.score(h)

    def posterior(self) -> dict[Hypothesis, float]:
        weights = {h: self.log_weight(h) for h in self.log_prior}
        top = max(weights.values())
        exp = {h: math.exp(w - top) for h, w in weights.items() if w > -math.inf}
        norm = sum(exp.values())
        return {h: v / norm for h, v in exp.items()}

    def ranked(self) -> list[tuple[Hypothesis, float]]:
        post = self.posterior()
        return sorted(post.items(), key=lambda kv: (-kv[1], kv[0]))

    def cause_mass(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for h, p in self.posterior().items():
            out[h.cause] = out.get(h.cause, 0.0) + p
        return out

    # -- choosing the next query ---------------------------------------------------------------
    def information_gain(self, covered: Iterable[Hypothesis], resolution: float) -> float:
        """Entropy (nats) of the partition a query's result reveals, times its resolution."""
        post = self.posterior()
        cells = [post.get(h, 0.0) for h in set(covered)]
        rest = max(1.0 - sum(cells), 0.0)
        entropy = -sum(p * math.log(p) for p in [*cells, rest] if p > 0)
        return resolution * entropy
