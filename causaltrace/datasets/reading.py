"""The read side of a dataset: its index, labels and specs, the episodes' agent-visible
directories (rebuilt on first use for lazy splits), and :class:`DatasetSource`, the dataset as
an environment sees it. Generation (:mod:`causaltrace.datasets.generation`) writes what this
module reads; it never needs the generator's machinery beyond rebuilding one episode."""

from __future__ import annotations

import os
import shutil
import tempfile
from functools import cached_property
from pathlib import Path
from typing import Any

from causaltrace.core.files import json_load, read_jsonl, sha256_file
from causaltrace.core.progress import progress_bar
from causaltrace.datasets.storage import DatasetLayout, write_episode_dir
from causaltrace.episodes.answers import AnswerSpace
from causaltrace.episodes.domain import Domain, load_domain
from causaltrace.episodes.labels import OracleLabel
from causaltrace.episodes.sampling import Episode, EpisodeSpec, build_episode, build_visible
from causaltrace.errors import CausalTraceError


def load_index(out_dir: str | Path) -> list[dict[str, Any]]:
    """Episode ids and prompts, in index order (agent-visible).

    Args:
        out_dir: The dataset directory (the one holding ``manifest.json``).

    Returns:
        One row per episode, with ``episode_id`` and ``prompt``.
    """
    return DatasetLayout(out_dir).all_index()


