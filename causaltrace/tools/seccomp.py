"""The seccomp filter of every sandbox: what agent code may not ask the kernel for.

One classic-BPF program, loaded by bwrap (``--seccomp``), by the unshare launcher's loader
(:data:`SECCOMP_LOADER`, run by ``setpriv`` before the worker) and by each worker a fork server
forks (``fork_server.py`` installs it last). It is a deny list of the kernel interfaces that
would reach past a sandbox or outlive it (keyrings, locks, shared memory, namespaces, mounts,
``ptrace``, ``bpf``, ``io_uring``...), plus one allow list: the socket families a tool needs.
Kept apart from ``sandbox.py`` so that the filter can be read, and tested, on its own.
"""

from __future__ import annotations

import functools
import logging
import platform
import struct

log = logging.getLogger("causaltrace.tools")

# System calls a sandbox may not make, by name: (x86_64 number, aarch64 number, what they return).
# Kernel objects that would outlive a call or be shared between sandboxes, memory that rlimits do
# not count, new namespaces, and interfaces with a large kernel attack surface.
_EPERM, _ENOSYS, _ENOLCK, _OK = 1, 38, 37, 0
_DENIED_SYSCALLS: dict[str, tuple[int | None, int | None, int]] = {
    # kernel keyrings: a key made world-readable is visible from every sandbox, and outlives it
    "add_key": (248, 217, _EPERM),
    "request_key": (249, 218, _EPERM),
    "keyctl": (250, 219, _EPERM),
    # shared memory that RLIMIT_DATA does not count; System V IPC objects
    "memfd_create": (319, 279, _EPERM),
    "memfd_secret": (447, 447, _EPERM),
    "shmget": (29, 194, _EPERM),
    "shmat": (30, 196, _EPERM),
    "shmctl": (31, 195, _EPERM),
    "shmdt": (67, 197, _EPERM),
    "semget": (64, 190, _EPERM),
    "semop": (65, 193, _EPERM),
    "semctl": (66, 191, _EPERM),
    "semtimedop": (220, 192, _EPERM),
    "msgget": (68, 186, _EPERM),
    "msgsnd": (69, 189, _EPERM),
    "msgrcv": (70, 188, _EPERM),
    "msgctl": (71, 187, _EPERM),
    "mq_open": (240, 180, _EPERM),
    # file locks and file-change notifications are seen by every process that opens the same
    # file: sandboxes share /usr, the interpreter, the packages and (hard-linked) episode files.
    # Taking a lock succeeds without doing anything: a lock inside one sandbox protects nothing
    # anyway, and programs that lock their own files (a DuckDB or SQLite database) still work.
    "flock": (73, 32, _OK),
    "inotify_init": (253, None, _EPERM),
    "inotify_init1": (294, 26, _EPERM),
    "inotify_add_watch": (254, 27, _EPERM),
    "fanotify_init": (300, 262, _EPERM),
    # new namespaces (nested user namespaces widen the kernel's attack surface) and mounts
    "unshare": (272, 97, _EPERM),
    "setns": (308, 268, _EPERM),
    "clone3": (435, 435, _ENOSYS),  # its flags are out of a filter's reach; libc falls back
    "mount": (165, 40, _EPERM),
    "umount2": (166, 39, _EPERM),
    "pivot_root": (155, 41, _EPERM),
    "open_tree": (428, 428, _EPERM),
    "move_mount": (429, 429, _EPERM),
    "fsopen": (430, 430, _EPERM),
    "fsconfig": (431, 431, _EPERM),
    "fsmount": (432, 432, _EPERM),
    "fspick": (433, 433, _EPERM),
    "mount_setattr": (442, 442, _EPERM),
    "open_by_handle_at": (304, 265, _EPERM),
    # other processes' memory, and large kernel interfaces no data code needs
    "ptrace": (101, 117, _EPERM),
    "process_vm_readv": (310, 270, _EPERM),
    "process_vm_writev": (311, 271, _EPERM),
    "pidfd_getfd": (438, 438, _EPERM),
    "userfaultfd": (323, 282, _EPERM),
    "perf_event_open": (298, 241, _EPERM),
    "bpf": (321, 280, _EPERM),
    "io_uring_setup": (425, 425, _ENOSYS),
    "io_uring_enter": (426, 426, _ENOSYS),
    "io_uring_register": (427, 427, _ENOSYS),
}
_FCNTL = (72, 25)
_CLONE = (56, 220)
# socket(2) and socketpair(2): only the families a tool needs may be created. AF_UNIX (pipes
# between a process and its children, multiprocessing), AF_INET and AF_INET6 (inert: every
# sandbox has a network namespace of its own, with at most its own loopback). Every other family
# fails with EAFNOSUPPORT: vsock (a network namespace does not isolate it: it reaches the
# hypervisor's services), netlink (the kernel's configuration interfaces), packet sockets,
# Bluetooth, ALG, and whatever a kernel adds later.
_SOCKET_CALLS = ((41, 198), (53, 199))
_EAFNOSUPPORT = 97
ALLOWED_SOCKET_FAMILIES = (1, 2, 10)  # AF_UNIX, AF_INET, AF_INET6
# fcntl commands: record locks (F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW) succeed without
# doing anything, like flock; asking for another process's lock (F_GETLK, F_OFD_GETLK) fails;
# leases and directory notifications (F_SETLEASE, F_GETLEASE, F_NOTIFY) are refused.
_FCNTL_COMMANDS = {6: _OK, 7: _OK, 37: _OK, 38: _OK, 5: _ENOLCK, 36: _ENOLCK}
_FCNTL_COMMANDS.update({1024: _EPERM, 1025: _EPERM, 1026: _EPERM})
_CLONE_NEW_NAMESPACES = (
    0x7E020080  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWTIME
)
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_SYSCALL_BIT = 0x40000000


