"""The python tool and the tool API: namespaces, output, limits, restarts, pool, wrappers."""

from __future__ import annotations

import asyncio
import json
import os
import time
import warnings

import pytest
from _tools_support import LABEL, make_episode, tools_config

from causaltrace.tools import (
    SandboxUnavailableError,
    SyncToolRuntime,
    ToolConfig,
    ToolError,
    ToolRuntime,
    open_tools,
    tool_schemas,
)
from causaltrace.tools import sandbox as sandbox_module
from causaltrace.tools.episode_data import EpisodeData
from causaltrace.tools.pool import WorkerProcess

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def runtime():
    rt = SyncToolRuntime(tools_config())
    yield rt
    rt.close()


@pytest.fixture(scope="module")
def episode_dir(tmp_path_factory):
    return make_episode(tmp_path_factory.mktemp("python"))


@pytest.fixture
def tools(runtime, episode_dir):
    with runtime.episode(episode_dir) as t:
        yield t


def test_runtime_uses_a_sandbox(runtime):
    assert runtime.runtime.sandbox in ("bwrap", "unshare")


def test_tables_are_preloaded_and_namespace_persists(tools):
    assert tools.tables == ("customers", "orders")
    assert tools.python("orders.shape") == "(400, 5)"
    assert tools.python("type(tables['customers']).__name__") == "'DataFrame'"
    assert "revenue" in tools.python("print(data_dictionary['orders'])")
    assert tools.python("total = orders.units.sum()\nn = 2") == "(no output)"
    assert tools.python("int(total) > 0, n") == "(True, 2)"
    assert "np.float64" in tools.python("np.mean([1.0, 2.0])")
    out = tools.python("duckdb.sql('SELECT count(*) AS n FROM orders').fetchall()")
    assert out == "[(400,)]"
    assert "0.84" in tools.python("import scipy.stats\nscipy.stats.norm.cdf(1.0)")
    # The table files are gone once loaded (their sizes follow their contents; see
    # test_tools_size_channel.py): the tables live in the namespace.
    assert sorted(
        json.loads(tools.python("import json, os; print(json.dumps(os.listdir('.')))"))
    ) == ["data_dictionary.json"]


def test_print_and_last_expression(tools):
    assert tools.python("print('a'); print('b', end='')\n1 + 1") == "a\nb\n2"
    assert tools.python("x = 3\nx") == "3"
    assert tools.python("None") == "(no output)"
    assert tools.python("import sys; sys.stderr.write('warn\\n'); 5") == "warn\n5"


def test_errors_are_tracebacks_of_the_cell_only(tools):
    out = tools.python("def f():\n    return 1 / 0\nf()")
    assert out.startswith("Traceback (most recent call last):")
    assert 'File "<cell-' in out and "ZeroDivisionError: division by zero" in out
    assert "python_worker" not in out
    out = tools.python("def broken(:")
    assert "SyntaxError" in out and "python_worker" not in out
    assert "SystemExit(3) ignored" in tools.python("import sys; sys.exit(3)")
    assert tools.python("orders.shape") == "(400, 5)"


def test_output_is_capped_and_says_so(tools):
    out = tools.python("print('x' * 100_000)")
    assert len(out) < 4000 + 200
    assert "[output truncated: showing the first 4000 of 100001 characters]" in out
    out = tools.python("for i in range(200_000): print(i)")
    assert "[output truncated" in out and len(out) < 4400
    out = tools.python("'y' * 50_000")
    assert "[output truncated: showing the first 4000 of 50002 characters]" in out
    out = tools.python("import os; os.write(1, b'z' * 1_000_000)")
    assert "[output truncated: showing the first 4000 of 1000008 characters]" in out
    assert tools.python("1") == "1"


def test_low_level_output_of_children_is_captured(tools):
    out = tools.python("import subprocess; subprocess.run(['echo', 'child says hi']).returncode")
    assert "child says hi" in out and out.endswith("0")


def test_timeout_kills_restarts_and_reloads(tools):
    tools.python("keep = 41")
    out = tools.python("while True:\n    pass")
    assert "still running after 4 s (time limit) and was stopped" in out
    assert "variables from earlier calls are gone" in out
    assert "NameError" in tools.python("keep")
    assert tools.python("orders.shape") == "(400, 5)"
    assert tools.tools.restarts == 1


