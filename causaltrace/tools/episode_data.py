"""The agent-visible data of one episode, as the tools receive it.

Contract with the episode sampler: an episode's visible data is a directory holding one
``<table>.parquet`` per table and a ``data_dictionary.json``. Only those files are ever read or
copied into a sandbox: anything else in the directory (and everything next to it, such as
labels or manifests) is ignored, and symbolic links are refused, so that a stray link cannot
carry a label into an agent's view.
"""

from __future__ import annotations

import keyword
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from causaltrace.tools.config import ToolError

DATA_DICTIONARY = "data_dictionary.json"
# How a table's file may be named in a slot: the episode's Parquet, or its Arrow IPC copy.
TABLE_SUFFIXES = (".parquet", ".arrow")
_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class EpisodeData:
    """Validated paths of an episode's visible files: ``tables`` maps table name to file."""

    directory: Path
    tables: dict[str, Path]
    data_dictionary: Path | None

    @classmethod
    def from_dir(cls, directory: str | os.PathLike[str]) -> EpisodeData:
        """Read the directory listing; raise :class:`ToolError` naming any bad entry.

        Args:
            directory: The episode's directory of visible files.
        """
        root = Path(directory)
        if not root.is_dir():
            raise ToolError(f"episode directory {str(root)!r} does not exist or is not a directory")
        tables: dict[str, Path] = {}
        dictionary: Path | None = None
        for entry in sorted(root.iterdir()):
            if entry.name != DATA_DICTIONARY and entry.suffix != ".parquet":
                continue
            mode = entry.lstat().st_mode
            if not stat.S_ISREG(mode):
                raise ToolError(
                    f"episode file {str(entry)!r} is not a regular file (symbolic links and "
                    "directories are refused so that nothing outside the episode is exposed)"
                )
            if entry.name == DATA_DICTIONARY:
                dictionary = entry
                continue
            name = entry.stem
            if not _TABLE_NAME.fullmatch(name) or keyword.iskeyword(name):
                raise ToolError(
                    f"table file {entry.name!r} in {str(root)!r}: table names must be Python "
                    "and SQL identifiers ([A-Za-z_][A-Za-z0-9_]*, not a keyword)"
                )
            tables[name] = entry
        if not tables:
            raise ToolError(f"episode directory {str(root)!r} holds no <table>.parquet file")
        return cls(root, tables, dictionary)

    @property
    def files(self) -> list[Path]:
        """Every file the agent may see."""
        extra = [self.data_dictionary] if self.data_dictionary else []
        return [*self.tables.values(), *extra]

    @property
    def nbytes(self) -> int:
        """Total size on disk of the visible files."""
        return sum(path.stat().st_size for path in self.files)

    def install_into(self, target: Path, tables: dict[str, Path] | None = None) -> None:
        """Put the visible files into an (empty) sandbox slot directory.

        ``tables`` replaces the Parquet files with other files of the same tables (the Arrow
        IPC files of ``shared_tables.py``), named ``<table><suffix>``. Files are hard-linked
        when possible (no copy, no extra disk) and copied otherwise; a hard link is used only
        for world-readable files, so that a sandbox running under an unprivileged uid can read
        what it is given.

        Args:
            target: The slot directory.
            tables: Replacement files by table name (all of the episode's tables); the Parquet
                files by default.

        Raises:
            ToolError: ``tables`` does not hold exactly the episode's tables.
        """
        if tables is not None and set(tables) != set(self.tables):
            raise ToolError(
                f"the files given for {str(self.directory)!r} hold tables {sorted(tables)}, "
                f"not {sorted(self.tables)}"
            )
        sources = list((tables or self.tables).values())
        if self.data_dictionary:
            sources.append(self.data_dictionary)
        target.mkdir(mode=0o755, exist_ok=True)
        if any(target.iterdir()):
            raise ToolError(
                f"sandbox slot {str(target)!r} is not empty: a worker never serves two episodes"
            )
        for source in sources:
            dest = target / source.name
            info = source.stat()
            linked = False
            if info.st_mode & stat.S_IROTH and info.st_dev == target.stat().st_dev:
                try:
                    os.link(source, dest)
                    linked = True
                except OSError:
                    linked = False
            if not linked:
                shutil.copyfile(source, dest)
                os.chmod(dest, 0o644)
        os.chmod(target, 0o755)

    def remove_tables_from(self, target: Path) -> None:
        """Take the table files out of a slot once its worker has loaded them.

        Their sizes follow their contents (compressed columns: a cut budget's empty evening
        hours compress better), so a policy could read the cause from ``ls -l`` without looking
        at the data; the tables stay in the namespace, and the data dictionary stays on disk.

        Args:
            target: The slot directory the files were installed into.
        """
        for name in self.tables:
            for suffix in TABLE_SUFFIXES:
                (target / f"{name}{suffix}").unlink(missing_ok=True)
