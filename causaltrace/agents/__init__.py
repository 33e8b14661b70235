"""Agents that investigate episodes through the environment's tools.

An agent drives one :class:`~causaltrace.env.DiagnosisSession`: it sends turns (tool calls and
text) with ``await session.turn(...)`` until the session is done. Built-in agents: ``random``
(a uniformly random answer: the floor), ``openai`` (any OpenAI-compatible chat server) and
``transformers`` (a local checkpoint generating on this machine).
Domains add their own (the ads domain's ``teacher`` and ``localizer``) through the
``causaltrace.agents`` entry-point group.
"""

from causaltrace.agents.base import (
    AGENTS,
    Agent,
    available_agents,
    end_episode,
    last_json_object,
    make_agent,
    register_agent,
)

__all__ = [
    "AGENTS",
    "Agent",
    "available_agents",
    "end_episode",
    "last_json_object",
    "make_agent",
    "register_agent",
]
