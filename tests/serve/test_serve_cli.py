"""``causaltrace serve``: every option documented in docs/cli.md, the options reaching the server
as given (and their defaults being the library's), bad values refused in one line, and the
command itself end to end: the bearer token file it writes (mode 0600), a client on the same
machine finding it, and the file removed on shutdown."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from causaltrace.cli import main
from causaltrace.serve import UnknownSession
from causaltrace.serve import http as serve_http
from causaltrace.serve.client import HttpHost
from causaltrace.serve.host import TOKEN_ENV, default_token_file
from causaltrace.serve.http import ServeLimits, SessionCaps

REPO = Path(__file__).resolve().parents[2]


def serve_options(capsys) -> list[str]:
    with pytest.raises(SystemExit) as done:
        main(["serve", "--help"])
    assert done.value.code == 0
    return sorted(set(re.findall(r"(--[a-z][a-z-]+)", capsys.readouterr().out)) - {"--help"})


def test_every_serve_option_is_in_the_cli_reference(capsys):
    options = serve_options(capsys)
    assert {"--token-file", "--docs", "--max-body-bytes", "--header-timeout"} <= set(options)
    page = (REPO / "docs" / "cli.md").read_text()
    missing = [option for option in options if f"`{option}" not in page]
    assert not missing, f"docs/cli.md does not mention {missing}"


@pytest.fixture
def recorded(monkeypatch) -> dict:
    """``serve`` replaced by a recorder: what the command would start the server with."""
    calls: dict = {}

    def record(host, port, **kwargs):
        calls.update(kwargs, host=host, port=port)

    monkeypatch.setattr(serve_http, "serve", record)
    return calls


def test_the_defaults_are_the_librarys(recorded):
    assert main(["serve"]) == 0
    assert recorded["limits"] == ServeLimits()
    assert recorded["caps"] == SessionCaps()
    assert recorded["docs"] is False and recorded["token_file"] is None


def test_the_options_reach_the_server(recorded, tmp_path):
    argv = ["serve", "--docs", "--token-file", str(tmp_path / "t")]
    argv += ["--max-body-bytes", "1000", "--body-timeout", "2", "--header-timeout", "3"]
    argv += ["--keep-alive-timeout", "4", "--max-connections", "5", "--cap-tool-calls", "6"]
    argv += ["--cap-turns", "7", "--cap-answer-chars", "8", "--cap-output-chars", "9"]
    argv += ["--cap-answers", "10"]
    assert main(argv) == 0
    assert recorded["docs"] is True and recorded["token_file"] == str(tmp_path / "t")
    assert recorded["limits"] == ServeLimits(1000, 2.0, 3.0, 4.0, 5)
    assert recorded["caps"] == SessionCaps(6, 7, 8, 9, 10)


def test_bad_limits_are_one_line_errors(recorded, capsys):
    for flag, value in (
        ("--max-body-bytes", "0"),
        ("--header-timeout", "-1"),
        ("--cap-tool-calls", "0"),
    ):
        assert main(["serve", flag, value]) == 2
    assert recorded == {}  # nothing started
    assert capsys.readouterr().err.strip().splitlines() == [
        "causaltrace: error: --max-body-bytes must be > 0, got 0",
        "causaltrace: error: --header-timeout must be > 0, got -1.0",
        "causaltrace: error: --cap-tool-calls must be > 0, got 0",
    ]


class ServeProcess:
    """``causaltrace serve --port 0`` in a child process; its stderr lines collected."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "causaltrace", "serve", "--port", "0", *args],
            env=env,
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip())

    def wait_for(self, pattern: str, seconds: float = 180) -> re.Match:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for line in list(self.lines):
                found = re.search(pattern, line)
                if found:
                    return found
            if self.proc.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"no line matching {pattern!r} in:\n" + "\n".join(self.lines))

    def wait_healthy(self, url: str, seconds: float = 180) -> None:
        deadline = time.monotonic() + seconds
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert self.proc.poll() is None, "\n".join(self.lines)
            assert time.monotonic() < deadline, "\n".join(self.lines)
            time.sleep(0.2)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.reader.join(5)


@pytest.mark.sandbox  # the server starts the tools' runtime in its lifespan
def test_the_command_writes_a_private_token_file_and_removes_it(tmp_path, tools_file, monkeypatch):
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    monkeypatch.setenv("XDG_CACHE_HOME", env["XDG_CACHE_HOME"])  # where this client looks
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    server = ServeProcess(env, "--tool-config", str(tools_file), "--log-level", "warning")
    try:
        port = int(server.wait_for(r"listening on http://127\.0\.0\.1:(\d+)").group(1))
        written = Path(server.wait_for(r"bearer token written to (\S+)").group(1))
        url = f"http://127.0.0.1:{port}"
        server.wait_healthy(url)
        assert written == default_token_file(port)
        assert stat.S_IMODE(written.stat().st_mode) == 0o600
        token = written.read_text().strip()
        assert len(token) >= 40 and not any(token in line for line in server.lines)

        async def through_the_default_file() -> None:
            async with HttpHost(url) as host:
                with pytest.raises(UnknownSession):  # past the token
                    await host.close_session("nope")

        asyncio.run(through_the_default_file())
        anonymous = httpx.delete(f"{url}/sessions/nope")
        docs = httpx.get(f"{url}/docs", headers={"Authorization": f"Bearer {token}"})
        assert anonymous.status_code == 401 and docs.status_code == 404
    finally:
        status = server.stop()
    assert status == 0, "\n".join(server.lines)
    assert not written.exists()  # removed on shutdown


@pytest.mark.sandbox
def test_the_command_takes_the_token_from_the_environment(tmp_path, tools_file):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    env[TOKEN_ENV] = "from-the-environment"
    server = ServeProcess(env, "--tool-config", str(tools_file), "--log-level", "warning")
    try:
        port = int(server.wait_for(r"listening on http://127\.0\.0\.1:(\d+)").group(1))
        server.wait_for(rf"bearer token from {TOKEN_ENV}")
        url = f"http://127.0.0.1:{port}"
        server.wait_healthy(url)
        right = httpx.delete(
            f"{url}/sessions/nope", headers={"Authorization": "Bearer from-the-environment"}
        )
        wrong = httpx.delete(f"{url}/sessions/nope", headers={"Authorization": "Bearer other"})
    finally:
        status = server.stop()
    assert right.status_code == 404 and wrong.status_code == 401
    assert status == 0, "\n".join(server.lines)
    assert not (tmp_path / "cache").exists()  # no file written


@pytest.fixture
def tools_file(tmp_path) -> Path:
    """The lightest tool runtime: no warm workers, no fork server (no session opens here)."""
    path = tmp_path / "tools.yaml"
    path.write_text("warm_workers: 0\nfork_server: 'off'\n")
    return path
