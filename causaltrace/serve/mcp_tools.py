"""The agent's tools over MCP: ``sql`` and ``python`` on one episode, for any MCP client.

An MCP client (an IDE agent, a model runtime with MCP support) gets exactly what a model gets
in an episode: the two tools over the episode's visible tables, with the same sandbox, limits
and error replies as every other path (:mod:`causaltrace.tools`). Nothing else is served: no
submit, reset, step or state (OpenEnv issue 1126: tools must not reach the environment's
control), no resources, no prompts. The server process opens one episode directory and the
sandbox mounts only that directory, so neither the client nor the code it runs can reach a
label, a seed or another episode; a call of any other tool name is refused by the SDK.

Scoring stays with the environment: serve the prompt to the model, these tools over MCP, and
score its submitted answer with :func:`causaltrace.scoring.compute_score` (docs/serving.md).

    python -m causaltrace.serve.mcp_tools --episode-dir DIR
    python -m causaltrace.serve.mcp_tools --dataset data/ads_test --episode test-000007

This module imports the ``mcp`` SDK (>= 2, the ``mcp`` extra); ``import causaltrace`` does not.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from causaltrace.datasets.reading import open_episode
from causaltrace.errors import CausalTraceError
from causaltrace.tools import PYTHON_SPEC, SQL_SPEC, ToolConfig, ToolRuntime

SERVER_NAME = "causaltrace-tools"


def mcp_server(episode_dir: str | os.PathLike[str], config: ToolConfig | None = None):
    """An ``mcp`` ``MCPServer`` of one episode's ``sql`` and ``python`` tools.

    The episode's tools start with the server (its lifespan) and close with it; each call
    returns the tool's text, an error included (a failing call does not end the session).

    Args:
        episode_dir: The episode's visible directory (its Parquet tables).
        config: The tool settings; :class:`~causaltrace.tools.ToolConfig` defaults without
            warm workers by default.

    Raises:
        CausalTraceError: ``episode_dir`` is not a directory holding Parquet tables.
    """
    from mcp.server.mcpserver import MCPServer  # optional: the mcp extra

    directory = Path(episode_dir)
    if not directory.is_dir() or not any(directory.glob("*.parquet")):
        raise CausalTraceError(f"{directory}: not an episode directory (no Parquet tables in it)")
    state: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(_server) -> AsyncIterator[None]:
        runtime = ToolRuntime(config or ToolConfig(warm_workers=0))
        await runtime.start()
        try:
            tools = runtime.episode(directory)
            await tools.start(wait=True)
            state["tools"] = tools
            yield None
        finally:
            if "tools" in state:
                await state.pop("tools").close()
            await runtime.close()

    server = MCPServer(
        SERVER_NAME,
        instructions="Read-only SQL and a sandboxed Python notebook over one episode's tables.",
        lifespan=lifespan,
        log_level="WARNING",  # stderr is the client's log: one line per call is noise
    )

    async def sql(query: str) -> str:
        return await state["tools"].sql(query)

    async def python(code: str) -> str:
        return await state["tools"].python(code)

    server.add_tool(sql, name="sql", description=SQL_SPEC.description, structured_output=False)
    server.add_tool(
        python, name="python", description=PYTHON_SPEC.description, structured_output=False
    )
    return server


def _episode_dir(args: argparse.Namespace) -> Path:
    if args.episode_dir:
        return Path(args.episode_dir)
    return open_episode(args.dataset, args.episode, cache_dir=args.cache_dir)


def main(argv: Sequence[str] | None = None) -> None:
    """Serve one episode's tools over MCP on stdin/stdout."""
    parser = argparse.ArgumentParser(
        prog="python -m causaltrace.serve.mcp_tools",
        description="Serve one episode's sql and python tools over MCP (stdio).",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--episode-dir", help="an episode's visible directory")
    where.add_argument("--dataset", help="a dataset directory (with --episode)")
    parser.add_argument("--episode", help="the episode id, with --dataset")
    parser.add_argument("--cache-dir", help="where a lazy split's episode is rebuilt")
    args = parser.parse_args(argv)
    if args.dataset and not args.episode:
        parser.error("--dataset needs --episode")
    try:
        server = mcp_server(_episode_dir(args))
    except CausalTraceError as exc:
        print(f"causaltrace mcp: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    server.run("stdio")


if __name__ == "__main__":
    main()
