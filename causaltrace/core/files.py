"""Files written and read atomically and as canonical JSON: an interrupted writer leaves the old file
or the new one, never half, and equal data gives equal bytes (the basis of a dataset's
checksums and of resumable runs)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from causaltrace.errors import CausalTraceError


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never half.

    Args:
        path: The file to write; its directory is created if missing.
        data: The file's new contents.
    """
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
    """Deterministic JSON (sorted keys, fixed separators): equal data, equal bytes.

    Args:
        data: JSON-serializable data.
    """
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def plain_data(value: Any) -> Any:
    """Plain JSON data from mappings and tuples (config records, manifests, labels).

    Args:
        value: A mapping, list, tuple or scalar; mappings become dicts with string keys, tuples
            lists.
    """
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
    and column) if it is missing or not valid JSON.

    Args:
        path: The JSON file.

    Raises:
        DataFileError: The file is missing, unreadable, not UTF-8 or not valid JSON.
    """
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
    the first line that is not valid JSON.

    Args:
        path: The JSON Lines file; blank lines are skipped.

    Raises:
        DataFileError: The file is missing or unreadable, or a line is not valid JSON.
    """
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