def test_crash_restarts_the_namespace(tools):
    out = tools.python("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert "the Python process stopped" in out and "SIGSEGV" in out
    assert tools.python("orders.shape") == "(400, 5)"
    out = tools.python("import os; os._exit(7)")
    assert "exited with status 7" in out
    assert tools.python("1 + 1") == "2"


def test_call_dispatches_llm_tool_calls(tools):
    assert tools.call("python", json.dumps({"code": "2 * 21"})) == "42"
    assert "(1 row)" in tools.call("sql", {"query": "SELECT 1"})
    assert tools.call("python", "{not json").startswith(
        "Error: the arguments could not be read: not valid JSON"
    )
    assert tools.call("python", {"source": "1"}).startswith("Error: the python tool needs")
    assert tools.call("shell", {"cmd": "ls"}).startswith("Error: unknown tool 'shell'")


def test_schemas_are_flat_strings():
    schemas = tool_schemas()
    assert [s["function"]["name"] for s in schemas] == ["sql", "python"]
    for schema in schemas:
        assert schema["type"] == "function"
        params = schema["function"]["parameters"]
        assert params["type"] == "object" and params["required"]
        for prop in params["properties"].values():
            assert set(prop) <= {"type", "description", "enum"} and prop["type"] == "string"
    schemas[0]["function"]["name"] = "changed"
    assert tool_schemas(["sql"])[0]["function"]["name"] == "sql"
    with pytest.raises(KeyError, match="shell"):
        tool_schemas(["shell"])


def test_a_worker_serves_one_episode_then_dies(runtime, episode_dir):
    tools = runtime.episode(episode_dir)
    worker = tools.tools._worker
    slot = worker.slot
    assert (slot / "episode" / "data_dictionary.json").exists()
    assert not (slot / "episode" / "orders.parquet").exists()  # loaded, then taken out
    assert not (slot / "episode" / "labels.jsonl").exists()
    reply = runtime._run(worker.request({"op": "load"}, 10))
    assert reply == {
        "ok": False,
        "error": "this worker already serves an episode",
        "id": reply["id"],
        "pid": reply["pid"],  # the answering process, which the host keeps when it reaps
    }
    assert isinstance(reply["pid"], int) and reply["pid"] > 0
    tools.close()
    assert worker.proc.returncode is not None
    assert not slot.exists()
    with pytest.raises(ToolError, match="closed"):
        tools.python("1")


def test_many_episodes_run_concurrently(tmp_path):
    dirs = [make_episode(tmp_path, f"ep{i}", rows=100 + i, seed=i) for i in range(4)]

    async def main():
        async with ToolRuntime(tools_config(warm_workers=2)) as runtime:

            async def one(i, path):
                async with runtime.episode(path) as tools:
                    await tools.python(f"mine = {i}")
                    await asyncio.sleep(0.05)
                    shape = await tools.python("orders.shape[0], mine")
                    count = await tools.sql("SELECT count(*) AS n FROM orders")
                    return shape, count

            return await asyncio.gather(*(one(i, p) for i, p in enumerate(dirs)))

    results = asyncio.run(main())
    for i, (shape, count) in enumerate(results):
        assert shape == f"({100 + i}, {i})"
        assert f"{100 + i}" in count


def test_start_is_lazy_and_ready_reports_load_errors(tmp_path):
    visible = make_episode(tmp_path)
    (visible / "broken.parquet").write_bytes(b"this is not parquet")

    async def main():
        async with ToolRuntime(tools_config(warm_workers=0)) as runtime:
            tools = runtime.episode(visible)
            t0 = time.perf_counter()
            await tools.start()
            assert time.perf_counter() - t0 < 0.5  # no sandbox start, no table load awaited
            with pytest.raises(ToolError, match="broken"):
                await tools.ready()
            with pytest.raises(ToolError, match="could not load"):
                await tools.python("1")
            await tools.close()

    asyncio.run(main())


def test_open_episode_sync_wrapper(tmp_path):
    with open_tools(make_episode(tmp_path)) as tools:
        assert tools.python("len(orders)") == "400"
        assert "400" in tools.sql("SELECT count(*) FROM orders")


def test_no_sandbox_means_refusal_unless_opted_in(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox_module, "LAUNCHER_ENV", {"PATH": str(tmp_path)})  # no bwrap etc.
    with pytest.raises(SandboxUnavailableError, match="allow_unsandboxed=True"):
        sandbox_module.select_launcher(ToolConfig())
    with pytest.raises(ToolError, match="allow_unsandboxed"):
        ToolConfig(sandbox="none")
    with pytest.warns(RuntimeWarning, match="WITHOUT A SANDBOX"):
        launcher = sandbox_module.select_launcher(ToolConfig(allow_unsandboxed=True))
    assert launcher.name == "none" and not launcher.sandboxed


def test_unsandboxed_mode_still_runs_code(tmp_path):
    config = tools_config(sandbox="none", allow_unsandboxed=True, warm_workers=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with open_tools(make_episode(tmp_path), config) as tools:
            assert tools.python("orders.shape") == "(400, 5)"
            assert tools.tools.runtime.sandbox == "none"


def test_config_validation():
    with pytest.raises(ToolError, match="python_timeout"):
        ToolConfig(python_timeout=0)
    with pytest.raises(ToolError, match="causaltrace"):
        ToolConfig(sandbox_packages=("pandas", "causaltrace"))
    with pytest.raises(ToolError, match=r"ToolConfig: unknown key\(s\) \['nope'\]"):
        ToolConfig.from_mapping({"nope": 1})
    assert ToolConfig.from_mapping({"preload": ["numpy"]}).preload == ("numpy",)


def test_worker_protocol_refuses_unknown_ops(runtime, episode_dir):
    tools = runtime.episode(episode_dir)
    try:
        worker: WorkerProcess = tools.tools._worker
        reply = runtime._run(worker.request({"op": "shell"}, 10))
        assert reply["ok"] is False and "unknown op" in reply["error"]
        assert EpisodeData.from_dir(episode_dir).nbytes > 0
        assert LABEL not in json.dumps(worker.info)
        assert os.path.basename(worker.launcher.runtime.executable).startswith("python")
    finally:
        tools.close()
