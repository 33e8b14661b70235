"""A generation job: a split's resolved config as plain data, the plan of its episodes, and the
generator's fingerprint.

:class:`Job` is everything one worker needs (the dataset directory, the domain's and the
dataset's settings, the verifier), built from a Hydra config or a mapping, with each unknown or
mistyped key named. :func:`generation_plan` says which cause (and slice order) each episode
index gets and :func:`episode_spec` makes attempt 0 of an index from the config alone, so that
a worker, a resume and a check of an existing split draw the same episode. The fingerprint
(package version, a hash of the generator's source, the numerical libraries' versions) is
provenance: :mod:`causaltrace.datasets.split_check` decides what a different one means.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from causaltrace.core.config import typed_config
from causaltrace.core.files import (
    plain_data,
)
from causaltrace.core.version import __version__
from causaltrace.datasets.source_closure import import_closure
from causaltrace.episodes.composition import allows_concurrent, assignments
from causaltrace.episodes.difficulty import Difficulty
from causaltrace.episodes.domain import DOMAINS, Domain, load_domain
from causaltrace.episodes.sampling import (
    Episode,
    EpisodeSpec,
    episode_id,
)
from causaltrace.episodes.verify import Verdict, VerifierConfig
from causaltrace.errors import CausalTraceError

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
        diff = differences(plain_data(config), job.config_record())
        if diff:
            shown = "; ".join(f"{k}: {shown_value(a)} -> {shown_value(b)}" for k, a, b in diff[:4])
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


_ABSENT = object()


def differences(old: Any, new: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(key path, recorded value, current value) of every leaf that differs."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out: list[tuple[str, Any, Any]] = []
        for key in sorted(set(old) | set(new), key=str):
            sub = f"{path}.{key}" if path else str(key)
            out.extend(differences(old.get(key, _ABSENT), new.get(key, _ABSENT), sub))
        return out
    return [] if old == new else [(path, old, new)]


def shown_value(value: Any) -> str:
    return "(not set)" if value is _ABSENT else json.dumps(value, sort_keys=True)
