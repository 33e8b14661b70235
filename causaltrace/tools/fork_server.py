"""The fork server (zygote) of sandboxed workers: import once, fork a sandbox per worker.

A cold worker is a new interpreter that imports pandas, NumPy, SciPy, PyArrow and DuckDB: about
a second of CPU and 50 MB of private memory, paid again for every rollout. This program runs
once per tool runtime, inside a sandbox built by the same launcher as a worker (the same
read-only root, the same package view, no network), imports the worker programs and their
libraries, and then, on request, forks a worker that shares those pages copy-on-write.

Every forked worker is still a sandbox of its own before any of its code runs:

* new mount, PID, IPC, UTS and network namespaces (``unshare``), so it sees only its own
  processes (a fresh ``/proc``), its own ``/tmp`` and ``/dev/shm`` (fresh tmpfs), no network and
  only its own episode at ``/episode``: the server sees the tool runtime's slot directories
  (read-only, at ``settings["slots"]``); the worker binds its own at ``/episode`` and unmounts
  the rest from its namespace before anything else runs;
* every file descriptor but its own pipes closed, and a pseudo-terminal instance of its own;
* a session (and process group) of its own, so that a signal sent to "my process group"
  (``kill(0, ...)``) reaches its own processes only, never the server or another worker;
* a random unprivileged uid chosen by the host (so ``RLIMIT_NPROC`` counts that sandbox alone),
  every capability dropped (bounding set too), ``no_new_privs``. As real root (the server runs
  without a user namespace) the worker switches to that uid, with no supplementary groups. As
  a normal user (the server is root of an unprivileged user namespace, ``settings["userns"]``)
  it makes a user namespace of its own whose uid map has that one uid, mapped to the server's;
  the namespaces made before it (mount, PID, network...) belong to the server's user namespace,
  so the worker holds no capability over them even before it drops its own, and it can create
  no further user namespace (``user.max_user_namespaces`` is 0 in its own);
* the seccomp filter of the launcher (``sandbox.seccomp_filter``), installed last because it
  refuses the namespace and mount calls above;
* its own resource limits, set by the worker program itself (``worker_protocol.apply_limits``).

The first forked process (the *relay*) makes the namespaces and forks the worker proper, which is
PID 1 of the new PID namespace (as under ``bwrap --as-pid-1``); the relay waits for it and exits
with its status (128 + N for signal N, as bwrap's init reports it), so that the server, which
reaps the relay, can tell the host how the worker ended. Killing the relay's PID 1 ends the PID
namespace and every process in it.

Protocol with the host: a ``SOCK_SEQPACKET`` socket on fd 0. The host sends ``{"op": "spawn",
"id", "program", "uid", "slot"}`` with three descriptors (the worker's stdin, stdout and
stderr); the server answers ``{"op": "spawned", "id", "pid"}``
(the relay's PID in the server's namespace) or ``{"op": "error", "id", "error"}``, and later
``{"op": "exit", "pid", "status"}`` when the relay ends. This file imports only the standard
library and the worker programs bound beside it; it never runs agent code and never reads the
episode's files.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import python_worker
import sql_worker

del sys.path[0]

PROGRAMS = {"python_worker.py": python_worker, "sql_worker.py": sql_worker}
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_SECCOMP, PR_CAPBSET_DROP, PR_SET_SECUREBITS = 1, 22, 24, 28
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
SECCOMP_MODE_FILTER = 2
MNT_DETACH = 2
CLONE_NEWUSER = 0x10000000
# SECBIT_NOROOT, locked, and the locks of SECBIT_NO_SETUID_FIXUP and SECBIT_KEEP_CAPS (both
# off): changing uid clears the capabilities, and uid 0 could never regain them.
SECUREBITS = 0x01 | 0x02 | 0x08 | 0x20
MAX_MESSAGE = 1 << 20
MAX_FD = 1 << 20  # every descriptor above 2 is closed in a fork (close_range: no loop)
_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    """A step of building a worker's sandbox failed; the relay exits with EXIT_SETUP."""


EXIT_SETUP = 87


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32)]
    _fields_ += [("inheritable", ctypes.c_uint32)]


