"""Issue 12, D9-D12: data integrity of re-runs, and what the commands say when the user errs.

D9: ``causaltrace-generate`` into a directory holding a dataset (or done shards) of another
config or generator refuses, naming each differing key with both values, and changes nothing.
D10-D12: every user error of ``causaltrace-generate``, ``-inspect``, ``-eval`` and ``-export``
is one line on stderr naming the culprit, with a non-zero exit and no traceback unless asked
(``--debug`` or ``HYDRA_FULL_ERROR=1``); damaged JSON files are named; an unreachable model
server stops the evaluation with a non-zero exit and records nothing, so a re-run retries.

Each test runs the real command in a subprocess, on a small dataset of the example domain.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from causaltrace.core.files import read_jsonl
from causaltrace.datasets.generation import Job, run
from causaltrace.errors import CausalTraceError


def json_load(path: Path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


SMALL = [
    "domain=example",
    "dataset=ads_smoke",
    "dataset.name=ex",
    "dataset.split=ex",
    "dataset.n_episodes=4",
    "dataset.shard_size=2",
    "dataset.composition={kind:prior}",
    "progress=false",
]


def command(module: str, *args: str, env: dict | None = None, timeout: float = 300):
    return subprocess.run(
        [sys.executable, "-m", f"causaltrace.apps.{module}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def generate(out: Path, *overrides: str):
    return command("generate", *SMALL, f"out_dir={out}", *overrides)


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".hydra" not in p.parts
    }


def one_line_error(done: subprocess.CompletedProcess, prog: str) -> str:
    """The command failed with exactly one line on stderr, ``<prog>: error: ...``."""
    assert done.returncode != 0, done.stdout[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith(f"{prog}: error: "), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gen") / "ds"
    done = generate(out)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


# -- D9: no mixing ----------------------------------------------------------------------------
@pytest.mark.slow
def test_changed_config_into_a_finished_dataset_refuses_and_names_the_keys(finished, tmp_path):
    out = tmp_path / "ds"
    shutil.copytree(finished, out)
    before = files(out)
    done = generate(out, "dataset.n_episodes=6", "dataset.seed=8")
    line = one_line_error(done, "causaltrace-generate")
    assert "dataset.n_episodes: recorded 4, now 6" in line, line
    assert "dataset.seed: recorded 7, now 8" in line, line
    assert "manifest.json" in line
    assert files(out) == before  # nothing written, nothing mixed


@pytest.mark.slow
def test_changed_config_into_done_shards_without_a_manifest_refuses(finished, tmp_path):
    out = tmp_path / "ds"
    shutil.copytree(finished, out)
    (out / "manifest.json").unlink()
    (out / "done" / "shard-00001.json").unlink()  # as if killed before the last shard
    before = files(out)
    done = generate(out, "dataset.seed=8", "verifier.check_alert=false")
    line = one_line_error(done, "causaltrace-generate")
    assert "shard-00000.json" in line and "dataset.seed: recorded 7, now 8" in line, line
    assert "verifier.check_alert: recorded true, now false" in line, line
    assert files(out) == before


@pytest.mark.slow
def test_same_config_resumes_and_a_finished_rerun_changes_nothing(finished, tmp_path):
    out = tmp_path / "ds"
    shutil.copytree(finished, out)
    before = files(out)
    assert generate(out).returncode == 0
    assert files(out) == before
    (out / "manifest.json").unlink()
    (out / "done" / "shard-00001.json").unlink()
    done = generate(out)
    assert done.returncode == 0, done.stderr[-2000:]
    assert files(out) == before


def test_done_records_and_manifest_state_the_config_and_generator(finished):
    manifest = json_load(finished / "manifest.json")
    record = json_load(finished / "done" / "shard-00000.json")
    assert record["generation"]["config"] == manifest["config"]
    assert record["generation"]["generator"] == manifest["generator"]
    assert set(manifest["generator"]) == {"package_version", "code_sha256", "libraries"}
    assert all("generation" not in shard for shard in manifest["shards"])  # stated once


def _half_done_copy(finished, tmp_path, monkeypatch):
    """A copy of the finished dataset with its manifest and second shard gone, and a job whose
    generator fingerprint differs from the recorded one (a refactor of the generator)."""
    out = tmp_path / "ds"
    shutil.copytree(finished, out)
    (out / "manifest.json").unlink()
    (out / "done" / "shard-00001.json").unlink()
    config = json_load(finished / "manifest.json")["config"]
    job = Job.from_config({"out_dir": str(out), **config})
    real = json_load(finished / "manifest.json")["generator"]
    monkeypatch.setattr(
        "causaltrace.datasets.job.generator_fingerprint",
        lambda name: {**real, "code_sha256": "0" * 64},
    )
    return out, job


def test_a_changed_generator_that_rebuilds_the_same_episodes_resumes(
    finished, tmp_path, monkeypatch
):
    """A dataset's identity is what it holds: a generator whose code hash differs but that
    rebuilds a sample of the done episodes byte for byte may finish the dataset, and finishes it
    with the same bytes."""
    out, job = _half_done_copy(finished, tmp_path, monkeypatch)
    run(job, show_progress=False)
    assert (out / "done" / "shard-00001.json").exists()
    for episode_file in (finished / "private" / "labels").iterdir():
        assert (out / "private" / "labels" / episode_file.name).read_bytes() == (
            episode_file.read_bytes()
        )
    # A finished dataset is not rewritten by a run of that generator either.
    manifest = (finished / "manifest.json").read_bytes()
    copy = tmp_path / "finished"
    shutil.copytree(finished, copy)
    run(
        Job.from_config({"out_dir": str(copy), **json_load(finished / "manifest.json")["config"]}),
        show_progress=False,
    )
    assert (copy / "manifest.json").read_bytes() == manifest


def test_a_changed_generator_that_rebuilds_differently_refuses(finished, tmp_path, monkeypatch):
    from dataclasses import replace

    from causaltrace.datasets import split_check
    from causaltrace.datasets.job import DatasetMismatchError

    out, job = _half_done_copy(finished, tmp_path, monkeypatch)
    real = split_check.build_episode

    def shifted(domain, spec, *args, **kwargs):  # a generator whose labels moved by a day
        episode = real(domain, spec, *args, **kwargs)
        return replace(episode, label=replace(episode.label, onset=episode.label.onset + 1))

    monkeypatch.setattr(split_check, "build_episode", shifted)
    with pytest.raises(
        DatasetMismatchError, match=r"rebuilds its episodes differently \(.*its label"
    ):
        run(job, show_progress=False)
    assert not (out / "done" / "shard-00001.json").exists()


# -- D10: damaged files are named -------------------------------------------------------------
@pytest.mark.slow
def test_a_damaged_done_record_is_named(finished, tmp_path):
    out = tmp_path / "ds"
    shutil.copytree(finished, out)
    damaged = out / "done" / "shard-00001.json"
    damaged.write_text(damaged.read_text()[:40])
    line = one_line_error(generate(out), "causaltrace-generate")
    assert str(damaged) in line and "not valid JSON" in line, line


def test_json_errors_name_the_file_and_line(tmp_path):
    from causaltrace.core.files import DataFileError, json_load

    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n{"b": \n')
    with pytest.raises(DataFileError, match=rf"{path}: line 2 is not valid JSON"):
        read_jsonl(path)
    path.write_text("{not json")
    with pytest.raises(DataFileError, match=rf"{path}: not valid JSON \(line 1, column 2"):
        json_load(path)
    with pytest.raises(DataFileError, match=rf"{tmp_path / 'nope.json'}: no such file"):
        json_load(tmp_path / "nope.json")
    assert issubclass(DataFileError, CausalTraceError)


# -- D11: one line per user error ------------------------------------------------------------
@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["dataset.n_episodes=abc"], "n_episodes must be an integer, got 'abc'"),
        (["dataset=nope"], "Could not find 'dataset/nope'; available: ads_"),
        (
            ["num_workers=two"],
            "num_workers: Value 'two' of type 'str' could not be converted to Integer",
        ),
        (["worker_index=3", "num_workers=2"], "worker_index 3 is not in [0, 2)"),
        (["executor=spark"], "executor must be 'local' or 'ray'"),
        (["nonexistent_key=1"], "nonexistent_key"),
        (["dataset.shard_size=0"], "must be >= 1"),
    ],
)
@pytest.mark.slow
def test_generate_user_errors_are_one_line(tmp_path, overrides, expected):
    line = one_line_error(generate(tmp_path / "ds", *overrides), "causaltrace-generate")
    assert expected in line, line


@pytest.mark.slow
def test_debug_and_hydra_full_error_show_the_traceback(tmp_path):
    done = generate(tmp_path / "ds", "dataset.n_episodes=abc", "--debug")
    assert done.returncode != 0 and "Traceback" in done.stderr
    done = command(
        "generate",
        *SMALL,
        f"out_dir={tmp_path / 'ds'}",
        "dataset.n_episodes=abc",
        env={"HYDRA_FULL_ERROR": "1"},
    )
    assert done.returncode != 0 and "Traceback" in done.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["{ds}", "example-ex-999999"],
            "has no episode 'example-ex-999999' (4 episodes: example-ex-000000 ... example-ex-000003)",
        ),
        (["{ds}/missing", "example-ex-000000"], "no such dataset directory"),
        (["{ds}/done", "example-ex-000000"], "is not a dataset directory"),
        (
            ["{ds}", "example-ex-000000", "--plot", "/proc/no/kpi.png"],
            "/proc/no/kpi.png: No such file",
        ),
        (["{ds}", "example-ex-000000", "--rows", "x"], None),  # argparse's own one-line usage error
    ],
)
@pytest.mark.slow
def test_inspect_user_errors_are_one_line(finished, args, expected):
    done = command("inspect", *(a.format(ds=finished) for a in args))
    if expected is None:
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert "invalid int value: 'x'" in done.stderr
        return
    line = one_line_error(done, "causaltrace-inspect")
    assert expected in line, line
    debug = command("inspect", *(a.format(ds=finished) for a in args), "--debug")
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def test_inspect_still_shows_an_episode(finished):
    done = command("inspect", str(finished), "example-ex-000001")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "== prompt" in done.stdout


def test_export_user_error_is_one_line(tmp_path):
    line = one_line_error(
        command("export", "sft", "--run", str(tmp_path), "--out", str(tmp_path / "o.jsonl")),
        "causaltrace-export",
    )
    assert f"{tmp_path} is not an evaluation run" in line


# -- D12: the evaluation app ---------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def evaluate(finished: Path, out: Path, *overrides: str):
    return command(
        "evaluate",
        f"dataset_dir={finished}",
        f"out_dir={out}",
        "progress=false",
        "n_boot=20",
        *overrides,
    )


@pytest.mark.slow
def test_eval_with_an_unreachable_server_fails_and_a_rerun_retries(finished, tmp_path):
    out = tmp_path / "run"
    url = f"http://127.0.0.1:{free_port()}/v1"
    args = ["agent=openai", "agent.model=m", f"agent.base_url={url}", "agent.retries=1"]
    args += ["agent.backoff=0.01", "concurrency=2"]
    done = evaluate(finished, out, *args)
    assert done.returncode == 1, done.stderr[-3000:]
    line = one_line_error(done, "causaltrace-eval")
    assert f"the chat server at {url} cannot be reached" in line, line
    assert "re-run the same command to retry" in line
    assert "cut off by a budget" not in done.stdout + done.stderr
    results = out / "results.jsonl"
    assert not results.exists() or results.read_text().strip() == ""
    assert not (out / "summary.md").exists() and not (out / "metrics.json").exists()
    again = evaluate(finished, out, *args)
    assert again.returncode == 1 and f"{url} cannot be reached" in again.stderr, again.stderr
    # Past the preflight (off), the first episode's request stops the run: nothing recorded,
    # no report, and a re-run resumes nothing.
    skip = [*args, "agent.preflight=false"]
    late = evaluate(finished, out, *skip)
    line = one_line_error(late, "causaltrace-eval")
    assert f"the chat server at {url} cannot be reached" in line, line
    assert "re-run the same command to retry" in line
    assert not (out / "summary.md").exists() and not (out / "report.html").exists()
    again = evaluate(finished, out, *skip)
    assert again.returncode == 1 and "resumed 0" in again.stdout, again.stdout


def test_eval_without_a_model_says_so(finished, tmp_path):
    line = one_line_error(evaluate(finished, tmp_path / "run", "agent=openai"), "causaltrace-eval")
    assert "agent.model is required and not set" in line, line
    assert not (tmp_path / "run" / "results.jsonl").exists()


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["concurrency=abc"],
            "concurrency: Value 'abc' of type 'str' could not be converted to Integer",
        ),
        (["concurrency=0"], "concurrency must be >= 1, got 0"),
        (["episodes=[example-ex-000000,nope]"], "no episode(s) ['nope']"),
        (["agent=nobody"], "Could not find 'agent/nobody'"),
        (["agent.name=nobody"], "unknown agent 'nobody'"),
        (["tools.sql_timeoutt=3"], "Could not override 'tools.sql_timeoutt'"),
        (["+tools.sql_timeoutt=3"], "ToolConfig: unknown key(s) ['sql_timeoutt']"),
    ],
)
def test_eval_user_errors_are_one_line(finished, tmp_path, overrides, expected):
    line = one_line_error(
        evaluate(finished, tmp_path / "run", "agent=random", *overrides), "causaltrace-eval"
    )
    assert expected in line, line


@pytest.mark.slow
def test_eval_names_a_damaged_run_file(finished, tmp_path):
    out = tmp_path / "run"
    done = evaluate(finished, out, "agent=random", "limit=1")
    assert done.returncode == 0, done.stderr[-3000:]
    (out / "run.json").write_text("{")
    line = one_line_error(evaluate(finished, out, "agent=random", "limit=1"), "causaltrace-eval")
    assert f"{out / 'run.json'}: not valid JSON" in line, line
    assert json.loads((out / "results.jsonl").read_text().splitlines()[0])["episode_id"]


def test_an_episode_ended_by_an_error_is_not_counted_as_cut_off_by_a_budget():
    from causaltrace.eval.harness import _counts

    records = [
        {"reason": "HTTP 500 from the chat server (after 3 attempt(s))", "error": "HTTP 500"},
        {"reason": "turn budget exhausted", "error": None},
        {"reason": "submitted", "error": None, "answer": {"root_cause": "X"}},
    ]
    counts = _counts(records, {})
    assert (counts["errors"], counts["truncated"], counts["no_answer"]) == (1, 1, 2)


def test_a_file_the_user_named_is_one_line_and_a_bug_keeps_its_traceback(capsys):
    from causaltrace.apps.errors import run_cli

    def missing_file(argv):
        with open("/proc/no/such/file"):
            return 0

    assert run_cli("prog", missing_file, []) == 2
    assert capsys.readouterr().err == "prog: error: /proc/no/such/file: No such file or directory\n"

    def bug(argv):
        return {}["missing"]

    with pytest.raises(KeyError):
        run_cli("prog", bug, [])


def test_a_random_eval_prints_no_traceback(finished, tmp_path):
    """Issue 42, item 8: an eval that succeeds writes nothing alarming to stderr (the reviewer
    saw "Task exception was never retrieved ... FileNotFoundError ... .duckdb...tmp" on 3 of 3
    random and openai runs): only the progress bar, which is off here."""
    done = evaluate(finished, tmp_path / "run", "agent=random", "concurrency=4")
    assert done.returncode == 0, done.stderr[-3000:]
    for alarm in ("Traceback", "Task exception was never retrieved", "Task was destroyed"):
        assert alarm not in done.stderr, done.stderr[-3000:]
    assert len(read_jsonl(tmp_path / "run" / "results.jsonl")) == 4


def test_malformed_yaml_is_one_line_that_names_the_file(tmp_path):
    """Issue 42, item 8: a config file the user wrote with a YAML error (40-111 lines of
    traceback before) is one line naming the file and the line, exit 2."""
    conf = tmp_path / "conf" / "dataset"
    conf.mkdir(parents=True)
    (conf / "broken.yaml").write_text("name: broken\nsplit: [1,\n", encoding="utf-8")
    done = command(
        "generate",
        f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
        "dataset=broken",
        f"out_dir={tmp_path / 'out'}",
    )
    line = one_line_error(done, "causaltrace-generate")
    assert done.returncode == 2
    assert "malformed YAML" in line and "broken.yaml" in line and "line 3" in line, line


def test_eval_without_the_openai_package_says_how_to_install_it(finished, tmp_path):
    """Issue 42, item 8: the openai agent where the openai package is missing (a 54-line
    traceback before) is one line with the install command, exit 2."""
    script = (
        "import sys\nsys.modules['openai'] = None  # as if it were not installed\n"
        "from causaltrace.apps.evaluate import main\n"
        f"sys.argv = ['causaltrace-eval', 'dataset_dir={finished}', "
        f"'out_dir={tmp_path / 'run'}', 'progress=false', 'agent=openai', "
        "'agent.model=m', 'agent.base_url=http://127.0.0.1:9/v1']\nmain()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    line = one_line_error(done, "causaltrace-eval")
    assert done.returncode == 2
    assert "pip install 'causaltrace[eval]'" in line, line
