"""Shared pieces of the trainer tests: a small generated ads dataset, the training libraries
(required under CI, skipped elsewhere), and a scripted model server for verl's agent loop."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest


def require(module: str):
    """Import a training library; CI (CAUSALTRACE_REQUIRE_TRAIN=1) fails instead of skipping,
    so a missing install step cannot turn the compatibility tests into skips."""
    if os.environ.get("CAUSALTRACE_REQUIRE_TRAIN") == "1":
        return importlib.import_module(module)
    return pytest.importorskip(module)


def small_dataset(out: Path, *, n: int = 6, seed: int = 5, name: str = "trainsmoke") -> Path:
    """Six verified episodes of the small ads preset (4 sliced, one 2-D)."""
    from causaltrace.training.smoke import small_split

    return small_split(out, name, n, seed, sliced=4, shard_size=3)


def hermes_call(name: str, **arguments) -> str:
    """A Hermes-format tool call as Qwen models emit it, ending the assistant turn."""
    import json

    return (
        "<tool_call>\n"
        + json.dumps({"name": name, "arguments": arguments})
        + "\n</tool_call><|im_end|>"
    )
