"""Warm Python workers: sandboxes started before any episode needs them.

A worker is one sandbox running ``python_worker.py`` with pandas, numpy, duckdb and pyarrow
already imported: forked from the launcher's fork server when the runtime runs one
(``forking.py``), else started as a sandbox of its own (:meth:`SandboxProcess._launch`). Its
episode directory is a private, empty *slot* on the host, bound read-only
into the sandbox at ``/episode`` when the sandbox starts; when an episode claims the worker, the
episode's visible files are hard-linked (or copied) into the slot and the worker is told to load
them. A worker serves exactly one episode and is then killed with its slot, so nothing an agent
leaves behind (files, variables, processes) reaches another episode. The pool keeps
``warm_workers`` idle workers and refills in the background, ``spawn_concurrency`` at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import platform
import shutil
import signal
import struct
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Generic, Self, TypeVar

from causaltrace.core import untrusted
from causaltrace.tools.config import SandboxError, ToolConfig
from causaltrace.tools.sandbox import Launcher

log = logging.getLogger("causaltrace.tools")
P = TypeVar("P", bound="SandboxProcess")

_HEADER = struct.Struct(">I")
# How often the host reads a running call's memory (seconds). Between two readings a sandbox
# can grow by what its processes touch in that time (about 2 GB/s per busy core: 0.1 GB per core
# at 0.05 s), which bounds how far past the limit it gets before it is stopped.
MEMORY_POLL = 0.05
_STDERR_TAIL = 8192
_SIGNAL_HINTS = {
    "SIGKILL": ": the kernel or the host stopped it, most likely for using too much memory",
    "SIGXCPU": ": the CPU time limit of the Python process was reached",
    "SIGXFSZ": ": the file size limit was reached",
    "SIGSEGV": ": it crashed",
    "SIGSYS": ": it made a system call the sandbox forbids",
}
# python_worker.EXIT_STRAY_THREADS: the worker could not stop threads a call left running.
_EXIT_HINTS = {
    86: ": the code left threads running that could not be stopped (threads do not outlive a call)",
}


class StderrTail:
    """The last bytes a process wrote to stderr (what an error about it quotes)."""

    def __init__(self) -> None:
        self._data = bytearray()

    async def drain(self, stream: asyncio.StreamReader | None) -> None:
        """Read ``stream`` to its end, keeping its last :data:`_STDERR_TAIL` bytes."""
        assert stream is not None
        with contextlib.suppress(Exception):
            while chunk := await stream.read(4096):
                self._data += chunk
                del self._data[:-_STDERR_TAIL]

    def text(self) -> str:
        return self._data.decode(errors="replace").strip()[-2000:] or "(no stderr)"


class WorkerDied(Exception):
    """The worker process ended (or broke the protocol) while a request was pending."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class SandboxProcess:
    """One sandboxed worker process, driven by length-prefixed JSON over its stdin and stdout.

    The Python tool's workers and the SQL tool's workers differ only in the program they run
    and in what their start-up greeting must say; subclasses set :attr:`kind`, :meth:`program`,
    :meth:`frame_limit` and :meth:`greeting_problem`. Everything else (the launch, the protocol,
    death reasons, killing the whole sandbox, memory accounting) is shared.
    """

    kind = "worker"
    slot_prefix = "w"
    signal_hints: ClassVar[dict[str, str]] = _SIGNAL_HINTS
    exit_hints: ClassVar[dict[int, str]] = _EXIT_HINTS
    _ids = itertools.count(1)

    def __init__(
        self, proc: asyncio.subprocess.Process, slot: Path, launcher: Launcher, max_frame: int
    ):
        self.proc = proc
        self.slot = slot
        self.launcher = launcher
        self.max_frame = max_frame
        self.info: dict[str, Any] = {}
        self.claimed = False
        self.loaded = False
        # Called once when the worker is closed (releases what its episode holds for it).
        self.on_close: list[Callable[[], None]] = []
        self._stderr = StderrTail()
        self._stderr_task = asyncio.create_task(self._stderr.drain(proc.stderr))
        self._lock = asyncio.Lock()
        # Set by hold_memory when it stopped the sandbox: what its processes held (bytes).
        self.memory_exceeded: int | None = None

    @classmethod
    def program(cls, launcher: Launcher, slot: Path, config: ToolConfig) -> list[str] | None:
        """What the sandboxed interpreter runs (None: the launcher's Python worker)."""
        return None

    @classmethod
    def frame_limit(cls, config: ToolConfig) -> int:
        """The largest message the worker may send (bytes); a larger one is a violation."""
        return 8 * config.python_max_output_chars + 65536

    @classmethod
    def greeting_problem(cls, launcher: Launcher, hello: dict[str, Any]) -> str | None:
        """Why a worker's greeting disqualifies it (None if it is fit to serve)."""
        if hello.get("error"):
            return str(hello["error"])
        if hello.get("python") != platform.python_version():
            return (
                f"it runs Python {hello.get('python')} with prefix {hello.get('prefix')!r}, not "
                f"this interpreter ({platform.python_version()} at {sys.prefix!r}); its standard "
                "library is not reachable in the sandbox"
            )
        if launcher.sandboxed and hello.get("generator_importable"):
            return (
                f"it can import {hello['generator_importable']}: the generator must not be "
                "reachable from agent code"
            )
        return None

    @property
    def episode_dir(self) -> Path:
        """The host directory whose contents the sandbox sees at its data directory."""
        return self.slot / "episode"

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None

    @classmethod
    async def start(cls, launcher: Launcher, slot_root: Path, config: ToolConfig) -> Self:
        slot = slot_root / f"{cls.slot_prefix}{next(cls._ids)}-{os.urandom(6).hex()}"
        slot.mkdir(mode=0o755)
        (slot / "episode").mkdir(mode=0o755)
        try:
            program = cls.program(launcher, slot, config)
            server = launcher.fork_server
            if server is not None and server.alive:
                proc = await server.spawn(launcher.worker_program(slot, program), slot / "episode")
            else:
                proc = await cls._launch(launcher, slot, program)
        except BaseException:
            shutil.rmtree(slot, ignore_errors=True)
            raise
        worker = cls(proc, slot, launcher, max_frame=cls.frame_limit(config))
        what = f"a {launcher.name} {cls.kind}"
        try:
            hello = await asyncio.wait_for(worker._receive(), config.worker_start_timeout)
        except (TimeoutError, WorkerDied) as exc:
            await worker.close()
            reason = "timed out" if isinstance(exc, TimeoutError) else exc.reason
            raise SandboxError(
                f"{what} failed to start ({reason}): {worker.stderr_tail()}"
            ) from None
        except BaseException:
            await worker.close()
            raise
        problem = cls.greeting_problem(launcher, hello)
        if problem:
            await worker.close()
            raise SandboxError(f"{what} failed to start: {problem}")
        worker.info = hello
        return worker

    @staticmethod
    async def _launch(
        launcher: Launcher, slot: Path, program: list[str] | None
    ) -> asyncio.subprocess.Process:
        """Start a worker in a sandbox of its own (no fork server)."""
        return await launcher.spec(slot, program).start()

    def stderr_tail(self) -> str:
        return self._stderr.text()

    async def _receive(self) -> dict[str, Any]:
        stdout = self.proc.stdout
        assert stdout is not None
        try:
            (size,) = _HEADER.unpack(await stdout.readexactly(_HEADER.size))
            if size > self.max_frame:
                raise WorkerDied(f"protocol violation: a {size}-byte message")
            message = untrusted.loads(await stdout.readexactly(size), "the worker's reply")
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            raise WorkerDied(await self._death_reason()) from exc
        except (ValueError, UnicodeDecodeError) as exc:
            raise WorkerDied(f"protocol violation: unreadable message ({exc})") from exc
        if not isinstance(message, dict):
            raise WorkerDied("protocol violation: message is not an object")
        return message

    async def _death_reason(self) -> str:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 2.0)
        code = self.proc.returncode
        if code is None:
            return "it closed its output"
        if getattr(self.proc, "server_stopped", False):  # forking.ForkedProcess
            return (
                "the fork server it was started from stopped, ending every worker it had "
                "started; a new one is being started"
            )
        # bwrap's init reports a worker killed by signal N as exit status 128 + N.
        number = -code if code < 0 else code - 128 if code > 128 else 0
        try:
            name = signal.Signals(number).name if number else ""
        except ValueError:
            name = ""
        if name:
            return f"killed by {name}" + self.signal_hints.get(name, "")
        return f"it exited with status {code}" + self.exit_hints.get(code, "")

    async def request(self, message: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        """Send one request and wait for its answer; raise WorkerDied or TimeoutError."""
        async with self._lock:
            if not self.alive:
                raise WorkerDied(await self._death_reason())
            request_id = next(self._ids)
            data = json.dumps({**message, "id": request_id}).encode()
            stdin = self.proc.stdin
            assert stdin is not None
            try:
                stdin.write(_HEADER.pack(len(data)) + data)
                await stdin.drain()
            except (ConnectionError, RuntimeError) as exc:
                raise WorkerDied(await self._death_reason()) from exc

            async def answer() -> dict[str, Any]:
                while True:  # skip anything agent code wrote to the channel itself
                    reply = await self._receive()
                    if reply.get("id") == request_id:
                        return reply

            return await asyncio.wait_for(answer(), timeout)

    def kill(self) -> None:
        """Kill the sandbox now (every process of it, :func:`kill_sandbox`); :meth:`close`
        cleans up."""
        kill_sandbox(self.proc)

    def pids(self) -> list[int]:
        """Host PIDs of the launcher and every process below it (for memory accounting)."""
        return process_tree(self.proc.pid)

    async def reap_strays(self, keep: int, wait: float = 2.0) -> list[int]:
        """Kill, from the host, every process below the sandbox's init except the one whose PID
        in the sandbox is ``keep`` (the process that answered the call), and wait up to
        ``wait`` seconds until they have stopped running (a killed busy loop still ran when the
        next call listed the sandbox's processes, on a loaded machine); returns their host PIDs.

        The worker reaps what a call started from inside (``python_worker``), but agent code
        can switch that off (patch ``os.kill``): spinning children then outlived the call and
        held memory across calls. Here nothing in the sandbox can stop it. ``keep`` comes from
        the worker's reply, which agent code can forge: naming another process only gets the
        REPL killed, and its sandbox ends with it (the init exits when the REPL dies).
        """
        if not self.launcher.sandboxed:
            return []
        init = next((p for p in process_tree(self.proc.pid) if namespace_pid(p) == 1), None)
        if init is None:
            return []
        killed = []
        for pid in process_tree(init)[1:]:
            if namespace_pid(pid) in (keep, None):
                continue
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        deadline = time.monotonic() + wait
        while any(map(running, killed)) and time.monotonic() < deadline:
            await asyncio.sleep(0.002)
        return killed

    def private_memory(self) -> int:
        """Memory the sandbox's processes hold together (bytes): each one's proportional share
        of its anonymous and shared-memory pages (``Pss_Anon`` + ``Pss_Shmem``), so that pages
        forks share copy-on-write count once. This is what ``RLIMIT_DATA`` bounds per process
        (file pages, such as the mapped tables, are the page cache's)."""
        return sum(map(private_pages, self.pids()))

    async def hold_memory(self, limit: int, interval: float = MEMORY_POLL) -> None:
        """Stop the sandbox once its processes hold more than ``limit`` bytes together (read
        every ``interval`` seconds until cancelled); :attr:`memory_exceeded` says how much.

        Each process is held to ``RLIMIT_DATA`` on its own, but a call can start up to
        ``max_processes`` of them: the outside review held 2.3-2.9 GB under a 2 GiB limit that
        way. The reading is the host's, from /proc: nothing in the sandbox can change it."""
        while self.alive:
            used = self.private_memory()
            if used > limit:
                self.memory_exceeded = used
                self.kill()
                return
            await asyncio.sleep(interval)

    def memory_pss(self) -> int:
        """Proportional set size (bytes) of the worker's process tree: shared pages split."""
        total = 0
        for pid in self.pids():
            with contextlib.suppress(OSError), open(f"/proc/{pid}/smaps_rollup") as handle:
                for line in handle:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
        return total

    async def close(self) -> None:
        """Kill the sandbox (every process of it, :func:`kill_sandbox`) and delete the slot."""
        self.kill()
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        # Wait for the exit and for both output pipes to reach end of file, so that asyncio
        # closes the transport now rather than when it is garbage-collected (maybe after its
        # event loop is gone).
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(self._stderr_task, 10.0)
        with contextlib.suppress(BaseException):
            assert self.proc.stdout is not None
            await asyncio.wait_for(self.proc.stdout.read(), 10.0)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 10.0)
        self._stderr_task.cancel()
        await asyncio.to_thread(shutil.rmtree, self.slot, True)
        callbacks, self.on_close = self.on_close, []
        for callback in callbacks:
            callback()


