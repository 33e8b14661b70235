"""Dataset generation: episodes sharded by index, verified, written atomically, resumable.

Each shard (a fixed range of episode indices) is a unit of work whose bytes depend only on the
config and the shard id, so one worker or N workers write the same dataset. A shard is complete
when its ``done`` record exists (written last, atomically); a killed run leaves at most a
partial shard without a record, which the next run of the same command rewrites from scratch.
Workers are separate processes started by an existing engine (Hydra's joblib launcher, or Ray
tasks), each taking the shards ``shard % num_workers == worker_index``.

A split's identity is what it holds: its config and its episodes' checksums
(:mod:`causaltrace.datasets.content`). Every done record and the manifest state the resolved
config (domain, dataset, verifier) and, as provenance, the generator's fingerprint (package
version, a hash of the generator's source, versions of the numerical libraries). A run into a
directory whose manifest or done records state another *config* refuses with a
:class:`DatasetMismatchError` naming each differing key and both values: shards of two configs
are never mixed in one dataset. A recorded *fingerprint* that differs from this generator's (a
refactor, a new release) is not a mismatch by itself: a deterministic sample of the episodes it
made (:func:`sample_indices`: the first, the last and two spread evenly between) is regenerated
from the config and each episode's index alone and compared with what the dataset holds, byte
for byte (:func:`check_sample`). If every byte matches, the run goes on (a finished split is
reported finished with nothing written; a resume finishes the split); if one differs, the
refusal names the split, the first differing episode and file, and what to do. The one
difference accepted, and reported, is float rounding from the CPU's vector math: label or
statistics values that differ in their last bits and nothing else
(:mod:`causaltrace.datasets.float_math`).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import math
import os
import tempfile
import weakref
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from causaltrace.core.config import typed_config
from causaltrace.core.files import (
    atomic_write_text,
    canonical_json,
    json_load,
    jsonl,
    plain_data,
    sha256_file,
)
from causaltrace.core.progress import progress_bar
from causaltrace.core.version import __version__
from causaltrace.datasets.content import (
    ROW_KINDS,
    StoredEpisode,
    content_digest,
    dataset_content,
    row_bytes,
    row_file,
    shard_episodes,
)
from causaltrace.datasets.float_math import rounding_only, vector_math_targets
from causaltrace.datasets.source_closure import import_closure
from causaltrace.datasets.storage import DatasetLayout, write_episode_dir
from causaltrace.episodes.alert_shares import cause_alert_shares, weakest_cause
from causaltrace.episodes.change_shares import ChangeAttribution, attribute_changes
from causaltrace.episodes.composition import allows_concurrent, assignments
from causaltrace.episodes.difficulty import Difficulty
from causaltrace.episodes.domain import DOMAINS, Domain, domain_has_monitor, load_domain
from causaltrace.episodes.labels import OracleLabel
from causaltrace.episodes.oracle import OracleSolver, oracle_reading
from causaltrace.episodes.sampling import (
    Episode,
    EpisodeSpec,
    build_episode,
    complete_episode,
    episode_id,
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

FORMAT = "causaltrace-dataset/1"
# How episode ids are formed (DatasetSettings.id_scheme): from the dataset and domain names, or
# from the split alone (splits made before ids were unique across splits and domains).
ID_SCHEMES = ("dataset", "split")
# Parts of the causaltrace package that take no part in generating a dataset: editing them
# does not change the generator's fingerprint.
_NOT_GENERATOR = frozenset(
    {
        "tools",
        "env",
        "eval",
        "agents",
        "apps",
        "scoring",
        "audit",
        "serve",
        "training",
        "interop",
        "structure",
        "plotting.py",
        "cli.py",
        "__main__.py",
    }
)
# Libraries whose version can change the bytes of a dataset (random streams, quantiles, the
# Parquet writer's output).
_LIBRARIES = ("numpy", "scipy", "pandas", "pyarrow", "numba")


class DatasetMismatchError(CausalTraceError):
    """An output directory holds a dataset, or done shards, of another config or generator."""


ENGINE_ROOT = Path(__file__).resolve().parents[1]  # the causaltrace package


def engine_generator_sources() -> list[Path]:
    """The engine's source files that shape a dataset's bytes: every module of the
    ``causaltrace`` package but those in :data:`_NOT_GENERATOR` (sorted)."""
    out = []
    for path in sorted(ENGINE_ROOT.rglob("*.py")):
        rel = path.relative_to(ENGINE_ROOT)
        if rel.parts[0] in _NOT_GENERATOR or "__pycache__" in rel.parts:
            continue
        out.append(path)
    return out


def _domain_module(name: str) -> str:
    """The module a domain name points to (a registered name, or a ``module:Class`` path)."""
    return DOMAINS.paths().get(name, name).partition(":")[0]


@functools.cache
def generator_fingerprint(domain_name: str) -> dict[str, Any]:
    """What identifies the generator: the package version, a sha256 of the generator's source
    (the engine without its tools, environment, evaluation, agents and apps, plus the modules
    the domain's entry module imports, directly or not: its agents and teacher are not part of
    it, :mod:`causaltrace.datasets.source_closure`) and the versions of the libraries that shape
    the bytes."""
    digest = hashlib.sha256()
    for path in engine_generator_sources():
        rel = path.relative_to(ENGINE_ROOT)
        digest.update(str(rel).encode() + b"\0" + path.read_bytes() + b"\0")
    for name, path in import_closure(_domain_module(domain_name)).items():
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    libraries = {}
    for name in _LIBRARIES:
        try:
            libraries[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            libraries[name] = None
    return {
        "package_version": __version__,
        "code_sha256": digest.hexdigest(),
        "libraries": libraries,
    }


@dataclass(frozen=True)
class DatasetSettings:
    """A split to generate (a domain's ``conf/dataset/*.yaml``).

    Args:
        name: The dataset's name.
        split: The split's name (``train``, ``test``, ...); part of every episode's seed.
        seed: The dataset seed.
        n_episodes: How many episodes (at least 1).
        composition: How causes and slice orders are assigned to episodes; by default drawn
            from the domain's prior (``{"kind": "prior"}``).
        materialize: Store every episode's tables (on by default); off stores only specs and
            rebuilds tables on first use (a lazy split).
        shard_size: Episodes per shard (the unit of work and of resumption); 16 by default.
        max_attempts: Attempts per episode before generation fails; 40 by default.
        difficulty: A difficulty tier's knobs (see
            :class:`~causaltrace.episodes.difficulty.Difficulty`); none by default.
        id_scheme: How episode ids are formed: ``"dataset"`` (the default) from the dataset's
            name and the domain's, unique across splits and domains (``ads_test-000012``);
            ``"split"`` from the split alone (``test-000012``), the scheme of splits made
            before it existed, which repeats across splits and domains. A manifest records the
            key only when it is ``"dataset"``, so an older manifest reads back as ``"split"``.
    """

    name: str
    split: str
    seed: int
    n_episodes: int
    composition: Mapping[str, Any] = field(default_factory=lambda: {"kind": "prior"})
    materialize: bool = True
    shard_size: int = 16
    max_attempts: int = 40
    # A difficulty tier (causaltrace/episodes/difficulty.py): moved into the domain's config by Job, so
    # that every rebuild of an episode from the manifest sees the same priors.
    difficulty: Mapping[str, Any] | None = None
    id_scheme: str = "dataset"

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> DatasetSettings:
        """Settings from a config mapping, checked key by key.

        A ``defaults`` key (Hydra's defaults list, as in a dataset config file read as it is
        written: a committed split's file selects the verifier it was made with) is composition,
        not a setting, and is left out; Hydra removes it when it composes the config.

        Args:
            data: The ``dataset`` section of a generation config.

        Raises:
            CausalTraceError: An unknown or missing key, or a value of the wrong type or range.
        """
        if isinstance(data, Mapping) and "defaults" in data:
            data = {k: v for k, v in data.items() if k != "defaults"}
        settings = typed_config(cls, data, "dataset config")
        if settings.difficulty is not None:
            knobs = Difficulty.from_mapping(settings.difficulty).knobs()
            settings = replace(settings, difficulty=knobs)
        return settings

    def __post_init__(self) -> None:
        for key in ("name", "split"):
            if not getattr(self, key):
                raise CausalTraceError(
                    f"dataset config: {key} must be a name, got {getattr(self, key)!r}"
                )
        if self.n_episodes < 1 or self.shard_size < 1 or self.max_attempts < 1:
            raise CausalTraceError(
                "dataset config: n_episodes, shard_size and max_attempts must be >= 1"
            )
        if self.id_scheme not in ID_SCHEMES:
            raise CausalTraceError(
                f"dataset config: id_scheme must be one of {list(ID_SCHEMES)}, "
                f"got {self.id_scheme!r}"
            )

    def record(self) -> dict[str, Any]:
        """The settings as a manifest states them: ``id_scheme`` only when it is not the
        legacy ``"split"`` (a manifest written before the key existed reads back unchanged)."""
        out = asdict(self)
        if out["id_scheme"] == "split":
            del out["id_scheme"]
        return out

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> DatasetSettings:
        """The settings a manifest states (no ``id_scheme``: the legacy ``"split"``)."""
        return cls.from_mapping({"id_scheme": "split", **data})

    def episode_id(self, domain: str, index: int) -> str:
        """Episode ``index``'s public id under this split's scheme."""
        if self.id_scheme == "split":
            return episode_id(self.split, index)
        return episode_id(self.name, index, domain)


@dataclass(frozen=True)
class Job:
    """Everything one worker needs: the resolved config as plain data.

    Args:
        out_dir: The dataset directory to write.
        domain: The domain's config (``name`` plus its options).
        dataset: The split to generate.
        verifier: The acceptance verifier's settings.
        resolved_config: The whole resolved config, for the record; empty by default.
    """

    out_dir: str
    domain: Mapping[str, Any]
    dataset: DatasetSettings
    verifier: VerifierConfig
    resolved_config: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> Job:
        """A job from a resolved generation config (``out_dir``, ``domain``, ``dataset``, and
        optionally ``verifier``).

        Args:
            cfg: The resolved config as plain data.

        Raises:
            CausalTraceError: A missing or unknown key, or difficulty set in both places.
        """
        for key in ("out_dir", "domain", "dataset"):
            if key not in cfg:
                raise CausalTraceError(f"generation config: missing key {key!r}")
        verifier = dict(cfg.get("verifier") or {})
        known = {f.name for f in fields(VerifierConfig)}
        unknown = sorted(set(verifier) - known)
        if unknown:
            raise CausalTraceError(
                f"verifier config: unknown key(s) {unknown}; known: {sorted(known)}"
            )
        dataset = DatasetSettings.from_mapping(cfg["dataset"])
        domain = dict(cfg["domain"])
        if dataset.difficulty is not None:
            if domain.get("difficulty") is not None:
                raise CausalTraceError(
                    "both dataset.difficulty and domain.difficulty are set; set one of them"
                )
            domain["difficulty"] = dataset.difficulty
        if allows_concurrent(dataset.composition):
            # Every prompt of a split with concurrent episodes says that one or more causes may
            # be at work: the domain learns it from its config, like the difficulty, so that
            # every rebuild of an episode from the manifest writes the same prompt. Set only
            # when true, so a single-cause split's config (and manifest) is as before.
            domain["concurrent"] = True
        return cls(str(cfg["out_dir"]), domain, dataset, VerifierConfig(**verifier), dict(cfg))

    @classmethod
    def from_record(cls, out_dir: str | Path, config: Mapping[str, Any]) -> Job:
        """The job that made a dataset, from the config record its manifest states (the
        ``config`` of :meth:`config_record`: the domain's config already holds the difficulty
        and concurrency moved into it).

        Args:
            out_dir: The dataset directory.
            config: The manifest's ``config``.

        Raises:
            CausalTraceError: The record is malformed, or does not read back to itself (a key
                this version of causaltrace reads differently).
        """
        for key in ("domain", "dataset"):
            if key not in config:
                raise CausalTraceError(f"{out_dir}: the recorded config has no {key!r}")
        verifier = dict(config.get("verifier") or {})
        known = {f.name for f in fields(VerifierConfig)}
        unknown = sorted(set(verifier) - known)
        if unknown:
            raise CausalTraceError(
                f"{out_dir}: the recorded verifier config has unknown key(s) {unknown}"
            )
        job = cls(
            str(out_dir),
            dict(config["domain"]),
            DatasetSettings.from_record(config["dataset"]),
            VerifierConfig(**verifier),
            {"out_dir": str(out_dir), **plain_data(config)},
        )
        diff = _differences(plain_data(config), job.config_record())
        if diff:
            shown = "; ".join(f"{k}: {_shown(a)} -> {_shown(b)}" for k, a, b in diff[:4])
            raise CausalTraceError(
                f"{out_dir}: the recorded config does not read back to itself ({shown})"
            )
        return job

    def make_domain(self) -> Domain:
        config = dict(self.domain)
        name = config.get("name")
        if not name:
            raise CausalTraceError("domain config: missing key 'name'")
        return load_domain(name, config)

    @property
    def n_shards(self) -> int:
        return math.ceil(self.dataset.n_episodes / self.dataset.shard_size)

    def shard_range(self, shard: int) -> range:
        """The episode indices of a shard.

        Args:
            shard: The shard's index.
        """
        size = self.dataset.shard_size
        return range(shard * size, min((shard + 1) * size, self.dataset.n_episodes))

    def episode_id(self, index: int) -> str:
        """Episode ``index``'s public id (:meth:`DatasetSettings.episode_id`)."""
        return self.dataset.episode_id(str(self.domain.get("name")), index)

    def config_record(self) -> dict[str, Any]:
        """The config that decides the dataset's bytes (as the manifest states it)."""
        return plain_data(
            {
                "domain": dict(self.domain),
                "dataset": self.dataset.record(),
                "verifier": self.verifier.record(),
            }
        )

    def identity(self) -> dict[str, Any]:
        """What every done record and the manifest state: the config and the generator."""
        return {
            "config": self.config_record(),
            "generator": generator_fingerprint(str(self.domain.get("name"))),
        }


@dataclass
class ShardResult:
    shard: int
    episodes: int
    attempts: int
    rejections: Counter


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


def episode_spec(job: Job, plan, index: int) -> EpisodeSpec:
    """Attempt 0 of episode ``index``: everything it needs is the config and the index (its
    seeds derive from the dataset seed, the split and the index, :mod:`causaltrace.core.seeds`;
    its cause and slice order from the split's plan, ``plan[index]``)."""
    ds = job.dataset
    assignment = plan[index]
    return EpisodeSpec(
        job.episode_id(index),
        ds.split,
        index,
        ds.seed,
        assignment.cause,
        assignment.slice_order,
        also=assignment.also,
    )


def generation_plan(job: Job, domain: Domain) -> list:
    """Which cause and slice order (and concurrent causes) each episode index gets."""
    ds = job.dataset
    return assignments(
        domain.scm, ds.composition, split=ds.split, dataset_seed=ds.seed, n_episodes=ds.n_episodes
    )


def episode_rows(episode: Episode, verdicts: list[Verdict]) -> dict[str, dict[str, Any]]:
    """An accepted episode's row in each row file of its shard (:data:`ROW_KINDS`): its prompt
    (``index``), its spec, its label and its acceptance statistics (``stats``)."""
    spec = episode.spec
    stats = {
        "episode_id": spec.episode_id,
        "cause": spec.cause,
        "slice_order": spec.slice_order,
        "attempts": len(verdicts),
        "rejections": [list(v.reasons) for v in verdicts if not v.accepted],
        "accepted_stats": verdicts[-1].stats,
    }
    if spec.also:  # (single-cause rows keep the form they had before)
        stats["also"] = list(spec.also)
    return {
        "index": {"episode_id": spec.episode_id, "prompt": episode.prompt},
        "spec": spec.to_dict(),
        "label": episode.label.to_dict(),
        "stats": stats,
    }


def generate_shard(job: Job, domain: Domain, shard: int, plan, progress=None) -> ShardResult:
    """Generate, verify and write one shard; the done record is written last."""
    layout = DatasetLayout(job.out_dir)
    ds = job.dataset
    _clear_partial_writes(job, layout, shard)
    rows: dict[str, list[dict[str, Any]]] = {kind: [] for kind in ROW_KINDS}
    attempts, rejections = 0, Counter()
    for index in job.shard_range(shard):
        spec = episode_spec(job, plan, index)
        episode, verdicts = accept_episode(domain, spec, job.verifier, ds.max_attempts)
        attempts += len(verdicts)
        rejections.update(v.reason for v in verdicts if not v.accepted)
        if ds.materialize:
            write_episode_dir(
                layout.episode_dir(spec.episode_id),
                episode.tables,
                episode.prompt,
                domain.data_dictionary(),
            )
        for kind, row in episode_rows(episode, verdicts).items():
            rows[kind].append(row)
        if progress is not None:
            progress(len(verdicts))
    atomic_write_text(layout.index(shard), jsonl(rows["index"]))
    atomic_write_text(layout.specs(shard), jsonl(rows["spec"]))
    atomic_write_text(layout.labels(shard), jsonl(rows["label"]))
    atomic_write_text(layout.stats(shard), canonical_json(rows["stats"]))
    files = [layout.index(shard), layout.specs(shard), layout.labels(shard), layout.stats(shard)]
    if ds.materialize:
        for row in rows["index"]:
            files.extend(sorted(layout.episode_dir(row["episode_id"]).iterdir()))
    checksums = {str(p.relative_to(layout.root)): sha256_file(p) for p in files}
    record = {
        "shard": shard,
        "episodes": [job.shard_range(shard).start, job.shard_range(shard).stop],
        "files": checksums,
        "generation": job.identity(),
    }
    atomic_write_text(layout.done(shard), canonical_json(record))
    return ShardResult(shard, len(rows["index"]), attempts, rejections)


def _clear_partial_writes(job: Job, layout: DatasetLayout, shard: int) -> None:
    """Remove the temporary files a killed run left while writing this shard (atomic writes
    go through ``.<name>.*.tmp`` beside their target). Only this shard's own files are
    touched, so workers writing other shards at the same time are never disturbed."""
    prefix = f".{layout.shard_name(shard)}."
    for target in (
        layout.index(shard),
        layout.specs(shard),
        layout.labels(shard),
        layout.stats(shard),
        layout.done(shard),
    ):
        if target.parent.is_dir():
            for stale in target.parent.glob(f"{prefix}*.tmp"):
                stale.unlink(missing_ok=True)
    for index in job.shard_range(shard):
        directory = layout.episode_dir(job.episode_id(index))
        if directory.is_dir():
            for stale in directory.glob(".*.tmp"):
                stale.unlink(missing_ok=True)


def pending_shards(job: Job, worker_index: int = 0, num_workers: int = 1) -> list[int]:
    """This worker's shards without a done record."""
    if not 0 <= worker_index < num_workers:
        raise CausalTraceError(f"worker_index {worker_index} is not in [0, {num_workers})")
    layout = DatasetLayout(job.out_dir)
    return [
        s
        for s in range(job.n_shards)
        if s % num_workers == worker_index and not layout.done(s).exists()
    ]


def shard_order(job: Job, worker_index: int = 0, num_workers: int = 1) -> list[int]:
    """The shards this worker tries, in order: its own share first (``shard % num_workers ==
    worker_index``), then the other workers' from the end backwards, to take over what a slower
    worker has not started (:func:`claim_shard` keeps two workers off one shard). Which worker
    makes a shard does not change its bytes."""
    own = pending_shards(job, worker_index, num_workers)
    layout = DatasetLayout(job.out_dir)
    others = [
        s
        for s in reversed(range(job.n_shards))
        if s % num_workers != worker_index and not layout.done(s).exists()
    ]
    return own + others


@contextlib.contextmanager
def claim_shard(job: Job, shard: int):
    """Yield True while this process holds the shard (an exclusive lock on its claim file, which
    the kernel releases if the process dies, so a crashed worker's shard is free again), False
    if a live worker holds it; the claim file goes once the shard is done."""
    path = Path(job.out_dir) / ".claims" / f"{DatasetLayout(job.out_dir).shard_name(shard)}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            if DatasetLayout(job.out_dir).done(shard).exists():
                path.unlink(missing_ok=True)


_ABSENT = object()


def _differences(old: Any, new: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(key path, recorded value, current value) of every leaf that differs."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out: list[tuple[str, Any, Any]] = []
        for key in sorted(set(old) | set(new), key=str):
            sub = f"{path}.{key}" if path else str(key)
            out.extend(_differences(old.get(key, _ABSENT), new.get(key, _ABSENT), sub))
        return out
    return [] if old == new else [(path, old, new)]


def _shown(value: Any) -> str:
    return "(not set)" if value is _ABSENT else json.dumps(value, sort_keys=True)


def check_existing(job: Job, domain: Domain | None = None) -> list[SampleCheck]:
    """Refuse to generate into a directory whose manifest or done records state another config
    (:class:`DatasetMismatchError` naming each difference); pass for an empty directory and for
    a resume or re-run with the same config.

    A split's identity is its config and what it holds, not the hash of the code that wrote it:
    episodes whose shards record another generator fingerprint (a refactor, a new release) are
    accepted when a sample of them (:func:`sample_indices`, one sample per recorded fingerprint)
    regenerates from the config and each episode's index alone, byte for byte (:func:`check_sample`;
    float rounding from the CPU's vector math is reported, not refused); otherwise the refusal
    names the split, the first differing episode and file, and what to do. Nothing is written
    either way.

    Args:
        job: The job (config and output directory).
        domain: The job's domain, if already made (made here when a sample is checked).

    Returns:
        One :class:`SampleCheck` per recorded fingerprint that differs from this generator's
        (each reproduced); empty when none differs.

    Raises:
        DatasetMismatchError: Another config, a done record that states none, or a sample that
            does not reproduce.
    """
    layout = DatasetLayout(job.out_dir)
    current = job.identity()
    manifest = json_load(layout.manifest) if layout.manifest.exists() else None
    if manifest is not None:
        _refuse_other_config(job, layout.manifest, manifest.get("config"), finished=True)
    made_by: dict[str, tuple[Any, list[int]]] = {}
    for shard in _done_shards(layout):
        path = layout.done(shard)
        generation = json_load(path).get("generation")
        if generation is None:
            if manifest is None:
                raise DatasetMismatchError(
                    f"{path} records no config (an older causaltrace wrote it), so resuming "
                    f"{job.out_dir} cannot be checked to match; finish it with the version that "
                    "started it, or use a new out_dir"
                )
            generator = manifest.get("generator")  # an older finished dataset states it once
        else:
            _refuse_other_config(job, path, generation.get("config"), finished=False)
            generator = generation.get("generator")
        if generator != current["generator"]:
            key = json.dumps(generator, sort_keys=True)
            made_by.setdefault(key, (generator, []))[1].append(shard)
    checks = []
    for generator, shards in made_by.values():
        if domain is None:
            domain = job.make_domain()
        indices = [i for shard in shards for i in job.shard_range(shard)]
        check = replace(
            check_sample(job, sample_indices(indices), domain), recorded_generator=generator
        )
        if check.difference is not None:
            raise DatasetMismatchError(
                _not_reproduced(job, check, current["generator"], finished=manifest is not None)
            )
        checks.append(check)
    return checks


def _done_shards(layout: DatasetLayout) -> list[int]:
    done_dir = layout.root / "done"
    if not done_dir.is_dir():
        return []
    return sorted(int(p.stem.split("-")[1]) for p in done_dir.glob("shard-*.json"))


# How many episodes a sample holds: the first, the last and two spread evenly between.
SAMPLE_SIZE = 4


def sample_indices(indices, size: int = SAMPLE_SIZE) -> list[int]:
    """The episodes a check regenerates, out of ``indices``: the first, the last and
    ``size - 2`` spread evenly between (positions ``j * (n - 1) / (size - 1)``, rounded), with
    no seed, so every run and every machine checks the same ones; all of them when there are
    ``size`` or fewer.

    Args:
        indices: The episode indices to choose from (any order).
        size: How many to choose; :data:`SAMPLE_SIZE` by default.
    """
    ordered = sorted(set(indices))
    n = len(ordered)
    if n <= size:
        return ordered
    steps = size - 1
    return sorted({ordered[(j * (n - 1) + steps // 2) // steps] for j in range(size)})


@dataclass(frozen=True)
class Difference:
    """Where a regenerated episode first differs from the dataset's.

    Args:
        episode_id: The episode.
        index: Its index in the split.
        file: The dataset file that differs (relative to the dataset directory).
        what: What differs in it.
    """

    episode_id: str
    index: int
    file: str
    what: str

    def __str__(self) -> str:
        return f"{self.episode_id} (index {self.index}): {self.file}: {self.what}"


@dataclass(frozen=True)
class SampleCheck:
    """The outcome of regenerating a sample of a dataset's episodes (:func:`check_sample`).

    Args:
        out_dir: The dataset directory.
        episodes: The episodes regenerated, in index order (up to the first difference).
        difference: The first difference, or None when the sample reproduces.
        rounding: Rows that reproduce but for the last bits of float values
            (:func:`~causaltrace.datasets.float_math.rounding_only`), one line each; empty when
            every byte matched.
        recorded_generator: The fingerprint the checked episodes' shards record, if known.
    """

    out_dir: str
    episodes: tuple[str, ...]
    difference: Difference | None = None
    rounding: tuple[str, ...] = ()
    recorded_generator: Any = None

    @property
    def reproduces(self) -> bool:
        return self.difference is None

    @property
    def byte_for_byte(self) -> bool:
        return self.difference is None and not self.rounding

    def describe(self) -> str:
        """One sentence: what was regenerated and how it compared."""
        if self.difference is not None:
            return f"regenerated {', '.join(self.episodes)}: {self.difference}"
        said = f"regenerated {', '.join(self.episodes)}"
        if not self.rounding:
            return f"{said}: byte for byte the same"
        targets = vector_math_targets()
        why = (
            f" (this process's numpy computes float math with {' '.join(targets)} code, "
            "whose last bits differ from the C library's: docs/datasets.md)"
            if targets
            else ""
        )
        return (
            f"{said}: the same but for the last bits of float values in "
            f"{'; '.join(self.rounding)}{why}"
        )

    def to_dict(self) -> dict[str, Any]:
        recorded = self.recorded_generator or {}
        return {
            "out_dir": self.out_dir,
            "episodes": list(self.episodes),
            "reproduces": self.reproduces,
            "byte_for_byte": self.byte_for_byte,
            "float_rounding": list(self.rounding),
            "difference": None if self.difference is None else str(self.difference),
            "recorded_code_sha256": recorded.get("code_sha256"),
            "description": self.describe(),
        }


def check_sample(
    job: Job, indices=None, domain: Domain | None = None, *, read_path: bool = True
) -> SampleCheck:
    """Regenerate episodes of a dataset with this generator and compare them with what the
    dataset holds, byte for byte; stop at the first difference.

    Each episode is regenerated from the config and its index alone (:func:`episode_spec`,
    then :func:`accept_episode`: the rejected attempts are regenerated and rejected again), and
    its row in each shard file (prompt, spec, label, acceptance statistics) is compared with the
    stored row, then its episode files with the checksums a materialized split froze. With
    ``read_path``, the episode is also rebuilt from its stored spec, as reading the split does
    (a lazy split's tables, :func:`causaltrace.datasets.reading.rebuild_episode`), and must give
    the same label, prompt and files as generating it.

    Rows equal but for the last bits of float values (numpy's vector math on another kind of
    CPU, :func:`~causaltrace.datasets.float_math.rounding_only`) are not a difference: they are
    listed in :attr:`SampleCheck.rounding` (empty in a process started with
    :func:`~causaltrace.datasets.float_math.portable_env`, for a split made the same way).

    Args:
        job: The dataset's job (its config must be the recorded one: :func:`check_existing`
            checks that first; :meth:`Job.from_record` builds it from a manifest).
        indices: The episode indices to regenerate; by default :func:`sample_indices` of
            every episode in a done shard.
        domain: The job's domain, if already made.
        read_path: Also rebuild each episode from its stored spec; on by default.

    Raises:
        DataFileError: A shard file is missing or does not match its done record's checksum.
    """
    layout = DatasetLayout(job.out_dir)
    if indices is None:
        done = [i for shard in _done_shards(layout) for i in job.shard_range(shard)]
        indices = sample_indices(done)
    domain = job.make_domain() if domain is None else domain
    plan = generation_plan(job, domain)
    stored: dict[int, dict[str, StoredEpisode]] = {}
    checked: list[str] = []
    rounding: list[str] = []
    with tempfile.TemporaryDirectory(prefix="causaltrace-check-") as tmp:
        for index in sorted(indices):
            shard = index // job.dataset.shard_size
            if shard not in stored:
                stored[shard] = {e.episode_id: e for e in shard_episodes(layout, shard)}
            spec = episode_spec(job, plan, index)
            checked.append(spec.episode_id)
            held = stored[shard].get(spec.episode_id)
            if held is None:
                where = str(layout.index(shard).relative_to(layout.root))
                difference = Difference(spec.episode_id, index, where, "the shard lacks it")
            else:
                difference = _regenerated_difference(
                    job, domain, spec, held, Path(tmp), read_path, rounding
                )
            if difference is not None:
                return SampleCheck(job.out_dir, tuple(checked), difference, tuple(rounding))
    return SampleCheck(job.out_dir, tuple(checked), None, tuple(rounding))


def _regenerated_difference(
    job: Job,
    domain: Domain,
    spec: EpisodeSpec,
    held: StoredEpisode,
    tmp: Path,
    read_path: bool,
    rounding: list[str],
) -> Difference | None:
    """The first difference between an episode regenerated now and the stored one, or None;
    rows that differ only by float rounding are added to ``rounding``."""
    layout = DatasetLayout(job.out_dir)

    def differs(file: str | Path, what: str) -> Difference:
        if isinstance(file, Path):
            file = str(file.relative_to(layout.root))
        return Difference(spec.episode_id, spec.index, file, what)

    try:
        episode, verdicts = accept_episode(domain, spec, job.verifier, job.dataset.max_attempts)
    except CausalTraceError as exc:
        return differs(row_file(layout, "spec", held.shard), f"no attempt is accepted now ({exc})")
    rows = episode_rows(episode, verdicts)
    for kind in ("spec", "label", "index", "stats"):  # the cause of a change first
        mine = row_bytes(rows[kind])
        if mine == held.rows[kind]:
            continue
        path = row_file(layout, kind, held.shard)
        rounded = rounding_only(json.loads(held.rows[kind]), json.loads(mine))
        if rounded is None:
            change = _row_change(held.rows[kind], mine)
            return differs(path, f"its row differs ({change})")
        rounding.append(
            f"{spec.episode_id}'s row of {path.relative_to(layout.root)} ({rounded[0]} "
            f"value{'s' if rounded[0] > 1 else ''}, at most {rounded[1]:.1e} relative)"
        )
    made = _episode_files(tmp / "generated" / spec.episode_id, episode, domain)
    prefix = f"public/episodes/{spec.episode_id}/"
    for name, digest in sorted(held.files.items()):
        if made.get(name) != digest:
            what = "its bytes differ" if name in made else "it is not made any more"
            return differs(prefix + name, what)
    extra = sorted(set(made) - set(held.files)) if held.files else []
    if extra:
        return differs(prefix + extra[0], "a file the split did not freeze is made now")
    if not read_path:
        return None
    rebuilt = build_episode(domain, EpisodeSpec.from_dict(json.loads(held.rows["spec"])))
    how = "rebuilt from its stored spec (as reading the split does), differs from the generated one"
    if _built_label(rebuilt.label.to_dict()) != _built_label(episode.label.to_dict()):
        return differs(row_file(layout, "label", held.shard), f"its label, {how}")
    if rebuilt.prompt != episode.prompt:
        return differs(row_file(layout, "index", held.shard), f"its prompt, {how}")
    again = _episode_files(tmp / "rebuilt" / spec.episode_id, rebuilt, domain)
    for name in sorted(set(made) | set(again)):
        if made.get(name) != again.get(name):
            return differs(prefix + name, f"the file, {how}")
    return None


def _episode_files(directory: Path, episode: Episode, domain: Domain) -> dict[str, str]:
    """An episode's files, written to ``directory``: name -> sha256."""
    write_episode_dir(directory, episode.tables, episode.prompt, domain.data_dictionary())
    return {p.name: sha256_file(p) for p in sorted(directory.iterdir())}


def _row_change(old: bytes, new: bytes) -> str:
    """The first keys that differ between two rows, with both values (shortened)."""

    def short(value: Any) -> str:
        text = _shown(value)
        return text if len(text) <= 60 else text[:57] + "..."

    diff = _differences(json.loads(old), json.loads(new))
    shown = "; ".join(f"{k}: recorded {short(a)}, now {short(b)}" for k, a, b in diff[:3])
    if len(diff) > 3:
        shown += f"; and {len(diff) - 3} more"
    return shown or "the same data, other bytes"


def _built_label(label: Mapping[str, Any]) -> str:
    """A label as :func:`build_episode` makes it: without what acceptance adds after (the
    verifier's and the oracle's measurements, each change's share of the alerts)."""
    data = json.loads(json.dumps(label, sort_keys=True))
    extra = data.get("extra") or {}
    extra.pop("alert_shares", None)
    extra.pop("change_shares", None)
    (extra.get("difficulty") or {}).pop("measured", None)
    for other in data.get("also") or ():
        (other.get("extra") or {}).pop("alert_shares", None)
    return json.dumps(data, sort_keys=True)


def describe_generator(generator: Any, current: Mapping[str, Any] | None = None) -> str:
    """A generator fingerprint in a few words (with the libraries whose version differs from
    ``current``'s)."""
    if not isinstance(generator, Mapping):
        return "not recorded"
    text = (
        f"causaltrace {generator.get('package_version')}, "
        f"code sha256 {str(generator.get('code_sha256'))[:12]}"
    )
    if current is not None:
        mine, theirs = current.get("libraries") or {}, generator.get("libraries") or {}
        moved = [
            f"{name} {theirs.get(name)}" for name in sorted(mine) if theirs.get(name) != mine[name]
        ]
        if moved:
            text += ", " + ", ".join(moved)
    return text


def _not_reproduced(
    job: Job, check: SampleCheck, current: Mapping[str, Any], finished: bool
) -> str:
    held = "a finished dataset" if finished else "done shards"
    out = job.out_dir.rstrip("/")
    return (
        f"{job.out_dir} (split {job.dataset.name}) holds {held} made by another generator "
        f"(recorded: {describe_generator(check.recorded_generator, current)}; this one: "
        f"{describe_generator(current)}), and this generator rebuilds its episodes differently "
        f"({check.difference}; regenerated {', '.join(check.episodes)}). A split is what it "
        f"holds, so {job.out_dir} is left as it is: to make this config with this generator, "
        f"generate into a new out_dir (e.g. out_dir={out}_regenerated); to resume or keep "
        f"{job.out_dir}, use the generator that made it"
    )


def _refuse_other_config(job: Job, source: Path, recorded: Any, finished: bool) -> None:
    diff = _differences({"config": recorded}, {"config": job.config_record()})
    if not diff:
        return
    details = "; ".join(
        f"{path.removeprefix('config.')}: recorded {_shown(old)}, now {_shown(new)}"
        for path, old, new in diff[:8]
    )
    if len(diff) > 8:
        details += f"; and {len(diff) - 8} more"
    held = "a finished dataset" if finished else "shards"
    raise DatasetMismatchError(
        f"{job.out_dir} holds {held} made with a different config (recorded in {source}): "
        f"{details}. Generating into it would mix the two; use a new out_dir, delete "
        f"{job.out_dir}, or run with the recorded settings"
    )


def run(
    job: Job,
    worker_index: int = 0,
    num_workers: int = 1,
    show_progress: bool = True,
    check: bool = True,
) -> dict:
    """Generate this worker's pending shards, then any other pending shard no live worker has
    claimed (:func:`shard_order`), then the manifest if every shard is done.

    Refuses (:class:`DatasetMismatchError`) if ``job.out_dir`` holds a dataset or shards of
    another config, or made by another generator that does not reproduce them
    (:func:`check_existing`).

    Args:
        job: The job (config and output directory).
        worker_index: This worker's index, from 0; 0 by default.
        num_workers: How many workers share the job; 1 by default.
        show_progress: Show a progress bar; on by default.
        check: Check what ``job.out_dir`` holds first; on by default (off only where the
            caller has checked, e.g. the Ray tasks of a checked job).

    Returns:
        A summary: shards made, episodes, attempts, rejections by reason, whether the
        dataset was finished before this run (``already_finished``), whether the manifest was
        written, the content digest once it is (``content_sha256``), and, when episodes made
        by another generator were regenerated to check them, ``verified`` (one
        :meth:`SampleCheck.to_dict` per recorded fingerprint).

    Raises:
        DatasetMismatchError: ``job.out_dir`` holds data of another config, or of another
            generator that does not reproduce it.
    """
    domain = job.make_domain()
    verified = check_existing(job, domain) if check else []
    ds = job.dataset
    plan = generation_plan(job, domain)
    already_finished = not pending_shards(job)
    shards = shard_order(job, worker_index, num_workers)
    total = sum(len(job.shard_range(s)) for s in pending_shards(job, worker_index, num_workers))
    bar = progress_bar(total, f"{ds.name} worker {worker_index}/{num_workers}", show_progress)
    tried = {"attempts": 0, "episodes": 0}

    def tick(attempts: int) -> None:
        tried["attempts"] += attempts
        tried["episodes"] += 1
        if bar is not None:
            bar.update(1)
            bar.set_postfix(acceptance=f"{tried['episodes'] / tried['attempts']:.0%}")

    rejections: Counter = Counter()
    made = []
    layout = DatasetLayout(job.out_dir)
    try:
        for shard in shards:
            with claim_shard(job, shard) as mine:
                if not mine or layout.done(shard).exists():  # another worker has it
                    continue
                rejections.update(generate_shard(job, domain, shard, plan, tick).rejections)
                made.append(shard)
    finally:
        if bar is not None:
            bar.close()
    with contextlib.suppress(OSError):  # empty once every shard is done
        (Path(job.out_dir) / ".claims").rmdir()
    manifest = write_manifest(job)
    summary = {
        "shards": made,
        "episodes": tried["episodes"],
        "attempts": tried["attempts"],
        "rejections": dict(rejections),
        "already_finished": already_finished,
        "manifest_written": manifest is not None,
    }
    if manifest is not None:
        summary["content_sha256"] = manifest_content(job.out_dir)
    if verified:
        summary["verified"] = [c.to_dict() for c in verified]
    return summary


def manifest_content(out_dir: str | Path) -> str:
    """A finished dataset's content digest: the one its manifest states, or (a manifest written
    before it was stated) computed from its files (:func:`content.dataset_content`)."""
    layout = DatasetLayout(out_dir)
    stated = json_load(layout.manifest).get("content_sha256")
    return stated if stated is not None else dataset_content(out_dir)


def write_manifest(job: Job) -> Path | None:
    """The manifest, once every shard is done (idempotent: same shards, same bytes). A manifest
    already there for the same config and shards is kept as it is, generator record included:
    a dataset another generator made and this one reproduces (:func:`check_existing`) is not
    rewritten.

    The manifest states the split's identity, its config and ``content_sha256`` (the digest of
    every episode's checksums, :mod:`causaltrace.datasets.content`), and, as provenance, the
    generator fingerprint of the run that wrote it."""
    layout = DatasetLayout(job.out_dir)
    records = []
    for shard in range(job.n_shards):
        if not layout.done(shard).exists():
            return None
        record = json_load(layout.done(shard))
        records.append({k: v for k, v in record.items() if k != "generation"})
    if layout.manifest.exists():
        held = json_load(layout.manifest)
        if held.get("config") == job.config_record() and held.get("shards") == records:
            return layout.manifest
    episodes = [e for shard, r in enumerate(records) for e in shard_episodes(layout, shard, r)]
    manifest = {
        "format": FORMAT,
        "package_version": __version__,
        "generator": job.identity()["generator"],
        "name": job.dataset.name,
        "split": job.dataset.split,
        "n_episodes": job.dataset.n_episodes,
        "materialized": job.dataset.materialize,
        "config": job.config_record(),
        "content_sha256": content_digest(job.config_record(), episodes),
        "shards": records,
    }
    with _directory_lock(layout.root):
        # Under the lock no other writer is mid-write, so any temporary manifest left here is
        # a killed writer's: remove it with the new manifest in place.
        atomic_write_text(layout.manifest, canonical_json(plain_data(manifest)))
        for stale in layout.root.glob(f".{layout.manifest.name}.*.tmp"):
            stale.unlink(missing_ok=True)
    return layout.manifest


@contextlib.contextmanager
def _directory_lock(directory: Path):
    """An exclusive advisory lock on a directory (flock on its descriptor: no lock file to
    leave behind). Workers on one machine take turns; a shared file system that ignores flock
    degrades to the unlocked behaviour, where a killed writer's temporary file may stay."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def acceptance_report(out_dir: str | Path):
    """Acceptance rate and rejection reasons per cause (a pandas DataFrame).

    Args:
        out_dir: The dataset directory (its ``private/stats`` is read).
    """
    # lazy: pandas takes ~0.5 s to import; the rest of this module does not need it
    import pandas as pd

    rows = []
    for path in sorted((Path(out_dir) / "private" / "stats").glob("shard-*.json")):
        for stat in json_load(path):
            reasons = Counter(r[0].split(":")[0] for r in stat["rejections"] if r)
            rows.append(
                {
                    "cause": stat["cause"],
                    "slice_order": stat["slice_order"],
                    "attempts": stat["attempts"],
                    **reasons,
                }
            )
    frame = pd.DataFrame(rows).fillna(0)
    grouped = frame.groupby("cause").sum(numeric_only=True)
    counts = frame.groupby("cause").size()
    grouped.insert(0, "episodes", counts)
    grouped.insert(2, "acceptance", (counts / grouped["attempts"]).round(3))
    return grouped.drop(columns=["slice_order"], errors="ignore").sort_index()
