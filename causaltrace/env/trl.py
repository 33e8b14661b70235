"""TRL ``environment_factory`` for GRPO training (importable without TRL).

The recipe (TRL >= 1.16; tested with 1.16.0)::

    from causaltrace.env.trl import make_trl_environment, trl_reward, trl_rows
    Env = make_trl_environment("data/ads_train")
    trainer = GRPOTrainer(
        model=..., args=GRPOConfig(...), train_dataset=Dataset.from_list(trl_rows(Env)),
        environment_factory=Env, reward_funcs=[trl_reward],
    )

Each reward is counted once: the environment has no ``get_reward`` method (TRL >= 1.16 would
add one as a second reward source, doubling the gradient under ``scale_rewards="none"``);
:func:`trl_reward` is the only source. It gives, for every conversation, the score the
environment gives: a ``submit`` call is scored when it is made, and a completion that ends in a
text answer without ``submit`` is scored by the same parser the harness and
:func:`causaltrace.scoring.adapters.trl.make_reward_function` use (one policy for text answers:
the final assistant message's JSON answer counts, see docs/rewards.md).

TRL instantiates the class once per rollout slot and calls ``reset(**row)``; the row's
``episode_id`` names the episode. The tools (``sql``, ``python``, ``submit``) are generated
from :class:`~causaltrace.env.contract.ToolContract`, so TRL describes them to the model with
the same schemas as the harness, the SFT export and verl (the cause enum included).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from causaltrace.env.contract import ToolContract
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
    """One episode at a time; bind a dataset with :func:`make_trl_environment`, which also
    adds the contract's tool methods."""

    dataset: ClassVar[str | None] = None
    config: ClassVar[EnvConfig] = EnvConfig()
    tool_config: ClassVar[Any] = None

    def __init__(self) -> None:
        if self.dataset is None:
            raise RuntimeError("use make_trl_environment(dataset_dir) to bind a dataset")
        self._source = DatasetSource(self.dataset)
        self._runtime = _shared_runtime(self.tool_config)
        self._session: DiagnosisSession | None = None
        self._result: dict[str, Any] | None = None

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
        self._result = None
        return None

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if self._session is None:
            return "The episode is over." if self._result is not None else "Error: no episode."
        result = self._runtime._run(self._session.step({"name": name, "arguments": arguments}))
        if self._session.done:
            self._finish()
        return result.observation

    def _reward_of(self, completion: Any = None) -> dict[str, float]:
        """The reward breakdown of this rollout (``score`` is the composite). Private because
        TRL exposes every public method of an environment to the model as a tool.

        If the episode is still open, ``completion`` (what TRL passes: a list of messages, or
        text) is its end: the final assistant message is the agent's last turn, scored as the
        harness scores a turn without tool calls.
        """
        if self._session is not None:
            final = _final_text(completion)
            self._runtime._run(self._session.turn([], content=final))
            self._finish()
        if self._result is None:
            raise RuntimeError("_reward_of() before reset(): no episode was run")
        return dict(self._result["reward"])

    def _finish(self) -> None:
        self._result = self._session.result
        self._close()

    def _close(self) -> None:
        if self._session is not None:
            self._runtime._run(self._session.close())
            self._session = None


def _final_text(completion: Any) -> str | None:
    """The content of a completion's last message if it is the assistant's (None otherwise:
    a completion cut off after a tool output has no final answer)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion:
        last = completion[-1]
        if isinstance(last, Mapping) and last.get("role") == "assistant":
            content = last.get("content")
            if isinstance(content, list):  # content blocks
                content = "".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping))
            return None if content is None else str(content)
    return None


def _tool_call(self: CausalTraceEnvironment, name: str, arguments: dict[str, Any]) -> str:
    return self._call(name, dict(arguments))


def make_trl_environment(
    dataset: str | os.PathLike, config: EnvConfig | None = None, tool_config=None
) -> type[CausalTraceEnvironment]:
    """A ``CausalTraceEnvironment`` subclass bound to a dataset (TRL calls it with no args),
    with one method per tool of the dataset's :class:`ToolContract`."""
    source = DatasetSource(dataset)
    methods = ToolContract.for_dataset(source).python_tools(_tool_call)
    attrs = {"dataset": str(dataset), "config": config or EnvConfig(), "tool_config": tool_config}
    return type("BoundCausalTraceEnvironment", (CausalTraceEnvironment,), {**attrs, **methods})


def trl_reward(completions, environments=None, **kwargs) -> list[float]:
    """TRL reward function for environment rollouts: each rollout's composite score, from its
    environment (the only reward source of the recipe; see the module docstring)."""
    if environments is None:
        raise ValueError("trl_reward needs TRL's 'environments' argument (environment_factory)")
    if len(environments) != len(completions):
        raise ValueError(f"{len(completions)} completions but {len(environments)} environments")
    return [float(env._reward_of(c)["score"]) for env, c in zip(environments, completions)]


def trl_rows(env: type[CausalTraceEnvironment] | str | os.PathLike) -> list[dict[str, Any]]:
    """GRPO training rows of a dataset: ``prompt`` (the user message) and ``episode_id``."""
    source = DatasetSource(env.dataset if isinstance(env, type) else env)
    return [
        {"prompt": [{"role": "user", "content": source.prompt(e)}], "episode_id": e}
        for e in source.episode_ids
    ]
