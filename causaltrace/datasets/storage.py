"""Files of a dataset: atomic writes, Parquet tables, checksums, and the directory layout.

A dataset directory keeps what an agent may see apart from what it must not::

    manifest.json                      resolved config, package version, shard checksums
    public/index/shard-00000.jsonl     episode ids and prompts (agent-visible)
    public/episodes/<episode_id>/      one Parquet file per table (materialized splits only)
    private/specs/shard-00000.jsonl    episode specs: seeds, assigned cause (secret)
    private/labels/shard-00000.jsonl   oracle labels (secret)
    private/stats/shard-00000.json     attempts and rejection reasons per episode (secret)
    done/shard-00000.json              completion record with the shard's checksums

A sandbox mounts one ``public/episodes/<episode_id>`` directory and nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from causaltrace.errors import CausalTraceError

TABLE_SUFFIX = ".parquet"
PROMPT_FILE = "prompt.txt"
DICTIONARY_FILE = "data_dictionary.json"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # readable by a sandbox user, like any other data file
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def canonical_json(data: Any) -> str:
    """Deterministic JSON (sorted keys, fixed separators): equal data, equal bytes."""
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def plain_data(value: Any) -> Any:
    """Plain JSON data from mappings and tuples (config records, manifests, labels)."""
    if isinstance(value, Mapping):
        return {str(k): plain_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_data(v) for v in value]
    return value


def jsonl(records: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in records)


class DataFileError(CausalTraceError):
    """A dataset or run file is missing, unreadable or not valid JSON; the message names it."""


def _read_text(path: Path, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataFileError(f"{path}: no such {what}") from None
    except UnicodeDecodeError as exc:
        raise DataFileError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def json_load(path: Path) -> Any:
    """The JSON document in ``path``; a :class:`DataFileError` naming the file (and the line
    and column) if it is missing or not valid JSON."""
    text = _read_text(path, "file")
    try:
        return json.loads(text)
    except ValueError as exc:
        where = f"line {exc.lineno}, column {exc.colno}: " if hasattr(exc, "lineno") else ""
        msg = getattr(exc, "msg", str(exc))
        raise DataFileError(
            f"{path}: not valid JSON ({where}{msg}); the file is damaged or was cut short"
        ) from None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON Lines file; a :class:`DataFileError` naming the file and line of
    the first line that is not valid JSON."""
    out = []
    for number, line in enumerate(_read_text(path, "file").splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError as exc:
            msg = getattr(exc, "msg", str(exc))
            raise DataFileError(
                f"{path}: line {number} is not valid JSON ({msg}); the file is damaged or was "
                "cut short"
            ) from None
    return out


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def table_bytes(frame) -> bytes:
    """A table as Parquet bytes (zstd, no index): the same frame always gives the same bytes.

    What ``frame.to_parquet(engine="pyarrow", compression="zstd", index=False)`` writes, byte for
    byte (a test checks), without pandas' path and option handling on every call."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buffer, compression="zstd")
    return buffer.getvalue()


def write_episode_dir(
    directory: Path,
    tables: Mapping[str, Any],
    prompt: str,
    dictionary: Mapping[str, Mapping[str, str]],
) -> None:
    """One Parquet file per table, the prompt and the data dictionary, written atomically."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, frame in tables.items():
        atomic_write_bytes(directory / f"{name}{TABLE_SUFFIX}", table_bytes(frame))
    atomic_write_text(directory / PROMPT_FILE, prompt)
    atomic_write_text(directory / DICTIONARY_FILE, canonical_json(dictionary))


def read_episode_tables(directory: Path) -> dict[str, Any]:
    """The tables of an episode directory as pandas DataFrames (by file name)."""
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
