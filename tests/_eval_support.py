"""Shared pieces of the evaluation tests: one small generated dataset per test session, and
scripted runs of the ``openai`` agent against the stub server of ``_openai_stub``."""

from __future__ import annotations

import asyncio
import atexit
import functools
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _openai_stub import StubServer, call, completion, episode_of, turn_of

from causaltrace.agents import make_agent
from causaltrace.datasets.generation import Job, run
from causaltrace.env import DatasetSource
from causaltrace.eval import evaluate

N_EPISODES = 6


@functools.cache
def dataset_dir() -> Path:
    """Six episodes of the small ads domain (4 sliced, 1 of them 2D), generated once."""
    root = Path(tempfile.mkdtemp(prefix="causaltrace-eval-tests-"))
    atexit.register(shutil.rmtree, root, True)
    out = root / "ds"
    job = Job.from_config(
        {
            "out_dir": str(out),
            "domain": {"name": "ads", "preset": "small"},
            "dataset": {
                "name": "evaltest",
                "split": "evaltest",
                "seed": 11,
                "n_episodes": N_EPISODES,
                "composition": {"kind": "quotas", "total": N_EPISODES, "sliced": 4, "two_d": 1},
                "shard_size": N_EPISODES,
                # as the committed splits allow: a segment cause with a bid twin near the
                # incident can take more than the default 40 in the small account
                "max_attempts": 400,
            },
        }
    )
    run(job, show_progress=False)
    return out


def answer_of(source: DatasetSource, episode: str) -> dict[str, str]:
    """The label's answer (read by the tests only, never by the agent)."""
    label = source.label(episode)
    return {"root_cause": label.cause, "slice": label.slice or ""}


def submit_call(source: DatasetSource, episode: str, **kwargs: Any) -> dict[str, Any]:
    return call("submit", answer_of(source, episode), **kwargs)


Script = Callable[[str, int, dict[str, Any]], Any]


def scripted(source: DatasetSource, script: Script) -> Callable[[dict[str, Any]], Any]:
    """A server handler: ``script(episode, turn, request)`` answers each request."""
    prompts = {source.prompt(ep): ep for ep in source.episode_ids}

    def handler(request: dict[str, Any]) -> Any:
        return script(episode_of(request, prompts), turn_of(request), request)

    return handler


def agent_config(server: StubServer, **overrides: Any) -> dict[str, Any]:
    config = {
        "name": "openai",
        "model": "stub-model",
        "base_url": server.base_url,
        "api_key": "test-key",
        "retries": 2,
        "backoff": 0.01,
        "max_backoff": 0.05,
        "timeout": 30.0,
    }
    config.update(overrides)
    return config


def run_openai(
    server: StubServer,
    source: DatasetSource,
    out: Path,
    episodes,
    *,
    env: dict[str, Any] | None = None,
    concurrency: int = 3,
    **agent_overrides,
):
    """One evaluation of the openai agent against ``server``."""
    agent = make_agent("openai", agent_config(server, **agent_overrides))
    return asyncio.run(
        evaluate(
            agent,
            source,
            out,
            concurrency=concurrency,
            seed=0,
            env_config=env or {"max_tool_calls": 30, "max_turns": 40},
            episodes=episodes,
            progress=False,
            n_boot=50,
        )
    )


def requests_of(server: StubServer, source: DatasetSource, episode: str) -> list[dict]:
    prompts = {source.prompt(ep): ep for ep in source.episode_ids}
    return [r for r in server.requests if episode_of(r, prompts) == episode]


__all__ = [
    "N_EPISODES",
    "StubServer",
    "agent_config",
    "answer_of",
    "call",
    "completion",
    "dataset_dir",
    "requests_of",
    "run_openai",
    "scripted",
    "submit_call",
]
