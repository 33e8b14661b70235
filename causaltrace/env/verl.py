"""verl tools: ``sql``, ``python`` and ``submit`` as ``verl.tools.base_tool.BaseTool``
subclasses, keyed by the episode id in ``create_kwargs`` (importable without verl).

verl's agent loop calls ``create``, ``execute`` and ``release`` around every single tool call,
so an instance id lives for one call only. The episode's tools (its DuckDB connection and its
Python namespace) therefore live in a process-wide registry keyed by the episode id (and an
optional ``rollout_key`` in ``create_kwargs``, to keep GRPO samples of the same prompt apart);
an episode's tools close after ``idle_seconds`` without calls. Rewards come from
``causaltrace.scoring.adapters.verl.compute_score`` on the whole response; the submit tool only
acknowledges. Tool config: ``configs/verl/causaltrace_tools.yaml``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any
from uuid import uuid4

try:  # pragma: no cover - exercised only where verl is installed
    from verl.tools.base_tool import BaseTool as _VerlBaseTool
except Exception:  # verl not installed: a stand-in with the same interface

    class _VerlBaseTool:  # type: ignore[no-redef]
        def __init__(self, config: dict, tool_schema: Any):
            self.config = config
            self.tool_schema = tool_schema
            function = (
                tool_schema["function"] if isinstance(tool_schema, dict) else tool_schema.function
            )
            self.name = function["name"] if isinstance(function, dict) else function.name

        def get_openai_tool_schema(self) -> Any:
            return self.tool_schema


class _Registry:
    """Open episodes by key, shared by the tool classes of one process."""

    def __init__(self) -> None:
        self.runtime = None
        self.sources: dict[str, Any] = {}
        self.episodes: dict[str, dict[str, Any]] = {}
        self.lock = asyncio.Lock()

    async def tools(self, config: dict, key: str, episode: str):
        from causaltrace.env.source import DatasetSource
        from causaltrace.tools import ToolConfig, ToolRuntime

        async with self.lock:
            if self.runtime is None:
                self.runtime = ToolRuntime(ToolConfig.from_mapping(config.get("tools")))
                await self.runtime.start()
            entry = self.episodes.get(key)
            if entry is None:
                root = config["dataset"]
                source = self.sources.setdefault(root, DatasetSource(root))
                tools = self.runtime.episode(source.visible_dir(episode))
                await tools.start()
                entry = self.episodes[key] = {"tools": tools, "calls": 0}
            entry["last"] = time.monotonic()
            await self._evict(float(config.get("idle_seconds", 600)))
            return entry

    async def _evict(self, idle: float) -> None:
        now = time.monotonic()
        for key in [k for k, e in self.episodes.items() if now - e["last"] > idle]:
            await self.episodes.pop(key)["tools"].close()


REGISTRY = _Registry()


class CausalTraceTool(_VerlBaseTool):
    """Base of the three tools: ``config`` needs ``dataset`` (the dataset directory)."""

    def __init__(self, config: dict, tool_schema: Any):
        super().__init__(config, tool_schema)
        self._instances: dict[str, dict[str, str]] = {}

    async def create(self, instance_id: str | None = None, **kwargs: Any):
        create_kwargs = kwargs.get("create_kwargs", kwargs)
        episode = create_kwargs.get("episode_id")
        if episode is None:
            raise ValueError("causaltrace tools need create_kwargs={'episode_id': ...}")
        instance_id = instance_id or str(uuid4())
        key = f"{episode}::{create_kwargs.get('rollout_key', '')}"
        self._instances[instance_id] = {"episode": str(episode), "key": key}
        return instance_id

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any):
        instance = self._instances.get(instance_id)
        if instance is None:
            return "Error: unknown tool instance.", 0.0, {}
        entry = await REGISTRY.tools(self.config, instance["key"], instance["episode"])
        limit = int(self.config.get("max_tool_calls", 30))
        if entry["calls"] >= limit:
            return f"Error: the tool-call budget ({limit}) is exhausted.", 0.0, {}
        entry["calls"] += 1
        text = await entry["tools"].call(self.name, parameters)
        return text, 0.0, {"calls": entry["calls"]}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0  # the reward is computed from the whole response by compute_score

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._instances.pop(instance_id, None)


class SqlTool(CausalTraceTool):
    """The ``sql`` tool."""


class PythonTool(CausalTraceTool):
    """The ``python`` tool."""


class SubmitTool(CausalTraceTool):
    """The ``submit`` tool: acknowledges; compute_score reads the call from the response."""

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any):
        return "Submission received. The episode is over.", 0.0, {}
