"""The oracle: a solver that knows the SCM (its causes, candidate slices, signatures and noise
model) and reads only an episode's visible tables.

It is the yardstick of the audit: what an agent could reach if it knew everything about the
model except the episode's hidden draw. Its likelihood is built on the domain's
:class:`~causaltrace.episodes.verify.Evidence`, the signature statistics the verifier reads, so an
episode the verifier accepted is one the oracle can in principle solve.

Scores (log-likelihood ratios against "no effect", under the Gaussian approximation the
statistics are built on: a statistic's ``z`` is N(0, 1) without an effect):

- a hypothesis (cause c, candidate slice S) scores ``z+^2 / 2`` with ``z+ = max(z, 0)``, the
  profile likelihood ratio of "c acts on S from the onset" (one-sided: the signature has a
  direction) against "no effect", at the best onset of a grid (see below);
- nested slices: the same statistic does not separate a slice from its parent or its children
  (a 2D slice's effect also moves its 1D parent), so, as the verifier does, the score of S is
  lowered by the evidence against "exactly S":

  * for each parent P of S (one condition dropped), the rest of the parent P \\ S, compared with
    the cells outside P, should show nothing: its ``z+^2 / 2`` is subtracted (the likelihood of
    the rest under "no effect there"), with ``z`` of the footprint that moved most there when
    the signature is an AND of footprints (a rest can show one and not the other);
  * for each child C of S (one condition added, any dimension, as the verifier's
    :func:`~causaltrace.episodes.verify.children`), the rest of the slice S \\ C, compared with the cells
    outside S, should show S's effect: with ``e`` the effect measured on S and ``se`` the
    standard error of the rest, its expected z is ``m = e / se``; the log-likelihood ratio of
    "no effect in the rest" (the child alone) against "the slice's effect there",
    ``m (m / 2 - z_rest)``, of the child that contradicts S most is subtracted when positive;

- the no-signal hypothesis (each of ``domain.no_signal_causes()``) scores ``t^2 / 2 - log n``,
  with ``t`` the verifier's Bonferroni scan threshold over every (cause, slice, onset) test the
  oracle makes and ``n`` the geometric mean number of candidate slices per signal cause: with
  the prior below, a signal hypothesis of a cause with ``n`` slices beats "no signal" exactly
  when its z exceeds ``t``, so pure noise maps to the no-signal cause at the scan's
  family-wise rate.

Practical size: as the verifier's scan requires a significant *and* practically large effect
(SNR >= ``snr``, the verifier's threshold) to say a cause fired, a hypothesis whose SNR is below
``snr`` has its score capped where it ties the no-signal hypothesis (and ties go to no signal):
a significant but tiny move, or a statistic whose z is overconfident, does not beat "nothing".

Relevance: the question is the root cause of the alerted movement. A hypothesis whose effect,
where the domain's evidence can estimate it (:meth:`~causaltrace.episodes.verify.Evidence.alert_share`),
accounts for less than ``relevance_share`` of every alert in the prompt is capped the same way:
an edit that moved its own small segment, or an ad whose siblings took over its traffic, is not
the answer however clearly its signature shows.

Prior: uniform over causes, and uniform over a cause's candidate slices within it (``-log n_c``,
a multiplicity correction of its own). Posterior: softmax of score + log prior over all
hypotheses.

Onset: the oracle does not know it. It scans a grid of onsets over the causes' prior onset
ranges (every ``onset_step`` steps, plus the domain's alert onset) and keeps, per hypothesis,
the onset of the largest z; the scan threshold counts the grid (Bonferroni over slices x onsets,
conservative since neighbouring onsets are correlated).

Cost: the nested refinement needs two statistics per parent and child, so it is applied
lazily, to the best hypotheses until the ``refine_top`` best (after refinement) are all refined.
The scan asks the evidence for every candidate's z at every onset at once where the evidence can
(its optional ``scan``), and reads only each candidate's best onset (and any within a relative
1e-9 of it) with the scalar statistic, so that every number it reports, and its choices, are
those of the scalar scan (``tests/episodes/test_oracle_batched_scan.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from causaltrace.episodes.domain import Domain
from causaltrace.episodes.verify import alert_share, candidate_masks, children, scan_threshold
from causaltrace.model.slices import Slice


@dataclass(frozen=True)
class Hypothesis:
    """One ranked answer: ``slice`` is canonical text (None: the whole panel or no slice);
    ``score`` the log-likelihood ratio against no effect (before the prior); ``posterior`` its
    posterior probability over all hypotheses."""

    cause: str
    slice: str | None
    score: float
    posterior: float
    onset: int | None = None


def posterior_margin(ranked: Sequence[Hypothesis]) -> float:
    """Top-1 minus top-2 posterior (1.0 when there is a single hypothesis).

    Args:
        ranked: The hypotheses, best first (0.0 when empty).
    """
    if not ranked:
        return 0.0
    second = ranked[1].posterior if len(ranked) > 1 else 0.0
    return float(ranked[0].posterior - second)


@dataclass
class _Candidate:
    cause: str
    slice: Slice
    mask: np.ndarray | None
    z: float = 0.0
    effect: float = 0.0
    snr: float = 0.0
    onset: int | None = None
    penalty: float = 0.0
    refined: bool = False
    share: float | None = None  # of the prompt's alerts (None: not estimated)

    def llr(self) -> float:
        return 0.5 * max(self.z, 0.0) ** 2 - self.penalty


class OracleSolver:
    """Rank every (cause, slice) hypothesis of an episode from its visible tables.

    Args:
        domain: The domain whose evidence and causes are read.
        scan_alpha: The family-wise false-positive rate of the scan over every cause, slice
            and onset (Bonferroni); 0.05 by default.
        snr: The signal-to-noise ratio a finding must reach; 1.0 by default.
        onset_step: The spacing of the onset grid over the causes' prior onset ranges; 2 by
            default.
        refine_top: How many top candidates get the nested-slice refinement (at least 1); 5 by
            default.
        onsets: The onsets to scan; the grid by default.
        relevance_share: The share of an alert a hypothesis must account for; 0.25 by default
            (``None``: every hypothesis is relevant).
    """

    def __init__(
        self,
        domain: Domain,
        *,
        scan_alpha: float = 0.05,
        snr: float = 1.0,
        onset_step: int = 2,
        refine_top: int = 5,
        onsets: Sequence[int] | None = None,
        relevance_share: float | None = 0.25,
    ):
        self.domain = domain
        self.relevance_share = relevance_share
        self.scm = domain.scm
        self.no_signal = tuple(domain.no_signal_causes())
        self.signal = tuple(c for c in self.scm.intervention_points if c not in self.no_signal)
        self.onsets = tuple(sorted(set(onsets))) if onsets else self._onset_grid(onset_step)
        self.refine_top = max(int(refine_top), 1)
        self.snr = float(snr)
        self.n_slices = {c: len(candidate_masks(self.scm, c)) for c in self.signal}
        tests = sum(self.n_slices.values()) * len(self.onsets)
        self.threshold = scan_threshold(scan_alpha, tests)
        n_causes = len(self.signal) + len(self.no_signal)
        self.log_prior_cause = -math.log(max(n_causes, 1))
        geo_mean = float(np.exp(np.mean([np.log(max(n, 1)) for n in self.n_slices.values()])))
        self.null_score = 0.5 * self.threshold**2 - math.log(geo_mean) if self.signal else 0.0
        self._masks: dict[str, np.ndarray] = {}
        self._child_masks: dict[str, list[np.ndarray]] = {}

    def _onset_grid(self, step: int) -> tuple[int, ...]:
        """Onsets every ``step`` steps over the union of the signal causes' prior ranges."""
        n_time = self.scm.panel.n_time
        first, last = n_time, -1
        for cause in self.signal:
            lo, hi = self.scm.point(cause).prior.onset_range(n_time)
            first, last = min(first, lo), max(last, hi)
        grid = set(range(first, last + 1, max(int(step), 1))) if last >= first else set()
        alert = int(self.domain.alert_onset())
        grid |= {alert} if 0 < alert < n_time else set()
        return tuple(sorted(grid))

    # -- the scan ------------------------------------------------------------------------------
    def _scan(self, evidence) -> list[_Candidate]:
        out = []
        for cause in self.signal:
            candidates = candidate_masks(self.scm, cause)
            batch = _batched_scan(evidence, cause, [mask for _, mask in candidates], self.onsets)
            for i, (sl, mask) in enumerate(candidates):
                best = _Candidate(cause, sl, mask)
                onsets = self.onsets if batch is None else _best_onsets(batch, i, self.onsets)
                self._read(evidence, best, onsets)
                if best.onset is None and batch is not None:  # the batch was wrong: read all
                    self._read(evidence, best, self.onsets)
                out.append(best)
        return out

    @staticmethod
    def _read(evidence, best: _Candidate, onsets) -> None:
        """Keep in ``best`` the onset of the largest z (the first on ties) among ``onsets``."""
        for onset in onsets:
            stat = evidence.statistic(best.cause, best.mask, onset)
            if stat is not None and (best.onset is None or stat.z > best.z):
                best.z, best.effect, best.onset = float(stat.z), float(stat.effect), onset
                best.snr = float(stat.snr)

    def _mask(self, sl: Slice) -> np.ndarray:
        """``sl``'s cells, computed once per solver (read-only)."""
        key = sl.canonical()
        mask = self._masks.get(key)
        if mask is None:
            mask = self._masks[key] = sl.mask(self.scm.panel)
            mask.setflags(write=False)
        return mask

    def _children(self, sl: Slice) -> list[np.ndarray]:
        """The cells of each child of ``sl`` (:func:`children`), computed once per solver."""
        key = sl.canonical()
        if key not in self._child_masks:
            self._child_masks[key] = [self._mask(c) for c in children(self.scm.panel, sl)]
        return self._child_masks[key]

    def _refine(self, evidence, cand: _Candidate) -> None:
        """Subtract the evidence against "exactly this slice" (module docstring)."""
        cand.refined = True
        cells = cand.mask  # None: the whole panel
        if cand.onset is None:
            return
        if self.relevance_share is not None:
            cand.share = alert_share(evidence, cand.cause, cells, cand.onset)
        panel, onset, penalty = self.scm.panel, cand.onset, 0.0
        if cells is not None:
            for parent in cand.slice.parents():
                inside_parent = self._mask(parent)
                rest = inside_parent & ~cells
                if not rest.any():
                    continue
                stat = evidence.statistic(cand.cause, rest, onset, reference=~inside_parent)
                if stat is not None:
                    # Any footprint moving in the rest of the parent speaks against S: one
                    # diluted there (bots' CTR where humans click most) can stay flat while
                    # the cause's own rate moves as much as in S.
                    moved = max(float(part.z) for part in stat.components())
                    penalty += 0.5 * max(moved, 0.0) ** 2
        inside = cells if cells is not None else np.ones(panel.n_cells, dtype=bool)
        worst = 0.0
        for sub in self._children(cand.slice):
            remaining = inside & ~sub
            if not remaining.any():
                continue
            stat = evidence.statistic(cand.cause, remaining, onset, reference=~inside)
            if stat is None or not (stat.se > 0) or not math.isfinite(stat.se):
                continue
            expected = max(cand.effect, 0.0) / stat.se
            # The rest's evidence for "only the child" (no effect in the rest) against "the
            # whole slice" (the slice's effect in the rest too): the log-likelihood ratio of
            # N(0, 1) against N(expected, 1) at its z, when positive. A rest whose effect is
            # far from zero, if not exactly the slice's size (a saturated effect: an ad that
            # stopped serving is at zero everywhere), says nothing for the child.
            # Both in the effect's own units (effect / se): a score-test z, which does not grow
            # linearly with a large effect, would make any large effect look short.
            z_rest = float(stat.effect) / stat.se
            worst = max(worst, expected * (0.5 * expected - z_rest))
        cand.penalty = penalty + worst

    def _irrelevant(self, cand: _Candidate) -> bool:
        return (
            self.relevance_share is not None
            and cand.share is not None
            and cand.share < self.relevance_share
        )

    def _score(self, cand: _Candidate) -> float:
        """The LLR; below the practical SNR, or accounting for too little of the alerts, it is
        capped where it ties "no signal"."""
        llr = cand.llr()
        if self.no_signal and (cand.snr < self.snr or self._irrelevant(cand)):
            # Just below the tie, so that no rounding lets it beat "no signal".
            tie = self.null_score + math.log(max(self.n_slices[cand.cause], 1))
            llr = min(llr, tie - 1e-9)
        return llr

    def _log_weight(self, cand: _Candidate) -> float:
        return (
            self._score(cand) + self.log_prior_cause - math.log(max(self.n_slices[cand.cause], 1))
        )

    def _refined_candidates(self, evidence) -> list[_Candidate]:
        """Every candidate, best first, the best ``refine_top`` of them refined (lazily: refine
        the best until the ``refine_top`` best are all refined)."""
        cands = self._scan(evidence)
        for _ in range(len(cands)):
            cands.sort(key=self._log_weight, reverse=True)
            pending = [c for c in cands[: self.refine_top] if not c.refined]
            if not pending:
                break
            for c in pending:
                self._refine(evidence, c)
        return cands

    def _ranked(self, cands: Sequence[_Candidate]) -> list[Hypothesis]:
        # No-signal first: a tie (a practically small effect) goes to it.
        weights = [self.null_score + self.log_prior_cause for _ in self.no_signal]
        names: list[tuple] = [(cause, None, self.null_score, None) for cause in self.no_signal]
        weights += [self._log_weight(c) for c in cands]
        names += [(c.cause, c.slice.canonical() or None, self._score(c), c.onset) for c in cands]
        w = np.asarray(weights, dtype=np.float64)
        post = np.exp(w - w.max())
        post /= post.sum()
        order = np.argsort(-w, kind="stable")
        return [
            Hypothesis(names[i][0], names[i][1], float(names[i][2]), float(post[i]), names[i][3])
            for i in order
        ]

    # -- public API ----------------------------------------------------------------------------
    def rank(self, tables: Mapping[str, Any]) -> list[Hypothesis]:
        """Every hypothesis, best first, with its score and posterior.

        Args:
            tables: The episode's visible tables, by name.
        """
        return self._ranked(self._refined_candidates(self.domain.evidence(tables)))

    def answer(self, tables: Mapping[str, Any]) -> Hypothesis:
        """The top hypothesis.

        Args:
            tables: The episode's visible tables, by name.
        """
        return self.rank(tables)[0]

    def answer_set(self, tables: Mapping[str, Any], max_causes: int = 2) -> list[Hypothesis]:
        """The causes the tables support, the strongest first: the top hypothesis, then, while
        fewer than ``max_causes``, the best hypothesis of another cause that is itself a finding
        (it beats "no signal" after its nested-slice refinement: significant, practically large
        and relevant to the alerts). One cause, or no signal, when nothing else is found: the
        number of causes is read from the evidence, as an analyst would explain the alerts
        away cause by cause.

        Args:
            tables: The episode's visible tables, by name.
            max_causes: The most causes to return; 2 by default.
        """
        evidence = self.domain.evidence(tables)
        cands = self._refined_candidates(evidence)
        ranked = self._ranked(cands)
        if not ranked or ranked[0].cause in self.no_signal:
            return ranked[:1]
        null = self.null_score + self.log_prior_cause
        causes = [ranked[0].cause]
        while len(causes) < max_causes:
            found = None
            others = [c for c in cands if c.cause not in causes]
            # Refinement only lowers a weight: the first candidate, best first, still above the
            # null once refined is the best finding; none above it unrefined ends the search.
            for cand in sorted(others, key=self._log_weight, reverse=True):
                if self._log_weight(cand) <= null:
                    break
                if not cand.refined:
                    self._refine(evidence, cand)
                if self._log_weight(cand) > null:
                    found = cand
                    break
            if found is None:
                break
            causes.append(found.cause)
        ranked = self._ranked(cands)  # with the refinements made above
        return [next(h for h in ranked if h.cause == cause) for cause in causes]


