"""The host side of the fork server: start it, ask it for workers, track how they end.

A :class:`ForkServer` is one sandbox running ``fork_server.py`` (see its docstring for what each
forked worker is given). :meth:`ForkServer.spawn` returns a :class:`ForkedProcess`, which
behaves like the ``asyncio.subprocess.Process`` of a worker started cold (``pid``,
``returncode``, ``wait``, ``kill`` and the three pipes), so the worker classes of ``pool.py``
drive either the same way. Memory accounting and killing work on host PIDs: the relay's host PID
is found from the server's children (their ``NSpid``) and held as a pidfd, so a kill can never
reach a recycled PID.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import random
import shutil
import signal
import socket
from pathlib import Path
from typing import Any

from causaltrace.tools.config import SandboxError, ToolConfig
from causaltrace.tools.pool import StderrTail, children

log = logging.getLogger("causaltrace.tools")

_MAX_MESSAGE = 1 << 16
# The relay's exit status when it could not build a worker's sandbox (fork_server.EXIT_SETUP).
EXIT_SETUP = 87
# What a worker's status reads as when its server died under it (the server's PID namespace
# ended, and every worker with it): killed by SIGKILL, as bwrap's init reports it. The worker
# also says so (:attr:`ForkedProcess.server_stopped`), so that nobody blames its memory use.
_SERVER_GONE = 128 + signal.SIGKILL


class ForkedProcess:
    """A worker forked by a :class:`ForkServer`, seen like an asyncio subprocess."""

    def __init__(
        self,
        exited: asyncio.Future[int],
        host_pid: int | None,
        stdin: asyncio.StreamWriter,
        stdout: asyncio.StreamReader,
        stderr: asyncio.StreamReader,
        server: ForkServer | None = None,
        server_pid: int = -1,
    ):
        self.pid = host_pid if host_pid is not None else -1
        self._server = server
        self._server_pid = server_pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self._pidfd: int | None = None
        if host_pid is not None:
            with contextlib.suppress(OSError, AttributeError):
                self._pidfd = os.pidfd_open(host_pid)
        self._exited = exited
        self._exited.add_done_callback(lambda _: self._close_pidfd())

    @property
    def returncode(self) -> int | None:
        return self._exited.result() if self._exited.done() else None

    @property
    def server_stopped(self) -> bool:
        """Whether this worker ended because its fork server stopped (taking every worker it
        forked with it), rather than on its own."""
        return self._server is not None and self._server_pid in self._server.lost

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    def kill(self) -> None:
        """SIGKILL the relay (its worker, PID 1 of its namespace, dies with it: pdeathsig)."""
        if self.returncode is not None:
            return
        with contextlib.suppress(OSError):
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            elif self.pid > 0:
                os.kill(self.pid, signal.SIGKILL)

    def _close_pidfd(self) -> None:
        fd, self._pidfd = self._pidfd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


class ForkServer:
    """One warm sandbox that forks sandboxed workers on request (``fork_server.py``)."""

    _ids = itertools.count(1)

    def __init__(self, proc: asyncio.subprocess.Process, control: socket.socket, slot: Path):
        self.proc = proc
        self.control = control
        self.slot = slot
        self.host_pid: int | None = None  # the server's own host PID (PID 1 of its namespace)
        # Relays (server PIDs) that were still running when the server stopped.
        self.lost: set[int] = set()
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._exits: dict[int, asyncio.Future[int]] = {}
        self._ready: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._stderr = StderrTail()
        self._send_lock = asyncio.Lock()
        self._reader = asyncio.create_task(self._read_messages())
        self._stderr_task = asyncio.create_task(self._stderr.drain(proc.stderr))

    @classmethod
    async def start(cls, launcher: Any, config: ToolConfig, slot_root: Path) -> ForkServer:
        """Start the server in a sandbox of ``launcher`` and wait until its libraries are in."""
        slot = slot_root / f"fork-{launcher.name}-{os.urandom(6).hex()}"
        slot.mkdir(mode=0o755)
        (slot / "episode").mkdir(mode=0o755)
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            spec = launcher.fork_server_spec(slot, slot_root)
            try:
                proc = await spec.start(stdin=child.fileno(), stdout=asyncio.subprocess.DEVNULL)
            finally:
                child.close()
        except BaseException:
            parent.close()
            shutil.rmtree(slot, ignore_errors=True)
            raise
        parent.setblocking(False)
        server = cls(proc, parent, slot)
        try:
            hello = await asyncio.wait_for(
                asyncio.shield(server._ready), config.worker_start_timeout
            )
            server.host_pid = cls._find_host_pid(int(hello["pid"]), root=proc.pid)
        except BaseException as exc:
            await server.close()
            if isinstance(exc, (TimeoutError, SandboxError)):
                raise SandboxError(
                    f"the {launcher.name} fork server failed to start: {exc or 'timed out'}; "
                    f"{server.stderr_tail()}"
                ) from None
            raise
        return server

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None and not self._reader.done()

    def stderr_tail(self) -> str:
        return self._stderr.text()

    async def wait_stopped(self) -> None:
        """Return once the server has stopped (its control channel closed)."""
        with contextlib.suppress(BaseException):
            await asyncio.shield(self._reader)

    def _exit_future(self, server_pid: int) -> asyncio.Future[int]:
        """Resolved with the exit status of the relay ``server_pid`` when the server reports it
        (or when the server itself is gone)."""
        future = asyncio.get_running_loop().create_future()
        self._exits[server_pid] = future
        return future

    async def _read_messages(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                data = await loop.sock_recv(self.control, _MAX_MESSAGE)
                if not data:
                    return
                message = json.loads(data)
                op = message.get("op")
                if op == "ready" and not self._ready.done():
                    self._ready.set_result(message)
                elif op == "exit":
                    future = self._exits.pop(int(message["pid"]), None)
                    if future is not None and not future.done():
                        future.set_result(int(message["status"]))
                elif op in ("spawned", "error"):
                    if op == "spawned":  # its exit future exists before any exit can be read
                        message["exited"] = self._exit_future(int(message["pid"]))
                    waiter = self._pending.pop(message.get("id"), None)
                    if waiter is not None and not waiter.done():
                        waiter.set_result(message)
        except (OSError, ValueError) as exc:
            log.warning("fork server: the control channel broke: %s", exc)
        finally:
            self._server_gone()

    def _server_gone(self) -> None:
        error = SandboxError(f"the fork server stopped: {self.stderr_tail()}")
        if not self._ready.done():
            self._ready.set_exception(error)
            self._ready.exception()  # retrieved: start() reports it
        for waiter in self._pending.values():
            if not waiter.done():
                waiter.set_exception(error)
        self._pending.clear()
        for server_pid, future in self._exits.items():
            if not future.done():
                self.lost.add(server_pid)
                future.set_result(_SERVER_GONE)
        self._exits.clear()

    async def spawn(self, program: list[str], episode_dir: Path) -> ForkedProcess:
        """Fork a worker running ``program`` (the worker script and its config) whose
        ``/episode`` is ``episode_dir``; raise :class:`SandboxError` if the server cannot."""
        if not self.alive:
            raise SandboxError(f"the fork server is not running: {self.stderr_tail()}")
        loop = asyncio.get_running_loop()
        request_id = next(self._ids)
        uid = random.randint(1 << 30, (1 << 31) - 2)  # sandbox.SANDBOX_UID_RANGE
        if episode_dir.parent.parent != self.slot.parent:
            raise SandboxError(f"{episode_dir} is not a slot of this fork server's runtime")
        message = json.dumps(
            {
                "op": "spawn",
                "id": request_id,
                "program": program,
                "uid": uid,
                "slot": episode_dir.parent.name,
            }
        )
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        ours = [stdin_w, stdout_r, stderr_r]
        theirs = [stdin_r, stdout_w, stderr_w]
        waiter = self._pending[request_id] = loop.create_future()
        try:
            async with self._send_lock:
                while True:
                    try:
                        socket.send_fds(self.control, [message.encode()], theirs)
                        break
                    except BlockingIOError:
                        await asyncio.sleep(0.001)
        except BaseException:
            self._pending.pop(request_id, None)
            for fd in ours:
                os.close(fd)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        try:
            reply = await waiter
        except BaseException:
            for fd in ours:
                os.close(fd)
            raise
        if reply["op"] != "spawned":
            for fd in ours:
                os.close(fd)
            raise SandboxError(f"the fork server could not start a worker: {reply.get('error')}")
        server_pid = int(reply["pid"])
        stdin = await _writer(loop, stdin_w)
        stdout = await _reader(loop, stdout_r)
        stderr = await _reader(loop, stderr_r)
        host_pid = self._find_host_pid(server_pid, root=self.host_pid)
        return ForkedProcess(reply["exited"], host_pid, stdin, stdout, stderr, self, server_pid)

    @staticmethod
    def _find_host_pid(server_pid: int, root: int | None) -> int | None:
        """The host PID of the process that is ``server_pid`` in the server's PID namespace:
        ``root`` itself, or one of its children, or one of theirs (bwrap's monitor sits between
        the launcher and the server)."""
        if root is None:
            return None
        level = [root]
        for _ in range(3):
            for pid in level:
                nspid = _nspid(pid)
                if len(nspid) >= 2 and nspid[-1] == server_pid:
                    return pid
            level = [c for pid in level for c in children(pid)]
        return None

    async def close(self) -> None:
        """Stop the server; its PID namespace ends, and every worker it forked with it."""
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        with contextlib.suppress(OSError):
            self.control.close()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(self._stderr_task, 10.0)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 10.0)
        self._reader.cancel()
        with contextlib.suppress(BaseException):
            await self._reader
        self._server_gone()
        await asyncio.to_thread(shutil.rmtree, self.slot, True)


def _nspid(pid: int) -> list[int]:
    """The PIDs of ``pid`` in each nested PID namespace, outermost first (``NSpid``)."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("NSpid:"):
                return [int(p) for p in line.split()[1:]]
    return []


async def _reader(loop: asyncio.AbstractEventLoop, fd: int) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=1 << 16, loop=loop)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(fd, "rb", 0)
    )
    return reader


async def _writer(loop: asyncio.AbstractEventLoop, fd: int) -> asyncio.StreamWriter:
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.streams.FlowControlMixin(loop=loop), os.fdopen(fd, "wb", 0)
    )
    return asyncio.StreamWriter(transport, protocol, None, loop)
