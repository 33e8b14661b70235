"""One episode of the environment: tool calls with budgets, submit, reward, transcript.

A turn is one assistant message; it may carry several tool calls. Each tool call costs one
unit of the ``max_tool_calls`` budget and each turn one unit of ``max_turns``; a call past a
budget ends the episode (truncated) with no attribution reward. ``submit`` ends it (terminated)
and scores the answer against the label; the agent only reads "Submission received."

With the reward's ``parse.retry_malformed_submit`` (on in the RL exports), a submit whose
arguments do not parse does not end the episode: the agent reads the named format error, the
call costs one unit of ``max_tool_calls``, and it may submit again (see ``docs/rewards.md``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from causaltrace.core.config import typed_config
from causaltrace.core.files import atomic_write_text
from causaltrace.datasets.reading import DatasetSource
from causaltrace.env.contract import ToolContract
from causaltrace.errors import CausalTraceError
from causaltrace.scoring import CompositeReward, ParsedAnswer

_LOG = logging.getLogger(__name__)


def host_failure(tool: str, exc: BaseException) -> str:
    """What an agent reads when its call raised in the environment (a bug, or bytes a worker
    forged): a named tool error, and the episode goes on. The exception's text stays in the
    host's log; only its type is shown."""
    return (
        f"Error: the {tool} call failed in the environment ({type(exc).__name__}); "
        "the episode goes on."
    )


SUBMITTED = "Submission received. The episode is over."


@dataclass(frozen=True)
class EnvConfig:
    """Budgets, reward weights and where transcripts go (the ``env`` section of ``causaltrace/conf/eval.yaml``).

    Args:
        max_tool_calls: Tool calls before the episode is truncated; 30 by default.
        max_turns: Assistant turns before the episode is truncated; 40 by default.
        reward: The reward config (see :mod:`causaltrace.scoring.rewards`); empty (the
            default) is the TRACE composite.
        transcript_dir: Write each episode's transcript here on close; none by default.
    """

    max_tool_calls: int = 30
    max_turns: int = 40
    reward: Mapping[str, Any] = field(default_factory=dict)  # {} = the TRACE composite
    transcript_dir: str | None = None

    def __post_init__(self) -> None:
        for name in ("max_tool_calls", "max_turns"):
            if getattr(self, name) < 1:
                raise CausalTraceError(
                    f"env config: {name} must be >= 1, got {getattr(self, name)}"
                )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> EnvConfig:
        """A config from a mapping with this class's keys (``None`` gives the defaults).

        Args:
            data: The ``env`` section of a config, or ``None``.

        Raises:
            CausalTraceError: An unknown key, or a value of the wrong type or range.
        """
        return typed_config(cls, data, "env config")


@dataclass(frozen=True)
class ToolCall:
    """A tool call as an LLM emits it. ``arguments`` is a JSON string or a mapping.

    Args:
        name: The tool's name (``sql``, ``python``, ``submit``).
        arguments: The arguments, as a JSON string or a mapping; ``"{}"`` by default.
        id: The call's id, if the model gave one; one is made up otherwise.
    """

    name: str
    arguments: str | Mapping[str, Any] = "{}"
    id: str | None = None

    @classmethod
    def of(cls, action: Any) -> ToolCall:
        """From a ``ToolCall``, an OpenAI ``{"function": {"name", "arguments"}}`` dict, or a
        ``{"name", "arguments"}`` dict.

        Args:
            action: The call in one of those forms.

        Raises:
            TypeError: ``action`` is none of those forms.
        """
        if isinstance(action, ToolCall):
            return action
        if isinstance(action, Mapping):
            fn = action.get("function") if isinstance(action.get("function"), Mapping) else action
            return cls(str(fn.get("name", "")), fn.get("arguments") or "{}", action.get("id"))
        raise TypeError(f"an action is a tool call ({{'name', 'arguments'}}), not {action!r}")


@dataclass(frozen=True)
class StepResult:
    """What a step returns: ``observation`` for the agent, the rest for the caller.

    Args:
        observation: The text the agent sees (a tool's output, or the end of the episode).
        reward: The reward (0 until the episode ends).
        terminated: The agent submitted an answer.
        truncated: A budget ran out, or the episode was ended without an answer.
        info: Everything else for the caller (the reward breakdown, counts); never shown to
            the agent.
    """

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


