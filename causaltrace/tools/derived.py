"""Files the host derives from an episode's tables once per machine, shared by its rollouts.

The SQL tool's DuckDB database and the Python tool's Arrow IPC tables are both built by the
host from an episode's (trusted) Parquet files, hard-linked read-only into the slot of every live
worker of that episode (an RL rollout group), and kept after the last of them closes for later
episodes of the same files (RL epochs), within a count and a size; the least recently used goes
first. Everything is deleted with the runtime. A subclass says what it builds (:meth:`build`)
and what its key depends on besides the files (:meth:`version`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import shutil
from abc import ABC, abstractmethod
from pathlib import Path

from causaltrace.tools.config import MiB, ToolConfig
from causaltrace.tools.episode_data import EpisodeData


class DerivedFiles(ABC):
    """One built path (a file or a directory) per distinct set of table files: the key is the
    files' names, paths, inodes, sizes and modification times, and :meth:`version`."""

    suffix = ""
    keep_files = 64
    keep_bytes = 512 * MiB

    def __init__(self, root: Path, config: ToolConfig):
        self.root = root
        self.config = config
        root.mkdir(mode=0o755, exist_ok=True)
        self._entries: dict[str, tuple[Path, asyncio.Task[None]]] = {}
        self._refs: dict[str, int] = {}
        self._unused: dict[str, None] = {}  # keys of built paths no episode uses, oldest first
        self.builds = 0

    @abstractmethod
    def build(self, episode: EpisodeData, target: Path) -> None:
        """Build ``target`` from the episode's tables, atomically (a thread runs this)."""

    def version(self) -> str:
        """What else the built files depend on (a library's version)."""
        return ""

    def limits(self) -> tuple[int, int]:
        """(files, bytes) kept unused at most."""
        return self.keep_files, self.keep_bytes

    def key(self, episode: EpisodeData) -> str:
        digest = hashlib.sha256(self.version().encode())
        for name, path in sorted(episode.tables.items()):
            st = path.stat()
            stamp = (name, str(path.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            digest.update(repr(stamp).encode())
        return digest.hexdigest()[:32]

    async def acquire(self, episode: EpisodeData) -> tuple[str, Path]:
        """The (key, path) of what the episode needs, built unless it exists."""
        key = await asyncio.to_thread(self.key, episode)
        if key not in self._entries:
            path = self.root / f"{key}{self.suffix}"
            task = asyncio.get_running_loop().create_task(
                asyncio.to_thread(self.build, episode, path)
            )
            self._entries[key] = (path, task)
            self.builds += 1
        self._unused.pop(key, None)
        self._refs[key] = self._refs.get(key, 0) + 1
        path, task = self._entries[key]
        try:
            await asyncio.shield(task)
        except BaseException:
            self.release(key)
            raise
        return key, path

    def release(self, key: str) -> None:
        if key not in self._refs:  # the cache was closed first
            return
        self._refs[key] -= 1
        if self._refs[key] > 0:
            return
        del self._refs[key]
        task = self._entries[key][1]
        if not task.done() or task.cancelled() or task.exception() is not None:
            self._forget(key)  # a failed (or still running) build is not kept
            return
        self._unused[key] = None
        self._evict()

    def _forget(self, key: str) -> None:
        path, task = self._entries.pop(key)
        self._unused.pop(key, None)
        if task.done():
            _remove(path)
        else:  # still building: delete what it builds
            task.add_done_callback(lambda _: _remove(path))

    def _evict(self) -> None:
        keep_files, keep_bytes = self.limits()
        total = sum(_size(self._entries[k][0]) for k in self._unused)
        while self._unused and (len(self._unused) > keep_files or total > keep_bytes):
            oldest = next(iter(self._unused))
            total -= _size(self._entries[oldest][0])
            self._forget(oldest)

    async def close(self) -> None:
        for _, task in list(self._entries.values()):
            with contextlib.suppress(BaseException):
                await task
        self._entries.clear()
        self._unused.clear()
        self._refs.clear()
        await asyncio.to_thread(shutil.rmtree, self.root, True)


def _size(path: Path) -> int:
    try:
        if path.is_dir():
            return sum(p.stat().st_size for p in path.iterdir())
        return path.stat().st_size
    except OSError:
        return 0


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
