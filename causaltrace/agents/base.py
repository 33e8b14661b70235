"""The agent interface and registry."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np

from causaltrace.core.registry import Registry

ENTRY_POINT_GROUP = "causaltrace.agents"


class Agent(ABC):
    """Investigates one episode at a time. ``config`` is the agent's (Hydra) config mapping.

    Agents see only what an LLM sees: the prompt (``session.prompt``), the tool schemas and the
    tool outputs returned by ``session.turn``. They never touch labels or seeds; the harness
    passes each episode its own ``rng`` (derived from the evaluation seed and the episode id).

    Args:
        config: The agent's config mapping (kept as :attr:`config`); empty by default.
    """

    name: ClassVar[str] = ""

    def __init__(self, config: Mapping[str, Any] | None = None):
        self.config = dict(config or {})

    @abstractmethod
    async def run(self, session, rng: np.random.Generator) -> None:
        """Drive ``session`` until ``session.done`` (submit, or a budget runs out).

        Args:
            session (DiagnosisSession): The episode's session (``prompt``, ``tool_schemas()``,
                ``turn``).
            rng: The episode's own generator (for any randomness of the agent).
        """

    async def preflight(self) -> None:
        """Check, before any episode starts, what every episode needs (e.g. that a model
        server can be reached), and raise if it is missing: an exception with a true
        ``abort_run`` attribute, or a :class:`~causaltrace.errors.RunFailure`, so a run fails in
        seconds instead of once per episode. The evaluation harness calls it once per run
        before it writes anything. Default: nothing to check."""
        return None

    async def end_episode(self, session, error: str) -> None:
        """End ``session`` without an answer after a failure the agent cannot recover from.

        Args:
            session (DiagnosisSession): The episode's session (``prompt``, ``tool_schemas()``,
                ``turn``).
            error: What went wrong (recorded in the transcript).
        """
        await end_episode(session, error)


async def end_episode(session, error: str) -> None:
    """End an unfinished episode without an answer and record ``error`` in its transcript.

    The session is finished with ``error`` as its reason (no attribution reward); its last
    assistant message carries ``"error": error`` for evaluators. A session that is already done
    is left alone.

    Args:
        session (DiagnosisSession): The episode's session.
        error: What went wrong (recorded in the transcript).
    """
    if not session.done:
        await session.finish(str(error))


def _agent_class(name: str, obj: Any) -> type[Agent]:
    if not (isinstance(obj, type) and issubclass(obj, Agent)):
        raise TypeError(f"{obj!r} is not an Agent subclass")
    return obj


# Agents by name: the built-ins below (paths: nothing is imported until an agent is made),
# the ``causaltrace.agents`` entry points of installed packages (the domains' teachers), and
# agents registered at run time with :func:`register_agent`.
AGENTS: Registry[type[Agent]] = Registry("agent", ENTRY_POINT_GROUP, _agent_class)
AGENTS.register("random", "causaltrace.agents.random_agent:RandomAgent")
AGENTS.register("openai", "causaltrace.agents.openai_agent:OpenAIAgent")
AGENTS.register("transformers", "causaltrace.agents.transformers_agent:TransformersAgent")
AGENTS.register("investigator", "causaltrace.agents.investigator:SignatureInvestigator")


def register_agent(name: str, *, overwrite: bool = False) -> Callable[[type[Agent]], type[Agent]]:
    """Class decorator: register an agent class under ``name`` (a taken name raises unless
    ``overwrite=True``). Installed packages register theirs as ``causaltrace.agents`` entry
    points instead, so that listing agents imports nothing.

    Args:
        name: The agent's name (what ``make_agent`` and ``agent=<name>`` take).
        overwrite: Replace an agent of the same name; off by default.
    """
    return AGENTS.add(name, overwrite=overwrite)


def available_agents() -> list[str]:
    return AGENTS.names()


def make_agent(name: str, config: Mapping[str, Any] | None = None) -> Agent:
    """An agent by registered name, or by ``"module:Class"`` path.

    Args:
        name: A registered agent name (``random``, ``openai``, ``transformers``, a domain's
            teacher), or a ``"module:Class"`` path to an :class:`Agent` subclass.
        config: The agent's config mapping; empty by default.

    Raises:
        RegistryError: An unknown name, or one that does not load as an :class:`Agent`.
    """
    return AGENTS.get(name)(config)


def last_json_object(text: str) -> Any:
    """The last line of a tool's output that parses as a JSON object: how a scripted agent
    reads what its own notebook code printed (the tools return text).

    Args:
        text: A tool's output.

    Raises:
        ValueError: No line parses as a JSON object.
    """
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise ValueError(f"no JSON object in the tool output: {text[:300]}")
