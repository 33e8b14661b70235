"""The agent environment: episodes of a dataset behind sandboxed tools, scored on submit.

- :class:`DiagnosisSession`: the asyncio core, one episode (many run concurrently in one loop).
- :class:`DiagnosisEnv`: a Gymnasium-style ``reset``/``step`` wrapper for blocking code.
- :class:`Curriculum`: which episode each training sample gets, from easy tiers to hard ones.
- :class:`ToolContract`: the tools declared once, rendered for every consumer.

The trainer adapters built on these (TRL's environment factory, verl's tools) are in
:mod:`causaltrace.training`.

Labels stay on this side: the tools see one episode's visible directory and nothing else; the
reward breakdown goes to the caller, never into an observation.
"""

from causaltrace.datasets.reading import DatasetSource
from causaltrace.env.contract import ToolContract, submit_tool, tool_schemas_for
from causaltrace.env.curriculum import Curriculum, CurriculumConfig, EpisodeRef, Stage
from causaltrace.env.gym import DiagnosisEnv
from causaltrace.env.session import (
    DiagnosisSession,
    EnvConfig,
    StepResult,
    ToolCall,
)

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
    "ToolContract",
    "submit_tool",
    "tool_schemas_for",
]
