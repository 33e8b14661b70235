"""The acceptance verifier: an episode is kept only if its answer can be found from its tables.

Generation and acceptance are separate stages. The verifier reads what the agent reads (through
the domain's :class:`Evidence`, built from the rendered tables alone) and checks, for the drawn
cause ``c``, slice ``S`` and onset ``t0``:

1. detectable: c's signature statistic on S has SNR >= ``snr`` (effect over the episode's own
   day-to-day noise, estimated before the onset), and inside ``snr_band`` where a difficulty
   tier sets one (see causaltrace/episodes/difficulty.py);
2. identifiable: for every parent P of S (one condition dropped) the rest of the parent, P \\ S,
   shows no such effect (SNR < ``snr``), and for every child C of S (one condition added) the
   rest of the slice, S \\ C, shows it too (SNR >= ``child_snr``). If S \\ C does not, C explains
   the effect as well as S (when S \\ C would have shown C's effect) or the tables cannot tell
   them apart (when it would not): either way the slice is not identifiable;
3. distinguishable: no declared confuser's signature fires on any of its own candidate slices
   with an SNR of at least ``confuser_ratio`` times the true cause's (a confuser may co-occur,
   e.g. a natural dip in demand during a budget cut, as long as it is clearly the weaker story);
4. for a no-signal cause: no cause's signature fires on any of its candidate slices at the alert
   window.

Relevance: a signature that fires where it cannot account for the alert (a bid raise that moved
a small segment while the alert is about conversions in another campaign, a disapproved ad whose
siblings took over its traffic) is not a competing root cause of *the movement*: it is the
account's everyday change. Where the domain's evidence estimates how much of the prompt's
alerts a hypothesis accounts for (the optional :meth:`Evidence.alert_share`), checks 3 and 4
count a firing signature only if it accounts for at least ``relevance_share`` of an alert.

A concurrent episode (two simultaneous causes) is accepted by :func:`verify_concurrent` only if
*each* cause passes 1-3 on its own slice, with the other true cause not counted as a confuser
of it (it is at work, so its signature may fire); a further cause's rejection reasons carry the
prefix ``second_`` (``second_undetectable``, ``second_parent_explains``, ...).

For a domain with a monitoring rule, :func:`verify_alert` adds a gate that reads the hidden
counterfactual (so it is not part of :func:`verify`, which reads the tables only): the prompt's
alert must fire, and for a signal cause the cause must explain at least ``explained_share`` of
its move without the alert firing in the counterfactual world as well.

"Fires" in a scan over many slices means significant after a Bonferroni correction over the
scan (one-sided z >= Phi^-1(1 - ``scan_alpha`` / m)) *and* SNR >= ``snr``, so that a scan of a
hundred noisy slices does not find a cause in pure noise.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, ClassVar, Protocol

import numpy as np
from scipy import special

from causaltrace.episodes.alerts import AlertExplanation
from causaltrace.model.intervention_points import InterventionDraw, candidate_slices
from causaltrace.model.panel import Panel
from causaltrace.model.slices import Slice


@dataclass(frozen=True)
class Statistic:
    """A signature statistic: ``effect`` in the cause's direction; ``noise``, the episode's own
    day-to-day noise of the same quantity (so ``snr`` = effect / noise is the effect in units of
    a day's fluctuation); and ``se``, the standard error of the effect (so ``z`` = effect / se
    is its significance)."""

    effect: float
    noise: float
    se: float
    z_value: float | None = None  # a better-calibrated z (e.g. a score test), if the domain has one
    # The footprints of an AND of evidence (:meth:`weakest`), each readable on its own.
    parts: tuple[Statistic, ...] = ()

    @classmethod
    def from_daily(cls, effect: float, noise: float, n_post: int, n_pre: int) -> Statistic:
        """A difference of two means of daily values with standard deviation ``noise``.

        Args:
            effect: The difference of the post-onset and pre-onset means, in the cause's direction.
            noise: The standard deviation of one day's value.
            n_post: The number of days after the onset (at least 1 is used).
            n_pre: The number of days before the onset (at least 1 is used).
        """
        se = noise * math.sqrt(1.0 / max(n_post, 1) + 1.0 / max(n_pre, 1))
        return cls(effect, noise, se)

    @property
    def snr(self) -> float:
        if not (self.noise > 0) or not math.isfinite(self.effect):
            return 0.0
        return self.effect / self.noise

    @property
    def z(self) -> float:
        if self.z_value is not None:
            return self.z_value
        if not (self.se > 0) or not math.isfinite(self.effect):
            return 0.0
        return self.effect / self.se

    @staticmethod
    def weakest(*stats: Statistic | None) -> Statistic | None:
        """AND of evidence: the component with the lowest SNR (None if any is missing), with
        every component kept in ``parts``.

        Args:
            *stats: The components; any ``None`` makes the result ``None``.
        """
        if any(s is None for s in stats):
            return None
        low = min(stats, key=lambda s: s.snr)  # type: ignore[union-attr]
        return replace(low, parts=tuple(stats))  # type: ignore[arg-type]

    def components(self) -> tuple[Statistic, ...]:
        """The footprints this statistic reads (itself, if it reads one)."""
        return self.parts or (self,)


class Evidence(Protocol):
    """Signature statistics computed from one episode's agent-visible tables."""

    def statistic(
        self, cause: str, cells: np.ndarray | None, onset: int, reference: np.ndarray | None = None
    ) -> Statistic | None:
        """Cause's signature on the panel cells in ``cells`` (``None``: the whole panel) from
        ``onset`` on, compared where it compares with other cells against ``reference``
        (default: every cell not in ``cells``); ``None`` if the cause has no signature or the
        tables the signature reads cannot resolve the cells.

        Args:
            cause: The cause whose signature is read.
            cells: A boolean mask over the panel's leaf cells, or ``None`` for the whole panel.
            onset: The first time step of the effect.
            reference: The cells to compare against; every cell not in ``cells`` by default.
        """

    # Optional (a domain's evidence may leave it out; then every firing signature counts):
    # def alert_share(self, cause: str, cells: np.ndarray | None, onset: int) -> float | None:
    #     """The largest share of one of the prompt's alerts that ``cause`` acting on ``cells``
    #     from ``onset`` accounts for, estimated from the tables (None: cannot be told)."""
    #
    # Optional, for speed only (without it the oracle reads every onset one by one):
    # def scan(self, cause: str, masks: Sequence[np.ndarray], onsets: Sequence[int]
    #          ) -> tuple[np.ndarray, np.ndarray] | None:
    #     """``statistic(cause, mask, onset).z`` for every mask (rows) and onset (columns), and
    #     where the statistic exists, computed at once; None for a cause it does not batch.
    #     Its z may differ from the scalar one in the last bits: the oracle uses it to choose
    #     each candidate's onset and reads every number it reports from ``statistic``."""


