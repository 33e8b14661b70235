"""Opening a dataset for the audit: the visible directory of each episode, its label, its
private verifier stats, and the domain it was generated with.

Visible files come from :func:`causaltrace.datasets.reading.open_episode`, as the evaluation and
``causaltrace-inspect`` read them: a materialized split's stored directory as it is; a lazy
split's tables rebuilt from the spec into ``cache_dir`` (never into the dataset).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from causaltrace.core.files import json_load
from causaltrace.datasets.reading import open_episode
from causaltrace.datasets.storage import PROMPT_FILE, DatasetLayout, read_episode_tables
from causaltrace.episodes.domain import Domain, load_domain
from causaltrace.errors import CausalTraceError


@dataclass(frozen=True)
class AuditEpisode:
    """One episode: ``directory`` holds only what the agent sees; ``label`` and ``stats`` are
    the generator's secrets (for scoring the oracle and binning, never for probe features)."""

    episode_id: str
    directory: Path
    label: Mapping[str, Any]
    stats: Mapping[str, Any]

    def tables(self) -> dict[str, Any]:
        return read_episode_tables(self.directory)

    def prompt(self) -> str:
        path = self.directory / PROMPT_FILE
        return path.read_text(encoding="utf-8") if path.exists() else ""


class AuditDataset:
    """A dataset directory, checked, with its first ``limit`` episodes in index order."""

    def __init__(
        self,
        root: str | Path,
        domain_config: Mapping[str, Any],
        cache_dir: str | Path,
        limit: int | None = None,
    ):
        self.root = Path(root)
        layout = DatasetLayout(self.root)
        if not self.root.is_dir():
            raise CausalTraceError(f"{root}: no such dataset directory")
        if not (self.root / "public" / "index").is_dir() or not layout.manifest.exists():
            raise CausalTraceError(f"{root} is not a dataset directory (no manifest or index)")
        manifest = json_load(layout.manifest)
        self.manifest = manifest
        written = dict((manifest.get("config") or {}).get("domain") or {})
        wanted = str(domain_config.get("name") or "")
        if written.get("name") != wanted:
            raise CausalTraceError(
                f"dataset {root} was generated with domain {written.get('name')!r}, not "
                f"{wanted!r}: run the audit with domain={written.get('name')}"
            )
        # The dataset's own domain config (preset, overrides, difficulty) rebuilds its SCM.
        self.domain: Domain = load_domain(wanted, written)
        self.verifier = dict((manifest.get("config") or {}).get("verifier") or {})
        self.name = str(manifest.get("name") or self.root.name)
        self.cache_dir = Path(cache_dir)
        labels = {row["episode_id"]: row for row in layout.all_labels()}
        stats: dict[str, Any] = {}
        for path in sorted((self.root / "private" / "stats").glob("shard-*.json")):
            for row in json_load(path):
                stats[row["episode_id"]] = row
        ids = [row["episode_id"] for row in layout.all_index()]
        missing = [e for e in ids if e not in labels]
        if missing:
            raise CausalTraceError(f"dataset {root}: no label for episode {missing[0]!r}")
        self.ids = ids[:limit] if limit is not None else ids
        self.labels = labels
        self.stats = stats

    def __len__(self) -> int:
        return len(self.ids)

    def episode(self, episode_id: str) -> AuditEpisode:

        # The stored directory when it is there; else rebuilt into the cache, never the dataset.
        directory = open_episode(self.root, episode_id, cache_dir=self.cache_dir / self.name)
        return AuditEpisode(
            episode_id,
            Path(directory),
            self.labels[episode_id],
            self.stats.get(episode_id, {}),
        )

    def __iter__(self) -> Iterator[AuditEpisode]:
        for episode_id in self.ids:
            yield self.episode(episode_id)


def read_agent_results(path: str | Path) -> tuple[str, dict[str, dict[str, Any]]]:
    """An evaluation's per-episode results (``results.jsonl`` of ``causaltrace-eval``, or its
    run directory): the agent's name and the records by episode id."""
    path = Path(path)
    file = path / "results.jsonl" if path.is_dir() else path
    if not file.exists():
        raise CausalTraceError(f"{path}: no such results file (results.jsonl of causaltrace-eval)")
    records: dict[str, dict[str, Any]] = {}
    for line in file.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a torn line, as the harness itself skips it
        if isinstance(row, dict) and row.get("episode_id"):
            records[str(row["episode_id"])] = row
    names = {str(r.get("agent")) for r in records.values() if r.get("agent")}
    name = names.pop() if len(names) == 1 else file.parent.name
    return name, records
