"""Files of a dataset: Parquet tables, episode directories, and the directory layout (atomic
writes and checksums are :mod:`causaltrace.core.files`).

A dataset directory keeps what an agent may see apart from what it must not::

    manifest.json                      resolved config, content digest, generator, shard checksums
    public/index/shard-00000.jsonl     episode ids and prompts (agent-visible)
    public/episodes/<episode_id>/      one Parquet file per table (materialized splits only)
    private/specs/shard-00000.jsonl    episode specs: seeds, assigned cause (secret)
    private/labels/shard-00000.jsonl   oracle labels (secret)
    private/stats/shard-00000.json     attempts and rejection reasons per episode (secret)
    done/shard-00000.json              completion record with the shard's checksums

A sandbox mounts one ``public/episodes/<episode_id>`` directory and nothing else.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from causaltrace.core.files import atomic_write_bytes, atomic_write_text, canonical_json, read_jsonl

TABLE_SUFFIX = ".parquet"
PROMPT_FILE = "prompt.txt"
DICTIONARY_FILE = "data_dictionary.json"


def table_bytes(frame, written_by: Mapping[str, str] | None = None) -> bytes:
    """A table as Parquet bytes (zstd, no index): the same frame always gives the same bytes.

    What ``frame.to_parquet(engine="pyarrow", compression="zstd", index=False)`` writes, byte for
    byte (a test checks), without pandas' path and option handling on every call.

    The file's pandas metadata names the pandas and pyarrow versions that wrote it, so a patch
    release of either changes the bytes of an unchanged table. ``written_by`` (library ->
    version, a dataset generator's ``libraries``) writes those two names as that generator's
    versions instead, which is how a rebuild is compared with the files a split froze: the
    same data, written as the recorded libraries wrote it. (The Parquet footer's
    ``created_by`` still names the running pyarrow, which cannot be set.)"""
    # lazy: pyarrow and pandas take ~0.6 s to import; the dataset's read side (reward functions
    # in trainer workers) needs neither
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, preserve_index=False)
    if written_by:
        table = _as_written_by(table, written_by)
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    return buffer.getvalue()


def _as_written_by(table, libraries: Mapping[str, str]):
    """``table`` with its pandas metadata naming ``libraries``' pandas and pyarrow versions
    (unchanged where they are the running ones: pyarrow's own JSON is kept)."""
    metadata = dict(table.schema.metadata or {})
    if b"pandas" not in metadata:
        return table
    pandas_meta = json.loads(metadata[b"pandas"])
    before = json.dumps(pandas_meta)
    if libraries.get("pandas"):
        pandas_meta["pandas_version"] = libraries["pandas"]
    creator = pandas_meta.get("creator")
    if isinstance(creator, dict) and libraries.get("pyarrow"):
        creator["version"] = libraries["pyarrow"]
    after = json.dumps(pandas_meta)
    if after == before:
        return table
    metadata[b"pandas"] = after.encode()
    return table.replace_schema_metadata(metadata)


def write_episode_dir(
    directory: Path,
    tables: Mapping[str, Any],
    prompt: str,
    dictionary: Mapping[str, Mapping[str, str]],
    written_by: Mapping[str, str] | None = None,
) -> None:
    """One Parquet file per table, the prompt and the data dictionary, written atomically
    (``written_by``: see :func:`table_bytes`)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, frame in tables.items():
        atomic_write_bytes(directory / f"{name}{TABLE_SUFFIX}", table_bytes(frame, written_by))
    atomic_write_text(directory / PROMPT_FILE, prompt)
    atomic_write_text(directory / DICTIONARY_FILE, canonical_json(dictionary))


def read_episode_tables(directory: Path) -> dict[str, Any]:
    """The tables of an episode directory as pandas DataFrames (by file name)."""
    # lazy: pandas takes ~0.5 s to import; the dataset's read side (reward functions in
    # trainer workers) does not need it
    import pandas as pd

    directory = Path(directory)
    return {
        p.name[: -len(TABLE_SUFFIX)]: pd.read_parquet(p)
        for p in sorted(directory.glob(f"*{TABLE_SUFFIX}"))
    }


class DatasetLayout:
    """Paths inside a dataset directory."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    def shard_name(self, shard: int) -> str:
        return f"shard-{shard:05d}"

    def index(self, shard: int) -> Path:
        return self.root / "public" / "index" / f"{self.shard_name(shard)}.jsonl"

    def episode_dir(self, episode_id: str) -> Path:
        return self.root / "public" / "episodes" / episode_id

    def specs(self, shard: int) -> Path:
        return self.root / "private" / "specs" / f"{self.shard_name(shard)}.jsonl"

    def labels(self, shard: int) -> Path:
        return self.root / "private" / "labels" / f"{self.shard_name(shard)}.jsonl"

    def stats(self, shard: int) -> Path:
        return self.root / "private" / "stats" / f"{self.shard_name(shard)}.json"

    def done(self, shard: int) -> Path:
        return self.root / "done" / f"{self.shard_name(shard)}.json"

    def all_labels(self) -> list[dict[str, Any]]:
        out = []
        for path in sorted((self.root / "private" / "labels").glob("shard-*.jsonl")):
            out.extend(read_jsonl(path))
        return out

    def all_index(self) -> list[dict[str, Any]]:
        out = []
        for path in sorted((self.root / "public" / "index").glob("shard-*.jsonl")):
            out.extend(read_jsonl(path))
        return out

    def all_specs(self) -> list[dict[str, Any]]:
        out = []
        for path in sorted((self.root / "private" / "specs").glob("shard-*.jsonl")):
            out.extend(read_jsonl(path))
        return out
