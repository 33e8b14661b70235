"""Shared pieces of the trainer tests: a small generated ads dataset, the training libraries
(required under CI, skipped elsewhere), and a scripted model server for verl's agent loop."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from causaltrace.generation import Job, run


def require(module: str):
    """Import a training library; CI (CAUSALTRACE_REQUIRE_TRAIN=1) fails instead of skipping,
    so a missing install step cannot turn the compatibility tests into skips."""
    if os.environ.get("CAUSALTRACE_REQUIRE_TRAIN") == "1":
        return importlib.import_module(module)
    return pytest.importorskip(module)


def small_dataset(out: Path, *, n: int = 6, seed: int = 5, name: str = "trainsmoke") -> Path:
    """Six verified episodes of the small ads preset (4 sliced, one 2-D)."""
    job = Job.from_config(
        {
            "out_dir": str(out),
            "domain": {"name": "ads", "preset": "small"},
            "dataset": {
                "name": name,
                "split": name,
                "seed": seed,
                "n_episodes": n,
                "composition": {"kind": "quotas", "total": n, "sliced": 4, "two_d": 1},
                "shard_size": 3,
            },
        }
    )
    run(job, show_progress=False)
    return out


def hermes_call(name: str, **arguments) -> str:
    """A Hermes-format tool call as Qwen models emit it, ending the assistant turn."""
    import json

    return (
        "<tool_call>\n"
        + json.dumps({"name": name, "arguments": arguments})
        + "\n</tool_call><|im_end|>"
    )
