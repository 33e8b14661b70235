"""Dataset generation: episodes sharded by index, verified, written atomically, resumable.

Each shard (a fixed range of episode indices) is a unit of work whose bytes depend only on the
config and the shard id, so one worker or N workers write the same dataset. A shard is complete
when its ``done`` record exists (written last, atomically); a killed run leaves at most a
partial shard without a record, which the next run of the same command rewrites from scratch.
Workers are separate processes started by an existing engine (Hydra's joblib launcher, or Ray
tasks), each taking the shards ``shard % num_workers == worker_index``.

Every done record carries the generation's identity: the resolved config (domain, dataset,
verifier) and the generator's fingerprint (package version, a hash of the generator's source,
versions of the numerical libraries); the manifest states the same. A run into a directory
whose manifest or done records state another identity refuses with a
:class:`DatasetMismatchError` naming each differing key and both values: shards of two configs
or two generators are never mixed in one dataset. Resuming with the same config and code works
as before.
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
from collections.abc import Mapping
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
    read_jsonl,
    sha256_file,
)
from causaltrace.core.progress import progress_bar
from causaltrace.core.version import __version__
from causaltrace.datasets.source_closure import import_closure
from causaltrace.datasets.storage import DatasetLayout, write_episode_dir
from causaltrace.episodes.alert_shares import cause_alert_shares, weakest_cause
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

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> DatasetSettings:
        """Settings from a config mapping, checked key by key.

        Args:
            data: The ``dataset`` section of a generation config.

        Raises:
            CausalTraceError: An unknown or missing key, or a value of the wrong type or range.
        """
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

    def config_record(self) -> dict[str, Any]:
        """The config that decides the dataset's bytes (as the manifest states it)."""
        return plain_data(
            {
                "domain": dict(self.domain),
                "dataset": asdict(self.dataset),
                "verifier": asdict(self.verifier),
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
    return oracle_reading(solvers[key], tables, label.causes)


def check_oracle(label: OracleLabel, reading: Mapping[str, Any], verifier: VerifierConfig):
    """The oracle gate: reject a label the tables do not support (the oracle's answer names no
    true cause); None when the oracle agrees or the gate is off.

    Args:
        label: The episode's label.
        reading: The oracle's measurements (its ``oracle_answer`` is read).
        verifier: The verifier settings (``check_oracle`` turns the gate on).
    """
    answer = reading.get("oracle_answer")
    if not verifier.check_oracle or answer is None:
        return None
    if answer["cause"] in {cause for cause, _ in label.causes}:
        return None
    where = answer["slice"] or "all"
    return Verdict(False, (f"oracle_disagrees:{answer['cause']}@{where}",), {})


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
        shares = reading = None
        if verdict.accepted:  # the costlier checks, cheapest first
            shares = cause_alert_shares(domain, episode)
            verdict = check_cause_shares(shares, verifier) or verdict
        if verdict.accepted:
            reading = oracle_measurements(episode.label, domain, episode.tables, verifier)
            verdict = check_oracle(episode.label, reading, verifier) or verdict
        verdicts.append(verdict)
        if verdict.accepted:
            measured = {**verifier_measurements(episode.label, verdict, typical), **reading}
            label = with_measured_difficulty(episode.label, measured)
            label = with_alert_shares(label, shares)
            return replace(episode, label=label), verdicts
    reasons = Counter(v.reason for v in verdicts)
    causes = " + ".join(spec.causes)
    raise CausalTraceError(
        f"episode {spec.episode_id} ({causes}, slice order {spec.slice_order}): no attempt "
        f"accepted in {max_attempts}; rejections {dict(reasons)}. A cause that is this hard to "
        f"verify is a domain bug (its prior draws effects the tables cannot show)."
    )


def generate_shard(job: Job, domain: Domain, shard: int, plan, progress=None) -> ShardResult:
    """Generate, verify and write one shard; the done record is written last."""
    layout = DatasetLayout(job.out_dir)
    ds = job.dataset
    _clear_partial_writes(job, layout, shard)
    index_rows, spec_rows, label_rows, stat_rows = [], [], [], []
    attempts, rejections = 0, Counter()
    for index in job.shard_range(shard):
        assignment = plan[index]
        spec = EpisodeSpec(
            episode_id(ds.split, index),
            ds.split,
            index,
            ds.seed,
            assignment.cause,
            assignment.slice_order,
            also=assignment.also,
        )
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
        index_rows.append({"episode_id": spec.episode_id, "prompt": episode.prompt})
        spec_rows.append(episode.spec.to_dict())
        label_rows.append(episode.label.to_dict())
        stat_row = {
            "episode_id": spec.episode_id,
            "cause": spec.cause,
            "slice_order": spec.slice_order,
            "attempts": len(verdicts),
            "rejections": [list(v.reasons) for v in verdicts if not v.accepted],
            "accepted_stats": verdicts[-1].stats,
        }
        if spec.also:  # (single-cause rows keep the form they had before)
            stat_row["also"] = list(spec.also)
        stat_rows.append(stat_row)
        if progress is not None:
            progress(len(verdicts))
    atomic_write_text(layout.index(shard), jsonl(index_rows))
    atomic_write_text(layout.specs(shard), jsonl(spec_rows))
    atomic_write_text(layout.labels(shard), jsonl(label_rows))
    atomic_write_text(layout.stats(shard), canonical_json(stat_rows))
    files = [layout.index(shard), layout.specs(shard), layout.labels(shard), layout.stats(shard)]
    if ds.materialize:
        for row in index_rows:
            files.extend(sorted(layout.episode_dir(row["episode_id"]).iterdir()))
    checksums = {str(p.relative_to(layout.root)): sha256_file(p) for p in files}
    record = {
        "shard": shard,
        "episodes": [job.shard_range(shard).start, job.shard_range(shard).stop],
        "files": checksums,
        "generation": job.identity(),
    }
    atomic_write_text(layout.done(shard), canonical_json(record))
    return ShardResult(shard, len(index_rows), attempts, rejections)


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
        directory = layout.episode_dir(episode_id(job.dataset.split, index))
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


def check_existing(job: Job) -> None:
    """Refuse to generate into a directory whose manifest or done records state another config
    (:class:`DatasetMismatchError` naming each difference); pass for an empty directory and for
    a resume with the same config and code.

    A dataset's identity is what it contains: recorded with another generator (a refactor, a
    new package version), it is accepted when a sample of its episodes, one per cause and slice
    order, rebuilds from its specs with this generator to the same labels, prompts and frozen
    files (:func:`rebuild_differences`); otherwise the refusal names what differs."""
    layout = DatasetLayout(job.out_dir)
    current = job.identity()
    manifest = json_load(layout.manifest) if layout.manifest.exists() else None
    recorded: list[tuple[Path, Mapping[str, Any], bool]] = []
    if manifest is not None:
        identity = {"config": manifest.get("config")}
        if "generator" in manifest:  # manifests of causaltrace before issue 12 lack it
            identity["generator"] = manifest["generator"]
        recorded.append((layout.manifest, identity, True))
    done_dir = layout.root / "done"
    for path in sorted(done_dir.glob("shard-*.json")) if done_dir.is_dir() else ():
        generation = json_load(path).get("generation")
        if generation is None:
            if manifest is not None:
                continue  # an older finished dataset: its manifest was checked above
            raise DatasetMismatchError(
                f"{path} records no config (an older causaltrace wrote it), so resuming "
                f"{job.out_dir} cannot be checked to match; finish it with the version that "
                "started it, or use a new out_dir"
            )
        recorded.append((path, generation, False))
    verified = False
    for source, identity, finished in recorded:
        diff = _differences(identity, {k: current[k] for k in identity})
        if any(not path.startswith("generator") for path, _, _ in diff):
            _refuse_if_different(job, source, identity, current, finished=finished)
        if diff and not verified:  # the generator alone differs: what does it rebuild?
            problems = rebuild_differences(job)
            if problems:
                _refuse_if_different(
                    job, source, identity, current, finished=finished, why=problems
                )
            verified = True


def rebuild_differences(job: Job, per_kind: int = 1) -> list[str]:
    """Rebuild a sample of a dataset's done episodes from their specs with this generator and
    name every difference from what the dataset holds: labels (what the episode was built
    with, before the measurements acceptance adds), prompts, and the files the done records
    froze. The sample: ``per_kind`` episodes of each (cause, slice order, concurrent) kind
    present, the first in index order."""
    layout = DatasetLayout(job.out_dir)
    done = [s for s in range(job.n_shards) if layout.done(s).exists()]
    if not done:
        return []
    domain = job.make_domain()
    specs = {r["episode_id"]: r for s in done for r in read_jsonl(layout.specs(s))}
    labels = {r["episode_id"]: r for s in done for r in read_jsonl(layout.labels(s))}
    prompts = {r["episode_id"]: r["prompt"] for s in done for r in read_jsonl(layout.index(s))}
    frozen = {
        rel: digest
        for s in done
        for rel, digest in json_load(layout.done(s))["files"].items()
        if rel.startswith("public/episodes/")
    }
    chosen: dict[tuple, list[str]] = {}
    for episode in sorted(specs):
        spec = specs[episode]
        kind = (spec["cause"], spec.get("slice_order"), tuple(spec.get("also") or ()))
        if len(chosen.setdefault(kind, [])) < per_kind:
            chosen[kind].append(episode)
    problems = []
    for episode in (e for group in chosen.values() for e in group):
        rebuilt = build_episode(domain, EpisodeSpec.from_dict(specs[episode]))
        if _built_label(rebuilt.label.to_dict()) != _built_label(labels[episode]):
            problems.append(f"{episode}: its label")
        if rebuilt.prompt != prompts[episode]:
            problems.append(f"{episode}: its prompt")
        prefix = f"public/episodes/{episode}/"
        mine = {rel[len(prefix) :]: d for rel, d in frozen.items() if rel.startswith(prefix)}
        if mine:
            with tempfile.TemporaryDirectory() as tmp:
                write_episode_dir(
                    Path(tmp), rebuilt.tables, rebuilt.prompt, domain.data_dictionary()
                )
                changed = sorted(n for n, d in mine.items() if sha256_file(Path(tmp) / n) != d)
            problems += [f"{episode}: {name}" for name in changed]
    return problems


def _built_label(label: Mapping[str, Any]) -> str:
    """A label as :func:`build_episode` makes it: without what acceptance adds after (the
    verifier's and the oracle's measurements, each cause's share of the alerts)."""
    data = json.loads(json.dumps(label, sort_keys=True))
    extra = data.get("extra") or {}
    extra.pop("alert_shares", None)
    (extra.get("difficulty") or {}).pop("measured", None)
    for other in data.get("also") or ():
        (other.get("extra") or {}).pop("alert_shares", None)
    return json.dumps(data, sort_keys=True)


def _refuse_if_different(
    job: Job,
    source: Path,
    recorded: Mapping[str, Any],
    current: Mapping[str, Any],
    finished: bool,
    why: list[str] | None = None,
) -> None:
    diff = _differences(recorded, {k: current[k] for k in recorded})
    if not diff:
        return
    kinds = sorted({path.split(".")[0] for path, _, _ in diff})
    details = "; ".join(
        f"{path.removeprefix('config.')}: recorded {_shown(old)}, now {_shown(new)}"
        for path, old, new in diff[:8]
    )
    if len(diff) > 8:
        details += f"; and {len(diff) - 8} more"
    held = "a finished dataset" if finished else "shards"
    rebuilt = ""
    if why:
        shown = "; ".join(why[:6]) + (f"; and {len(why) - 6} more" if len(why) > 6 else "")
        rebuilt = f" This generator rebuilds its episodes differently ({shown})."
    raise DatasetMismatchError(
        f"{job.out_dir} holds {held} made with a different {' and '.join(kinds)} "
        f"(recorded in {source}): {details}.{rebuilt} Generating into it would mix the two; "
        f"use a new out_dir, delete {job.out_dir}, or run with the recorded settings"
    )


def run(job: Job, worker_index: int = 0, num_workers: int = 1, show_progress: bool = True) -> dict:
    """Generate this worker's pending shards, then any other pending shard no live worker has
    claimed (:func:`shard_order`), then the manifest if every shard is done.

    Refuses (:class:`DatasetMismatchError`) if ``job.out_dir`` holds a dataset or shards of
    another config or generator.

    Args:
        job: The job (config and output directory).
        worker_index: This worker's index, from 0; 0 by default.
        num_workers: How many workers share the job; 1 by default.
        show_progress: Show a progress bar; on by default.

    Returns:
        A summary: shards made, episodes, attempts, rejections by reason, and whether the
        manifest was written.

    Raises:
        DatasetMismatchError: ``job.out_dir`` holds data of another config or generator.
    """
    check_existing(job)
    domain = job.make_domain()
    ds = job.dataset
    plan = assignments(
        domain.scm, ds.composition, split=ds.split, dataset_seed=ds.seed, n_episodes=ds.n_episodes
    )
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
    return {
        "shards": made,
        "episodes": tried["episodes"],
        "attempts": tried["attempts"],
        "rejections": dict(rejections),
        "manifest_written": manifest is not None,
    }


def write_manifest(job: Job) -> Path | None:
    """The manifest, once every shard is done (idempotent: same shards, same bytes). A manifest
    already there for the same config and shards is kept as it is, generator record included:
    a dataset another generator made and this one rebuilds identically (:func:`check_existing`)
    is not rewritten."""
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
    manifest = {
        "format": FORMAT,
        "package_version": __version__,
        "generator": job.identity()["generator"],
        "name": job.dataset.name,
        "split": job.dataset.split,
        "n_episodes": job.dataset.n_episodes,
        "materialized": job.dataset.materialize,
        "config": job.config_record(),
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
