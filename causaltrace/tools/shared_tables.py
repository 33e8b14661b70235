"""An episode's tables as Arrow IPC files: one copy per machine, mapped by every Python worker.

A Python worker that reads Parquet holds a private copy of every table (decompressed), so a
GRPO group of 16 rollouts of one prompt holds 16 copies. Arrow IPC files are the in-memory
layout written to disk: a worker maps them (``python_worker._mapped_frame``) and its DataFrame
columns point into the mapping, so the pages are the kernel's page cache, shared by every
worker of the episode, and written nowhere. The mapping is private (copy-on-write): what agent
code assigns into a DataFrame lands in pages of its own, never in the file or in another
worker's view; the files are read-only, and so is the slot they are linked into.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from causaltrace.tools.config import ToolError
from causaltrace.tools.derived import DerivedFiles
from causaltrace.tools.episode_data import EpisodeData

ARROW_SUFFIX = ".arrow"


def build_arrow_tables(episode: EpisodeData, target: Path) -> None:
    """Write ``<table>.arrow`` (IPC file format, uncompressed: mappable as is) for each of the
    episode's tables into the new directory ``target``, atomically, world-readable."""
    # lazy: the host process rarely needs it; tool start-up stays fast
    import pyarrow

    # lazy: the host process rarely needs it; tool start-up stays fast
    import pyarrow.ipc

    # lazy: the host process rarely needs it; tool start-up stays fast
    import pyarrow.parquet

    tmp = target.with_name(f".{target.name}.{os.urandom(6).hex()}.tmp")
    tmp.mkdir(mode=0o755)
    try:
        for name, path in sorted(episode.tables.items()):
            try:
                table = pyarrow.parquet.read_table(path)  # keeps the pandas metadata (dtypes)
            except (pyarrow.ArrowException, OSError) as exc:
                raise ToolError(f"{path.name}: {exc}") from None
            out = tmp / f"{name}{ARROW_SUFFIX}"
            with pyarrow.ipc.new_file(out, table.schema) as writer:
                writer.write_table(table)
            os.chmod(out, 0o444)
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class ArrowTables(DerivedFiles):
    """The episodes' Arrow IPC tables, one directory per distinct set of Parquet files."""

    suffix = ".arrow.d"

    def build(self, episode: EpisodeData, target: Path) -> None:
        build_arrow_tables(episode, target)

    def version(self) -> str:
        # lazy: the host process rarely needs it; tool start-up stays fast
        import pyarrow

        return pyarrow.__version__

    @staticmethod
    def files(directory: Path) -> dict[str, Path]:
        """Table name -> Arrow file of a built directory."""
        return {p.name[: -len(ARROW_SUFFIX)]: p for p in sorted(directory.glob(f"*{ARROW_SUFFIX}"))}
