"""A dataset as the environment sees it: prompts and visible directories for the agent side,
labels and the answer space for scoring (never handed to tools)."""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path

from causaltrace.datasets.generation import dataset_domain, load_index, load_labels, open_episode
from causaltrace.episodes.labels import OracleLabel
from causaltrace.errors import CausalTraceError


class DatasetSource:
    """Episodes of one generated dataset directory."""

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
        try:
            return self._index[episode]
        except KeyError:
            raise CausalTraceError(f"dataset {self.root}: no episode {episode!r}") from None

    def label(self, episode: str) -> OracleLabel:
        self.prompt(episode)  # a clear error for an unknown id
        return OracleLabel.from_dict(self._labels[episode])

    def visible_dir(self, episode: str) -> Path:
        """The episode's agent-visible directory (rebuilt on first use for lazy splits)."""
        self.prompt(episode)
        return open_episode(self.root, episode, self.cache_dir)

    @cached_property
    def domain(self):
        return dataset_domain(self.root)

    @cached_property
    def answer_space(self):
        from causaltrace.scoring import AnswerSpace

        return AnswerSpace.from_scm(self.domain.scm)

    @cached_property
    def concurrent(self) -> bool:
        """Whether the dataset's episodes may have several causes (its submit tool then takes
        a list of causes, and every prompt says so)."""
        return bool(self.domain.concurrent)

    def tool_schemas(self) -> list[dict]:
        """sql, python and this dataset's submit, in OpenAI function-calling format."""
        from causaltrace.env.session import tool_schemas_for

        return tool_schemas_for(self.answer_space, self.concurrent)
