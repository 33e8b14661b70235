"""A Prime Intellect ``verifiers`` environment (verifiers 0.4, its ``verifiers.v1`` stack) for a
dataset's episodes.

    from causaltrace.training.verifiers_env import load_environment
    env = load_environment(dataset="data/ads_test")       # a verifiers.v1 Env
    # verifiers' own machinery runs it: env.serving(), env.run_slot(...), run_eval(...)

verifiers 0.4 builds an environment from a *taskset* (the rows: one task per episode), a
*harness* (the agent's chat loop, which calls the model through verifiers' interception server)
and *toolsets* (MCP servers the harness gives the model as tools). Here:

- :class:`CausalTraceTaskset`: one :class:`CausalTraceTask` per episode of the split; its data
  (:class:`CausalTraceData`) holds the prompt, ``info`` (the episode id, the dataset's name and
  split) and ``answer``: the ground truth JSON of
  :func:`~causaltrace.training.records.ground_truth_json` (label, answer space and the rules,
  :data:`~causaltrace.training.records.RL_RULES` with this environment's budget), which scores
  a completion with nothing else (as verl's reward does).
- :class:`CausalTraceToolset`: the contract's tools (``sql``, ``python``, ``submit``, their
  schemas :meth:`~causaltrace.env.contract.ToolContract.openai`'s, names unprefixed), served
  per rollout: verifiers launches one tool server per rollout, which opens the rollout's episode
  as one :class:`~causaltrace.env.DiagnosisSession` on a
  :class:`~causaltrace.serve.SessionHost` and closes it when the episode ends (a submit, a budget)
  and when the rollout's server stops. What the episode did (calls, the end, the session's
  reward) reaches the rollout's state (:class:`CausalTraceState`).
- The reward (:meth:`CausalTraceTask.causaltrace`): causaltrace's composite on the rollout's
  completion, scored from its ``answer`` as
  :func:`~causaltrace.training.verl_reward.compute_score` scores it (same parser, same rules);
  the terms and the session's own score are recorded as metrics.
- :class:`CausalTraceHarness`: verifiers' tool-less ``null`` chat loop (MCP tools only), the
  default harness of this taskset, so an unpinned agent gets no shell (the ``bash`` harness would
  let it read the dataset's labels).

Taskset ids: verifiers 0.4 imports a taskset by its id as a top-level module. Importing this
module registers it as the top-level module ``causaltrace_verifiers`` (:data:`TASKSET_ID`)
too, so ``vf.load_environment`` and in-process runs (``run_eval`` without ``--serve``) find it;
verifiers' command line and its env-server workers import ids in fresh processes, where that
alias does not exist yet.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import verifiers.v1 as vf
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, Tool
from pydantic import Field, model_validator
from verifiers.v1.dialects.chat import message_to_wire
from verifiers.v1.harnesses.null import NullHarness
from verifiers.v1.runtimes import SubprocessConfig

from causaltrace.datasets.reading import DatasetSource
from causaltrace.env.contract import ToolContract
from causaltrace.env.session import EnvConfig
from causaltrace.serve import HostConfig, SessionHost
from causaltrace.training.records import (
    RL_RULES,
    EpisodeRules,
    dataset_records,
    ground_truth_json,
)
from causaltrace.training.verl_reward import compute_score

TASKSET_ID = "causaltrace_verifiers"
"""The taskset id this module answers to in verifiers (``--env.taskset.id``)."""

# verifiers resolves a taskset id to a top-level module; see the module docstring.
sys.modules.setdefault(TASKSET_ID, sys.modules[__name__])


class CausalTraceState(vf.State):
    """What one rollout's episode did, shared by its tool server and the scoring host.

    Attributes:
        episode_id: The episode the rollout's session opened.
        tool_calls: Tool calls the session counted (submits that were refused included).
        done: The episode ended (a submit, or a budget ran out).
        reason: Why it ended (``submitted``, ``tool-call budget exhausted``, ...).
        session_reward: The session's reward breakdown when it ended (``score`` and the terms).
    """

    episode_id: str = ""
    tool_calls: int = 0
    done: bool = False
    reason: str | None = None
    session_reward: dict[str, float] | None = None


class CausalTraceToolsConfig(vf.ToolsetConfig):
    """The tool server's settings (filled from the taskset's config; see
    :class:`CausalTraceTasksetConfig`).

    Attributes:
        dataset: The dataset directory.
        max_tool_calls: The tool-call budget of an episode.
        max_turns: The turn budget of an episode (each tool call is one step).
        retry_malformed_submit: A malformed submit is answered with its format error and may be
            retried.
        cache_dir: Where a lazy split's rebuilt episodes go; the dataset's own by default.
        sandbox: :class:`~causaltrace.tools.ToolConfig` fields for the sandbox.
    """

    dataset: str = ""
    max_tool_calls: int = RL_RULES.max_tool_calls
    max_turns: int = EnvConfig.max_turns
    retry_malformed_submit: bool = RL_RULES.retry_malformed_submit
    cache_dir: str | None = None
    sandbox: dict[str, Any] = Field(default_factory=dict)


class CausalTraceToolset(vf.Toolset[CausalTraceToolsConfig, CausalTraceState]):
    """The contract's tools for one rollout: an MCP server whose process holds one
    :class:`~causaltrace.serve.SessionHost` and the rollout's session on it."""

    TOOL_PREFIX = None  # the tools keep the contract's names: sql, python, submit

    def __init__(self, config: CausalTraceToolsConfig) -> None:
        super().__init__(config)
        self._host: SessionHost | None = None
        self._session: str | None = None
        self._contract: ToolContract | None = None

    def contract(self) -> ToolContract:
        if self._contract is None:
            self._contract = ToolContract.for_dataset(
                DatasetSource(self.config.dataset, self.config.cache_dir)
            )
        return self._contract

    async def setup(self) -> None:
        """Start the host (its sandbox) once per server process; closed when the server stops."""
        self._host = SessionHost(self.config.sandbox or None, HostConfig(max_sessions=1))
        self._host.sources[self.config.dataset] = DatasetSource(
            self.config.dataset, self.config.cache_dir
        )
        await self._host.start()
        self._exit_stack.push_async_callback(self._host.close)

    async def setup_task(self, task: CausalTraceData) -> None:
        """Open the rollout's episode (verifiers passes the rollout's task data on start)."""
        assert self._host is not None
        env = {
            "max_tool_calls": self.config.max_tool_calls,
            "max_turns": self.config.max_turns,
            "reward": EpisodeRules(
                self.config.max_tool_calls, self.config.retry_malformed_submit
            ).env_reward(),
        }
        opened = await self._host.open(self.config.dataset, task.episode_id, env)
        self._session = opened["session_id"]

    def register(self, mcp: MCPServer) -> None:
        # The contract's schemas as they are (enums, optional slice), not ones rebuilt from
        # Python signatures: replace the server's list and call handlers, state synced.
        server: Any = mcp
        server.list_tools = self._with_state(self.list_tools)
        server.call_tool = self._with_state(self.call_tool)

    async def list_tools(self) -> list[Tool]:
        return [
            Tool(
                name=spec["function"]["name"],
                description=spec["function"]["description"],
                input_schema=spec["function"]["parameters"],
            )
            for spec in self.contract().openai()
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, context: Any = None
    ) -> CallToolResult:
        state = self.state
        if self._session is None:
            return _text("The episode is over." if state.done else "Error: no episode is open.")
        assert self._host is not None
        step = await self._host.step(self._session, {"name": name, "arguments": arguments or {}})
        info = step["info"]
        state.episode_id = self._host.sessions[self._session].episode
        state.tool_calls = int(info.get("tool_calls", state.tool_calls))
        if step["terminated"] or step["truncated"]:
            await self._host.close_session(self._session)
            self._session = None
            state.done = True
            state.reason = info.get("reason")
            state.session_reward = {
                k: float(v) for k, v in (info.get("reward") or {}).items() if _number(v)
            }
        return _text(step["observation"])


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _text(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)])


