"""Workers forked from the fork server (tools/fork_server.py) and tables shared as Arrow IPC.

The isolation suites (test_tools_security.py, test_sandbox_isolation.py) run every attack with
forked workers too (their ``bwrap`` kind); this file checks what is specific to forking: each
forked worker is its own sandbox (namespaces, uid, session, /tmp, no view of other slots, no
capabilities), rollouts of one episode map one copy of its tables that no worker can change for
another, a dead fork server costs a call and not the episode and is restarted (a bounded number
of times), and the Python tool's DataFrames equal ``pd.read_parquet``.

Everything here runs as root (forks switch to random uids) and as a normal user (the server is
root of an unprivileged user namespace; each fork makes its own): ``scripts/nonroot-check.sh``
runs this file as a normal user.
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
from causaltrace.tools import fork_keeper as keeper_module
from causaltrace.tools.config import SandboxError
from causaltrace.tools.fork_keeper import ForkServerKeeper
from causaltrace.tools.forking import ForkedProcess
from causaltrace.tools.pool import process_tree
from causaltrace.tools.sandbox import SANDBOX_SLOTS

ROOT = os.geteuid() == 0

PROBE = f"""
import json, os
try:
    slots = os.listdir({SANDBOX_SLOTS!r})
except OSError as exc:
    slots = type(exc).__name__
