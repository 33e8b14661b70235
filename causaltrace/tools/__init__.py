"""Agent tools: ``sql`` and ``python`` over one episode's visible tables, safely.

``sql`` is read-only DuckDB with external access off; ``python`` is a persistent notebook-like
namespace in a sandbox (bubblewrap, or util-linux ``unshare``) with no network, resource limits
and nothing of the host but the episode's visible files. See ``docs/tools.md`` for the design
and threat model. Importing this package imports DuckDB (for ``sql``), not pandas.
"""

from causaltrace.tools.config import (
    SandboxError,
    SandboxUnavailableError,
    ToolConfig,
    ToolError,
)
from causaltrace.tools.episode_data import EpisodeData
from causaltrace.tools.runtime import (
    EpisodeTools,
    SyncEpisodeTools,
    SyncToolRuntime,
    ToolRuntime,
    open_tools,
)
from causaltrace.tools.schemas import (
    PYTHON_SPEC,
    PYTHON_TOOL,
    SQL_SPEC,
    SQL_TOOL,
    Param,
    ToolSpec,
    tool_schemas,
)

__all__ = [
    "PYTHON_SPEC",
    "PYTHON_TOOL",
    "SQL_SPEC",
    "SQL_TOOL",
    "Param",
    "ToolSpec",
    "EpisodeData",
    "EpisodeTools",
    "SandboxError",
    "SandboxUnavailableError",
    "SyncEpisodeTools",
    "SyncToolRuntime",
    "ToolConfig",
    "ToolError",
    "ToolRuntime",
    "open_tools",
    "tool_schemas",
]