class WorkerProcess(SandboxProcess):
    """A Python tool worker (``python_worker.py``, the launcher's default program)."""


class WorkerPool(Generic[P]):
    """Keeps ``config.warm_workers`` started workers ready to be claimed by new episodes."""

    def __init__(
        self,
        launcher: Launcher,
        config: ToolConfig,
        slot_root: Path,
        process: type[P] = WorkerProcess,  # type: ignore[assignment]
    ):
        self.launcher = launcher
        self.config = config
        self.slot_root = slot_root
        self.process = process
        self._idle: deque[P] = deque()
        self._refills: set[asyncio.Task[None]] = set()
        self._closing: set[asyncio.Task[None]] = set()
        self._spawn_slots = asyncio.Semaphore(config.spawn_concurrency)
        self._ready = asyncio.Event()
        self._closed = False
        self.last_error: BaseException | None = None
        self.spawned = 0

    @property
    def idle(self) -> int:
        return len(self._idle)

    def start(self) -> None:
        self.refill()

    async def wait_warm(self, timeout: float | None = None) -> None:
        """Wait until the pool holds its target number of idle workers (for benchmarks)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while len(self._idle) < self.config.warm_workers:
            if self.last_error is not None and not self._refills:
                raise self.last_error
            self._ready.clear()
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            await asyncio.wait_for(self._ready.wait(), remaining)

    async def _spawn(self) -> P:
        async with self._spawn_slots:
            worker = await self.process.start(self.launcher, self.slot_root, self.config)
            self.spawned += 1
            return worker

    def refill(self) -> None:
        """Start workers in the background until ``warm_workers`` are idle or starting.

        :meth:`claim` does not refill by itself: the claimer calls this once its episode is
        loaded, so that starting a replacement does not compete for CPU with the start.
        """
        while not self._closed and len(self._idle) + len(self._refills) < self.config.warm_workers:
            task = asyncio.create_task(self._refill_one())
            self._refills.add(task)
            task.add_done_callback(self._refills.discard)

    async def _refill_one(self) -> None:
        try:
            worker = await self._spawn()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self.last_error = exc
            log.error("causaltrace.tools: could not start a warm %s: %s", self.process.kind, exc)
            self._ready.set()
            return
        self.last_error = None
        if self._closed:
            await worker.close()
            return
        self._idle.append(worker)
        self._ready.set()

    def prune(self) -> None:
        """Drop the idle workers that died (with the fork server that forked them), then
        refill: otherwise they would hold their places in the pool until claimed."""
        dead = [worker for worker in self._idle if not worker.alive]
        for worker in dead:
            self._idle.remove(worker)
            task = asyncio.get_running_loop().create_task(worker.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        self.refill()

    async def claim(self) -> P:
        """A started worker that has never served an episode (warm if one is idle)."""
        if self._closed:
            raise SandboxError(f"the {self.process.kind} pool is closed")
        while self._idle:
            worker = self._idle.popleft()
            if worker.alive:
                worker.claimed = True
                return worker
            await worker.close()
        worker = await self._spawn()
        worker.claimed = True
        return worker

    async def close(self) -> None:
        self._closed = True
        # Starts in flight are let finish (each within worker_start_timeout; a finished one sees
        # the pool closed and closes its worker): cancelling them mid-start left close()
        # waiting forever when a runtime was closed while still warming up.
        for task in list(self._refills):
            with contextlib.suppress(BaseException):
                await task
        while self._idle:
            await self._idle.popleft().close()
        for task in list(self._closing):
            with contextlib.suppress(BaseException):
                await task


def children(pid: int) -> list[int]:
    """Host PIDs of the children of ``pid`` (read from /proc; [] if it is gone)."""
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                out.extend(int(p) for p in handle.read().split())
    return out


def process_tree(root: int) -> list[int]:
    """Host PIDs of ``root`` and every process below it (read from /proc)."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children(pid))
    return out


