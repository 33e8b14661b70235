"""Harbor tasks: one task directory per episode, for Harbor's runner and the trainers that read
its format (TRL, verifiers' ``HarborEnv``).

Harbor's task contract (harborframework.com/docs/tasks): ``instruction.md`` is what the agent
is told; ``environment/`` is the build context of the container it works in; ``tests/`` is
uploaded to ``/tests`` only after the agent finishes, and ``bash /tests/test.sh`` writes the
reward to ``/logs/verifier/reward.json`` (numeric fields; ``reward`` is the one Harbor
aggregates). Here:

- ``instruction.md``: the episode's prompt, and where the tables are and the answer goes (the
  agent works in a shell: ``/app/data/<table>.parquet``, ``/app/answer.json``).
- ``environment/``: a Dockerfile on ``python:3.11-slim`` that installs the causaltrace wheel
  given to the export (offline: it is copied into the context) and copies the episode's visible
  files; nothing of the label.
- ``tests/``: ``ground_truth.json`` (the label and answer space, as the RL exports store
  them), ``score.py`` (calls :func:`causaltrace.training.verl_reward.compute_score` on the
  answer file) and ``test.sh``. The agent never sees them: Harbor uploads them afterwards.
- ``task.toml``: timeouts, resources, no internet, and answer-free metadata (the dataset and
  split; never the cause).

    causaltrace-export harbor --dataset data/ads_test --out harbor/ --wheel dist/causaltrace-*.whl
"""

from __future__ import annotations

import shutil
from pathlib import Path

from causaltrace.core.files import atomic_write_text
from causaltrace.datasets.reading import DatasetSource
from causaltrace.errors import CausalTraceError
from causaltrace.training.records import dataset_records, ground_truth_json

APP = "/app"
ANSWER_FILE = f"{APP}/answer.json"

INSTRUCTION_TAIL = f"""

## Where things are

You work in a shell here: the sql and python tools above are duckdb and python3 over these
files, and there is no submit tool (the answer file below is the answer). The tables are Parquet
files, one per table, in `{APP}/data/` (`{APP}/data/<table>.parquet`);
Python 3 with duckdb, pandas and numpy is installed (e.g. `duckdb.sql("SELECT ... FROM
'{APP}/data/perf_daily.parquet'")`).

## Your answer

Write your answer as JSON to `{ANSWER_FILE}`: `{{"root_cause": "CAUSE", "slice": "dim=level"}}`
(the slice as described above; `""` where the cause takes none), or, where several causes may
be at work, `{{"causes": [{{"root_cause": ..., "slice": ...}}, ...]}}`. Only that file is scored.
"""

DOCKERFILE = """FROM python:3.11-slim
# The causaltrace wheel (copied into this build context by the export) brings duckdb, pandas,
# numpy and pyarrow; the verifier's score.py imports it. No network is needed after the build.
COPY {wheel} /tmp/{wheel}
RUN pip install --no-cache-dir /tmp/{wheel} && rm /tmp/{wheel}
COPY data/ {app}/data/
WORKDIR {app}
"""

TEST_SH = """#!/usr/bin/env bash
# Harbor runs this after the agent: it scores /app/answer.json against the ground truth that
# was uploaded with it, and writes the reward where Harbor's verifier reads it.
set -u
mkdir -p /logs/verifier
python3 /tests/score.py {answer} /tests/ground_truth.json /logs/verifier/reward.json
"""

SCORE_PY = '''"""Score an answer file with causaltrace's compute_score; write Harbor's reward.json."""

import json
import sys
from pathlib import Path

from causaltrace.training.verl_reward import compute_score

answer, ground_truth, out = (Path(p) for p in sys.argv[1:4])
text = answer.read_text(errors="replace") if answer.is_file() else ""
scores = compute_score("causaltrace", text, ground_truth.read_text())
rewards = {"reward": scores["score"], **{k: v for k, v in scores.items() if k != "score"}}
out.write_text(json.dumps(rewards, sort_keys=True))
print(json.dumps(rewards, sort_keys=True))
'''

TASK_TOML = """version = "1.0"

[metadata]
author_name = "causaltrace"
category = "root-cause-analysis"
tags = ["causaltrace", "{domain}", "{dataset}"]
dataset = "{dataset}"
split = "{split}"
episode_id = "{episode}"

[verifier]
timeout_sec = 120.0

[agent]
timeout_sec = {agent_timeout}

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 4096
storage_mb = 4096
allow_internet = false
"""


def export_harbor(
    dataset: str | Path,
    out: str | Path,
    wheel: str | Path,
    *,
    limit: int | None = None,
    cache_dir: str | Path | None = None,
    agent_timeout: float = 1800.0,
) -> dict[str, int]:
    """Write one Harbor task per episode of ``dataset`` under ``out/<episode_id>/``.

    Args:
        dataset: A generated dataset directory.
        out: The directory of the tasks (created).
        wheel: The causaltrace wheel each task's container installs (``pip wheel . --no-deps``).
        limit: The first N episodes only; all by default.
        cache_dir: Where a lazy split's episodes are rebuilt; the dataset's own by default.
        agent_timeout: The agent's time limit per task, in seconds.

    Returns:
        ``{"tasks": N}``.

    Raises:
        CausalTraceError: ``wheel`` is not a wheel file.
    """
    wheel = Path(wheel)
    if not (wheel.is_file() and wheel.suffix == ".whl"):
        raise CausalTraceError(f"{wheel}: not a wheel file (build one: pip wheel . --no-deps)")
    source = DatasetSource(dataset, cache_dir)
    episodes = source.episode_ids[:limit] if limit is not None else source.episode_ids
    out = Path(out)
    for record in dataset_records(source, episodes):
        task = out / record.episode_id
        _write_task(task, record, source, wheel, agent_timeout)
    return {"tasks": len(episodes)}


def _write_task(task: Path, record, source, wheel: Path, agent_timeout: float) -> None:
    (task / "environment" / "data").mkdir(parents=True, exist_ok=True)
    (task / "tests").mkdir(exist_ok=True)
    visible = source.visible_dir(record.episode_id)
    for path in sorted(visible.glob("*.parquet")):
        shutil.copyfile(path, task / "environment" / "data" / path.name)
    shutil.copyfile(wheel, task / "environment" / wheel.name)
    prompt = record.prompt[-1]["content"]
    atomic_write_text(task / "instruction.md", prompt.rstrip() + INSTRUCTION_TAIL)
    atomic_write_text(
        task / "environment" / "Dockerfile", DOCKERFILE.format(wheel=wheel.name, app=APP)
    )
    atomic_write_text(
        task / "tests" / "ground_truth.json", ground_truth_json(record.label, record.space)
    )
    atomic_write_text(task / "tests" / "score.py", SCORE_PY)
    atomic_write_text(task / "tests" / "test.sh", TEST_SH.format(answer=ANSWER_FILE))
    (task / "tests" / "test.sh").chmod(0o755)
    meta = record.metadata
    atomic_write_text(
        task / "task.toml",
        TASK_TOML.format(
            domain=_toml(str(source.domain.name)),
            dataset=_toml(str(meta.get("dataset", ""))),
            split=_toml(str(meta.get("split", ""))),
            episode=_toml(record.episode_id),
            agent_timeout=float(agent_timeout),
        ),
    )


def _toml(text: str) -> str:
    """A value for a basic TOML string (quotes and backslashes escaped)."""
    return text.replace("\\", "\\\\").replace('"', '\\"')
