"""ORS, the Open Reward Standard (openrewardstandard.io): causaltrace's episodes over HTTP + SSE
for the trainers that consume it (SkyRL, ROLL), with the official ``openreward`` SDK.

:func:`ors_environment` makes an ORS ``Environment`` class over one dataset per split. Its tasks
are ``{"split", "episode_id"}`` (nothing of the label: ids carry none, see
``tests/audit/test_audit_id_leakage.py``); a session opens the episode on a
:class:`~causaltrace.serve.SessionHost` shared by the server's sessions (the same sandbox,
budgets and reward as ``causaltrace serve``), and its tools are the tool contract's: ``sql``,
``python`` and ``submit``. ORS delivers reward inline: a call that ends the episode (a submit,
or a budget running out) carries the reward and ``finished``; the label stays on the host and
never enters a task, a prompt or a tool's output. A session's teardown closes its host session.

    from openreward.environments import Server
    Server([ors_environment({"test": "data/ads_test"})]).run(port=8080)

or ``python -m causaltrace.serve.ors_env --split test=data/ads_test --port 8080``.

This module imports the SDK (the ``ors`` extra); ``import causaltrace`` does not.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from openreward.environments import Environment, Server, Split, TextBlock, ToolOutput, tool
from pydantic import BaseModel, Field

from causaltrace.datasets.reading import DatasetSource
from causaltrace.errors import CausalTraceError
from causaltrace.serve.host import HostConfig, SessionHost
from causaltrace.tools import PYTHON_SPEC, SQL_SPEC

SPLIT_TYPES = {"train": "train", "validation": "validation", "val": "validation", "test": "test"}


class SqlInput(BaseModel):
    query: str = Field(description=SQL_SPEC.params[0].description)


class PythonInput(BaseModel):
    code: str = Field(description=PYTHON_SPEC.params[0].description)


class SubmitInput(BaseModel):
    """The answer, as the tool contract's ``submit`` takes it: one cause and its slice, or
    ``causes`` for several."""

    root_cause: str | None = Field(default=None, description="the root cause's name")
    slice: str | None = Field(
        default=None, description="dim=level or dim=level&dim=level; empty for no slice"
    )
    causes: list[dict[str, Any]] | None = Field(
        default=None, description='several causes: [{"root_cause": ..., "slice": ...}, ...]'
    )


def _split(name: str) -> Split:
    kind = SPLIT_TYPES.get(name)
    if kind is None:
        raise CausalTraceError(
            f"ORS split {name!r}: its name must say its kind, one of {sorted(SPLIT_TYPES)}"
        )
    return Split(name=name, type=kind)


def ors_environment(
    splits: Mapping[str, str | Path],
    *,
    name: str = "causaltrace",
    env_config: Mapping[str, Any] | None = None,
    host_config: HostConfig | None = None,
    cache_dir: str | Path | None = None,
) -> type[Environment]:
    """An ORS ``Environment`` class over ``splits`` (split name -> dataset directory).

    Args:
        splits: The datasets by split (``train``, ``validation``/``val``, ``test``).
        name: The environment's name on the server (what clients ``get``).
        env_config: Each session's budgets and reward (:class:`~causaltrace.env.EnvConfig`
            keys); the host's defaults by default.
        host_config: The shared host's capacity.
        cache_dir: Where lazy splits' episodes are rebuilt.

    Raises:
        CausalTraceError: A split name that is not a kind ORS knows, or no split.
    """
    if not splits:
        raise CausalTraceError("ORS environment: no split given")
    declared = [_split(s) for s in splits]
    sources = {s: DatasetSource(path, cache_dir) for s, path in splits.items()}
    paths = {s: str(Path(path)) for s, path in splits.items()}
    shared: dict[str, Any] = {}

    async def host() -> SessionHost:
        """The server's one host, made by the first session (concurrent setups wait for it)."""
        lock = shared.setdefault("lock", asyncio.Lock())
        async with lock:
            if "host" not in shared:
                made = SessionHost(None, host_config or HostConfig())
                for s, source in sources.items():
                    made.sources[paths[s]] = source
                await made.start()
                shared["host"] = made
        return shared["host"]

    class CausalTraceEnvironment(Environment):
        """One causaltrace episode per session (module docstring)."""

        def __init__(
            self, task_spec: Mapping[str, Any] | None = None, secrets: dict[str, str] | None = None
        ):
            task_spec = dict(task_spec or {})
            super().__init__(task_spec, dict(secrets or {}))
            split, episode = task_spec.get("split"), task_spec.get("episode_id")
            if split not in sources or episode not in sources[split].episode_ids:
                raise CausalTraceError(f"ORS task {task_spec!r}: no such split or episode")
            self._split, self._episode = str(split), str(episode)
            self._session: str | None = None
            self._host: SessionHost | None = None
            self._opened = asyncio.Event()

        @classmethod
        def list_splits(cls) -> Sequence[Split]:
            return declared

        @classmethod
        def list_tasks(cls, split: str) -> Sequence[dict[str, Any]]:
            return [{"split": split, "episode_id": e} for e in sources[split].episode_ids]

        async def setup(self) -> None:
            try:
                self._host = await host()
                opened = await self._host.open(paths[self._split], self._episode, env_config)
                self._session = opened["session_id"]
            finally:
                self._opened.set()  # a failed setup answers every call "the episode is over"

        async def teardown(self) -> None:
            if self._session is not None and self._host is not None:
                session, self._session = self._session, None
                await self._host.close_session(session)

        def get_prompt(self) -> list[TextBlock]:
            return [TextBlock(text=sources[self._split].prompt(self._episode))]

        @tool
        async def sql(self, params: SqlInput) -> ToolOutput:
            """Run a read-only DuckDB SQL query over the episode's tables."""
            return await self._step("sql", {"query": params.query})

        @tool
        async def python(self, params: PythonInput) -> ToolOutput:
            """Execute Python in the episode's persistent sandboxed namespace."""
            return await self._step("python", {"code": params.code})

        @tool(exclusive=True)
        async def submit(self, params: SubmitInput) -> ToolOutput:
            """Submit the root cause and the affected slice; ends the episode."""
            return await self._step("submit", params.model_dump(exclude_none=True))

        async def _step(self, name: str, arguments: dict[str, Any]) -> ToolOutput:
            await self._opened.wait()
            if self._session is None:
                return ToolOutput(blocks=[TextBlock(text="The episode is over.")], finished=True)
            assert self._host is not None
            step = await self._host.step(self._session, {"name": name, "arguments": arguments})
            done = bool(step["terminated"] or step["truncated"])
            return ToolOutput(
                blocks=[TextBlock(text=step["observation"])],
                reward=float(step["reward"]) if done else None,
                finished=done,
            )

    return type(name, (CausalTraceEnvironment,), {"__doc__": CausalTraceEnvironment.__doc__})


def main(argv: Sequence[str] | None = None) -> None:
    """Serve datasets as an ORS environment."""
    parser = argparse.ArgumentParser(
        prog="python -m causaltrace.serve.ors_env",
        description="Serve causaltrace datasets over ORS (the Open Reward Standard).",
    )
    parser.add_argument(
        "--split",
        action="append",
        required=True,
        metavar="NAME=DIR",
        help="a split and its dataset directory (repeat: --split train=... --split test=...)",
    )
    parser.add_argument("--name", default="causaltrace", help="the environment's name")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    splits = dict(item.split("=", 1) for item in args.split if "=" in item)
    if len(splits) != len(args.split):
        parser.error("--split takes NAME=DIR")
    Server([ors_environment(splits, name=args.name)]).run(host=args.host, port=args.port)


if __name__ == "__main__":
    main()