def alert_share(
    evidence: Evidence, cause: str, cells: np.ndarray | None, onset: int
) -> float | None:
    """``evidence.alert_share(...)`` if the domain's evidence estimates it, else None.

    Args:
        evidence: The episode's evidence.
        cause: The hypothesized cause.
        cells: The hypothesized cells (a mask over the leaf cells), or ``None`` for the whole
            panel.
        onset: The hypothesized onset.
    """
    method = getattr(evidence, "alert_share", None)
    return None if method is None else method(cause, cells, onset)


def is_relevant(
    evidence: Evidence,
    cause: str,
    cells: np.ndarray | None,
    onset: int,
    config: VerifierConfig,
) -> bool:
    """Whether a hypothesis could be a root cause of the alerted movement: it accounts for at
    least ``config.relevance_share`` of an alert (True where that cannot be estimated, or with
    the check off).

    Args:
        evidence: The episode's evidence.
        cause: The hypothesized cause.
        cells: The hypothesized cells (a mask over the leaf cells), or ``None`` for the whole
            panel.
        onset: The hypothesized onset.
        config: The verifier's thresholds (``relevance_share``; ``None`` turns the check off).
    """
    if config.relevance_share is None:
        return True
    share = alert_share(evidence, cause, cells, onset)
    return share is None or share >= config.relevance_share