class CausalTraceData(vf.TaskData):
    """One episode as a verifiers task: the prompt, the episode, and the ground truth.

    Attributes:
        episode_id: The episode the rollout opens.
        info: Answer-free metadata: the episode id, the dataset's name and split.
        answer: The ground truth JSON (:func:`~causaltrace.training.records.ground_truth_json`
            with the environment's rules); read by the reward only, never shown to the model.
    """

    episode_id: str
    info: dict[str, Any] = Field(default_factory=dict)
    answer: str


class CausalTraceTaskConfig(vf.TaskConfig):
    """The task's settings: its tool server's (filled from the taskset's config)."""

    tools: CausalTraceToolsConfig = CausalTraceToolsConfig()


class CausalTraceTask(vf.Task[CausalTraceData, CausalTraceState, CausalTraceTaskConfig]):
    """One rollout of one episode: the contract's tools, the end of the episode as the stop
    condition, and the composite reward."""

    @classmethod
    def toolsets(cls, config: CausalTraceTaskConfig) -> list[vf.Toolset]:
        return [CausalTraceToolset(config.tools)]

    @property
    def key(self) -> str:
        return self.data.episode_id

    @vf.stop
    async def episode_over(self, trace: vf.Trace) -> bool:
        """Stop once the episode has ended (submitted, or out of budget)."""
        return bool(trace.state.done)

    @vf.reward(weight=1.0)
    async def causaltrace(self, trace: vf.Trace) -> float:
        """The composite reward of the rollout's completion (``compute_score`` on it)."""
        scored = score_completion(completion_messages(trace), self.data.answer)
        episode = trace.state.model_dump(exclude={"artifacts"})
        trace.info["causaltrace"] = {"reward": scored, "episode": episode}
        metrics = {f"causaltrace/{k}": v for k, v in scored.items() if k != "score"}
        if trace.state.session_reward is not None:
            metrics["causaltrace/session_score"] = trace.state.session_reward["score"]
        trace.record_metrics(metrics)
        return scored["score"]