class DiagnosisSession:
    """The asyncio core of one episode. Use ``async with``; tools are started on entry.

    Args:
        runtime (ToolRuntime): The started :class:`~causaltrace.tools.ToolRuntime` whose sandboxes run the
            tools (one runtime serves many sessions).
        source: The dataset.
        episode: The episode id.
        config: Budgets, reward and transcripts; :class:`EnvConfig` defaults by default.

    Raises:
        CausalTraceError: The dataset has no such episode.
    """

    def __init__(
        self, runtime, source: DatasetSource, episode: str, config: EnvConfig | None = None
    ):
        self.runtime, self.source, self.episode = runtime, source, episode
        self.config = config or EnvConfig()
        self.prompt = source.prompt(episode)
        self.tool_calls = 0
        self.turns = 0
        self.malformed_submits = 0
        self.done = False
        self.result: dict[str, Any] | None = None
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": self.prompt}]
        self.events: list[dict[str, Any]] = []
        self._tools = None
        self._started = time.perf_counter()
        # Built now, so a malformed reward config fails when the session opens, not at submit.
        self._reward = CompositeReward.from_config(self.config.reward or None)

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The episode's tools (sql, python, its dataset's submit) as OpenAI schemas."""
        return ToolContract.for_dataset(self.source).openai()

    async def __aenter__(self) -> DiagnosisSession:
        self._tools = self.runtime.episode(self.source.visible_dir(self.episode))
        await self._tools.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._tools is not None:
            await self._tools.close()
            self._tools = None
        if self.config.transcript_dir:
            self.write_transcript(Path(self.config.transcript_dir) / f"{self.episode}.jsonl")

    async def turn(
        self,
        calls: Sequence[Any],
        content: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> list[StepResult]:
        """One assistant message with its tool calls; returns one result per call.

        Args:
            calls: The message's tool calls (see :meth:`ToolCall.of` for the forms); none
                means the message's text is the final answer.
            content: The message's text; none by default.
            extra: More keys to record on the assistant message (e.g. reasoning); none by
                default.

        Returns:
            One result per call run (calls after the episode ends are skipped); the last one
            carries the end of the episode if a budget ran out.

        Raises:
            RuntimeError: The episode is already over.
        """
        if self.done:
            raise RuntimeError(f"episode {self.episode} is over")
        calls = [ToolCall.of(c) for c in calls]
        self.turns += 1
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = [
                {
                    "id": c.id or f"call_{self.turns}_{i}",
                    "type": "function",
                    "function": {
                        "name": c.name,
                        "arguments": c.arguments
                        if isinstance(c.arguments, str)
                        else json.dumps(c.arguments),
                    },
                }
                for i, c in enumerate(calls)
            ]
        if extra:
            message.update(extra)
        self.messages.append(message)
        results = []
        if not calls:
            results.append(await self._answer_in_text(content))
        for i, call in enumerate(calls):
            if self.done:
                break
            result = await self._call(call, message["tool_calls"][i]["id"])
            results.append(result)
        if not self.done and self.turns >= self.config.max_turns:
            # The turn's last tool output still reaches the agent, with the end of the episode.
            end = self._truncate("turn budget exhausted")
            last = results.pop() if results else None
            observation = (
                end.observation if last is None else f"{last.observation}\n\n{end.observation}"
            )
            results.append(StepResult(observation, end.reward, False, True, end.info))
        return results

    async def finish(self, reason: str) -> StepResult:
        """End the episode without an answer (e.g. the agent's model server failed for good):
        no attribution reward, and ``reason`` recorded in the result and the transcript.

        Args:
            reason: Why the episode ends.

        Raises:
            RuntimeError: The episode is already over.
        """
        if self.done:
            raise RuntimeError(f"episode {self.episode} is over")
        self.messages.append({"role": "assistant", "content": None, "error": str(reason)})
        return self._truncate(str(reason))

    async def step(self, action: Any) -> StepResult:
        """A turn with exactly one tool call (the Gymnasium-style unit).

        Args:
            action: The tool call (see :meth:`ToolCall.of` for the forms).
        """
        return (await self.turn([action]))[0]

    async def _call(self, call: ToolCall, call_id: str) -> StepResult:
        if call.name == "submit":
            return self._submit({"name": "submit", "arguments": call.arguments}, call_id)
        if self.tool_calls >= self.config.max_tool_calls:
            return self._truncate("tool-call budget exhausted")
        self.tool_calls += 1
        started = time.perf_counter()
        try:
            observation = await self._tools.call(call.name, call.arguments)
        except Exception as exc:  # the tools' bug or a worker's forged bytes: the episode goes on
            _LOG.warning(
                "%s call of episode %s failed on the host", call.name, self.episode, exc_info=True
            )
            observation = host_failure(call.name, exc)
        elapsed = time.perf_counter() - started
        self.messages.append(
            {"role": "tool", "tool_call_id": call_id, "name": call.name, "content": observation}
        )
        self.events.append(
            {"tool": call.name, "seconds": round(elapsed, 4), "chars": len(observation)}
        )
        return StepResult(
            observation, 0.0, False, False, {"tool_calls": self.tool_calls, "turns": self.turns}
        )

    async def _answer_in_text(self, content: str | None) -> StepResult:
        """A turn without tool calls: the final message is the answer (if it holds one)."""
        return self._submit(self.messages[1:])

    def _submit(self, output: Any, call_id: str | None = None) -> StepResult:
        reward = self._reward
        parsed = reward.parse(
            output, self.source.answer_space, tool_calls=self.tool_calls, turns=self.turns
        )
        if not parsed.ok and call_id is not None and reward.policy.retry_malformed_submit:
            return self._refuse_submit(parsed.error or "invalid answer", call_id)
        parsed = replace(parsed, malformed_submits=self.malformed_submits)
        scored = reward(parsed, self.source.label(self.episode))
        self.done = True
        self.result = {
            "reason": "submitted",
            "parse_error": parsed.error,
            "answer": None if parsed.answer is None else parsed.answer.to_dict(),
            "reward": scored.to_dict(),
        }
        if isinstance(output, Mapping):
            self.messages.append({"role": "tool", "name": "submit", "content": SUBMITTED})
        return StepResult(SUBMITTED, scored.score, True, False, self._info())

    def _refuse_submit(self, error: str, call_id: str) -> StepResult:
        """A malformed submit, with retries on: the agent reads why, at the cost of a call."""
        if self.tool_calls >= self.config.max_tool_calls:
            return self._truncate("tool-call budget exhausted")
        self.tool_calls += 1
        self.malformed_submits += 1
        observation = (
            f"Error: the submission was not accepted: {error}. Nothing was scored; fix the "
            "answer and call submit again (this call counted against the tool-call budget)."
        )
        self.messages.append(
            {"role": "tool", "tool_call_id": call_id, "name": "submit", "content": observation}
        )
        return StepResult(observation, 0.0, False, False, self._info())

    def _truncate(self, reason: str) -> StepResult:
        reward = self._reward
        parsed = ParsedAnswer(
            None,
            self.source.answer_space,
            error=reason,
            tool_calls=self.tool_calls,
            turns=self.turns,
            malformed_submits=self.malformed_submits,
        )
        scored = reward(parsed, self.source.label(self.episode))
        self.done = True
        self.result = {
            "reason": reason,
            "parse_error": reason,
            "answer": None,
            "reward": scored.to_dict(),
        }
        return StepResult(
            f"The episode is over: {reason}.", scored.score, False, True, self._info()
        )

    def _info(self) -> dict[str, Any]:
        return {"tool_calls": self.tool_calls, "turns": self.turns, **(self.result or {})}

    def transcript(self) -> dict[str, Any]:
        """Everything needed to replay the episode (the label is added by evaluators only)."""
        return {
            "episode_id": self.episode,
            "messages": self.messages,
            "events": self.events,
            "tool_calls": self.tool_calls,
            "turns": self.turns,
            "seconds": round(time.perf_counter() - self._started, 3),
            "result": self.result,
        }

    def write_transcript(self, path: Path) -> None:
        """Write :meth:`transcript` as JSON lines (a ``meta`` line, then one per message).

        Args:
            path: The file to write (atomically).
        """
        record = self.transcript()
        lines = [
            json.dumps(
                {"type": "meta", **{k: v for k, v in record.items() if k != "messages"}},
                sort_keys=True,
            )
        ]
        lines += [json.dumps({"type": "message", **m}, sort_keys=True) for m in self.messages]
        atomic_write_text(path, "\n".join(lines) + "\n")