@dataclass(frozen=True)
class VerifierConfig:
    """Thresholds of the verifier (``causaltrace/conf/verifier/*.yaml``)."""

    snr: float = 1.0
    child_snr: float | None = None  # defaults to snr
    scan_alpha: float = 0.05
    confuser_ratio: float = 0.5
    check_children: bool = True
    check_confusers: bool = True
    explained_share: float = 0.5  # share of the alerted move a signal cause must have made
    check_alert: bool = True  # the explained-alert gate (domains with a monitor only)
    # A firing signature that accounts for less of every alert than this is the account's
    # everyday change, not a competing root cause (None: every firing signature counts).
    relevance_share: float | None = 0.25
    # Each further cause of a concurrent episode must make at least this share of one of the
    # prompt's alerts (its Shapley share, factual against counterfactual with the same noise).
    concurrent_share: float = 0.25
    # The oracle (causaltrace.episodes.oracle), reading the tables with the model known and the
    # draw not, must name a true cause: a label the data cannot support is rejected.
    check_oracle: bool = True
    # A difficulty tier's band [low, high) of the detection SNR (causaltrace.episodes.difficulty; high
    # None: unbounded). It bounds only the detection statistic: the identifiability checks keep
    # ``snr`` (a strong tier must not demand that every sub-slice be strong too).
    snr_band: tuple[float, float | None] | None = None
    # The label holds every change that moved the page (causaltrace.episodes.change_shares):
    # each background change's Shapley share of each shown alert, its causes and background
    # switched on and off with shared noise, must stay below this (None: the attribution over
    # every change is off, and only the causes' shares are read, as before it existed).
    background_share: float | None = None
    # The pairwise estimate of those shares is trusted only while its efficiency residual (the
    # interaction of three or more changes) stays below this share of every shown alert's move.
    attribution_residual: float = 0.05
    # Up to this many players (causes and background changes) every coalition is simulated.
    exact_players: int = 4
    # The oracle reads every shown alert, not only its top answer: each cause it finds in the
    # tables (its answer set, up to one more than the label holds) must be a labelled cause.
    check_oracle_set: bool = False

    # Keys added after splits were committed: recorded in a manifest only when set away from
    # their defaults, so a split made before them reads back to the config that made it.
    RECORDED_IF_SET: ClassVar[tuple[str, ...]] = (
        "background_share",
        "attribution_residual",
        "exact_players",
        "check_oracle_set",
    )

    def record(self) -> dict[str, Any]:
        """The settings as a manifest records them (see ``RECORDED_IF_SET``)."""
        out = asdict(self)
        for f in fields(self):
            if f.name in self.RECORDED_IF_SET and out[f.name] == f.default:
                del out[f.name]
        return out

    @property
    def child_threshold(self) -> float:
        return self.snr if self.child_snr is None else self.child_snr


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    reasons: tuple[str, ...] = ()
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def reason(self) -> str:
        """The first rejection reason's kind (e.g. ``undetectable``), for reporting."""
        return self.reasons[0].split(":")[0] if self.reasons else "accepted"


def scan_threshold(alpha: float, tests: int) -> float:
    """One-sided Bonferroni z threshold for ``tests`` simultaneous tests.

    Args:
        alpha: The family-wise false-positive rate.
        tests: The number of tests (at least 1 is used).
    """
    # norm.isf(q) is -ndtri(q) (scipy computes it so); scipy.special spares worker processes
    # the import of scipy.stats (about 0.4 s each).
    return float(-special.ndtri(alpha / max(tests, 1)))


