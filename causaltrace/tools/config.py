"""Limits and switches of the agent tools, and the errors the tool layer raises.

Every limit lives in one frozen :class:`ToolConfig` so that an RL launcher can put it in its
Hydra config and a benchmark can state exactly what it measured. Errors raised here are for the
*operator* (bad config, no sandbox available); what the *agent* does wrong comes back as text in
the tool result and never raises.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Literal

from causaltrace.core.config import typed_config
from causaltrace.errors import CausalTraceError

MiB = 1024 * 1024
GiB = 1024 * MiB

SandboxPreference = Literal["auto", "bwrap", "unshare", "none"]
ForkServerPreference = Literal["auto", "on", "off"]

# Distributions bound into the sandbox (with their installed dependencies). The generator's own
# packages are refused by name, whatever the config says.
DEFAULT_SANDBOX_PACKAGES = ("pandas", "numpy", "scipy", "duckdb", "pyarrow")
# Modules imported once by each warm worker, before it is given an episode. ``scipy.stats`` is
# left out on purpose: it costs about 35 MB and 0.3 s per worker and is imported on first use.
DEFAULT_PRELOAD = ("numpy", "pandas", "pyarrow.parquet", "duckdb", "scipy")
FORBIDDEN_PACKAGES = frozenset({"causaltrace", "causaltrace_domains", "domains"})


class ToolError(CausalTraceError):
    """The tool layer was misconfigured or misused by the host program (not by the agent)."""


class SandboxUnavailableError(ToolError):
    """No isolation could be set up for agent Python code, and unsandboxed mode was not allowed."""


class SandboxError(ToolError):
    """A sandboxed worker failed to start or broke the worker protocol."""


@dataclass(frozen=True)
class ToolConfig:
    """Limits of the ``sql`` and ``python`` tools and of the sandbox they run in.

    Output caps are in characters of the text returned to the agent. Resource limits apply to
    each episode's Python process (and to each process it starts; ``max_processes`` counts
    threads too, as the kernel does).
    """

    # sql tool
    sql_max_rows: int = 100
    sql_max_chars: int = 20_000
    sql_timeout: float = 30.0
    sql_memory_limit: str = "1GB"
    sql_threads: int = 1
    # python tool
    python_timeout: float = 30.0
    python_max_output_chars: int = 20_000
    memory_bytes: int = 2 * GiB
    cpu_seconds: int = 600
    max_processes: int = 64
    max_file_bytes: int = 64 * MiB
    tmp_bytes: int = 64 * MiB
    max_open_files: int = 256
    # sandbox and warm pool
    sandbox: SandboxPreference = "auto"
    allow_unsandboxed: bool = False
    sandbox_packages: tuple[str, ...] = DEFAULT_SANDBOX_PACKAGES
    preload: tuple[str, ...] = DEFAULT_PRELOAD
    warm_workers: int = 2
    spawn_concurrency: int = 2
    worker_start_timeout: float = 120.0
    # Fork workers from one warm sandbox per tool (tools/fork_server.py): libraries shared
    # copy-on-write, each worker still in its own namespaces with its own uid and limits.
    # "auto": where the launcher supports it (bwrap: as root, workers switch to random uids; as
    # a normal user, the server runs in an unprivileged user namespace and each worker makes
    # one of its own), else one sandbox per worker; "on": refuse to start without it; "off":
    # one sandbox per worker. A server that dies is restarted (tools/fork_keeper.py).
    fork_server: ForkServerPreference = "auto"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
            if numeric and not math.isfinite(value):  # nan passes every comparison below
                raise ToolError(f"ToolConfig.{f.name} must be a finite number, got {value!r}")
            if numeric and (value < 0 or (value == 0 and f.name != "warm_workers")):
                raise ToolError(f"ToolConfig.{f.name} must be positive, got {value!r}")
        if self.sandbox not in ("auto", "bwrap", "unshare", "none"):
            raise ToolError(
                f"ToolConfig.sandbox must be 'auto', 'bwrap', 'unshare' or 'none', "
                f"got {self.sandbox!r}"
            )
        if self.fork_server not in ("auto", "on", "off"):
            raise ToolError(
                f"ToolConfig.fork_server must be 'auto', 'on' or 'off', got {self.fork_server!r}"
            )
        if self.sandbox == "none" and not self.allow_unsandboxed:
            raise ToolError(
                "ToolConfig.sandbox='none' runs agent code without isolation; "
                "it also needs allow_unsandboxed=True"
            )
        bad = FORBIDDEN_PACKAGES.intersection(self.sandbox_packages)
        if bad:
            raise ToolError(
                f"ToolConfig.sandbox_packages lists {sorted(bad)}: the generator must never be "
                "importable by agent code"
            )
        object.__setattr__(self, "sandbox_packages", tuple(self.sandbox_packages))
        object.__setattr__(self, "preload", tuple(self.preload))

    @classmethod
    def from_mapping(cls, values: dict[str, Any] | None) -> ToolConfig:
        """Build from a plain mapping (e.g. a Hydra node), naming any unknown key.

        Args:
            values: The fields by name; ``None`` gives the defaults.

        Raises:
            ToolError: A key is unknown, or a value does not fit its field.
        """
        return typed_config(cls, values, "ToolConfig", ToolError)
