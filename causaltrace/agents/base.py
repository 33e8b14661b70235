"""The agent interface and registry."""

from __future__ import annotations

import contextlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Any, ClassVar

import numpy as np

from causaltrace.errors import CausalTraceError

ENTRY_POINT_GROUP = "causaltrace.agents"
_BUILTIN: dict[str, Callable[..., Agent]] = {}


class Agent(ABC):
    """Investigates one episode at a time. ``config`` is the agent's (Hydra) config mapping.

    Agents see only what an LLM sees: the prompt (``session.prompt``), the tool schemas and the
    tool outputs returned by ``session.turn``. They never touch labels or seeds; the harness
    passes each episode its own ``rng`` (derived from the evaluation seed and the episode id).
    """

    name: ClassVar[str] = ""

    def __init__(self, config: Mapping[str, Any] | None = None):
        self.config = dict(config or {})

    @abstractmethod
    async def run(self, session, rng: np.random.Generator) -> None:
        """Drive ``session`` until ``session.done`` (submit, or a budget runs out)."""

    async def end_episode(self, session, error: str) -> None:
        """End ``session`` without an answer after a failure the agent cannot recover from."""
        await end_episode(session, error)


async def end_episode(session, error: str) -> None:
    """End an unfinished episode without an answer and record ``error`` in its transcript.

    The session is finished with ``error`` as its reason (no attribution reward); its last
    assistant message carries ``"error": error`` for evaluators. A session that is already done
    is left alone.
    """
    if not session.done:
        await session.finish(str(error))


def register_agent(name: str) -> Callable[[type[Agent]], type[Agent]]:
    """Register a built-in agent class under ``name``."""

    def decorate(cls: type[Agent]) -> type[Agent]:
        _BUILTIN[name] = cls
        return cls

    return decorate


def available_agents() -> list[str]:
    _load_builtins()
    return sorted(set(_BUILTIN) | {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


def make_agent(name: str, config: Mapping[str, Any] | None = None) -> Agent:
    """An agent by registered name (built-in or from the ``causaltrace.agents`` entry points)."""
    _load_builtins()
    if name in _BUILTIN:
        return _BUILTIN[name](config)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return ep.load()(config)
    raise CausalTraceError(f"unknown agent {name!r}; available: {', '.join(available_agents())}")


def _load_builtins() -> None:
    from causaltrace.agents import random_agent, transformers_agent  # noqa: F401  (register)

    with contextlib.suppress(ImportError):  # the openai agent needs the optional client
        from causaltrace.agents import openai_agent  # noqa: F401


def last_json_object(text: str) -> Any:
    """The last line of a tool's output that parses as a JSON object: how a scripted agent
    reads what its own notebook code printed (the tools return text)."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise ValueError(f"no JSON object in the tool output: {text[:300]}")
