"""Helpers shared by the tools tests: episode directories with secrets planted next to them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from causaltrace.tools import ToolConfig

# A label that must never appear in any tool output. It is written next to the episode
# directory (labels, manifest, seed file), into the host environment, and into a host variable.
LABEL = "LABEL-3f9c1e-root-cause-is-pricing-in-eu-mobile"
SEED = "generator-seed-918273645"


def make_episode(root: Path, name: str = "episode", rows: int = 400, seed: int = 0) -> Path:
    """An episode's visible directory under ``root`` with labels and a manifest beside it."""
    rng = np.random.default_rng(seed)
    visible = root / name / "visible"
    visible.mkdir(parents=True)
    orders = pd.DataFrame(
        {
            "day": pd.date_range("2026-01-01", periods=rows, freq="h").date.astype(str),
            "region": rng.choice(["us", "eu", "apac"], rows),
            "device": rng.choice(["mobile", "desktop"], rows),
            "revenue": rng.gamma(2.0, 50.0, rows).round(2),
            "units": rng.integers(1, 9, rows),
        }
    )
    customers = pd.DataFrame({"customer_id": np.arange(50), "segment": rng.choice(["a", "b"], 50)})
    orders.to_parquet(visible / "orders.parquet", index=False)
    customers.to_parquet(visible / "customers.parquet", index=False)
    dictionary = {"orders": {"revenue": "order revenue in USD"}, "customers": {}}
    (visible / "data_dictionary.json").write_text(json.dumps(dictionary))
    # Secrets beside (not inside) the visible directory.
    (root / name / "labels.jsonl").write_text(json.dumps({"label": LABEL, "seed": SEED}) + "\n")
    (root / name / "manifest.json").write_text(json.dumps({"episodes": [{"label": LABEL}]}))
    (root / "labels.jsonl").write_text(json.dumps({"label": LABEL}) + "\n")
    return visible


def copy_episode(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


# The sandbox set-ups every isolation test runs under: bwrap with workers forked from a fork
# server (as root, workers switch to random uids; as a normal user, the server is root of an
# unprivileged user namespace and each worker makes a user namespace of its own: run the suites
# as a normal user with scripts/nonroot-check.sh), bwrap with one cold sandbox per worker, and
# the unshare fallback.
SANDBOX_KINDS = {
    "bwrap": {"sandbox": "bwrap", "fork_server": "on"},
    "bwrap-cold": {"sandbox": "bwrap", "fork_server": "off"},
    "unshare": {"sandbox": "unshare"},
}


def tools_config(**overrides) -> ToolConfig:
    """Small, fast limits for tests (a short time limit keeps the runaway-code tests short)."""
    values = dict(
        python_timeout=4.0,
        sql_timeout=3.0,
        warm_workers=1,
        spawn_concurrency=2,
        memory_bytes=1536 * 1024 * 1024,
        max_processes=48,
        python_max_output_chars=4000,
        sql_max_rows=20,
        sql_max_chars=4000,
    )
    kind = overrides.pop("kind", None)
    if kind is not None:
        values.update(SANDBOX_KINDS[kind])
    values.update(overrides)
    return ToolConfig(**values)
