"""OpenPipe ART: a rollout function for a dataset's episodes (``openpipe-art`` 0.5; import name
``art``).

    import art
    from causaltrace.training.art_rollout import rollout, scenarios

    train = scenarios("data/ads_train")
    groups = await art.gather_trajectory_groups(
        art.TrajectoryGroup(rollout(model, scenario) for _ in range(8)) for scenario in train[:4]
    )
    await backend.train(model, groups)       # an ART backend (GPU) trains on them

:func:`rollout` runs one episode with a model behind an OpenAI-compatible chat endpoint (an
``art.Model``'s ``openai_client()``, or any ``AsyncOpenAI``-like client): the model is offered
the contract's tool schemas (:meth:`~causaltrace.env.contract.ToolContract.openai`), each
assistant message's tool calls run as one turn of a
:class:`~causaltrace.env.DiagnosisSession` (on a :class:`~causaltrace.serve.SessionHost`), and
their outputs go back as ``tool`` messages, until the agent submits, answers in text, or a
budget runs out. The trajectory holds the chat as ART trains on it (the model's ``Choice``
objects, the prompt and tool outputs as messages, the tools), its reward is the session's
composite reward and its metrics are the reward's terms and the counts. Budgets and rewards are
the environment's (the RL exports' rules by default: a malformed submit is answered with its
format error and may be retried), as in the TRL, verl and SkyRL adapters.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import art

from causaltrace.datasets.reading import DatasetSource
from causaltrace.env.session import EnvConfig
from causaltrace.errors import CausalTraceError, RunFailure
from causaltrace.training.host_loop import HostLoop
from causaltrace.training.records import RL_RULES

DEFAULT_COMPLETION_KWARGS: Mapping[str, Any] = {"logprobs": True}
"""Sent with every chat request unless overridden: ART trains on a ``Choice`` with its token
logprobs (its tokenizer refuses one without, unless told ``allow_training_without_logprobs``)."""


@dataclass(frozen=True)
class Scenario:
    """One episode of a dataset, as an ART scenario.

    Args:
        dataset: The generated dataset's directory.
        episode_id: The episode's id.
    """

    dataset: str
    episode_id: str

    @property
    def id(self) -> str:
        """``<dataset name>/<episode id>`` (for a ``TrajectoryGroup``'s metadata)."""
        return f"{Path(self.dataset).name}/{self.episode_id}"

    @classmethod
    def of(cls, value: Any, dataset: str | os.PathLike | None = None) -> Scenario:
        """A scenario from a :class:`Scenario`, a mapping with ``episode_id`` (and ``dataset``),
        or an episode id with ``dataset``.

        Raises:
            CausalTraceError: No episode id, or no dataset.
        """
        if isinstance(value, Scenario):
            return value
        if isinstance(value, Mapping):
            episode, dataset = value.get("episode_id"), value.get("dataset") or dataset
        else:
            episode = value
        if episode is None or dataset is None:
            raise CausalTraceError(
                f"a scenario needs an episode id and a dataset, got {value!r} (dataset={dataset!r})"
            )
        return cls(str(dataset), str(episode))


def scenarios(dataset: str | os.PathLike, episodes: Sequence[str] | None = None) -> list[Scenario]:
    """The scenarios of a dataset, one per episode, in dataset order.

    Args:
        dataset: The generated dataset's directory.
        episodes: The episode ids to take, in this order; every episode by default.
    """
    source = DatasetSource(dataset)
    chosen = source.episode_ids if episodes is None else list(episodes)
    return [Scenario(str(dataset), str(e)) for e in chosen]


def _env_mapping(config: EnvConfig | Mapping[str, Any] | None) -> dict[str, Any]:
    if config is None:
        config = EnvConfig(reward=RL_RULES.env_reward())
    elif not isinstance(config, EnvConfig):
        config = EnvConfig.from_mapping(config)
    return {
        "max_tool_calls": config.max_tool_calls,
        "max_turns": config.max_turns,
        "reward": dict(config.reward),
        "transcript_dir": config.transcript_dir,
    }


async def rollout(
    model_or_client: Any,
    scenario: Scenario | Mapping[str, Any],
    *,
    model: str | None = None,
    config: EnvConfig | Mapping[str, Any] | None = None,
    tool_config: Any = None,
    host: Any = None,
    completion_kwargs: Mapping[str, Any] | None = None,
) -> art.Trajectory:
    """Run one episode with a model and return it as an ``art.Trajectory``.

    Args:
        model_or_client: An ``art.Model`` (its ``openai_client()`` and inference name are used)
            or an OpenAI-compatible async client (``AsyncOpenAI``; then ``model`` names the
            model).
        scenario: The episode: a :class:`Scenario` or a mapping with ``episode_id`` and
            ``dataset``.
        model: The model name to request; the ``art.Model``'s inference name by default.
        config: The episode's budgets and reward (:class:`~causaltrace.env.EnvConfig` or its
            mapping); the defaults' budgets with the RL exports' reward rules by default.
        tool_config (ToolConfig | Mapping | None): The sandbox settings of the in-process host;
            the defaults by default.
        host (SessionHost | RayHost | HttpHost | None): Where the session runs, awaited on the
            caller's event loop; by default one in-process host per process on its own
            event-loop thread (so any loop may call this).
        completion_kwargs: More arguments for ``chat.completions.create`` (``temperature``,
            ``max_completion_tokens``, ...); they override :data:`DEFAULT_COMPLETION_KWARGS`.

    Returns:
        The trajectory: ``messages_and_choices`` (the prompt, each model ``Choice``, each tool
        output as a ``tool`` message), ``tools`` (the schemas offered), ``reward`` (the
        session's), ``metrics`` (the reward's ``score``, its terms and ``parse_ok``,
        ``tool_calls``, ``turns``, ``truncated``) and ``metadata`` (``scenario_id``,
        ``episode_id``, ``reason``, ``parse_error``).

    Raises:
        CausalTraceError: No model name for a plain client, or a bad scenario or config.
        RunFailure: The chat endpoint answered without a choice.
        Exception: Whatever the chat client raises (the session is closed first); ART's
            ``gather_trajectory_groups`` counts it against ``max_exceptions``.
    """
    scenario = Scenario.of(scenario)
    if hasattr(model_or_client, "openai_client"):
        client = model_or_client.openai_client()
        name = model or model_or_client.get_inference_name()
    else:
        client, name = model_or_client, model
        if not name:
            raise CausalTraceError("rollout(client, ...) needs model=<the model name to request>")
    env = _env_mapping(config)
    kwargs = {**DEFAULT_COMPLETION_KWARGS, **dict(completion_kwargs or {})}
    if host is None:
        loop = HostLoop.get()
        host = loop.local_host(tool_config)
        call = loop.call
    else:

        async def call(coro):
            return await coro

    opened = await call(host.open(scenario.dataset, scenario.episode_id, env))
    sid = opened["session_id"]
    tools = opened["tools"]
    trajectory = art.Trajectory(
        messages_and_choices=[{"role": "user", "content": opened["prompt"]}],
        tools=tools,
        reward=0.0,
        metadata={"scenario_id": scenario.id, "episode_id": scenario.episode_id},
    )
    result = None
    try:
        done = False
        while not done:
            response = await client.chat.completions.create(
                model=name, messages=trajectory.messages(), tools=tools, **kwargs
            )
            if not getattr(response, "choices", None):
                raise RunFailure(f"the chat endpoint returned no choice for {scenario.id}")
            choice = response.choices[0]
            trajectory.messages_and_choices.append(choice)
            turn = sum(1 for m in trajectory.messages_and_choices if not isinstance(m, Mapping))
            calls = [
                _call_of(c, f"call_{turn}_{i}")
                for i, c in enumerate(choice.message.tool_calls or [])
            ]
            steps = await call(host.turn(sid, calls, choice.message.content))
            for tool_call, step in zip(calls, steps):
                trajectory.messages_and_choices.append(
                    {
                        "role": "tool",
                        "tool_call_id": tool_call["id"],
                        "content": step["observation"],
                    }
                )
            done = bool(steps[-1]["terminated"] or steps[-1]["truncated"])
        transcript = await call(host.close_session(sid))
        sid = None
        result = transcript["result"]
    finally:
        if sid is not None:
            await call(host.close_session(sid))
    breakdown = {k: float(v) for k, v in (result.get("reward") or {}).items()}
    trajectory.reward = breakdown.get("score", 0.0)
    trajectory.metrics.update(breakdown)
    trajectory.metrics["truncated"] = result.get("reason") != "submitted"
    trajectory.metadata.update(reason=result.get("reason"), parse_error=result.get("parse_error"))
    return trajectory.finish()


def _call_of(tool_call: Any, default_id: str) -> dict[str, Any]:
    """An OpenAI tool call (the client's object or a mapping) as a plain dict with an id."""
    data = tool_call.model_dump() if hasattr(tool_call, "model_dump") else dict(tool_call)
    function = data.get("function") or {}
    return {
        "id": data.get("id") or default_id,
        "type": "function",
        "function": {
            "name": function.get("name", ""),
            "arguments": function.get("arguments") or "{}",
        },
    }
