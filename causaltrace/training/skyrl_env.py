"""SkyRL: a ``skyrl_gym`` text environment for a dataset's episodes (``skyrl-gym`` 0.4).

    import causaltrace.training.skyrl_env  # registers env_class "causaltrace" with skyrl_gym

    rows = skyrl_rows("data/ads_train")     # prompt, env_class, episode_id, dataset, data_source
    # SkyRL's trainer makes one environment per sample:
    env = skyrl_gym.make("causaltrace", env_config=cfg.environment.skyrl_gym.causaltrace,
                         extras={"episode_id": ..., "dataset": ..., "max_turns": ...})
    prompt, info = env.init(row["prompt"])  # opens the episode; info["tools"]: the schemas
    out = env.step(model_text)              # observations, reward, done, metadata

SkyRL (``skyrl-train``) builds each sample's environment with
``skyrl_gym.make(row["env_class"], env_config=<environment.skyrl_gym.<env_class>>,
extras=<the row's other columns, plus max_turns>)`` and calls ``init(prompt)``, then
``step(model output text)`` until ``done``; the reward of the last step is the sample's.

The adapter is thin: an episode is a :class:`~causaltrace.env.DiagnosisSession` on a
:class:`~causaltrace.serve.SessionHost` (one in-process host per training process, on its own
event-loop thread: :class:`~causaltrace.training.host_loop.HostLoop`), so tools, budgets,
rewards and transcripts are the environment's own, as in the TRL and verl adapters.

**Actions.** A step's action is one assistant message as text. Its tool calls are read as
the reward's parser reads them (:func:`causaltrace.scoring.parsing.tool_calls_in`: Hermes and
Llama 3 JSON, OpenAI's ``{"function": ...}``, Qwen3.5 / Qwen3-Coder XML, GLM, Kimi), so the
calls the environment runs are the calls the reward reads; they run as one turn of the session,
in order (calls after a ``submit`` are not run). A message with no tool call in any of these
formats is answered with a named format error (``no_tool_call``) and the episode goes on; once
``max_turns`` messages have been sent, such a message ends the episode as the final answer
(scored as the harness scores a turn without tool calls).

**Rewards.** 0 until the episode ends, then the session's composite reward (a ``submit`` is
scored against the label; a budget that runs out scores as an episode without an answer). The
default reward config is the RL exports' (:data:`~causaltrace.training.records.RL_RULES`: a
malformed submit is answered with its format error and may be retried).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import skyrl_gym
from omegaconf import DictConfig, OmegaConf
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from causaltrace.datasets.reading import DatasetSource
from causaltrace.env.session import EnvConfig
from causaltrace.errors import CausalTraceError
from causaltrace.scoring.call_formats import CALL_FORMATS
from causaltrace.scoring.parsing import tool_calls_in
from causaltrace.serve import UnknownSession
from causaltrace.training.host_loop import HostLoop
from causaltrace.training.records import RL_RULES

ENV_CLASS = "causaltrace"
ENTRY_POINT = "causaltrace.training.skyrl_env:CausalTraceSkyRLEnv"
DATA_SOURCE = "causaltrace"
NO_TOOL_CALL = "no_tool_call"
"""The name of the format error a message without a tool call gets (metadata ``format_error``)."""

CONFIG_KEYS = frozenset(
    {
        "dataset",
        "max_tool_calls",
        "max_turns",
        "reward",
        "transcript_dir",
        "tool_config",
        "cache_dir",
        "observation_role",
        "call_formats",
    }
)


def _plain(value: Any) -> Any:
    """A plain container from an OmegaConf config (SkyRL passes ``DictConfig``)."""
    if isinstance(value, DictConfig):
        return OmegaConf.to_container(value, resolve=True)
    return value


def no_tool_call_message(tools: tuple[str, ...] = ("sql", "python", "submit")) -> str:
    """What the agent reads after a message without a tool call."""
    return (
        f"Error ({NO_TOOL_CALL}): your message holds no tool call. Call one of the tools "
        f"({', '.join(tools)}) in your tool-call format, e.g. "
        '<tool_call>{"name": "sql", "arguments": {"query": "SHOW TABLES"}}</tool_call>; '
        "end the episode with submit."
    )


class CausalTraceSkyRLEnv(BaseTextEnv):
    """One episode of a dataset as a SkyRL ``BaseTextEnv`` (see the module docstring).

    Args:
        env_config (Mapping | DictConfig | None): SkyRL's ``environment.skyrl_gym.causaltrace``
            section: ``dataset`` (the dataset directory, for rows without one), the session's
            ``max_tool_calls``, ``max_turns``, ``reward`` and ``transcript_dir``
            (:class:`~causaltrace.env.EnvConfig` keys; the reward defaults to the RL exports'
            rules), ``tool_config`` (:class:`~causaltrace.tools.ToolConfig` keys),
            ``cache_dir`` (where a lazy split's rebuilt episodes go), ``observation_role``
            (the role of tool outputs: ``"tool"``, the default, or ``"user"``) and
            ``call_formats`` (the tool-call formats read; every one by default).
        extras (Mapping | None): The sample's columns: ``episode_id`` (required), ``dataset``
            (wins over the config's) and ``max_turns`` (SkyRL's ``generator.max_turns``, which
            its generator adds; wins over the config's).

    Raises:
        CausalTraceError: No episode id or dataset, an unknown config key, or a bad value.
    """

    def __init__(
        self,
        env_config: Mapping[str, Any] | None = None,
        extras: Mapping[str, Any] | None = None,
    ):
        super().__init__()
        config = dict(_plain(env_config) or {})
        extras = dict(_plain(extras) or {})
        unknown = sorted(set(config) - CONFIG_KEYS)
        if unknown:
            raise CausalTraceError(
                f"skyrl env_config: unknown key(s) {unknown}; known: {sorted(CONFIG_KEYS)}"
            )
        episode = extras.get("episode_id")
        if episode is None:
            raise CausalTraceError("a causaltrace SkyRL sample needs an 'episode_id' column")
        dataset = extras.get("dataset") or config.get("dataset")
        if not dataset:
            raise CausalTraceError(
                "no dataset: give the sample a 'dataset' column (skyrl_rows does) or set "
                "environment.skyrl_gym.causaltrace.dataset"
            )
        self.episode_id = str(episode)
        self.dataset = str(dataset)
        env = {
            k: config[k]
            for k in ("max_tool_calls", "max_turns", "reward", "transcript_dir")
            if config.get(k) is not None
        }
        env.setdefault("reward", RL_RULES.env_reward())
        if extras.get("max_turns") is not None:
            env["max_turns"] = int(extras["max_turns"])
        self.env_config = EnvConfig.from_mapping(env)
        self.max_turns = self.env_config.max_turns
        self.observation_role = str(config.get("observation_role") or "tool")
        if self.observation_role not in ("tool", "user"):
            raise CausalTraceError(
                f"skyrl env_config: observation_role must be 'tool' or 'user', "
                f"not {self.observation_role!r}"
            )
        self.call_formats = tuple(config.get("call_formats") or CALL_FORMATS)
        unknown_formats = sorted(set(self.call_formats) - set(CALL_FORMATS))
        if unknown_formats:
            raise CausalTraceError(
                f"skyrl env_config: unknown call format(s) {unknown_formats}; "
                f"known: {list(CALL_FORMATS)}"
            )
        self._loop = HostLoop.get()
        self._host = self._loop.local_host(config.get("tool_config"))
        cache_dir = config.get("cache_dir")
        if cache_dir is not None:
            self._host.sources.setdefault(self.dataset, DatasetSource(self.dataset, cache_dir))
        self._sid: str | None = None
        self.tools: list[dict[str, Any]] = []
        self.result: dict[str, Any] | None = None
        self.tool_calls = 0
        self.format_errors = 0

    # -- SkyRL's interface ------------------------------------------------------------------
    def init(self, prompt: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Open the episode; the prompt (the row's, the episode's prompt as a user message) is
        returned unchanged.

        Args:
            prompt: The sample's chat messages.

        Returns:
            The prompt, and metadata with ``episode_id`` and the ``tools`` schemas (the
            contract's OpenAI schemas; give them to the chat template, e.g. through
            ``generator.chat_template_kwargs.tools``).
        """
        self._end()
        opened = self._loop.run(
            self._host.open(
                self.dataset, self.episode_id, _env_mapping(self.env_config), session_id=None
            )
        )
        self._sid = opened["session_id"]
        self.tools = opened["tools"]
        self.turns = 0
        self.tool_calls = 0
        self.format_errors = 0
        self.result = None
        return prompt, {"episode_id": self.episode_id, "tools": self.tools}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """One assistant message: its tool calls run as one turn of the session.

        Args:
            action: The model's message as text.

        Returns:
            ``observations`` (one message per tool output, none once the episode is over),
            ``reward`` (the episode's when it ends, else 0), ``done`` and ``metadata``
            (``tool_calls``, ``turns``; ``format_error`` for a message without a tool call;
            when the episode is over ``reason``, ``observation`` (what ended it) and the
            ``reward`` breakdown).

        Raises:
            RuntimeError: :meth:`init` was not called, or the episode is over.
        """
        if self._sid is None:
            raise RuntimeError(
                "the episode is over" if self.result is not None else "call init() before step()"
            )
        self.turns += 1
        text = "" if action is None else str(action)
        try:
            calls = tool_calls_in(text, self.call_formats)
        except ValueError:  # more candidate objects than the parser searches
            calls = []
        if not calls and self.turns < self.max_turns:
            self.format_errors += 1
            return BaseTextEnvStepOutput(
                observations=[{"role": "user", "content": no_tool_call_message()}],
                reward=0.0,
                done=False,
                metadata={
                    "format_error": NO_TOOL_CALL,
                    "tool_calls": self.tool_calls,
                    "turns": self.turns,
                },
            )
        actions = [{"name": name, "arguments": arguments} for name, arguments in calls]
        results = self._loop.run(self._host.turn(self._sid, actions, text))
        last = results[-1]
        done = bool(last["terminated"] or last["truncated"])
        info = dict(last["info"])
        self.tool_calls = int(info.get("tool_calls", self.tool_calls))
        metadata: dict[str, Any] = {"tool_calls": self.tool_calls, "turns": self.turns}
        if not calls:
            metadata["format_error"] = NO_TOOL_CALL
        if done:
            self._finish()
            metadata.update(
                reason=info.get("reason"),
                observation=last["observation"],
                reward=dict(info.get("reward") or {}),
            )
            return BaseTextEnvStepOutput(
                observations=[], reward=float(last["reward"]), done=True, metadata=metadata
            )
        observations = [
            {"role": self.observation_role, "content": r["observation"]} for r in results
        ]
        return BaseTextEnvStepOutput(
            observations=observations, reward=0.0, done=False, metadata=metadata
        )

    def close(self) -> None:
        """Close the episode's session if it is still open (idempotent)."""
        self._end()

    def get_metrics(self) -> dict[str, Any]:
        """The episode's reward breakdown (``score`` and each term, ``parse_ok``) and counts,
        once it is over (SkyRL logs them per env class); empty before."""
        if self.result is None:
            return {}
        metrics = {k: float(v) for k, v in (self.result.get("reward") or {}).items()}
        metrics["format_errors"] = float(self.format_errors)
        metrics["truncated"] = float(self.result.get("reason") != "submitted")
        return metrics

    # -- the session -------------------------------------------------------------------------
    def _finish(self) -> None:
        sid, self._sid = self._sid, None
        transcript = self._loop.run(self._host.close_session(sid))
        self.result = transcript["result"]

    def _end(self) -> None:
        sid, self._sid = self._sid, None
        if sid is not None:
            with contextlib.suppress(UnknownSession):  # evicted by the host (idle_seconds)
                self._loop.run(self._host.close_session(sid))


def _env_mapping(config: EnvConfig) -> dict[str, Any]:
    return {
        "max_tool_calls": config.max_tool_calls,
        "max_turns": config.max_turns,
        "reward": dict(config.reward),
        "transcript_dir": config.transcript_dir,
    }


def register_envs() -> list[str]:
    """Register ``causaltrace`` with ``skyrl_gym`` (an id already registered is kept).

    SkyRL makes environments in its generator's processes: call this (or import this module)
    in the entrypoint that starts training, before the trainer is built.

    Returns:
        The ids this call registered.
    """
    if ENV_CLASS in skyrl_gym.registry:
        return []
    skyrl_gym.register(id=ENV_CLASS, entry_point=ENTRY_POINT)
    return [ENV_CLASS]


def skyrl_rows(
    dataset: str | os.PathLike,
    *,
    env_class: str = ENV_CLASS,
    episodes: list[str] | None = None,
    with_dataset: bool = True,
) -> list[dict[str, Any]]:
    """SkyRL training rows of a dataset: ``prompt`` (the episode's prompt as a user message),
    ``env_class`` and the extras the environment reads: ``episode_id``, ``dataset`` (the
    directory as given) and ``data_source`` (SkyRL groups evaluation metrics by it). The label
    is not in them: the environment reads it from the dataset.

    Args:
        dataset: The generated dataset's directory.
        env_class: The registered id; ``causaltrace`` by default.
        episodes: The episode ids to take, in this order; every episode by default.
        with_dataset: Put the directory in each row; set False to give it in the env config
            (``environment.skyrl_gym.causaltrace.dataset``) instead.
    """
    source = DatasetSource(dataset)
    chosen = source.episode_ids if episodes is None else list(episodes)
    rows = []
    for episode in chosen:
        row: dict[str, Any] = {
            "prompt": [{"role": "user", "content": source.prompt(episode)}],
            "env_class": env_class,
            "episode_id": episode,
            "data_source": DATA_SOURCE,
        }
        if with_dataset:
            row["dataset"] = str(dataset)
        rows.append(row)
    return rows


def export_skyrl_parquet(dataset: str | os.PathLike, path: str | os.PathLike, **kwargs: Any) -> str:
    """Write :func:`skyrl_rows` to a Parquet file (SkyRL's ``data.train_data``); returns the path.

    Args:
        dataset: The generated dataset's directory.
        path: The Parquet file to write (its directory is created).
        **kwargs: Passed to :func:`skyrl_rows`.
    """
    # lazy: only writing Parquet needs it
    import pyarrow as pa

    # lazy: only writing Parquet needs it
    import pyarrow.parquet as pq

    rows = skyrl_rows(dataset, **kwargs)
    if not rows:
        raise CausalTraceError(f"{dataset} has no episodes")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return str(path)


register_envs()