class CausalTraceTasksetConfig(vf.TasksetConfig):
    """The taskset's settings (``--env.taskset.*``).

    Attributes:
        dataset: The generated dataset's directory (required).
        episodes: The episode ids to take, in this order; every episode by default.
        max_tool_calls: The tool-call budget of an episode (stored in each ground truth, so the
            reward scores by it); :data:`~causaltrace.training.records.RL_RULES`' (30) by
            default.
        max_turns: The turn budget of an episode; :class:`~causaltrace.env.EnvConfig`'s (40)
            by default.
        cache_dir: Where a lazy split's rebuilt episodes go; the dataset's own by default.
        sandbox: :class:`~causaltrace.tools.ToolConfig` fields for the tools' sandbox.
    """

    id: str = TASKSET_ID
    dataset: str = ""
    episodes: list[str] | None = None
    max_tool_calls: int = Field(RL_RULES.max_tool_calls, ge=1)
    max_turns: int = Field(EnvConfig.max_turns, ge=1)
    cache_dir: str | None = None
    sandbox: dict[str, Any] = Field(default_factory=dict)
    task: CausalTraceTaskConfig = CausalTraceTaskConfig()

    @model_validator(mode="after")
    def _tools_follow(self) -> CausalTraceTasksetConfig:
        """The tool server runs by the taskset's dataset and budgets."""
        if self.dataset:
            self.dataset = os.path.abspath(self.dataset)
        self.task.tools = self.task.tools.model_copy(
            update={
                "dataset": self.dataset,
                "max_tool_calls": self.max_tool_calls,
                "max_turns": self.max_turns,
                "retry_malformed_submit": RL_RULES.retry_malformed_submit,
                "cache_dir": self.cache_dir,
                "sandbox": dict(self.sandbox),
            }
        )
        return self

    @property
    def rules(self) -> EpisodeRules:
        return EpisodeRules(self.max_tool_calls, RL_RULES.retry_malformed_submit)


class CausalTraceTaskset(vf.Taskset[CausalTraceTask, CausalTraceTasksetConfig]):
    """The split's episodes, one task each, in dataset order."""

    def load(self) -> list[CausalTraceTask]:
        if not self.config.dataset:
            raise ValueError("set the taskset's dataset (--env.taskset.dataset DIR)")
        source = DatasetSource(self.config.dataset, self.config.cache_dir)
        rules = self.config.rules
        tasks = []
        for record in dataset_records(source, self.config.episodes):
            info = {"episode_id": record.episode_id, **record.metadata}
            data = CausalTraceData(
                id=record.episode_id,
                name=record.episode_id,
                prompt=record.prompt[0]["content"],
                episode_id=record.episode_id,
                info=info,
                answer=ground_truth_json(record.label, record.space, rules=rules),
            )
            tasks.append(CausalTraceTask(data, self.config.task))
        return tasks