def oracle_reading(
    solver: OracleSolver, tables: Mapping[str, Any], truth: Sequence[tuple[str, str | None]]
) -> dict[str, Any]:
    """What the oracle makes of an episode whose true ``(cause, slice)`` pairs are ``truth``:
    its top answer, its posterior margin (top-1 minus top-2) and the posterior it puts on the
    truth. Generation records this in each label's difficulty (``measured``): a small margin or
    a small posterior on the truth marks an episode that is hard even knowing the model.

    Args:
        solver: The oracle.
        tables: The episode's visible tables, by name.
        truth: The true ``(cause, slice)`` pairs (slice ``None``: the whole panel).
    """
    ranked = solver.rank(tables)
    wanted = {(cause, slice_ or None) for cause, slice_ in truth}
    top = ranked[0] if ranked else None
    return {
        "oracle_answer": None if top is None else {"cause": top.cause, "slice": top.slice},
        "oracle_margin": posterior_margin(ranked),
        "oracle_posterior_true": float(
            sum(h.posterior for h in ranked if (h.cause, h.slice) in wanted)
        ),
    }


# Onsets whose batched z is within this of the best are read again one by one: the batch sums
# in another order than the scalar path, so two onsets' z can swap places only if they are this
# close (the scalar statistic then decides, as without the batch).
BATCH_TIE = 1e-9


def _batched_scan(evidence, cause: str, masks, onsets) -> tuple[np.ndarray, np.ndarray] | None:
    """The evidence's batched z over candidates x onsets (:meth:`Evidence.scan`), if it has one."""
    method = getattr(evidence, "scan", None)
    return None if method is None else method(cause, masks, onsets)


def _best_onsets(batch: tuple[np.ndarray, np.ndarray], row: int, onsets) -> tuple[int, ...]:
    """The onsets of candidate ``row`` worth reading with the scalar statistic: those whose
    batched z is within :data:`BATCH_TIE` (relative) of the best, in grid order; every onset
    where the batch has a non-finite z (the scalar path decides those)."""
    z, valid = batch[0][row], batch[1][row]
    if not valid.any():
        return ()
    if (valid & ~np.isfinite(z)).any():
        return tuple(o for o, v in zip(onsets, valid) if v)
    top = z[valid].max()
    near = valid & (z >= top - BATCH_TIE * max(abs(top), 1.0))
    return tuple(o for o, v in zip(onsets, near) if v)
