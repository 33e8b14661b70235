"""Workers forked from the fork server (tools/fork_server.py) and tables shared as Arrow IPC.

The isolation suites (test_tools_security.py, test_sandbox_isolation.py) run every attack with
forked workers too (their ``bwrap`` kind); this file checks what is specific to forking: each
forked worker is its own sandbox (namespaces, uid, /tmp, no view of other slots), rollouts of
one episode map one copy of its tables that no worker can change for another, a dead fork server
costs a call and not the episode, and the Python tool's DataFrames equal ``pd.read_parquet``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
from pathlib import Path

import pandas as pd
import pytest
from _tools_support import make_episode, tools_config

from causaltrace.tools import EpisodeData, ToolRuntime
from causaltrace.tools.config import SandboxUnavailableError
from causaltrace.tools.forking import ForkedProcess
from causaltrace.tools.pool import process_tree
from causaltrace.tools.sandbox import SANDBOX_SLOTS

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="the fork server needs real root")

PROBE = f"""
import json, os
try:
    slots = os.listdir({SANDBOX_SLOTS!r})
except OSError as exc:
    slots = type(exc).__name__
open('/tmp/mark', 'w').write('x')
print(json.dumps({{
    "uid": os.getuid(),
    "pids": sorted(int(p) for p in os.listdir('/proc') if p.isdigit()),
    "tmp": sorted(os.listdir('/tmp')),
    "slots": slots,
    "episode": sorted(os.listdir('/episode')),
    "mounts": [l.split()[3] for l in open('/proc/self/mountinfo') if 'causaltrace-tools' in l],
}}))
"""


def forked_config(**overrides):
    return tools_config(sandbox="bwrap", fork_server="on", **overrides)


def nspid(pid: int) -> list[int]:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("NSpid:"):
                return [int(p) for p in line.split()[1:]]
    return []


@needs_root
def test_each_forked_worker_is_a_sandbox_of_its_own(tmp_path):
    a_dir, b_dir = make_episode(tmp_path, "a"), make_episode(tmp_path, "b", seed=1)

    async def main():
        async with ToolRuntime(forked_config()) as runtime:
            assert runtime.forking
            async with runtime.episode(a_dir) as a, runtime.episode(b_dir) as b:
                seen = [json.loads(await tools.python(PROBE)) for tools in (a, b)]
                workers = [tools._worker for tools in (a, b)]
                trees = [[nspid(p) for p in process_tree(w.proc.pid)] for w in workers]
        return seen, workers, trees

    (sa, sb), workers, trees = asyncio.run(main())
    assert all(isinstance(w.proc, ForkedProcess) for w in workers)
    # A relay in the server's PID namespace, then the worker as PID 1 of a namespace of its
    # own, then its REPL as PID 2.
    for tree in trees:
        assert [len(n) for n in tree] == [2, 3, 3] and [n[-1] for n in tree[1:]] == [1, 2]
    # Its own random unprivileged uid; the two differ.
    assert sa["uid"] >= 1 << 30 and sb["uid"] >= 1 << 30 and sa["uid"] != sb["uid"]
    # Its own PID namespace: only its supervisor (1) and REPL (2) are there.
    assert sa["pids"] == [1, 2] and sb["pids"] == [1, 2]
    # Its own /tmp: each sees only the one mark it wrote itself.
    assert sa["tmp"] == ["mark"] and sb["tmp"] == ["mark"]
    # No view of the server's slots, nor of the other worker's slot.
    assert sa["slots"] in ([], "FileNotFoundError") and sb["slots"] in ([], "FileNotFoundError")
    # Every slot-root mount it can see is the server's empty one or its own slot.
    for seen, worker in ((sa, workers[0]), (sb, workers[1])):
        own = str(worker.slot / "episode")
        assert own in seen["mounts"]
        assert all(m == own or "/fork-bwrap-" in m for m in seen["mounts"]), seen["mounts"]
    # The tables were loaded and taken out of the slot; the data dictionary stays.
    assert sa["episode"] == sb["episode"] == ["data_dictionary.json"]


@needs_root
def test_rollouts_of_one_episode_share_one_read_only_copy_of_its_tables(tmp_path):
    """A GRPO group maps one Arrow copy of the tables; what one rollout writes (through
    pandas, or straight into the mapped memory with ctypes) reaches no other rollout and not
    the file."""
    episode = make_episode(tmp_path)
    original = pd.read_parquet(episode / "orders.parquet")
    poke = (
        "import ctypes, numpy as np\n"
        "a = orders['revenue'].to_numpy()\n"
        "where = [l.split()[5] for l in open('/proc/self/maps')\n"
        "         if int(l.split('-')[0], 16) <= a.ctypes.data < int(l.split()[0].split('-')[1], 16)]\n"
        "ctypes.memset(a.ctypes.data, 0, a.nbytes)\n"  # writes into the mapping itself
        "orders.loc[0, 'units'] = -7\n"
        "print(float(orders['revenue'].sum()), int(orders.loc[0, 'units']), where)"
    )
    read = "print(float(orders['revenue'].sum()), int(orders.loc[0, 'units']))"

    def mapped_arrow_files(pid: int) -> set[tuple[str, str]]:
        with open(f"/proc/{pid}/maps") as handle:
            return {
                (parts[4], parts[5])  # (inode, path)
                for parts in (line.split() for line in handle)
                if len(parts) > 5 and parts[5].endswith(".arrow")
            }

    async def main():
        runtime = ToolRuntime(forked_config())
        async with runtime, runtime.episode(episode) as a, runtime.episode(episode) as b:
            before = await b.python(read)
            poked = await a.python(poke)
            after = await b.python(read)
            again = await a.python(read)
            repls = [process_tree(t._worker.proc.pid)[-1] for t in (a, b)]
            maps = [mapped_arrow_files(pid) for pid in repls]
            arrow_dir = next(runtime.arrow_tables.root.iterdir())
            digest = {
                p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mode)
                for p in arrow_dir.iterdir()
            }
            builds = runtime.arrow_tables.builds
        return before, poked, after, again, maps, digest, builds

    before, poked, after, again, maps, digest, builds = asyncio.run(main())
    expected = f"{float(original['revenue'].sum())} {int(original.loc[0, 'units'])}"
    assert before.strip() == after.strip() == expected  # b never saw a's writes
    # The column a wrote into lay in the mapped file, and a kept its own writes.
    assert poked.strip() == "0.0 -7 ['/episode/orders.arrow']" and again.strip() == "0.0 -7"
    assert builds == 1  # one Arrow copy for the two rollouts
    assert maps[0] and maps[0] == maps[1]  # the same files (same inodes) in both
    assert all(mode & 0o222 == 0 for _, mode in digest.values())  # read-only files
    fresh = asyncio.run(_arrow_digest(episode))
    assert {k: v[0] for k, v in digest.items()} == fresh  # the file was never changed


async def _arrow_digest(episode: Path) -> dict[str, str]:
    """The Arrow files a fresh build writes for the episode (what an unchanged copy holds)."""
    from causaltrace.tools.shared_tables import build_arrow_tables

    target = Path(f"{episode}.arrow-check")
    await asyncio.to_thread(build_arrow_tables, EpisodeData.from_dir(episode), target)
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in target.iterdir()}


@needs_root
def test_a_dead_fork_server_costs_one_call_not_the_episode(tmp_path):
    episode = make_episode(tmp_path)

    async def main():
        async with ToolRuntime(forked_config()) as runtime:
            server = runtime.launcher.fork_server
            async with runtime.episode(episode) as tools:
                await tools.python("x = 41")
                for pid in reversed(process_tree(server.proc.pid)):
                    os.kill(pid, signal.SIGKILL)  # the server, and every worker it forked
                await asyncio.wait_for(server.proc.wait(), 10)
                lost = await tools.python("print(x + 1)")
                after = await tools.python("print(orders.shape)")
                sql = await tools.sql("SELECT count(*) AS n FROM orders")
                cold = tools._worker.proc
            return server.alive, lost, after, sql, cold

    alive, lost, after, sql, cold = asyncio.run(main())
    assert not alive
    assert "the Python process stopped" in lost and "SIGKILL" in lost, lost
    assert after.strip() == "(400, 5)"  # restarted in a sandbox of its own
    assert not isinstance(cold, ForkedProcess)
    assert "400" in sql


def test_without_root_the_fork_server_is_refused_by_name_or_skipped(tmp_path, monkeypatch):
    """``fork_server="on"`` needs real root and says so; ``"auto"`` then starts one sandbox
    per worker (the tools still work)."""
    import causaltrace.tools.sandbox as sandbox

    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    launcher = sandbox.BwrapLauncher(tools_config(sandbox="bwrap"))
    with pytest.raises(SandboxUnavailableError, match="needs real root"):
        launcher.fork_server_spec(tmp_path, tmp_path)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_python_tool_tables_equal_read_parquet_on_default_ads_episodes(tmp_path, seed):
    """Property, on the default ads configuration over three seeds: every table the Python
    tool holds (mapped from Arrow IPC) equals ``pd.read_parquet`` of the episode's file in
    dtypes, index and values, and is writable the way a read_parquet frame is."""
    from causaltrace.datasets.generation import Job, run

    run(
        Job.from_config(
            {
                "out_dir": str(tmp_path),
                "domain": {"name": "ads"},
                "dataset": {"name": "fs", "split": "fs", "seed": seed, "n_episodes": 1},
            }
        ),
        show_progress=False,
    )
    [visible] = [p.parent for p in tmp_path.rglob("data_dictionary.json") if "public" in p.parts]
    data = EpisodeData.from_dir(visible)
    check = (
        "import hashlib, pandas as pd\n"
        "out = {}\n"
        "for name, df in sorted(tables.items()):\n"
        "    h = pd.util.hash_pandas_object(df, index=True).values.tobytes()\n"
        "    out[name] = [hashlib.sha256(h).hexdigest(), [str(t) for t in df.dtypes], list(df.columns)]\n"
        "num = [c for c in perf_daily.columns if perf_daily[c].dtype.kind in 'if']\n"
        "perf_daily.loc[0, num[0]] = 0\n"
        "print(json.dumps(out))"
    )

    async def main():
        async with ToolRuntime(tools_config()) as runtime, runtime.episode(visible) as tools:
            return await tools.python("import json\n" + check)

    seen = json.loads(asyncio.run(main()))
    expected = {}
    for name, path in sorted(data.tables.items()):
        df = pd.read_parquet(path)
        h = pd.util.hash_pandas_object(df, index=True).values.tobytes()
        expected[name] = [
            hashlib.sha256(h).hexdigest(),
            [str(t) for t in df.dtypes],
            list(df.columns),
        ]
    assert seen == expected


@needs_root
def test_a_fork_server_that_cannot_start_workers_is_dropped_or_refused(tmp_path, monkeypatch):
    """ "auto" falls back to one sandbox per worker when a forked worker cannot start (a kernel
    refusing a step of its sandbox); "on" refuses to start, naming the failure."""
    from causaltrace.tools import forking
    from causaltrace.tools.config import SandboxError

    async def refuse(self, program, episode_dir):
        raise SandboxError(
            "the fork server could not start a worker: unshare: Operation not permitted"
        )

    monkeypatch.setattr(forking.ForkServer, "spawn", refuse)
    episode = make_episode(tmp_path)

    async def auto():
        runtime = ToolRuntime(tools_config(sandbox="bwrap", fork_server="auto"))
        async with runtime, runtime.episode(episode) as tools:
            return runtime.forking, await tools.python("print(orders.shape)")

    async def on():
        async with ToolRuntime(forked_config()):
            pass

    forking_used, out = asyncio.run(auto())
    assert not forking_used and out.strip() == "(400, 5)"
    with pytest.raises(SandboxError, match="Operation not permitted"):
        asyncio.run(on())


@needs_root
def test_a_fork_whose_sandbox_cannot_be_built_ends_with_a_named_status(tmp_path):
    """A relay that cannot build its worker's sandbox (here: the slot has no episode directory
    to bind) exits with EXIT_SETUP, says why on the worker's stderr, and the host learns the
    status however soon the process ends."""
    from causaltrace.tools.forking import EXIT_SETUP

    async def main():
        async with ToolRuntime(forked_config()) as runtime:
            server, launcher = runtime.launcher.fork_server, runtime.launcher
            slot = runtime._slot_root / "w-missing-episode"
            slot.mkdir()
            proc = await server.spawn(launcher.worker_program(slot), slot / "episode")
            status = await asyncio.wait_for(proc.wait(), 30)
            stderr = await asyncio.wait_for(proc.stderr.read(), 30)
            return status, stderr.decode()

    status, stderr = asyncio.run(main())
    assert status == EXIT_SETUP
    assert "cannot build the sandbox" in stderr and "mount /episode" in stderr, stderr