# Candidate slices and their cell masks depend only on the SCM and the cause: computed once per
# SCM (weakly keyed, so a discarded SCM takes its entry along) instead of once per episode.
_CANDIDATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def candidate_masks(scm, cause: str) -> list[tuple[Slice, np.ndarray | None]]:
    """``cause``'s candidate slices with their read-only masks (None for the whole panel)."""
    by_cause = _CANDIDATES.setdefault(scm, {})
    if cause not in by_cause:
        point = scm.point(cause)
        out: list[tuple[Slice, np.ndarray | None]] = []
        for dims in point.prior.slice_dims:
            for sl in candidate_slices(scm.panel, tuple(dims), point.prior.allowed_levels):
                mask = None if sl.is_whole_panel else sl.mask(scm.panel)
                if mask is not None:
                    mask.setflags(write=False)
                out.append((sl, mask))
        by_cause[cause] = out
    return by_cause[cause]


def scan_stats(evidence: Evidence, scm, cause: str, onset: int) -> list[tuple[Slice, Statistic]]:
    """``cause``'s signature on each of its candidate slices that the tables can resolve.

    Args:
        evidence: The episode's evidence.
        scm (SCM): The model whose candidate slices of ``cause`` are read.
        cause: The cause.
        onset: The onset to read from.
    """
    out = []
    for sl, mask in candidate_masks(scm, cause):
        stat = evidence.statistic(cause, mask, onset)
        if stat is not None:
            out.append((sl, stat))
    return out


def fires(
    stats: list[tuple[Slice, Statistic]],
    threshold: float,
    config: VerifierConfig,
    relevant: Callable[[Slice], bool] | None = None,
) -> tuple[bool, float, str]:
    """Whether any statistic is significant at ``threshold``, practically large (SNR) and, if
    ``relevant`` is given, relevant to the alert; with the best z and its slice.

    Args:
        stats: ``(slice, statistic)`` pairs, as :func:`scan_stats` returns.
        threshold: The z a statistic must reach.
        config: The verifier's thresholds (``snr``).
        relevant: A predicate on slices; every slice counts by default.

    Returns:
        ``(fired, best z, best slice's canonical text)``; ``(False, 0.0, "")`` without stats.
    """
    if not stats:
        return False, 0.0, ""
    best_slice, best = max(stats, key=lambda item: item[1].z)
    fired = any(
        s.z >= threshold and s.snr >= config.snr and (relevant is None or relevant(sl))
        for sl, s in stats
    )
    return fired, best.z, best_slice.canonical()


def _relevance(evidence: Evidence, scm, cause: str, onset: int, config: VerifierConfig):
    """A slice -> relevant predicate for ``cause``'s candidate slices at ``onset``."""
    masks = {sl: mask for sl, mask in candidate_masks(scm, cause)}
    return lambda sl: is_relevant(evidence, cause, masks.get(sl), onset, config)


def children(panel: Panel, sl: Slice) -> list[Slice]:
    """Slices with one more condition than ``sl`` that hold some, but not all, of its cells.

    Args:
        panel: The panel.
        sl: The slice to refine.
    """
    inside = sl.mask(panel)
    out = []
    for dim in panel.dimensions:
        if dim.name in sl.dims:
            continue
        for level in dim.levels:
            child = Slice((*sl.conditions, (dim.name, level)))
            sub = child.mask(panel)
            if sub.any() and (sub != inside).any():
                out.append(child)
    return out


