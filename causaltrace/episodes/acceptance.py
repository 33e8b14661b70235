"""What makes an episode valid: the checks an attempt passes before it becomes an episode.

A domain author reads this module to learn why a draw is rejected. :func:`accept_episode`
builds attempts 0, 1, ... of an episode spec (the same spec and attempt give the same worlds)
and returns the first one every stage accepts, cheapest stage first:

1. **The alert gate** (domains with a :class:`~causaltrace.episodes.alerts.Monitor`), read
   from the simulated worlds before any table is rendered: the paged alert fired, and a signal
   cause made at least ``alert_share`` of its move (``verify_alert``).
2. **The table verifier** (:mod:`causaltrace.episodes.verify`), on the rendered tables: the
   cause's signature is detectable on its slice (SNR within the domain's difficulty band) and
   identifiable against the other causes' scans; for a concurrent episode, each cause on its own
   slice (:func:`verify_episode`).
3. **The oracle** (:mod:`causaltrace.episodes.oracle`: the model known, the draw not): its answer
   names a true cause, and with ``check_oracle_set`` every cause it finds relevant is labelled
   (:func:`check_oracle`).
4. **Every change's share** (``background_share`` set, the default verifier): Shapley shares
   of each shown alert over worlds that switch each cause and each background change on and off
   with the episode's noise (:mod:`causaltrace.episodes.change_shares`); no unlabelled change
   makes ``background_share`` of a shown alert, and the causes make half the paged one
   (:func:`check_change_shares`). Without it, a concurrent episode's causes are checked for a
   share of the alerts alone (:func:`check_cause_shares`).

The accepted episode's label records what was measured (the verifier's SNR and z, the oracle's
reading, the shares); the rejections of every attempt are returned beside it, and a spec with no
accepted attempt in ``max_attempts`` is reported as the domain bug it is (its prior draws effects
the tables cannot show). Sharding, resuming and writing datasets is
:mod:`causaltrace.datasets.generation`'s job.
"""

from __future__ import annotations

import math
import weakref
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

from causaltrace.episodes.alert_shares import cause_alert_shares, weakest_cause
from causaltrace.episodes.change_shares import ChangeAttribution, attribute_changes
from causaltrace.episodes.domain import Domain, domain_has_monitor
from causaltrace.episodes.labels import OracleLabel
from causaltrace.episodes.oracle import OracleSolver, oracle_reading
from causaltrace.episodes.sampling import (
    Episode,
    EpisodeSpec,
    complete_episode,
    monitor_explanation,
    simulate_attempt,
)
from causaltrace.episodes.verify import (
    Verdict,
    VerifierConfig,
    verify,
    verify_alert,
    verify_concurrent,
)
from causaltrace.errors import CausalTraceError


def verify_episode(domain: Domain, episode: Episode, verifier: VerifierConfig) -> Verdict:
    """The verdict on one built attempt: the explained-alert gate (for a domain with a monitor),
    then the table verifier.

    The gate runs first and a rejection there stops the attempt (the verifier's scans cost far
    more, and an episode whose prompt names an alert that did not fire, or that the cause did
    not make, is unusable whatever they find). An accepted verdict carries both stages' stats.

    A concurrent episode (``episode.also``) passes the gate for its causes together, then
    :func:`~causaltrace.episodes.verify.verify_concurrent`: every cause must be detectable and
    identifiable on its own slice (a further cause with ``verifier`` without its band, banded
    by the domain's difficulty for that cause's typical SNR).
    """
    gate = None
    if domain_has_monitor(domain):
        signal = episode.draw.point not in domain.no_signal_causes()
        gate = verify_alert(episode.alert, signal=signal, config=verifier)
        if not gate.accepted:
            return gate
    if episode.also:
        unbanded = replace(verifier, snr_band=None)
        verdict = verify_concurrent(
            domain.scm,
            domain.evidence(episode.tables),
            episode.draws,
            alert_onset=domain.alert_onset(),
            no_signal=domain.no_signal_causes(),
            configs=[
                verifier,
                *(
                    domain.difficulty.verifier(unbanded, typical_snr(domain, d.point))
                    for d in episode.also
                ),
            ],
        )
    else:
        verdict = verify(
            domain.scm,
            domain.evidence(episode.tables),
            episode.draw,
            alert_onset=domain.alert_onset(),
            no_signal=domain.no_signal_causes(),
            config=verifier,
        )
    if gate is None or not gate.stats:
        return verdict
    return Verdict(verdict.accepted, verdict.reasons, {**verdict.stats, **gate.stats})


def typical_snr(domain: Domain, cause: str) -> float:
    """The cause's typical detection SNR, the unit of a difficulty tier's SNR band (1 when
    the domain declares none)."""
    return float(domain.scm.point(cause).info.typical_snr or 1.0)


