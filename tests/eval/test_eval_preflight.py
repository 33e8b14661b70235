"""A model server that cannot be reached fails an evaluation in seconds, before anything is
written: the ``openai`` agent's preflight (one ``GET {base_url}/models``), and a run that stops
with episodes unrecorded leaves no report that could pass for a complete one."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("openai", reason="the openai agent's tests need the openai client")

from causaltrace.agents import make_agent
from causaltrace.agents.openai_agent import ModelServerUnavailable
from causaltrace.errors import CausalTraceError, RunFailure
from causaltrace.eval.harness import OUTPUT_FILES, RESULTS_FILE, RUN_FILE

ROOT = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ModelsServer:
    """Answers ``GET /v1/models`` with ``status`` and ``body``; records the paths asked."""

    def __init__(self, status: int, body: dict):
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                outer.paths.append(self.path)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def preflight(**config) -> None:
    asyncio.run(make_agent("openai", {"model": "m", **config}).preflight())


def test_the_app_fails_in_seconds_with_one_line_and_writes_no_report(tmp_path):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    out = tmp_path / "run"
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "causaltrace.apps.evaluate",
            "agent=openai",
            "agent.model=M",
            f"agent.base_url={url}",
            "domain=ads",
            "dataset=ads_test",
            f"dataset_dir={ROOT / 'data' / 'ads_test'}",
            f"out_dir={out}",
            "progress=false",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    elapsed = time.monotonic() - started
    assert elapsed < 15, f"took {elapsed:.1f} s"
    assert done.returncode == 1, done.stderr[-3000:]  # a RunFailure, not a user error (2)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith("causaltrace-eval: error: the chat server at "), lines[0]
    assert f"{url} cannot be reached (GET {url}/models: " in lines[0], lines[0]
    assert "test-000" not in done.stdout + done.stderr  # no episode id listed, none run
    written = [p for p in out.rglob("*") if ".hydra" not in p.parts] if out.exists() else []
    assert written == [], written
    for name in (*OUTPUT_FILES, RESULTS_FILE, RUN_FILE):
        assert not (out / name).exists()


def test_preflight_passes_a_server_that_answers_and_names_the_models_url():
    with ModelsServer(200, {"object": "list", "data": [{"id": "m"}]}) as server:
        preflight(base_url=server.base_url)
    assert server.paths == ["/v1/models"]
    with ModelsServer(404, {"error": {"message": "no route"}}) as server:
        preflight(base_url=server.base_url)  # up, without /models: the chat requests decide


def test_preflight_warns_of_a_model_the_server_does_not_list(caplog):
    with ModelsServer(200, {"object": "list", "data": [{"id": "other"}]}) as server:
        preflight(base_url=server.base_url)
    assert "agent.model 'm' is not among the models" in caplog.text and "other" in caplog.text


def test_preflight_refuses_a_refused_key():
    with (
        ModelsServer(401, {"error": {"message": "invalid api key"}}) as server,
        pytest.raises(ModelServerUnavailable, match="HTTP 401") as caught,
    ):
        preflight(base_url=server.base_url)
    assert isinstance(caught.value, RunFailure) and "API key" in str(caught.value)


def test_preflight_names_the_url_and_can_be_skipped():
    url = f"http://127.0.0.1:{closed_port()}/v1"
    started = time.monotonic()
    with pytest.raises(
        ModelServerUnavailable, match=re.escape(f"the chat server at {url} cannot be")
    ):
        preflight(base_url=url)
    assert time.monotonic() - started < 10
    preflight(base_url=url, preflight=False)  # no request at all
    with pytest.raises(CausalTraceError, match=r"agent\.preflight must be true or false"):
        make_agent("openai", {"model": "m", "preflight": "no"})
    with pytest.raises(CausalTraceError, match=r"agent\.preflight_timeout must be > 0"):
        make_agent("openai", {"model": "m", "preflight_timeout": 0})


@pytest.mark.sandbox
def test_a_run_that_stops_writes_no_report_and_drops_stale_ones(tmp_path):
    """With the preflight off, the server's absence stops the run at its first episode (the
    harness's abort): no report is written, and an earlier run's reports are removed."""
    from _eval_support import dataset_dir

    from causaltrace.env import DatasetSource
    from causaltrace.eval import evaluate

    source = DatasetSource(dataset_dir())
    url = f"http://127.0.0.1:{closed_port()}/v1"
    agent = make_agent(
        "openai", {"name": "openai", "model": "m", "base_url": url, "preflight": False}
    )
    agent.retries = 0
    out = tmp_path / "run"
    out.mkdir()
    for name in OUTPUT_FILES:
        (out / name).write_text("an earlier run's report")
    summary = asyncio.run(
        evaluate(agent, source, out, concurrency=1, progress=False, limit=3, n_boot=20)
    )
    assert summary.aborted and "cannot be reached" in summary.aborted
    assert summary.metrics is None and summary.records == [] and len(summary.failed) == 3
    assert [name for name in OUTPUT_FILES if (out / name).exists()] == []
    results = out / RESULTS_FILE
    assert not results.exists() or results.read_text().strip() == ""
