"""A TRL ``environment_factory`` class for GRPO training (importable without TRL).

    from causaltrace.env.trl import make_trl_environment, trl_reward
    Env = make_trl_environment("data/ads_train")
    trainer = GRPOTrainer(..., train_dataset=rows, environment_factory=Env, reward_funcs=trl_reward)

TRL instantiates the class once per rollout slot and calls ``reset(**row)`` with the dataset
row, whose ``episode_id`` column names the episode; the public methods ``sql``, ``python`` and
``submit`` (typed, with Google-style docstrings) become the model's tools; ``get_reward``
returns the composite reward once the episode is over (0 if it never submitted).
"""

from __future__ import annotations

import os
import threading
from typing import Any, ClassVar

from causaltrace.env.session import DiagnosisSession, EnvConfig
from causaltrace.env.source import DatasetSource

_RUNTIMES: dict[int, Any] = {}
_LOCK = threading.Lock()


def _shared_runtime(tool_config=None):
    """One sync tool runtime (warm worker pool) per process, shared by every environment."""
    from causaltrace.tools import SyncToolRuntime

    with _LOCK:
        key = os.getpid()
        if key not in _RUNTIMES:
            _RUNTIMES[key] = SyncToolRuntime(tool_config)
        return _RUNTIMES[key]


class CausalTraceEnvironment:
    """One episode at a time; configure with :func:`make_trl_environment`."""

    dataset: ClassVar[str | None] = None
    config: ClassVar[EnvConfig] = EnvConfig()
    tool_config: ClassVar[Any] = None

    def __init__(self) -> None:
        if self.dataset is None:
            raise RuntimeError("use make_trl_environment(dataset_dir) to bind a dataset")
        self._source = DatasetSource(self.dataset)
        self._runtime = _shared_runtime(self.tool_config)
        self._session: DiagnosisSession | None = None
        self.last_reward: dict[str, float] | None = None

    def reset(self, **kwargs: Any) -> str | None:
        """Start the episode named by the row's ``episode_id`` (the prompt is in the row)."""
        self._close()
        episode = kwargs.get("episode_id")
        if episode is None:
            raise ValueError("the dataset row needs an 'episode_id' column")
        self._session = DiagnosisSession(
            self._runtime.runtime, self._source, str(episode), self.config
        )
        self._runtime._run(self._session.__aenter__())
        self.last_reward = None
        return None

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if self._session is None:
            return "Error: no episode is open."
        if self._session.done:
            return "The episode is over."
        result = self._runtime._run(self._session.step({"name": name, "arguments": arguments}))
        if self._session.done:
            self.last_reward = (self._session.result or {}).get("reward")
            self._close()
        return result.observation

    def sql(self, query: str) -> str:
        """Run a read-only DuckDB SQL query over the account's report tables.

        Args:
            query: The SQL query, e.g. "SELECT * FROM perf_daily LIMIT 5".

        Returns:
            The result as a text table, or an error message.
        """
        return self._call("sql", {"query": query})

    def python(self, code: str) -> str:
        """Run Python code in a persistent namespace with the tables loaded as DataFrames.

        Args:
            code: Python source; pandas (pd), numpy (np) and scipy are available.

        Returns:
            What the code printed, and the value of its last expression.
        """
        return self._call("python", {"code": code})

    def submit(self, root_cause: str, slice: str) -> str:
        """Submit the diagnosis and end the episode.

        Args:
            root_cause: The root cause, one of the causes listed in the task.
            slice: The affected slice as dim=level or dim=level&dim=level; empty if none.

        Returns:
            A confirmation.
        """
        return self._call("submit", {"root_cause": root_cause, "slice": slice})

    def get_reward(self) -> float:
        """The composite reward of the finished episode (0 if it never finished)."""
        return float((self.last_reward or {}).get("score", 0.0))

    def _close(self) -> None:
        if self._session is not None:
            self._runtime._run(self._session.close())
            self._session = None


def make_trl_environment(
    dataset: str | os.PathLike, config: EnvConfig | None = None, tool_config=None
) -> type[CausalTraceEnvironment]:
    """A ``CausalTraceEnvironment`` subclass bound to a dataset (TRL calls it with no args)."""
    return type(
        "BoundCausalTraceEnvironment",
        (CausalTraceEnvironment,),
        {"dataset": str(dataset), "config": config or EnvConfig(), "tool_config": tool_config},
    )


def trl_reward(completions, environments=None, **kwargs) -> list[float]:
    """TRL reward function for environment rollouts: each environment's final reward."""
    if environments is None:
        raise ValueError("trl_reward needs TRL's 'environments' argument (environment_factory)")
    return [env.get_reward() for env in environments]