class CausalTraceHarness(NullHarness):
    """verifiers' ``null`` harness (a chat loop with the MCP tools only, no shell): this
    taskset's default, so an agent left unpinned cannot read the dataset from a shell."""


def completion_messages(trace: vf.Trace) -> list[dict[str, Any]]:
    """The rollout's completion as OpenAI chat messages: the assistant turns and tool results
    of the trace's final branch, after the prompt."""
    out = []
    for message in trace.messages:
        if message.role in ("assistant", "tool"):
            wire = message_to_wire(message)
            if isinstance(wire.get("content"), list):
                wire["content"] = "".join(
                    str(part.get("text", "")) for part in wire["content"] if isinstance(part, dict)
                )
            out.append(wire)
    return out


def score_completion(
    completion: Sequence[Mapping[str, Any]] | str, answer: str
) -> dict[str, float]:
    """The composite reward breakdown of a completion against a task's ``answer`` (the ground
    truth JSON): :func:`~causaltrace.training.verl_reward.compute_score` on it.

    Args:
        completion: OpenAI chat messages (assistant turns and tool results), or decoded text.
        answer: The task's ground truth JSON.
    """
    return compute_score("causaltrace", completion, answer)


def load_environment(
    dataset: str | os.PathLike,
    *,
    episodes: Sequence[str] | None = None,
    max_tool_calls: int = RL_RULES.max_tool_calls,
    max_turns: int = EnvConfig.max_turns,
    cache_dir: str | os.PathLike | None = None,
    sandbox: Mapping[str, Any] | None = None,
    harness: Mapping[str, Any] | None = None,
    runtime: Any = None,
    max_model_turns: int | None = None,
    **agent: Any,
) -> vf.Env:
    """A verifiers environment over a dataset's episodes (verifiers' ``load_environment``
    convention).

    Args:
        dataset: The generated dataset's directory.
        episodes: The episode ids to take, in order; every episode by default.
        max_tool_calls: The tool-call budget of an episode (stored in each ground truth);
            30 by default.
        max_turns: The session's turn budget; 40 by default.
        cache_dir: Where a lazy split's rebuilt episodes go; the dataset's own by default.
        sandbox: :class:`~causaltrace.tools.ToolConfig` fields for the tools' sandbox.
        harness: The agent's harness config (``{"id": ...}``); this taskset's tool-less chat
            loop by default.
        runtime: Where the harness runs (a verifiers ``RuntimeConfig`` or its mapping); a local
            subprocess by default (verifiers' own default is a remote sandbox).
        max_model_turns: verifiers' cap on the agent's model turns; none by default (the
            session's budgets end the episode).
        **agent: More ``vf.AgentConfig`` fields for the agent's seat.
    """
    taskset = {
        "id": TASKSET_ID,
        "dataset": os.fspath(dataset),
        "episodes": list(episodes) if episodes is not None else None,
        "max_tool_calls": max_tool_calls,
        "max_turns": max_turns,
        "cache_dir": None if cache_dir is None else os.fspath(cache_dir),
        "sandbox": dict(sandbox or {}),
    }
    seat = {
        "harness": dict(harness) if harness is not None else {"id": TASKSET_ID},
        "runtime": runtime if runtime is not None else SubprocessConfig(),
        "max_turns": max_model_turns,
        **agent,
    }
    return vf.load_environment(vf.resolve_env_config({"taskset": taskset, "agent": seat}))


__all__ = [
    "TASKSET_ID",
    "CausalTraceData",
    "CausalTraceHarness",
    "CausalTraceState",
    "CausalTraceTask",
    "CausalTraceTaskConfig",
    "CausalTraceTaskset",
    "CausalTraceTasksetConfig",
    "CausalTraceToolset",
    "CausalTraceToolsConfig",
    "completion_messages",
    "load_environment",
    "score_completion",
]


if __name__ == "__main__":  # verifiers starts each rollout's tool server as `python -m <module>`
    CausalTraceToolset.run()