def load_labels(out_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Oracle labels by episode id (secret: for scoring only).

    Args:
        out_dir: The dataset directory (the one holding ``manifest.json``).

    Returns:
        Episode id -> its label row (see :class:`~causaltrace.episodes.labels.OracleLabel`).
    """
    return {row["episode_id"]: row for row in DatasetLayout(out_dir).all_labels()}


# Spec rows by episode id, per dataset directory, read once per process: a training loop opens
# thousands of episodes of a lazy split, and scanning every spec file per open is quadratic. An
# entry is keyed by the spec files' names and modification times, so a resumed generation that
# adds shards is seen.
_SPECS: dict[str, tuple[tuple, dict[str, dict[str, Any]]]] = {}


def find_spec(out_dir: str | Path, episode: str) -> EpisodeSpec:
    """An episode's private spec (generator side only).

    Args:
        out_dir: The dataset directory (the one holding ``manifest.json``).
        episode: The episode id.

    Raises:
        CausalTraceError: The dataset has no such episode.
    """
    files = sorted((Path(out_dir) / "private" / "specs").glob("shard-*.jsonl"))
    stamp = tuple((f.name, f.stat().st_mtime_ns) for f in files)
    key = str(Path(out_dir).resolve())
    cached = _SPECS.get(key)
    if cached is None or cached[0] != stamp:
        rows = {row["episode_id"]: row for path in files for row in read_jsonl(path)}
        cached = _SPECS[key] = (stamp, rows)
    try:
        return EpisodeSpec.from_dict(cached[1][episode])
    except KeyError:
        raise CausalTraceError(f"dataset {out_dir}: no episode {episode!r}") from None


_DOMAINS: dict[str, Domain] = {}


def dataset_domain(out_dir: str | Path) -> Domain:
    """The domain a dataset was generated with, from its manifest (cached per process)."""
    key = str(Path(out_dir).resolve())
    if key not in _DOMAINS:
        manifest = json_load(DatasetLayout(out_dir).manifest)
        config = dict(manifest["config"]["domain"])
        _DOMAINS[key] = load_domain(config["name"], config)
    return _DOMAINS[key]


def rebuild_episode(out_dir: str | Path, episode: str) -> Episode:
    """Rebuild an episode from its private spec (generator side only: it holds the truth).

    Args:
        out_dir: The dataset directory (the one holding ``manifest.json``).
        episode: The episode id.
    """
    return build_episode(dataset_domain(out_dir), find_spec(out_dir, episode))


def open_episode(out_dir: str | Path, episode: str, cache_dir: str | Path | None = None) -> Path:
    """The directory of an episode's agent-visible files.

    A materialized split returns the stored directory as it is (so it loads byte-identically
    whatever the generator code does later). A lazy split rebuilds the tables from the spec into
    ``cache_dir/<episode>`` (default: the dataset's ``public/episodes``) once, and returns it.
    The rebuild is written to a private directory and renamed into place whole, so concurrent
    openers (rollouts of one prompt in several processes) never see a partial episode: the first
    rename wins and the others use its directory.

    Args:
        out_dir: The dataset directory (the one holding ``manifest.json``).
        episode: The episode id.
        cache_dir: Where a lazy split's rebuilt episodes go; the dataset's own
            ``public/episodes`` by default.

    Returns:
        The directory of the episode's visible tables and prompt.

    Raises:
        CausalTraceError: The dataset has no such episode, or a rebuild does not reproduce the
            bytes the manifest froze.
    """
    layout = DatasetLayout(out_dir)
    stored = layout.episode_dir(episode)
    if stored.is_dir() and any(stored.iterdir()):
        return stored
    target = Path(cache_dir) / episode if cache_dir is not None else stored
    if target.is_dir() and any(target.iterdir()):  # (an empty one is replaced by the rename)
        return target
    domain = dataset_domain(out_dir)
    tables, prompt = build_visible(domain, find_spec(out_dir, episode))
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{episode}.", suffix=".tmp", dir=target.parent))
    try:
        staging.chmod(0o755)  # readable by a sandbox user, like the files inside
        write_episode_dir(staging, tables, prompt, domain.data_dictionary(), _frozen_by(layout))
        _check_frozen(layout, episode, staging)
        try:
            staging.rename(target)
        except OSError:
            if not target.is_dir():  # not a lost race: a real error
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _frozen_by(layout: DatasetLayout) -> dict[str, str] | None:
    """The library versions of the generator that froze the split's files (None: none
    recorded), so a rebuild writes its Parquet metadata as they did."""
    if not layout.manifest.exists():
        return None
    generator = json_load(layout.manifest).get("generator")
    libraries = generator.get("libraries") if isinstance(generator, dict) else None
    return dict(libraries) if isinstance(libraries, dict) else None


def _check_frozen(layout: DatasetLayout, episode: str, directory: Path) -> None:
    """If the manifest froze this episode's files (a materialized split shipped without its
    tables), a rebuild must reproduce them byte for byte; otherwise the generator changed."""
    if not layout.manifest.exists():
        return
    prefix = f"public/episodes/{episode}/"
    frozen = {
        rel[len(prefix) :]: digest
        for shard in json_load(layout.manifest)["shards"]
        for rel, digest in shard["files"].items()
        if rel.startswith(prefix)
    }
    changed = sorted(
        name for name, digest in frozen.items() if sha256_file(directory / name) != digest
    )
    if changed:
        for path in directory.iterdir():
            path.unlink()
        raise CausalTraceError(
            f"episode {episode}: rebuilding gives different bytes for {changed} than the split "
            f"froze: the generator changed since (package version "
            f"{json_load(layout.manifest)['package_version']}). Use the frozen tables, or "
            f"the package version that made them."
        )


def materialize(out_dir: str | Path, show_progress: bool = True) -> int:
    """Open every episode of a dataset (rebuilding and checking lazy or shipped ones); returns
    the number of episodes.

    Args:
        out_dir: The dataset directory (the one holding ``manifest.json``).
        show_progress: Show a progress bar; on by default.
    """
    ids = [row["episode_id"] for row in load_index(out_dir)]
    bar = progress_bar(len(ids), "materialize", show_progress)
    for episode in ids:
        open_episode(out_dir, episode)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return len(ids)


class DatasetSource:
    """Episodes of one generated dataset directory.

    Args:
        root: The dataset directory (written by ``causaltrace-generate``).
        cache_dir: Where a lazy split's rebuilt episodes go; the dataset's own
            ``public/episodes`` by default.

    Raises:
        CausalTraceError: ``root`` has no ``manifest.json`` (not a complete dataset).
    """

    def __init__(self, root: str | os.PathLike, cache_dir: str | os.PathLike | None = None):
        self.root = Path(root)
        if not (self.root / "manifest.json").exists():
            raise CausalTraceError(
                f"{self.root} is not a complete dataset (no manifest.json); "
                f"generate it with causaltrace-generate"
            )
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None

    @cached_property
    def _index(self) -> dict[str, str]:
        return {row["episode_id"]: row["prompt"] for row in load_index(self.root)}

    @cached_property
    def _labels(self) -> dict[str, dict]:
        return load_labels(self.root)

    @property
    def episode_ids(self) -> list[str]:
        return list(self._index)

    def prompt(self, episode: str) -> str:
        """The episode's prompt (agent-visible).

        Args:
            episode: The episode id.

        Raises:
            CausalTraceError: The dataset has no such episode.
        """
        try:
            return self._index[episode]
        except KeyError:
            raise CausalTraceError(f"dataset {self.root}: no episode {episode!r}") from None

    def label(self, episode: str) -> OracleLabel:
        """The episode's oracle label (secret: for scoring only).

        Args:
            episode: The episode id.

        Raises:
            CausalTraceError: The dataset has no such episode.
        """
        self.prompt(episode)  # a clear error for an unknown id
        return OracleLabel.from_dict(self._labels[episode])

    def visible_dir(self, episode: str) -> Path:
        """The episode's agent-visible directory (rebuilt on first use for lazy splits).

        Args:
            episode: The episode id.
        """
        self.prompt(episode)
        return open_episode(self.root, episode, self.cache_dir)

    @cached_property
    def domain(self) -> Domain:
        return dataset_domain(self.root)

    @cached_property
    def answer_space(self) -> AnswerSpace:
        return AnswerSpace.from_scm(self.domain.scm)

    @cached_property
    def concurrent(self) -> bool:
        """Whether the dataset's episodes may have several causes (its submit tool then takes
        a list of causes, and every prompt says so)."""
        return bool(self.domain.concurrent)
