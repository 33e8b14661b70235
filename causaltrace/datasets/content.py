"""What a dataset holds, episode by episode: the identity of a split.

A split is identified by what it contains, not by the code that wrote it: its canonical config
and, in episode order, each episode's checksums (its prompt row, spec row, label row and
acceptance-statistics row, as the shard files hold them, and the checksums of its episode
files where the split froze them: a materialized split's tables, prompt and data dictionary).
:func:`content_digest` hashes the two together; the manifest states it (``content_sha256``;
manifests written before it was stated lack it, and :func:`dataset_content` computes it from
the files all the same).

The generator fingerprint the manifest also states (a hash of the generator's source) is
provenance only: a refactor changes it without changing a byte of the episodes, and generation
accepts a split recorded with another fingerprint when a sample of its episodes regenerates
byte for byte (:func:`causaltrace.datasets.split_check.check_existing`).

Every per-episode checksum is the sha256 of the episode's row in the JSON Lines form the shard
files use (one sorted-key JSON line), so that a regenerated episode is compared with the stored
one byte for byte without rewriting the shard around it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from causaltrace.core.files import DataFileError, canonical_json, json_load, jsonl, sha256_file
from causaltrace.datasets.storage import DatasetLayout

CONTENT_FORMAT = "causaltrace-content/1"
# The row files of a shard, by the name an episode's checksums use for its row in each.
ROW_KINDS = ("index", "spec", "label", "stats")


def row_bytes(row: Mapping[str, Any]) -> bytes:
    """A row as a shard's JSON Lines file holds it (one sorted-key line)."""
    return jsonl([row]).encode("utf-8")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def row_file(layout: DatasetLayout, kind: str, shard: int) -> Path:
    """The shard file that holds the rows of ``kind`` (one of :data:`ROW_KINDS`)."""
    return {
        "index": layout.index,
        "spec": layout.specs,
        "label": layout.labels,
        "stats": layout.stats,
    }[kind](shard)


@dataclass(frozen=True)
class StoredEpisode:
    """One episode as a dataset holds it.

    Args:
        episode_id: The episode's id.
        shard: The shard that holds it.
        rows: Its row in each row file (:data:`ROW_KINDS`), as bytes (:func:`row_bytes`).
        files: Its frozen episode files (name -> sha256), from the shard's done record; empty
            for a lazy split.
    """

    episode_id: str
    shard: int
    rows: Mapping[str, bytes]
    files: Mapping[str, str] = field(default_factory=dict)

    def checksums(self) -> dict[str, Any]:
        """The episode's checksums: one per row, and its frozen files'."""
        out: dict[str, Any] = {kind: sha256_bytes(self.rows[kind]) for kind in ROW_KINDS}
        out["files"] = dict(sorted(self.files.items()))
        return out


def _check_file(layout: DatasetLayout, path: Path, record: Mapping[str, Any], done: Path) -> None:
    rel = str(path.relative_to(layout.root))
    digest = (record.get("files") or {}).get(rel)
    if digest is None:
        raise DataFileError(f"{done} states no checksum for {rel}: the record is damaged")
    if not path.exists():
        raise DataFileError(f"{path}: no such file (its shard's done record lists it)")
    if sha256_file(path) != digest:
        raise DataFileError(
            f"{path} does not match the checksum {done} states: the file was edited or damaged "
            "after it was written"
        )


def shard_episodes(
    layout: DatasetLayout, shard: int, record: Mapping[str, Any] | None = None
) -> list[StoredEpisode]:
    """The episodes of a done shard, in index order, after checking each of its row files
    against the checksum its done record states.

    Args:
        layout: The dataset's layout.
        shard: The shard's index.
        record: The shard's done record; read from ``done/`` by default.

    Raises:
        DataFileError: A row file is missing, damaged or does not match its checksum, or the
            row files disagree on the shard's episodes.
    """
    done = layout.done(shard)
    record = json_load(done) if record is None else record
    rows: dict[str, dict[str, bytes]] = {}
    order: list[str] | None = None
    for kind in ROW_KINDS:
        path = row_file(layout, kind, shard)
        _check_file(layout, path, record, done)
        if kind == "stats":
            parsed = [(row["episode_id"], row_bytes(row)) for row in json_load(path)]
        else:
            parsed = []
            for line in path.read_bytes().splitlines(keepends=True):
                if line.strip():
                    parsed.append((json_load_line(line, path)["episode_id"], line))
        ids = [episode for episode, _ in parsed]
        if order is None:
            order = ids
        elif ids != order:
            raise DataFileError(
                f"{path} lists the episodes {ids[:3]}... where the shard's index lists "
                f"{order[:3]}...: the shard is damaged"
            )
        for episode, data in parsed:
            rows.setdefault(episode, {})[kind] = data
    files: dict[str, dict[str, str]] = {}
    for rel, digest in (record.get("files") or {}).items():
        parts = rel.split("/")
        if len(parts) == 4 and parts[:2] == ["public", "episodes"]:
            files.setdefault(parts[2], {})[parts[3]] = digest
    return [StoredEpisode(e, shard, rows[e], files.get(e, {})) for e in order or []]


def json_load_line(line: bytes, path: Path) -> dict[str, Any]:
    """One JSON Lines row, or a :class:`DataFileError` naming the file."""
    try:
        return json.loads(line)
    except ValueError:
        raise DataFileError(
            f"{path}: a line is not valid JSON; the file is damaged or was cut short"
        ) from None


def content_digest(config: Mapping[str, Any], episodes: Iterable[StoredEpisode]) -> str:
    """The split's identity: sha256 of its canonical config and, in episode order, every
    episode's id and checksums (:meth:`StoredEpisode.checksums`)."""
    document = {
        "format": CONTENT_FORMAT,
        "config": config,
        "episodes": [[e.episode_id, e.checksums()] for e in episodes],
    }
    return sha256_bytes(canonical_json(document).encode("utf-8"))


def dataset_content(out_dir: str | Path, config: Mapping[str, Any] | None = None) -> str:
    """The content digest of a finished dataset, computed from its files (each row file checked
    against its done record first).

    Args:
        out_dir: The dataset directory.
        config: The config record to hash with the episodes; the manifest's by default.

    Raises:
        DataFileError: A file is missing or does not match its checksum.
    """
    layout = DatasetLayout(out_dir)
    if config is None:
        config = json_load(layout.manifest)["config"]
    shards = sorted(int(p.stem.split("-")[1]) for p in (layout.root / "done").glob("shard-*.json"))
    episodes = [e for shard in shards for e in shard_episodes(layout, shard)]
    return content_digest(config, episodes)