def verifier_measurements(label: OracleLabel, verdict: Verdict, typical: float) -> dict:
    """What the verifier measured on an accepted episode's tables: the detection SNR and z of a
    signal cause (and the SNR in units of the cause's ``typical`` SNR), the strongest scan z of
    any cause in a no-signal episode (its most tempting false lead), the alert's explained share
    and, for a concurrent episode, its second cause's SNR and z."""
    stats = verdict.stats
    scans = [v for k, v in stats.items() if k.startswith("scan_z:")]
    snr = stats.get("snr")
    measured = {
        "snr": snr,
        "relative_snr": None if snr is None else snr / typical,
        "z": stats.get("z"),
        "strongest_false_lead_z": max(scans) if scans else None,
        "alert_explained_share": stats.get("alert_explained_share"),
    }
    if label.also:
        measured["second"] = {
            "cause": label.also[0].cause,
            "snr": stats.get("second:snr"),
            "z": stats.get("second:z"),
        }
    return measured


_ORACLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def oracle_measurements(
    label: OracleLabel, domain: Domain, tables, verifier: VerifierConfig | None = None
) -> dict:
    """The oracle's reading of an episode's tables: its answer, its posterior margin and the
    posterior it puts on the truth (:mod:`causaltrace.episodes.oracle`: the model known, the
    draw not), with the verifier's scan level, practical SNR and relevance share. One solver
    per domain and settings, built on first use."""
    verifier = VerifierConfig() if verifier is None else verifier
    key = (verifier.scan_alpha, verifier.snr, verifier.relevance_share)
    solvers = _ORACLES.setdefault(domain, {})
    if key not in solvers:
        solvers[key] = OracleSolver(
            domain,
            scan_alpha=verifier.scan_alpha,
            snr=verifier.snr,
            relevance_share=verifier.relevance_share,
        )
    reading = oracle_reading(solvers[key], tables, label.causes)
    if verifier.check_oracle_set:
        found = solvers[key].answer_set(tables, max_causes=len(label.causes) + 1)
        reading["oracle_set"] = [{"cause": h.cause, "slice": h.slice} for h in found]
    return reading


def check_oracle(label: OracleLabel, reading: Mapping[str, Any], verifier: VerifierConfig):
    """The oracle gate: reject a label the tables do not support (the oracle's answer names no
    true cause) or, with ``verifier.check_oracle_set``, one the tables support only in part (a
    cause the oracle finds in them, relevant to a shown alert, is not labelled); None when the
    oracle agrees or the gate is off.

    Args:
        label: The episode's label.
        reading: The oracle's measurements (its ``oracle_answer`` is read).
        verifier: The verifier settings (``check_oracle`` turns the gate on).
    """
    answer = reading.get("oracle_answer")
    if not verifier.check_oracle or answer is None:
        return None
    causes = {cause for cause, _ in label.causes}
    if answer["cause"] not in causes:
        where = answer["slice"] or "all"
        return Verdict(False, (f"oracle_disagrees:{answer['cause']}@{where}",), {})
    for found in reading.get("oracle_set") or ():  # every cause the oracle finds is labelled
        if found["cause"] not in causes:
            where = found["slice"] or "all"
            return Verdict(False, (f"oracle_finds_unlabelled:{found['cause']}@{where}",), {})
    return None


def check_cause_shares(
    shares: Mapping[str, Mapping[str, float]] | None, verifier: VerifierConfig
) -> Verdict | None:
    """Every cause of a concurrent episode must make ``verifier.concurrent_share`` of one of the
    prompt's alerts; None when each does (or the check cannot apply).

    Args:
        shares: Cause -> alert -> its share of that alert, or ``None``.
        verifier: The verifier settings (``concurrent_share``, ``check_alert``).
    """
    if not shares or len(shares) < 2 or not verifier.check_alert:
        return None
    cause, best = weakest_cause(shares)
    if best >= verifier.concurrent_share:
        return None
    return Verdict(False, (f"cause_unexplained:{cause}:share={best:.2f}",), {})


def check_change_shares(
    attribution: ChangeAttribution | None,
    verifier: VerifierConfig,
    no_signal: Collection[str] = (),
) -> Verdict | None:
    """The label must hold every change that moved the page: reject an attempt in which a
    background change explains ``verifier.background_share`` or more of a shown alert (its
    Shapley share in the alert's direction; a change that hid part of the move explains none
    of it), whose causes together make less than ``explained_share`` of the paged alert with
    the background counted, or whose pairwise estimate leaves more than
    ``attribution_residual`` of a move to interactions of three or more changes (the shares
    would not be exact). None when the attempt passes, or when there is nothing to attribute.

    Every background change is rejected rather than promoted to a labelled cause: a twin or a
    process that moved the page is a second incident the cause's prior did not draw, and
    labelling it would add concurrent episodes of kinds and slices no composition asked for.

    Args:
        attribution: Every change's shares (:func:`attribute_changes`), or None.
        verifier: The verifier settings (``background_share``, ``explained_share``,
            ``attribution_residual``, ``check_alert``).
        no_signal: The domain's no-signal causes (they explain nothing, by design; in their
            episodes a change that is not ``nameable`` may raise the page: that is the false
            alarm their label states).
    """
    if attribution is None or verifier.background_share is None or not verifier.check_alert:
        return None
    signal = [per_alert for c, per_alert in attribution.causes.items() if c not in no_signal]
    for name, per_alert in attribution.background.items():
        if not signal and not attribution.nameable.get(name, True):
            continue  # the false alarm a no-signal label says happened
        for alert, share in per_alert.items():
            if share >= verifier.background_share:
                kind = attribution.kinds.get(name, name)
                return Verdict(
                    False, (f"background_moves_alert:{kind}:{alert}:share={share:.2f}",), {}
                )
    paged = attribution.alerts[0]
    explained = math.fsum(per_alert[paged] for per_alert in signal)
    if signal and explained < verifier.explained_share:
        return Verdict(False, (f"alert_unexplained_with_background:share={explained:.2f}",), {})
    worst = max(attribution.residual.values(), key=abs, default=0.0)
    if abs(worst) > verifier.attribution_residual:
        return Verdict(False, (f"attribution_unresolved:residual={worst:.3f}",), {})
    return None


