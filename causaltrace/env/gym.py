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

from causaltrace.env.session import DiagnosisSession, EnvConfig
from causaltrace.env.source import DatasetSource


class DiagnosisEnv:
    """Blocking wrapper over :class:`DiagnosisSession` with a private tool runtime."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self,
        dataset: str | os.PathLike | DatasetSource,
        config: EnvConfig | None = None,
        tool_config=None,
    ):
        from causaltrace.tools import SyncToolRuntime

        self.source = dataset if isinstance(dataset, DatasetSource) else DatasetSource(dataset)
        self.config = config or EnvConfig()
        self._runtime = SyncToolRuntime(tool_config)
        self._session: DiagnosisSession | None = None

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tool schemas to give the model (OpenAI function-calling format)."""
        return self.source.tool_schemas()

    @property
    def session(self) -> DiagnosisSession | None:
        return self._session

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
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
