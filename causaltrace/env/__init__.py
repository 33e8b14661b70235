"""The agent environment: episodes of a dataset behind sandboxed tools, scored on submit.

- :class:`DiagnosisSession`: the asyncio core, one episode (many run concurrently in one loop).
- :class:`DiagnosisEnv`: a Gymnasium-style ``reset``/``step`` wrapper for blocking code.
- :class:`Curriculum`: which episode each training sample gets, from easy tiers to hard ones.
- :mod:`causaltrace.env.trl` and :mod:`causaltrace.env.verl`: trainer adapters, importable
  without TRL or verl installed.

Labels stay on this side: the tools see one episode's visible directory and nothing else; the
reward breakdown goes to the caller, never into an observation.
"""

from causaltrace.env.curriculum import Curriculum, CurriculumConfig, EpisodeRef, Stage
from causaltrace.env.gym import DiagnosisEnv
from causaltrace.env.session import (
    DiagnosisSession,
    EnvConfig,
    StepResult,
    ToolCall,
    submit_tool,
    tool_schemas_for,
)
from causaltrace.env.source import DatasetSource

__all__ = [
    "Curriculum",
    "CurriculumConfig",
    "DatasetSource",
    "DiagnosisEnv",
    "DiagnosisSession",
    "EnvConfig",
    "EpisodeRef",
    "Stage",
    "StepResult",
    "ToolCall",
    "submit_tool",
    "tool_schemas_for",
]