def verify(
    scm,
    evidence: Evidence,
    draw: InterventionDraw,
    *,
    alert_onset: int,
    no_signal: Iterable[str],
    config: VerifierConfig = VerifierConfig(),
    also_true: Iterable[str] = (),
) -> Verdict:
    """Accept or reject one episode, reading only ``evidence`` (built from its tables).

    ``also_true`` names the other true causes of a concurrent episode: they are never counted
    as confusers of ``draw``'s cause.

    Args:
        scm (SCM): The episode's model (its intervention points and panel).
        evidence: Statistics read from the episode's agent-visible tables.
        draw: The drawn intervention: the cause, its slice and its window.
        alert_onset: The time step the alert points at (where no-signal scans read from).
        no_signal: The causes that carry no signal.
        config: The verifier's thresholds; :class:`VerifierConfig` defaults by default.
        also_true: The other true causes of a concurrent episode; none by default.
    """
    no_signal = set(no_signal)
    also_true = set(also_true)
    panel = scm.panel
    cause, onset = draw.point, draw.window.onset
    if cause in no_signal:
        # One family of tests over every cause and candidate slice: the family-wise rate of
        # finding a cause in pure noise is scan_alpha.
        scans = {
            other: scan_stats(evidence, scm, other, alert_onset)
            for other in scm.intervention_points
            if other not in no_signal
        }
        threshold = scan_threshold(config.scan_alpha, sum(len(v) for v in scans.values()))
        reasons, stats = [], {"scan_threshold": threshold}
        for other, found in scans.items():
            relevant = _relevance(evidence, scm, other, alert_onset, config)
            fired, best_z, where = fires(found, threshold, config, relevant)
            stats[f"scan_z:{other}"] = best_z
            if fired:
                reasons.append(f"no_signal_detects:{other}@{where or 'all'}")
        return Verdict(not reasons, tuple(reasons), stats)

    cells = None if draw.slice.is_whole_panel else draw.slice.mask(panel)
    stat = evidence.statistic(cause, cells, onset)
    if stat is None or stat.snr < config.snr:
        snr = 0.0 if stat is None else stat.snr
        return Verdict(False, (f"undetectable:snr={snr:.2f}",), {"snr": snr})
    stats = {"snr": stat.snr, "z": stat.z}
    if config.snr_band is not None:
        low, high = config.snr_band
        if stat.snr < low:
            return Verdict(False, (f"too_weak:snr={stat.snr:.2f}",), stats)
        if high is not None and stat.snr >= high:
            return Verdict(False, (f"too_strong:snr={stat.snr:.2f}",), stats)
    reasons = []
    if not draw.slice.is_whole_panel:
        for parent in draw.slice.parents():
            rest = parent.mask(panel) & ~cells
            if not rest.any():
                reasons.append(f"parent_same_cells:{parent.canonical() or 'all'}")
                continue
            outside = evidence.statistic(cause, rest, onset, reference=~parent.mask(panel))
            if outside is not None and outside.snr >= config.snr:
                reasons.append(f"parent_explains:{parent.canonical() or 'all'}")
        if config.check_children:
            for child in children(panel, draw.slice):
                sub = child.mask(panel)
                # Both parts are compared with the cells outside the slice, not with each other.
                inner = evidence.statistic(cause, sub, onset, reference=~cells)
                remaining = evidence.statistic(cause, cells & ~sub, onset, reference=~cells)
                if inner is None or remaining is None:
                    continue  # the tables cannot tell this child from the rest of the slice
                if remaining.snr >= config.child_threshold:
                    continue  # the effect is also outside the child: the child explains less
                if inner.effect / remaining.noise >= config.child_threshold:
                    reasons.append(f"child_explains:{child.canonical()}")
                else:  # the rest of the slice is too small or noisy to tell them apart
                    reasons.append(f"child_indistinguishable:{child.canonical()}")
                break
    if config.check_confusers:
        for other in scm.point(cause).info.confusers:
            if other in no_signal or other == cause or other in also_true:
                continue
            found = scan_stats(evidence, scm, other, onset)
            threshold = scan_threshold(config.scan_alpha, len(found))
            rivals = [(sl, st) for sl, st in found if st.snr >= config.confuser_ratio * stat.snr]
            relevant = _relevance(evidence, scm, other, onset, config)
            fired, best_z, where = fires(rivals, threshold, config, relevant)
            stats[f"confuser_z:{other}"] = max((st.z for _, st in found), default=0.0)
            if fired:
                reasons.append(f"confusable:{other}@{where or 'all'}")
    return Verdict(not reasons, tuple(reasons), stats)


