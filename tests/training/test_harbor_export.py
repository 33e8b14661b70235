"""``causaltrace-export harbor`` (causaltrace.training.harbor): the task directories Harbor's
runner reads, and one task run the way the runner runs it, without Docker: the environment's
files where the Dockerfile puts them (``/app/data``), an agent's answer in ``/app/answer.json``,
then ``tests/`` uploaded to ``/tests`` and ``bash /tests/test.sh`` run, in a bubblewrap root
where those absolute paths exist, and the rewards read from ``/logs/verifier/reward.json`` as
Harbor's verifier reads them (a JSON object; its numeric fields; ``reward`` aggregated).
The reward equals causaltrace's own score of the same answer (harborframework.com/docs/tasks
is the contract; the ``harbor`` package is not on this machine's index)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from causaltrace.apps.export import main as export_main
from causaltrace.env import DatasetSource
from causaltrace.scoring import score_output

pytestmark = pytest.mark.sandbox

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "data" / "ads_test"
KEEP_OUT = {"app", "tests", "logs", "proc", "dev", "tmp"}


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    base = tmp_path_factory.mktemp("harbor")
    build = [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation"]
    subprocess.run([*build, "-q", "-w", str(base / "wheel")], check=True, capture_output=True)
    (wheel,) = (base / "wheel").glob("causaltrace-*.whl")
    where = ["--dataset", str(DATASET), "--out", str(base / "tasks"), "--wheel", str(wheel)]
    assert export_main(["harbor", *where, "--limit", "2"]) == 0
    return base / "tasks", wheel


def _sandbox_root_args() -> list[str]:
    """A bubblewrap root on tmpfs mirroring the host's top-level entries read-only, so that
    /app, /tests and /logs can be made in it (Harbor's container paths)."""
    args = ["--tmpfs", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for entry in sorted(Path("/").iterdir()):
        if entry.name in KEEP_OUT:
            continue
        if entry.is_symlink():
            args += ["--symlink", str(entry.readlink()), str(entry)]
        elif entry.is_dir():
            args += ["--ro-bind", str(entry), str(entry)]
    return args


def _run_like_harbor(task: Path, work: Path, answer: str | None) -> dict:
    """The trial: build (the Dockerfile's COPY), agent (writes the answer), verify (upload
    tests/, run test.sh, read the reward file)."""
    app, tests, logs = work / "app", work / "tests", work / "logs"
    shutil.copytree(task / "environment" / "data", app / "data")
    if answer is not None:
        (app / "answer.json").write_text(answer)
    shutil.copytree(task / "tests", tests)  # uploaded only now, after the agent
    (logs / "verifier").mkdir(parents=True)
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("bubblewrap is needed to give the test script Harbor's absolute paths")
    command = [bwrap, *_sandbox_root_args(), "--bind", str(app), "/app"]
    command += ["--bind", str(tests), "/tests", "--bind", str(logs), "/logs", "--chdir", "/app"]
    with (logs / "verifier" / "test-stdout.txt").open("w") as stdout:
        subprocess.run([*command, "bash", "/tests/test.sh"], stdout=stdout, timeout=120)
    parsed = json.loads((logs / "verifier" / "reward.json").read_text())
    assert isinstance(parsed, dict)
    return {k: v for k, v in parsed.items() if isinstance(v, int | float)}


def test_a_task_holds_what_harbor_reads_and_no_label_outside_its_tests(tasks):
    out, wheel = tasks
    source = DatasetSource(DATASET)
    names = sorted(p.name for p in out.iterdir())
    assert names == source.episode_ids[:2]
    for name in names:
        task = out / name
        config = tomllib.loads((task / "task.toml").read_text())
        assert config["environment"]["allow_internet"] is False
        assert config["metadata"]["episode_id"] == name
        assert config["verifier"]["timeout_sec"] > 0 and config["agent"]["timeout_sec"] > 0
        instruction = (task / "instruction.md").read_text()
        assert instruction.startswith(source.prompt(name).rstrip())
        assert "/app/answer.json" in instruction
        dockerfile = (task / "environment" / "Dockerfile").read_text()
        assert f"COPY {wheel.name} " in dockerfile and "COPY data/ /app/data/" in dockerfile
        assert (task / "environment" / wheel.name).read_bytes() == wheel.read_bytes()
        visible = source.visible_dir(name)
        assert sorted(p.name for p in (task / "environment" / "data").iterdir()) == sorted(
            p.name for p in visible.glob("*.parquet")
        )
        label = source.label(name)
        truth = json.loads((task / "tests" / "ground_truth.json").read_text())
        assert truth["label"]["cause"] == label.cause
        # The label's own words (its slice, its onset date) appear nowhere the agent can read.
        agent_side = [task / "instruction.md", task / "task.toml", task / "environment/Dockerfile"]
        for path in agent_side:
            text = path.read_text()
            assert "ground_truth" not in text and f'"{label.cause}"' not in text, path
            if label.slice:
                assert label.slice not in text.replace(source.prompt(name), ""), path


@pytest.mark.slow
def test_running_a_task_as_harbor_does_scores_the_answer_as_causaltrace_does(tasks, tmp_path):
    out, _ = tasks
    source = DatasetSource(DATASET)
    episode = source.episode_ids[0]
    label, space = source.label(episode), source.answer_space
    right = {"root_cause": label.cause, "slice": label.slice or ""}
    wrong_cause = next(c for c in space.causes if c != label.cause)
    answers = {
        "right": json.dumps(right),
        "wrong": json.dumps({"root_cause": wrong_cause, "slice": ""}),
        "garbled": "the cause is probably the budget",
        "missing": None,
    }
    rewards = {
        kind: _run_like_harbor(out / episode, tmp_path / kind, text)
        for kind, text in answers.items()
    }
    assert rewards["right"]["reward"] == pytest.approx(1.0)
    for kind in ("right", "wrong"):
        expected = score_output(json.loads(answers[kind]), label, space).score
        assert rewards[kind]["reward"] == pytest.approx(expected)
    assert rewards["wrong"]["reward"] < rewards["right"]["reward"]
    assert rewards["garbled"]["reward"] == 0.0 and rewards["garbled"]["parse_ok"] == 0.0
    assert rewards["missing"]["reward"] == 0.0