def seccomp_filter(machine: str | None = None) -> bytes | None:
    """The sandbox's seccomp program (classic BPF, ``struct sock_filter[]``), or None where
    this architecture is not supported (x86_64 and aarch64 are).

    Every system call is allowed except those of ``_DENIED_SYSCALLS``, the lock, lease and
    notification commands of ``fcntl``, ``clone`` with a namespace flag, and ``socket`` or
    ``socketpair`` of a family outside :data:`ALLOWED_SOCKET_FAMILIES`; a system call of
    another ABI (i386 or x32 on x86_64) kills the process.
    """
    machine = machine or platform.machine()
    if machine not in _AUDIT_ARCH:
        _warn_once(
            f"causaltrace.tools: no seccomp filter for {machine}: kernel keyrings, file locks, "
            "shared memory and nested namespaces stay reachable from sandboxes (see the threat "
            "model in docs/tools.md)"
        )
        return None
    column = 0 if machine == "x86_64" else 1
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, errno, kill = 0x7FFF0000, 0x00050000, 0x80000000
    program: list[tuple[int, int, int, int]] = []

    def op(code: int, k: int, jt: int = 0, jf: int = 0) -> None:
        program.append((code, jt, jf, k))

    op(ld, 4)  # seccomp_data.arch
    op(jeq, _AUDIT_ARCH[machine], 1, 0)
    op(ret, kill)
    op(ld, 0)  # seccomp_data.nr
    if machine == "x86_64":
        op(jge, _X32_SYSCALL_BIT, 0, 1)
        op(ret, kill)
    for numbers in _DENIED_SYSCALLS.values():
        if numbers[column] is not None:
            op(jeq, numbers[column], 0, 1)
            op(ret, errno | numbers[2])
    op(jeq, _FCNTL[column], 0, 2 + 2 * len(_FCNTL_COMMANDS))
    op(ld, 24)  # low half of args[1]: the fcntl command
    for command, result in _FCNTL_COMMANDS.items():
        op(jeq, command, 0, 1)
        op(ret, errno | result)
    op(ret, allow)
    op(jeq, _CLONE[column], 0, 4)
    op(ld, 16)  # low half of args[0]: the clone flags
    op(jset, _CLONE_NEW_NAMESPACES, 0, 1)
    op(ret, errno | _EPERM)
    op(ret, allow)
    families = ALLOWED_SOCKET_FAMILIES
    for numbers in _SOCKET_CALLS:  # [jeq call] ld, jeq family..., ret EAFNOSUPPORT, ret allow
        op(jeq, numbers[column], 0, len(families) + 3)
        op(ld, 16)  # low half of args[0]: the family (the kernel reads it as an int)
        for i, family in enumerate(families):
            op(jeq, family, len(families) - i, 0)  # to "ret allow"; else the next test
        op(ret, errno | _EAFNOSUPPORT)
        op(ret, allow)
    op(ret, allow)
    return b"".join(struct.pack("<HBBI", *instruction) for instruction in program)


@functools.cache
def _warn_once(message: str) -> None:
    log.warning(message)


# Installs the filter given (hex) as argv[1], then execs argv[2:]: the unshare launcher's way to
# apply the filter (bwrap has --seccomp). Runs as ``python -I -S -c``; no_new_privs is set.
SECCOMP_LOADER = """
import ctypes, os, sys
code = bytes.fromhex(sys.argv[1])
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(38, 1, 0, 0, 0) or libc.prctl(22, 2, ctypes.byref(Prog(len(code) // 8, code)), 0, 0):
    sys.exit("cannot install the seccomp filter: " + os.strerror(ctypes.get_errno()))
os.execv(sys.argv[2], sys.argv[2:])
"""