def _check(result: int, what: str) -> None:
    if result != 0:
        raise SetupError(f"{what}: {os.strerror(ctypes.get_errno())}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = ""):
    _check(
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def _make_namespaces(slot: str, slots: str, tmp_bytes: int) -> None:
    """In the relay: new namespaces, a private mount tree, its own episode only, a fresh /tmp.

    ``slots`` (every worker's slot, bound read-only into the server) is unmounted from the new
    mount namespace once the worker's own slot is bound at /episode.
    """
    if not slot or "/" in slot or slot in (".", ".."):
        raise SetupError(f"bad slot name {slot!r}")
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET
    _check(_libc.unshare(flags), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount(f"{slots}/{slot}/episode", "/episode", None, MS_BIND)
    _remount_read_only("/episode", MS_NOSUID | MS_NODEV)
    _check(_libc.umount2(slots.encode(), MNT_DETACH), f"umount {slots}")
    if os.listdir(slots):
        raise SetupError(f"{slots} is still visible")
    for target in ("/tmp", "/dev/shm"):
        _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={tmp_bytes}")
    # A pseudo-terminal instance of its own, as bwrap gives each sandbox (/dev/ptmx -> pts/ptmx).
    _mount(
        "devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620"
    )
    # /dev is the server's tmpfs (bwrap's --dev), one for every fork: read-only here, or a
    # worker that may write to it (as a normal user's, whose uid owns it) would leave files
    # there for the others. Its device nodes (bound files) still read and write.
    _remount_read_only("/dev", MS_NOSUID)


def _remount_read_only(target: str, flags: int = 0) -> None:
    """Bind-remount the mount at ``target`` read-only with ``flags``, keeping the nosuid,
    nodev and noexec it has: in a user namespace a host mount's flags are locked."""
    have = os.statvfs(target).f_flag
    for st_flag, ms_flag in (
        (os.ST_NOSUID, MS_NOSUID),
        (os.ST_NODEV, MS_NODEV),
        (os.ST_NOEXEC, MS_NOEXEC),
    ):
        if have & st_flag:
            flags |= ms_flag
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)


def _drop_privileges(uid: int, seccomp: bytes | None, userns: bool) -> None:
    """In the worker (PID 1 of its namespace): fresh /proc, a session of its own, then a nobody
    with no way back (in a user namespace of its own when ``userns``)."""
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chdir("/episode")
    os.setsid()  # kill(0, ...) from agent code reaches this sandbox's processes only
    if userns:
        _own_user_namespace(uid)
    for cap in range(64):  # stops at the first number this kernel does not know
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient")
    _check(_libc.prctl(PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0), "securebits")
    if not userns:  # a user namespace's groups cannot be changed (setgroups is denied there)
        os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()  # _LINUX_CAPABILITY_VERSION_3
    _check(_libc.capset(ctypes.byref(header), data), "capset")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    # Last of the credential changes: each of them clears the parent-death signal.
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
    if seccomp is not None:
        prog = _Prog(len(seccomp) // 8, seccomp)
        _check(
            _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp"
        )


def _own_user_namespace(uid: int) -> None:
    """A user namespace of this worker's own, where it is ``uid`` (and gid ``uid``): the only
    id of its map, standing for the server's id in the parent namespace (an unprivileged
    server has only the one). The worker keeps the capabilities of its new namespace until it
    drops them; it has none over the namespaces the relay made, which belong to the server's."""
    outer_uid, outer_gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER), "unshare user namespace")
    _write_proc("/proc/self/uid_map", f"{uid} {outer_uid} 1")
    _write_proc("/proc/self/setgroups", "deny")
    _write_proc("/proc/self/gid_map", f"{uid} {outer_gid} 1")
    # No nested user namespace, whatever the seccomp filter lets through (it refuses them too).
    _write_proc("/proc/sys/user/max_user_namespaces", "0")


def _write_proc(path: str, text: str) -> None:
    """One write(2) to a /proc file (id maps must be written in one call)."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError as exc:
        raise SetupError(f"open {path}: {exc.strerror}") from None
    try:
        os.write(fd, text.encode())
    except OSError as exc:
        raise SetupError(f"write {path}: {exc.strerror}") from None
    finally:
        os.close(fd)


def _relay(request: dict, fds: list[int], settings: dict) -> None:
    """The first forked process: build the sandbox, fork its PID 1, relay its exit status."""
    try:
        _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
        for fd, target in zip(fds, (0, 1, 2), strict=True):
            os.dup2(fd, target)
        _make_namespaces(str(request["slot"]), settings["slots"], int(settings["tmp_bytes"]))
        os.closerange(3, MAX_FD)
        worker = os.fork()
    except BaseException as exc:
        with contextlib.suppress(Exception):
            os.write(2, f"fork server: cannot build the sandbox: {exc}\n".encode())
        os._exit(EXIT_SETUP)
    if worker == 0:
        _run_worker(request, settings)
    for fd in (0, 1, 2):  # the worker's pipes reach end of file when the worker alone ends
        os.close(fd)
    while True:
        try:
            pid, status = os.waitpid(worker, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(EXIT_SETUP)
        if pid == worker:
            os._exit(python_worker._exit_code(status))


def _run_worker(request: dict, settings: dict) -> None:
    try:
        seccomp = bytes.fromhex(settings["seccomp"]) if settings.get("seccomp") else None
        _drop_privileges(int(request["uid"]), seccomp, bool(settings.get("userns")))
        program = list(request["program"])
        module = PROGRAMS[os.path.basename(program[0])]
        sys.argv = program
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        module.main()  # the frozen objects stay frozen: collecting them would copy their pages
    except BaseException as exc:
        with contextlib.suppress(Exception):
            os.write(2, f"fork server: the worker failed: {type(exc).__name__}: {exc}\n".encode())
        os._exit(EXIT_SETUP)
    os._exit(0)


class Server:
    """The server loop: spawn requests on fd 0, exits of relays reported back."""

    def __init__(self, settings: dict) -> None:
        self.settings = settings
        self.control = socket.socket(fileno=0)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)

    def send(self, message: dict) -> None:
        self.control.send(json.dumps(message).encode())

    def spawn(self, request: dict, fds: list[int]) -> None:
        try:
            if len(fds) != 3:
                raise ValueError(f"a spawn request carries 3 descriptors, not {len(fds)}")
            if os.path.basename(request["program"][0]) not in PROGRAMS:
                raise ValueError(f"unknown worker program {request['program'][0]!r}")
            pid = os.fork()
            if pid == 0:
                self.control.detach()
                signal.set_wakeup_fd(-1)
                _relay(request, fds, self.settings)
            self.send({"op": "spawned", "id": request.get("id"), "pid": pid})
        except Exception as exc:
            self.send({"op": "error", "id": request.get("id"), "error": f"{exc}"})
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.send({"op": "exit", "pid": pid, "status": python_worker._exit_code(status)})

    def run(self) -> None:
        self.send({"op": "ready", "pid": os.getpid(), "python": sys.version.split()[0]})
        while True:
            try:
                ready, _, _ = select.select([self.control, self.wake_r], [], [])
            except InterruptedError:
                continue
            if self.wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(self.wake_r, 4096)
            self.reap()
            if self.control in ready:
                data, fds, _, _ = socket.recv_fds(self.control, MAX_MESSAGE, 8)
                if not data:
                    return  # the host went away: the sandbox (and every worker) ends with us
                try:
                    request = json.loads(data)
                except ValueError:
                    request = {}
                if request.get("op") == "spawn":
                    self.spawn(request, fds)
                else:
                    for fd in fds:
                        os.close(fd)
                    self.send({"op": "error", "id": request.get("id"), "error": "bad request"})


def warm(preload: list[str]) -> None:
    """Import the libraries and run the set-up every worker would otherwise run on its own:
    the Python tool's server (pandas preloaded) warms ``python_worker``, the SQL tool's
    ``sql_worker``."""
    if "pandas" in preload:
        python_worker.warm(preload)
        if "pyarrow" in sys.modules:
            # lazy: the host process rarely needs it; tool start-up stays fast
            import pyarrow.ipc  # noqa: F401  (the tables arrive as Arrow IPC files)
    else:
        for name in preload:
            importlib.import_module(name)
        sql_worker.warm()


def main() -> None:
    settings = json.loads(sys.argv[1])
    for path in settings["site"]:
        sys.path.append(path)
    warm(settings["preload"])
    gc.collect()
    gc.freeze()  # the collector then never writes to the pages the forks share
    Server(settings).run()


if __name__ == "__main__":
    main()