def with_change_shares(label: OracleLabel, attribution: ChangeAttribution | None) -> OracleLabel:
    """``label`` with every background change's share of every shown alert (and the move left
    with no change on) in ``extra["change_shares"]``; unchanged without an attribution."""
    if attribution is None:
        return label
    return replace(label, extra={**label.extra, "change_shares": attribution.to_dict()})


def with_alert_shares(
    label: OracleLabel, shares: Mapping[str, Mapping[str, float]] | None
) -> OracleLabel:
    """``label`` with each cause's share of every shown alert in its ``extra["alert_shares"]``
    (the first cause's in the label's own extra, a further cause's in its ``also`` entry)."""
    if shares is None:
        return label
    extra = {**label.extra, "alert_shares": dict(shares[label.cause])}
    also = tuple(
        replace(c, extra={**c.extra, "alert_shares": dict(shares[c.cause])}) for c in label.also
    )
    return replace(label, extra=extra, also=also)


def with_measured_difficulty(label: OracleLabel, measured: Mapping[str, Any]) -> OracleLabel:
    """``label`` with ``measured`` as its difficulty record's ``measured`` part."""
    extra = dict(label.extra)
    extra["difficulty"] = {**extra.get("difficulty", {}), "measured": dict(measured)}
    return replace(label, extra=extra)


def accept_episode(
    domain: Domain, spec: EpisodeSpec, verifier: VerifierConfig, max_attempts: int
) -> tuple[Episode, list[Verdict]]:
    """Build attempts 0, 1, ... of an episode until the verifier accepts one (the verifier with
    the domain's difficulty band, :meth:`Difficulty.verifier`); the accepted episode's label
    carries the measured difficulty.

    Args:
        domain: The domain.
        spec: The episode's spec (its attempt is replaced by 0, 1, ...).
        verifier: The verifier settings, narrowed by the domain's difficulty band.
        max_attempts: Attempts before giving up.

    Returns:
        The accepted episode and the verdicts of every attempt.

    Raises:
        CausalTraceError: No attempt was accepted.
    """
    typical = typical_snr(domain, spec.cause)
    verifier = domain.difficulty.verifier(verifier, typical)
    verdicts: list[Verdict] = []
    monitored = domain_has_monitor(domain)
    signal = spec.cause not in domain.no_signal_causes()
    for attempt in range(max_attempts):
        simulated = simulate_attempt(domain, spec.with_attempt(attempt))
        alert = monitor_explanation(domain, simulated.worlds) if monitored else None
        if monitored:  # the alert gate, before any table is rendered
            gate = verify_alert(alert, signal=signal, config=verifier)
            if not gate.accepted:
                verdicts.append(gate)
                continue
        episode = complete_episode(domain, simulated, alert)
        verdict = verify_episode(domain, episode, verifier)
        shares = reading = attribution = None
        every_change = verifier.background_share is not None
        if verdict.accepted and not every_change:  # the costlier checks, cheapest first
            shares = cause_alert_shares(domain, episode)
            verdict = check_cause_shares(shares, verifier) or verdict
        if verdict.accepted:
            reading = oracle_measurements(episode.label, domain, episode.tables, verifier)
            verdict = check_oracle(episode.label, reading, verifier) or verdict
        if verdict.accepted and every_change:  # the costliest: a world per coalition played
            attribution = attribute_changes(domain, episode, exact_players=verifier.exact_players)
            shares = None if attribution is None else attribution.causes
            verdict = (
                check_change_shares(attribution, verifier, domain.no_signal_causes())
                or check_cause_shares(shares, verifier)
                or verdict
            )
        verdicts.append(verdict)
        if verdict.accepted:
            measured = {**verifier_measurements(episode.label, verdict, typical), **reading}
            label = with_measured_difficulty(episode.label, measured)
            label = with_alert_shares(label, shares)
            label = with_change_shares(label, attribution)
            return replace(episode, label=label), verdicts
    reasons = Counter(v.reason for v in verdicts)
    causes = " + ".join(spec.causes)
    raise CausalTraceError(
        f"episode {spec.episode_id} ({causes}, slice order {spec.slice_order}): no attempt "
        f"accepted in {max_attempts}; rejections {dict(reasons)}. A cause that is this hard to "
        f"verify is a domain bug (its prior draws effects the tables cannot show)."
    )