def private_pages(pid: int) -> int:
    """``pid``'s proportional share of anonymous and shared-memory pages (bytes; 0 once it is
    gone). Where smaps_rollup cannot be read (a process that is not dumpable, read by a
    non-root user), its resident pages less its shared ones, file and shared memory (statm):
    anonymous pages a fork shares with its parent then count in both, the larger, safe side
    (shared memory is held by the sandbox's tmpfs sizes)."""
    fields = {"Pss_Anon:": 0, "Pss_Shmem:": 0}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                key, _, rest = line.partition(" ")
                if key in fields:
                    fields[key] = int(rest.split()[0]) * 1024
        return sum(fields.values())
    except (OSError, ValueError):
        pass
    try:
        with open(f"/proc/{pid}/statm") as handle:
            _, resident, shared, *_ = (int(v) for v in handle.read().split())
    except (OSError, ValueError):
        return 0
    return max(0, resident - shared) * os.sysconf("SC_PAGE_SIZE")


def namespace_pid(pid: int) -> int | None:
    """``pid``'s PID in its innermost PID namespace (the last ``NSpid`` of /proc; None if it is
    gone or unreadable)."""
    with contextlib.suppress(OSError, ValueError), open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    return None


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (a killed process that has stopped running but
    waits for its parent to collect it)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def kill_sandbox(proc: asyncio.subprocess.Process) -> None:
    """Kill a sandbox's launcher and every process below it, from the host.

    The worker is its PID namespace's init (bwrap ``--as-pid-1``): killing the launcher alone
    left the namespace alive with agent code still running in it (seen with a timed-out busy
    loop), re-parented to the host's init. Killing the init takes the whole namespace down.
    """
    if proc.returncode is not None:
        return
    below = process_tree(proc.pid)[1:]
    with contextlib.suppress(ProcessLookupError):
        proc.kill()  # the launcher, through asyncio (which reaps it)
    for pid in below:  # not our children: killing them reaps nothing
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
