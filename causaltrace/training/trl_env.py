"""TRL ``environment_factory`` for GRPO training (importable without TRL).

The recipe (TRL >= 1.16; tested with 1.16.0)::

    from causaltrace.training.trl_env import make_trl_environment, trl_reward, trl_rows
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
:func:`causaltrace.training.trl_rewards.make_reward_function` use (one policy for text answers:
the final assistant message's JSON answer counts, see docs/rewards.md).

TRL instantiates the class once per rollout slot and calls ``reset(**row)``; the row's
``episode_id`` names the episode. The tools (``sql``, ``python``, ``submit``) are generated
from :class:`~causaltrace.env.contract.ToolContract`, so TRL describes them to the model with
the same schemas as the harness, the SFT export and verl (the cause enum included).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from causaltrace.datasets.reading import DatasetSource
from causaltrace.env.contract import ToolContract
from causaltrace.env.session import EnvConfig, host_failure
from causaltrace.serve import HostConfig, SessionHost
from causaltrace.training.host_loop import HostLoop
from causaltrace.training.records import RL_RULES

_LOG = logging.getLogger(__name__)


def _local_host(tool_config) -> Any:

    # The trainer sizes its own batch; the host only guards memory.
    return SessionHost(tool_config, HostConfig(max_sessions=1_000_000))


class CausalTraceEnvironment:
    """One episode at a time; bind a dataset with :func:`make_trl_environment`, which also
    adds the contract's tool methods. Sessions live on a *host*: by default one in-process
    :class:`~causaltrace.serve.SessionHost` per training process; ``host=`` takes a
    :class:`~causaltrace.serve.ray_host.RayHost`, an :class:`~causaltrace.serve.client.HttpHost`
    or a zero-argument factory of one, so rollouts can run on other machines."""

    dataset: ClassVar[str | None] = None
    config: ClassVar[EnvConfig] = EnvConfig()
    tool_config: ClassVar[Any] = None
    # Private: TRL exposes every public function attribute as a tool, and a host factory is one.
    _host_spec: ClassVar[Any] = None

    def __init__(self) -> None:
        if self.dataset is None:
            raise RuntimeError("use make_trl_environment(dataset_dir) to bind a dataset")
        self._loop = HostLoop.get()
        host = type(self)._host_spec
        if host is None:
            self._host = self._loop.host(
                ("local", id(self.tool_config)), lambda: _local_host(self.tool_config)
            )
        elif callable(host) and not hasattr(host, "open"):
            self._host = self._loop.host(("factory", id(host)), host)
        else:
            self._host = self._loop.host(("given", id(host)), lambda: host)
        self._session: str | None = None
        self._result: dict[str, Any] | None = None
        self._source = DatasetSource(self.dataset)

    def reset(self, **kwargs: Any) -> str | None:
        """Start the episode named by the row's ``episode_id`` (the prompt is in the row).

        Args:
            **kwargs: The dataset row's columns; ``episode_id`` is required, the others are ignored.

        Returns:
            ``None``: the prompt is already in the row.

        Raises:
            ValueError: The row has no ``episode_id``.
        """
        self._close()
        episode = kwargs.get("episode_id")
        if episode is None:
            raise ValueError("the dataset row needs an 'episode_id' column")
        env = {
            "max_tool_calls": self.config.max_tool_calls,
            "max_turns": self.config.max_turns,
            "reward": dict(self.config.reward),
        }
        opened = self._loop.run(self._host.open(self.dataset, str(episode), env))
        self._session = opened["session_id"]
        self._result = None
        return None

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if self._session is None:
            return "The episode is over." if self._result is not None else "Error: no episode."
        try:
            step = self._loop.run(
                self._host.step(self._session, {"name": name, "arguments": arguments})
            )
        except Exception as exc:  # TRL would end the whole rollout batch on a raise
            _LOG.warning("the %s call failed in the environment", name, exc_info=True)
            return host_failure(name, exc)
        if step["terminated"] or step["truncated"]:
            self._finish()
        return step["observation"]

    def _reward_of(self, completion: Any = None) -> dict[str, float]:
        """The reward breakdown of this rollout (``score`` is the composite). Private because
        TRL exposes every public method of an environment to the model as a tool.

        If the episode is still open, ``completion`` (what TRL passes: a list of messages, or
        text) is its end: the final assistant message is the agent's last turn, scored as the
        harness scores a turn without tool calls.
        """
        if self._session is not None:
            final = _final_text(completion)
            self._loop.run(self._host.turn(self._session, [], final))
            self._finish()
        if self._result is None:
            raise RuntimeError("_reward_of() before reset(): no episode was run")
        return dict(self._result["reward"])

    def _finish(self) -> None:
        transcript = self._loop.run(self._host.close_session(self._session))
        self._session = None
        self._result = transcript["result"]

    def _close(self) -> None:
        if self._session is not None:
            self._loop.run(self._host.close_session(self._session))
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
    dataset: str | os.PathLike, config: EnvConfig | None = None, tool_config=None, host=None
) -> type[CausalTraceEnvironment]:
    """A ``CausalTraceEnvironment`` subclass bound to a dataset (TRL calls it with no args),
    with one method per tool of the dataset's :class:`ToolContract`. ``host``: where sessions
    run (default: in this process; see :class:`CausalTraceEnvironment`).

    Args:
        dataset: The generated dataset's directory.
        config: The episodes' budgets and reward; by default :class:`~causaltrace.env.EnvConfig`'s
            budgets, with a malformed submit answered by its format error and retried
            (:data:`~causaltrace.training.records.RL_RULES`).
        tool_config (ToolConfig | Mapping | None): The sandbox settings of the in-process host;
            the defaults by default.
        host (SessionHost | RayHost | HttpHost | Callable | None): Where sessions run: a host, or
            a zero-argument factory of one; one in-process host per training process by default.
    """
    source = DatasetSource(dataset)
    methods = ToolContract.for_dataset(source).python_tools(_tool_call)
    attrs = {
        "dataset": str(dataset),
        "config": config or EnvConfig(reward=RL_RULES.env_reward()),
        "tool_config": tool_config,
        "_host_spec": host,
    }
    return type("BoundCausalTraceEnvironment", (CausalTraceEnvironment,), {**attrs, **methods})


def trl_reward(completions, environments=None, **kwargs) -> list[float]:
    """TRL reward function for environment rollouts: each rollout's composite score, from its
    environment (the only reward source of the recipe; see the module docstring).

    Args:
        completions (list): The rollouts' completions (lists of messages, or text), in order.
        environments (list[CausalTraceEnvironment] | None): The rollouts' environments, one per
            completion; required (TRL passes it under ``environment_factory``).
        **kwargs (Any): The other columns TRL passes; ignored.

    Raises:
        ValueError: ``environments`` is missing or not one per completion.
    """
    if environments is None:
        raise ValueError("trl_reward needs TRL's 'environments' argument (environment_factory)")
    if len(environments) != len(completions):
        raise ValueError(f"{len(completions)} completions but {len(environments)} environments")
    return [float(env._reward_of(c)["score"]) for env, c in zip(environments, completions)]


def trl_rows(env: type[CausalTraceEnvironment] | str | os.PathLike) -> list[dict[str, Any]]:
    """GRPO training rows of a dataset: ``prompt`` (the user message) and ``episode_id``.

    Args:
        env: A class from :func:`make_trl_environment` (its dataset is used), or a dataset
            directory.
    """
    source = DatasetSource(env.dataset if isinstance(env, type) else env)
    return [
        {"prompt": [{"role": "user", "content": source.prompt(e)}], "episode_id": e}
        for e in source.episode_ids
    ]
