"""A Gymnasium-style environment: ``reset`` returns the prompt, ``step`` takes one tool call.

    env = DiagnosisEnv("data/ads_test")
    prompt, info = env.reset(options={"episode": "test-000012"})
    obs, reward, terminated, truncated, info = env.step({"name": "sql", "arguments":
                                                         '{"query": "SHOW TABLES"}'})
    ...
    env.close()

``reset(seed=s)`` without an episode option picks episode ``s mod n`` (explicit seeding, as in
Gymnasium). Observations are text; rewards are 0 until the episode ends, then the composite
reward; ``info`` carries the breakdown for the caller. Gymnasium itself is not required.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from causaltrace.datasets.reading import DatasetSource
from causaltrace.env.contract import ToolContract
from causaltrace.env.session import DiagnosisSession, EnvConfig
from causaltrace.tools import SyncToolRuntime


class DiagnosisEnv:
    """Blocking wrapper over :class:`DiagnosisSession` with a private tool runtime.

    Args:
        dataset: The dataset directory, or a :class:`DatasetSource`.
        config: Budgets, reward and transcripts; :class:`EnvConfig` defaults by default.
        tool_config (ToolConfig | None): The sandbox settings (a :class:`~causaltrace.tools.ToolConfig`); the
            defaults by default.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self,
        dataset: str | os.PathLike | DatasetSource,
        config: EnvConfig | None = None,
        tool_config=None,
    ):

        self.source = dataset if isinstance(dataset, DatasetSource) else DatasetSource(dataset)
        self.config = config or EnvConfig()
        self._runtime = SyncToolRuntime(tool_config)
        self._session: DiagnosisSession | None = None

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tool schemas to give the model (OpenAI function-calling format)."""
        return ToolContract.for_dataset(self.source).openai()

    @property
    def session(self) -> DiagnosisSession | None:
        return self._session

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode (closing the previous one).

        Args:
            seed: Picks episode ``seed % len(episode_ids)`` when ``options`` names none;
                the first episode by default.
            options: ``{"episode": id}`` picks an episode by id.

        Returns:
            The prompt, and info with ``episode_id`` and the ``tools`` schemas.
        """
        self._end_session()
        ids = self.source.episode_ids
        episode = (options or {}).get("episode")
        if episode is None:
            episode = ids[(seed or 0) % len(ids)]
        session = DiagnosisSession(self._runtime.runtime, self.source, episode, self.config)
        self._runtime._run(session.__aenter__())
        self._session = session
        return session.prompt, {"episode_id": episode, "tools": self.tools}

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """One tool call.

        Args:
            action: The tool call (see :meth:`~causaltrace.env.session.ToolCall.of`).

        Returns:
            ``(observation, reward, terminated, truncated, info)`` as in Gymnasium.

        Raises:
            RuntimeError: :meth:`reset` was not called.
        """
        if self._session is None:
            raise RuntimeError("call reset() before step()")
        result = self._runtime._run(self._session.step(action))
        return result.observation, result.reward, result.terminated, result.truncated, result.info

    def _end_session(self) -> None:
        if self._session is not None:
            self._runtime._run(self._session.close())
            self._session = None

    def close(self) -> None:
        self._end_session()
        self._runtime.close()

    def __enter__(self) -> DiagnosisEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