open('/tmp/mark', 'w').write('x')
status = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)
print(json.dumps({{
    "uid": os.getuid(),
    "gid": os.getgid(),
    "pids": sorted(int(p) for p in os.listdir('/proc') if p.isdigit()),
    "tmp": sorted(os.listdir('/tmp')),
    "slots": slots,
    "episode": sorted(os.listdir('/episode')),
    "mounts": [l.split()[3] for l in open('/proc/self/mountinfo') if 'causaltrace-tools' in l],
    "session": [os.getsid(0), os.getpgid(0)],
    "userns": os.readlink('/proc/self/ns/user'),
    "uid_map": open('/proc/self/uid_map').read().split(),
    "caps": [status[k].strip() for k in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb')],
    "no_new_privs": status['NoNewPrivs'].strip(),
    "seccomp": status['Seccomp'].strip(),
    "dev": [bool(os.statvfs('/dev').f_flag & os.ST_RDONLY), open('/dev/null', 'w').write('x')],
}}))
"""


pytestmark = pytest.mark.sandbox


def forked_config(**overrides):
    return tools_config(sandbox="bwrap", fork_server="on", **overrides)


def nspid(pid: int) -> list[int]:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("NSpid:"):
                return [int(p) for p in line.split()[1:]]
    return []


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
    # Its own random unprivileged uid (and gid); the two differ.
    assert sa["uid"] >= 1 << 30 and sb["uid"] >= 1 << 30 and sa["uid"] != sb["uid"]
    assert sa["gid"] == sa["uid"] and sb["gid"] == sb["uid"]
    host_userns = os.readlink("/proc/self/ns/user")
    if ROOT:  # real root: the workers switched uid in the host's user namespace
        assert sa["userns"] == sb["userns"] == host_userns
    else:  # a user namespace of its own each, whose map holds only its uid
        assert len({sa["userns"], sb["userns"], host_userns}) == 3
        for seen in (sa, sb):
            assert seen["uid_map"] == [str(seen["uid"]), "0", "1"], seen["uid_map"]
    # A session and process group of its own (its supervisor, PID 1, leads them), no
    # capability of any kind, no_new_privs, the seccomp filter.
    for seen in (sa, sb):
        assert seen["session"] == [1, 1], seen["session"]
        assert seen["caps"] == ["0000000000000000"] * 5, seen["caps"]
        assert seen["no_new_privs"] == "1" and seen["seccomp"] == "2"
        # The server's /dev (one tmpfs for every fork) is read-only; its devices still work.
        assert seen["dev"] == [True, 1], seen["dev"]
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


def test_a_killed_fork_server_costs_one_call_and_is_restarted(tmp_path):
    """Killing the fork server ends the workers it forked: the live episode's next call says
    the server stopped (not memory), the episode goes on, ``runtime.forking`` is False until a
    new server runs, and then new workers are forked again."""
    episode = make_episode(tmp_path)

    async def main():
        # No warm workers: every worker below is started on demand, by whatever server runs.
        async with ToolRuntime(forked_config(warm_workers=0)) as runtime:
            server = runtime.launcher.fork_server
            async with runtime.episode(episode) as tools:
                await tools.python("x = 41")
                old_worker = tools._worker.proc
                os.kill(server.host_pid, signal.SIGKILL)  # the server alone
                await asyncio.wait_for(server.wait_stopped(), 30)
                during = runtime.forking
                lost = await tools.python("print(x + 1)")
                after = await tools.python("print(orders.shape)")
                sql = await tools.sql("SELECT count(*) AS n FROM orders")
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 120  # a bound against hanging, not a timing claim
            while not runtime.forking and loop.time() < deadline:
                await asyncio.sleep(0.05)
            restarted = runtime.launcher.fork_server
            async with runtime.episode(episode) as fresh:
                again = await fresh.python("print(orders.shape)")
                fresh_worker = fresh._worker.proc
            return (
                old_worker,
                during,
                lost,
                after,
                sql,
                runtime.forking,
                restarted is not server and restarted.alive,
                runtime.fork_server_restarts,
                again,
                fresh_worker,
            )

    (old, during, lost, after, sql, forking, new_server, restarts, again, fresh) = asyncio.run(
        main()
    )
    assert old.server_stopped  # it ended with its server, not on its own
    assert not during  # runtime.forking tells the truth while no server runs
    assert "the Python process stopped" in lost and "fork server" in lost, lost
    assert "memory" not in lost and "SIGKILL" not in lost, lost
    assert "variables from earlier calls are gone" in lost
    assert after.strip() == "(400, 5)" and "400" in sql  # the episode goes on
    assert forking and new_server and restarts == 1
    assert again.strip() == "(400, 5)" and isinstance(fresh, ForkedProcess)  # forked again


class _FakeServer:
    """Stands in for a ForkServer: alive until it dies."""

    def __init__(self) -> None:
        self.alive = True
        self._stopped = asyncio.Event()

    def die(self) -> None:
        self.alive = False
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    def stderr_tail(self) -> str:
        return "(test)"

    async def close(self) -> None:
        self.die()


def test_a_fork_server_that_keeps_dying_is_restarted_a_bounded_number_of_times(monkeypatch):
    """Each restart within the window waits twice as long as the one before; after ``limit``
    restarts the keeper gives up, and the launcher is left without a server (cold sandboxes)."""
    launcher = type("Launcher", (), {"name": "fake", "fork_server": None})()
    started: list[_FakeServer] = []
    delays: list[float] = []
    refreshed: list[int] = []
    real_sleep = asyncio.sleep

    async def recorded_sleep(delay, *args, **kwargs):
        if delay > 0:
            delays.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(keeper_module.asyncio, "sleep", recorded_sleep)

    async def main():
        async def start_server():
            server = _FakeServer()
            started.append(server)
            launcher.fork_server = server
            asyncio.get_running_loop().call_soon(server.die)  # a server that keeps dying
            return server

        keeper = ForkServerKeeper(
            launcher, start_server, lambda: refreshed.append(1), first_delay=0.5, limit=3
        )
        await keeper.start()
        await asyncio.wait_for(keeper._watch, 30)
        return keeper

    keeper = asyncio.run(main())
    assert len(started) == 4 and keeper.restarts == 3 and len(refreshed) == 3
    assert delays == [0.5, 1.0, 2.0]
    assert keeper.gave_up and not keeper.running and launcher.fork_server is None


def test_failed_restarts_count_against_the_limit_and_a_later_success_serves(monkeypatch):
    """A restart that fails is retried after the next delay; once one succeeds the new server
    is the launcher's and the pools are told to refill."""
    launcher = type("Launcher", (), {"name": "fake", "fork_server": None})()
    attempts: list[str] = []
    refreshed: list[int] = []
    real_sleep = asyncio.sleep

    async def no_wait(delay, *args, **kwargs):
        await real_sleep(0)

    monkeypatch.setattr(keeper_module.asyncio, "sleep", no_wait)

    async def main():
        async def start_server():
            if 1 <= len(attempts) <= 2:  # the first two restarts fail
                attempts.append("failed")
                raise SandboxError("cannot start (test)")
            attempts.append("ok")
            server = _FakeServer()
            launcher.fork_server = server
            return server

        keeper = ForkServerKeeper(launcher, start_server, lambda: refreshed.append(1), limit=5)
        await keeper.start()
        first = keeper.server
        first.die()
        for _ in range(1000):
            if keeper.running and keeper.server is not first:
                break
            await real_sleep(0)
        running, server = keeper.running, keeper.server
        await keeper.close()
        return first, running, server, keeper

    first, running, server, keeper = asyncio.run(main())
    assert attempts == ["ok", "failed", "failed", "ok"]
    assert running and server is not first and keeper.restarts == 1 and refreshed == [1]
    assert not keeper.gave_up and launcher.fork_server is None  # closed with the keeper


def test_the_fork_server_of_a_normal_user_runs_in_a_user_namespace_of_its_own(
    tmp_path, monkeypatch
):
    """Structurally, whoever runs this: started by a normal user, the server is root of an
    unprivileged user namespace with the capabilities a fork needs there (CAP_SETFCAP to map
    its root into each fork's own namespace), nesting allowed for its forks, which make a user
    namespace each (``userns``); started by root, it needs no user namespace."""
    import causaltrace.tools.sandbox as sandbox

    def server_args(euid: int) -> tuple[list[str], dict]:
        monkeypatch.setattr(sandbox.os, "geteuid", lambda: euid)
        launcher = sandbox.BwrapLauncher(tools_config(sandbox="bwrap"))
        spec = launcher.fork_server_spec(tmp_path, tmp_path)
        try:
            memfd = spec.pass_fds[-1]  # bwrap's options (--args)
            os.lseek(memfd, 0, os.SEEK_SET)
            args = os.read(memfd, 1 << 22).decode().split("\0")
        finally:
            spec.close()
        return args, json.loads(spec.argv[-1])

    args, settings = server_args(1000)
    assert "--unshare-user" in args and "--disable-userns" not in args
    assert args[args.index("--uid") + 1] == "0" and args[args.index("--gid") + 1] == "0"
    caps = {args[i + 1] for i, a in enumerate(args) if a == "--cap-add"}
    assert caps == {"CAP_SETUID", "CAP_SETGID", "CAP_SYS_ADMIN", "CAP_SETPCAP", "CAP_SETFCAP"}
    assert settings["userns"] is True and settings["seccomp"]
    args, settings = server_args(0)
    assert "--unshare-user" not in args and settings["userns"] is False


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


def test_a_fork_server_that_cannot_start_workers_is_dropped_or_refused(tmp_path, monkeypatch):
    """ "auto" falls back to one sandbox per worker when a forked worker cannot start (a kernel
    refusing a step of its sandbox); "on" refuses to start, naming the failure."""
    from causaltrace.tools import forking

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