SECOND = "second_"


def verify_concurrent(
    scm,
    evidence: Evidence,
    draws: Iterable[InterventionDraw],
    *,
    alert_onset: int,
    no_signal: Iterable[str],
    configs: Iterable[VerifierConfig],
) -> Verdict:
    """Accept a concurrent episode only if every cause's draw passes :func:`verify` on its own
    slice (``configs``: one verifier per draw, e.g. each with its cause's difficulty band),
    with the other true causes not counted as its confusers.

    The first cause's reasons and stats are :func:`verify`'s; a further cause's reasons carry
    the prefix ``second_`` (``second_undetectable:snr=0.40``) and its stats the prefix
    ``second:`` (``second:snr``). Every draw is checked (so the stats hold both), and a
    no-signal cause is refused outright: a concurrent episode has signal causes only.

    Args:
        scm (SCM): The episode's model.
        evidence: Statistics read from the episode's agent-visible tables.
        draws: The causes' drawn interventions, first cause first.
        alert_onset: The time step the alert points at.
        no_signal: The causes that carry no signal.
        configs: One verifier config per draw.

    Raises:
        ValueError: ``configs`` is not one per draw, or the causes are not distinct signal
            causes.
    """
    draws, configs = list(draws), list(configs)
    no_signal = set(no_signal)
    causes = [d.point for d in draws]
    if len(configs) != len(draws):
        raise ValueError(f"verify_concurrent: {len(draws)} draws but {len(configs)} configs")
    if len(set(causes)) != len(causes) or any(c in no_signal for c in causes):
        raise ValueError(f"a concurrent episode needs distinct signal causes, got {causes}")
    reasons: list[str] = []
    stats: dict[str, float] = {}
    for i, (draw, config) in enumerate(zip(draws, configs, strict=True)):
        verdict = verify(
            scm,
            evidence,
            draw,
            alert_onset=alert_onset,
            no_signal=no_signal,
            config=config,
            also_true=[c for c in causes if c != draw.point],
        )
        prefix = "" if i == 0 else SECOND
        reasons += [prefix + r for r in verdict.reasons]
        stats.update({(f"second:{k}" if i else k): v for k, v in verdict.stats.items()})
    return Verdict(not reasons, tuple(reasons), stats)


def verify_alert(
    explanation: AlertExplanation | None, *, signal: bool, config: VerifierConfig = VerifierConfig()
) -> Verdict:
    """The explained-alert gate of a monitored domain's episode (``explanation`` is None when
    its tables raise no alert).

    Every prompt says an alert fired, so an episode without one is rejected (``no_alert``). A
    signal cause must have made at least ``config.explained_share`` of the alerted move
    (``alert_unexplained``) and the alert must not fire without it (``alert_without_cause``):
    otherwise the prompt points at a movement the answer does not account for. A no-signal
    episode's alert is a false alarm by construction, so only its existence is checked. With
    ``config.check_alert`` off nothing is rejected; the share is recorded either way. For a
    concurrent episode the explanation is already the causes' together (the counterfactual
    world has none of them): the pair must make ``explained_share`` of the move, and the alert
    must not fire without both.

    Args:
        explanation: The alert and what the cause explains of it; ``None`` when no alert fired.
        signal: Whether the episode's cause carries a signal.
        config: The verifier's thresholds (``check_alert``, ``explained_share``);
            :class:`VerifierConfig` defaults by default.
    """
    if explanation is None:
        reasons = ("no_alert",) if config.check_alert else ()
        return Verdict(not reasons, reasons, {})
    share = explanation.explained_share
    stats = {"alert_explained_share": share}
    reasons = []
    if signal and config.check_alert:
        if share < config.explained_share:
            reasons.append(f"alert_unexplained:share={share:.2f}")
        if explanation.fires_without_cause:
            reasons.append("alert_without_cause")
    return Verdict(not reasons, tuple(reasons), stats)
