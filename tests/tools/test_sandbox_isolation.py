"""Channels between episodes and from agent code to the host (issue 12, D4 to D8; issue 26,
D9, D10), under every sandbox kind: kernel keyrings, file locks, shared memory, processes and
threads that outlive a call, builtins, signals, files left behind, host-wide settings, crashes
and memory growth.

No test here is skipped on a machine that has the sandbox tool: a sandbox that cannot start is a
failure, with the reason.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from _tools_support import make_episode, tools_config

from causaltrace.tools import SyncToolRuntime
from causaltrace.tools.config import SandboxError, SandboxUnavailableError, ToolConfig
from causaltrace.tools.pool import running
from causaltrace.tools.sandbox import UnshareLauncher, select_launcher

TOOLS = {
    "bwrap": ("bwrap", "apt-get install bubblewrap"),
    "bwrap-cold": ("bwrap", "apt-get install bubblewrap"),
    "unshare": ("unshare", "util-linux"),
}


pytestmark = pytest.mark.sandbox


def require_sandbox(kind: str) -> None:
    """Fail (never skip) when this sandbox kind cannot run here, saying how to fix it."""
    tool, package = TOOLS[kind]
    if shutil.which(tool) is None:
        pytest.fail(f"{tool} is not installed: the {kind} sandbox tests need it ({package})")
    try:
        select_launcher(tools_config(kind=kind))
    except (SandboxUnavailableError, SandboxError) as exc:
        pytest.fail(f"the {kind} sandbox does not work on this machine: {exc}")


@pytest.fixture(scope="module", params=sorted(TOOLS))
def kind(request):
    require_sandbox(request.param)
    return request.param


@pytest.fixture(scope="module")
def episode_dir(tmp_path_factory):
    return make_episode(tmp_path_factory.mktemp("isolation"))


@pytest.fixture(scope="module")
def runtime(kind):
    rt = SyncToolRuntime(tools_config(kind=kind, warm_workers=2))
    yield rt
    rt.close()


@pytest.fixture
def two(runtime, episode_dir):
    """Two live episodes of the same directory (their files are the same inodes)."""
    a, b = runtime.episode(episode_dir), runtime.episode(episode_dir)
    yield a, b
    a.close()
    b.close()


def shmem_bytes() -> int:
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("Shmem:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no Shmem line in /proc/meminfo")


# -- D4: kernel keyrings ------------------------------------------------------------------------
ADD_KEY = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
key = libc.syscall({add_key}, b"user", b"ct-d4-key", b"LEAKED", 6, -4)  # the user keyring
if key > 0:
    libc.syscall({keyctl}, 5, key, 0x3F3F3F3F)  # KEYCTL_SETPERM: everything to everyone
    libc.syscall({keyctl}, 15, key, 60)  # KEYCTL_SET_TIMEOUT: gone in a minute whatever happens
print("key", key > 0, ctypes.get_errno())
"""
FIND_KEY = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
found = libc.syscall({request_key}, b"user", b"ct-d4-key", None, 0)
try:
    listed = "ct-d4-key" in open("/proc/keys").read()
except OSError:
    listed = False
print("found", found > 0, "listed", listed)
"""


def syscall_numbers() -> dict[str, int]:
    import platform

    x86 = platform.machine() == "x86_64"
    return {
        "add_key": 248 if x86 else 217,
        "request_key": 249 if x86 else 218,
        "keyctl": 250 if x86 else 219,
    }


def test_d4_a_key_made_in_one_episode_is_invisible_to_another_and_to_the_host(two):
    a, b = two
    numbers = syscall_numbers()
    out_a = a.python(ADD_KEY.format(**numbers))
    assert out_a.startswith("key False"), out_a  # no keyring access at all
    out_b = b.python(FIND_KEY.format(**numbers))
    assert out_b == "found False listed False", out_b
    a.close()
    with open("/proc/keys") as handle:
        assert "ct-d4-key" not in handle.read()  # nothing outlives the episode


# -- D5: file locks and notifications on shared files --------------------------------------------
TAKE_LOCKS = """
import fcntl
held = [open("data_dictionary.json", "rb"), open("/usr/bin/env", "rb")]
fcntl.flock(held[0], fcntl.LOCK_EX | fcntl.LOCK_NB)
fcntl.lockf(held[1], fcntl.LOCK_SH | fcntl.LOCK_NB)
print("locked")
"""
SEE_LOCKS = """
import ctypes, fcntl, struct
seen = []
try:
    fcntl.flock(open("data_dictionary.json", "rb"), fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    seen.append("flock")
except OSError:
    pass
query = struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, 0, 0, 0)
for path in ("/usr/bin/env", "data_dictionary.json"):
    try:
        answer = fcntl.fcntl(open(path, "rb"), fcntl.F_GETLK, query)
        if struct.unpack("hhqqi4x", answer)[0] != fcntl.F_UNLCK:
            seen.append("posix lock on " + path)
    except OSError:
        pass
if ctypes.CDLL(None).inotify_init1(0) >= 0:
    seen.append("inotify")
print(seen)
"""


def test_d5_locks_and_notifications_do_not_cross_episodes(two):
    a, b = two
    assert a.python(TAKE_LOCKS) == "locked"  # taking a lock works (and does nothing)
    assert b.python(SEE_LOCKS) == "[]"
    assert a.python("len(held)") == "2"


# -- D6: memory that RLIMIT_DATA does not count ---------------------------------------------------
MEMFD_FLOOD = """
import os
fds, made = [], 0
try:
    for _ in range(40):  # 40 x 64 MiB = 2.5 GiB of shared memory
        fd = os.memfd_create("flood")
        os.pwrite(fd, b"x" * (64 << 20), 0)
        fds.append(fd)
        made += 64
except OSError as exc:
    print(type(exc).__name__, exc.errno)
print("memfd MiB", made)
"""
SHM_FLOOD = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
made = 0
for _ in range(10):  # 10 x 256 MiB = 2.5 GiB of System V shared memory
    shm = libc.shmget(0, 256 << 20, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
    if shm < 0:
        print("shmget failed", ctypes.get_errno())
        break
    address = libc.shmat(shm, None, 0)
    if address in (None, ctypes.c_void_p(-1).value):
        print("shmat failed", ctypes.get_errno())
        break
    ctypes.memset(address, 1, 256 << 20)
    libc.shmdt(ctypes.c_void_p(address))  # detached, the segment lives on
    made += 256
print("shm MiB", made)
"""


@pytest.mark.parametrize("attack", ["memfd", "sysv-shm"])
def test_d6_shared_memory_cannot_bypass_the_memory_limit(runtime, episode_dir, attack):
    tools = runtime.episode(episode_dir)
    try:
        before = shmem_bytes()
        out = tools.python(MEMFD_FLOOD if attack == "memfd" else SHM_FLOOD)
        grown = shmem_bytes() - before  # measured while the sandbox (and its IPC) still lives
        assert grown < 512 << 20, (out, grown)
        assert out.endswith(" MiB 0"), out
        assert tools.python("orders.shape") == "(400, 5)"
    finally:
        tools.close()


# -- D7: threads and processes outlive their call --------------------------------------------------
START_WRITERS = """
import subprocess, threading, time
import duckdb
con = duckdb.connect()
con.sql("SELECT 42").fetchall()
def write_forever():
    while True:
        with open("/tmp/thread.log", "a") as handle:
            handle.write("x")
        time.sleep(0.1)
threading.Thread(target=write_forever, daemon=True).start()
subprocess.Popen(["sh", "-c", "while true; do echo x >> /tmp/child.log; sleep 0.1; done"],
                 start_new_session=True)
keep = 41
time.sleep(0.35)
"""
WATCH_WRITERS = """
import os, time
def sizes():
    return [os.path.getsize(f"/tmp/{name}.log") for name in ("thread", "child")]
first = sizes()
time.sleep(0.6)
print(first[0] > 0 and first[1] > 0, sizes() == first)
"""


def test_d7_threads_and_children_stop_when_the_call_returns(runtime, episode_dir):
    with runtime.episode(episode_dir) as tools:
        out = tools.python(START_WRITERS)
        assert "thread(s) still running when this code ended" in out, out
        assert tools.python(WATCH_WRITERS) == "True True"
        assert tools.python("keep + 1") == "42"  # the namespace survived
        assert tools.python("con.sql('SELECT 7').fetchall()") == "[(7,)]"
        assert tools.python("con.close(); del con\nimport gc; gc.collect() >= 0") == "True"
        assert tools.tools.restarts == 0
        # The sandbox is back to its supervisor and REPL only.
        assert (
            tools.python(
                "import os; sorted(int(p) for p in os.listdir('/proc') if p.isdigit())[0] == 1"
            )
            == "True"
        )
        # Processes a call starts are killed after it; a thread that only lives during the call
        # is no concern.
        out = tools.python("import subprocess; subprocess.Popen(['sleep', '60']).pid > 0")
        assert out == "True"
        out = tools.python("import os; len([p for p in os.listdir('/proc') if p.isdigit()])")
        assert out == "2"


# Issue 42 item 3: the worker's own reaper runs in the process agent code controls.
DISARM_AND_SPIN = """
import os, subprocess
os.kill = lambda *args, **kwargs: None  # the in-sandbox reaper now kills nothing
subprocess.Popen(["sh", "-c", "while true; do :; done"])  # a child of the REPL
subprocess.Popen(["sh", "-c", "(while true; do :; done) &"])  # an orphan: the init adopts it
"""
RUNNING = """
import os
def state(p):
    with open(f"/proc/{p}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0]
print(sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and state(p) != "Z"))
"""


def test_processes_a_call_starts_die_even_with_the_reaper_disarmed(runtime, episode_dir):
    """Agent code that patches ``os.kill`` switches off the worker's own after-call reaper;
    spinning children then outlived the call (1.5-2.3 CPU-s per 8 s, 2.3-2.9 GB held across
    calls in the outside review). The host reaps from outside after every call
    (``SandboxProcess.reap_strays``): the next call sees only the sandbox's init and the REPL
    running, the busy children and the orphan gone, and the namespace still works."""
    with runtime.episode(episode_dir) as tools:
        assert tools.python("x = 41") == "(no output)"
        tools.python(DISARM_AND_SPIN)
        running = json.loads(tools.python(RUNNING))
        me = int(tools.python("import os; os.getpid()"))
        assert running == sorted({1, me}), running
        assert tools.python("x + 1") == "42"  # the namespace survived the reap
        assert tools.tools.restarts == 0


def test_a_timed_out_sandbox_leaves_no_process_behind(runtime, episode_dir):
    """A busy loop that hits the time limit is killed with its whole sandbox: no process of the
    old sandbox survives on the host (the worker is its PID namespace's init, so killing only
    the launcher left the namespace running the loop, re-parented to the host's init)."""
    with runtime.episode(episode_dir) as tools:
        assert tools.python("print(1)") == "1"
        worker = tools.tools._worker
        before = worker.pids()
        assert len(before) >= 2  # the launcher and the worker at least
        out = tools.python(
            "import threading, os\n"
            "threading.Thread(target=lambda: [0 for _ in iter(int, 1)], daemon=True).start()\n"
            "while True: pass"
        )
        assert "time limit" in out, out
        deadline = time.monotonic() + 10.0
        alive = before
        while alive and time.monotonic() < deadline:
            alive = [p for p in before if running(p)]
            time.sleep(0.1)
        assert alive == [], f"processes of the killed sandbox still running: {alive}"
        assert tools.python("print(2)") == "2"  # the episode goes on in a new sandbox


# -- D8: builtins ---------------------------------------------------------------------------------
def test_d8_breaking_builtins_does_not_break_the_next_call(runtime, episode_dir):
    with runtime.episode(episode_dir) as tools:
        assert tools.python("del __builtins__.print") == "(no output)"
        assert tools.python("print('still prints')") == "still prints"
        assert tools.python("import builtins; del builtins.open, builtins.len, builtins.repr")
        assert tools.python("open('data_dictionary.json', 'rb').read(1), len(orders)") == (
            "(b'{', 400)"
        )
        assert tools.python("import builtins; builtins.__import__ = None") == "(no output)"
        assert tools.python("import json; json.dumps([1])") == "'[1]'"
        assert tools.python("__builtins__ = {}") == "(no output)"
        assert tools.python("print(sum([1, 2]))") == "3"
        assert tools.tools.restarts == 0


# -- D9: signals --------------------------------------------------------------------------------
# Forked workers once shared the fork server's session and process group, so kill(0, SIGCONT)
# in one episode ran another episode's SIGCONT handler (a 32-bit pattern crossed that way).
COUNT_SIGCONT = """
import signal
hits = []
signal.signal(signal.SIGCONT, lambda *args: hits.append(1))
print("armed")
"""
SEND_SIGCONT = """
import os, signal
mine = []
signal.signal(signal.SIGCONT, lambda *args: mine.append(1))
os.kill(0, signal.SIGCONT)  # my process group
delivered = 0
for pid in range(1, 1 << 15):  # every PID and process group it could name
    for target in (pid, -pid):
        try:
            os.kill(target, signal.SIGCONT)
            delivered += 1
        except OSError:
            pass
try:
    os.kill(-1, signal.SIGCONT)  # everything it may signal
except OSError:
    pass
print(len(mine) > 0, delivered > 0)
"""


def test_d9_signals_reach_no_other_episode(two):
    a, b = two
    assert b.python(COUNT_SIGCONT) == "armed"
    assert a.python(SEND_SIGCONT) == "True True"  # the signals were sent, and reached a itself
    assert b.python("len(hits)") == "0"  # no handler run in the other episode
    # The counter works: a SIGCONT b sends itself is counted.
    assert b.python("import os, signal; os.kill(os.getpid(), signal.SIGCONT); len(hits)") == "1"


# -- D10: files left for another episode -----------------------------------------------------
# Workers forked from one fork server share its mount tree outside their own /tmp, /dev/shm and
# /episode: run by a normal user, whose uid owns the server's /dev tmpfs, one worker could once
# write a file to /dev that every other episode then read.
LEAVE_FILES = """
import os
left = []
for line in open('/proc/self/mountinfo'):
    target = line.split()[4]
    if target.startswith(('/proc', '/sys')) or not os.path.isdir(target):
        continue
    try:
        with open(os.path.join(target, 'ct-d10-mark'), 'w') as handle:
            handle.write('LEFT')
        left.append(target)
    except OSError:
        pass
print(sorted(set(left)))
"""


def test_d10_a_file_one_episode_writes_is_not_seen_by_another(two):
    a, b = two
    left = ast.literal_eval(a.python(LEAVE_FILES))
    assert "/tmp" in left  # the probe can write where a sandbox may
    marks = [os.path.join(path, "ct-d10-mark") for path in left]
    seen = b.python(f"import os; print([p for p in {marks!r} if os.path.exists(p)])")
    assert seen == "[]", (left, seen)


# -- crashes and memory growth --------------------------------------------------------------------
@pytest.mark.parametrize(
    "code",
    [
        "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)",
        "import faulthandler; faulthandler._sigsegv()",
        "import ctypes; ctypes.string_at(0)",
    ],
    ids=["kill-self", "faulthandler", "null-pointer"],
)
def test_a_crash_restarts_the_namespace(runtime, episode_dir, code):
    with runtime.episode(episode_dir) as tools:
        tools.python("keep = 1")
        out = tools.python(code)
        assert "the Python process stopped" in out and "SIGSEGV" in out, out
        assert "variables from earlier calls are gone" in out
        assert tools.python("orders.shape") == "(400, 5)"


def test_growing_allocation_ends_in_memory_error(kind, episode_dir):
    config = tools_config(kind=kind, warm_workers=0, memory_bytes=768 << 20, python_timeout=20)
    with SyncToolRuntime(config) as rt, rt.episode(episode_dir) as tools:
        t0 = time.monotonic()
        out = tools.python("x = []\nwhile True:\n    x.append(bytearray(10**7))")
        assert "MemoryError" in out, out
        assert time.monotonic() - t0 < 15
        assert tools.python("del x\norders.shape") == "(400, 5)"


# Issue 42 item 3: each process is held to RLIMIT_DATA alone, but a call may start many.
FORKED_HOARD = """
import os, time
for _ in range(4):
    if os.fork() == 0:
        hoard = b"\\x01" * (300 << 20)  # 300 MiB written: under the per-process limit
        time.sleep(60)
        os._exit(0)
time.sleep(60)
"""


def test_memory_is_counted_over_every_process_a_call_starts(kind, episode_dir):
    """Four forks of 300 MiB each stay under a 512 MiB per-process limit but hold 1.2 GiB
    together; the host reads the sandbox's processes together (``hold_memory``) and stops them
    long before the 20 s time limit, with a message that names memory, and the episode goes on."""
    config = tools_config(kind=kind, warm_workers=0, memory_bytes=512 << 20, python_timeout=20)
    with SyncToolRuntime(config) as rt, rt.episode(episode_dir) as tools:
        assert tools.python("orders.shape") == "(400, 5)"
        out = tools.python(FORKED_HOARD)
        assert "of memory together, over the sandbox's 0.50 GiB" in out, out
        assert "time limit" not in out, out
        assert tools.tools.restarts == 1
        assert tools.python("orders.shape") == "(400, 5)"  # a new sandbox serves the episode


def test_one_process_under_the_limit_is_not_stopped(kind, episode_dir):
    """The tree count does not bite a call that stays under the limit with its forks: two
    children of 100 MiB each beside the REPL, under 512 MiB together, run to the end."""
    config = tools_config(kind=kind, warm_workers=0, memory_bytes=512 << 20, python_timeout=20)
    code = FORKED_HOARD.replace("range(4)", "range(2)").replace("300 << 20", "100 << 20")
    code = code.replace("time.sleep(60)", "time.sleep(1)")
    code += "print(os.waitpid(-1, 0)[1], os.waitpid(-1, 0)[1])"
    with SyncToolRuntime(config) as rt, rt.episode(episode_dir) as tools:
        assert tools.python(code) == "0 0"
        assert tools.tools.restarts == 0


# -- host settings --------------------------------------------------------------------------------
def test_the_unshare_launcher_never_writes_host_settings(tmp_path):
    """Structurally: the setup script writes /proc/sys only in a user namespace it made."""
    launcher = UnshareLauncher(ToolConfig(sandbox="unshare"))
    (tmp_path / "episode").mkdir()
    spec = launcher.spec(tmp_path)
    script = spec.argv[spec.argv.index("-c") + 1]
    if os.geteuid() == 0:  # no user namespace is made: nothing under /proc/sys may be written
        assert "--user" not in spec.argv
        assert "/proc/sys" not in script, script
    else:
        assert "--user" in spec.argv


def test_unshare_mode_leaves_host_settings_unchanged(episode_dir):
    require_sandbox("unshare")
    files = [*sorted(Path("/proc/sys/user").iterdir()), Path("/proc/sys/kernel/shmmax")]
    before = {p: p.read_text() for p in files}
    config = tools_config(sandbox="unshare", warm_workers=0)
    with SyncToolRuntime(config) as rt, rt.episode(episode_dir) as tools:
        assert tools.python("orders.shape") == "(400, 5)"
    assert {p: p.read_text() for p in files} == before


SOCKET_FAMILIES = """
import json, socket
made, refused = set(), {}
for family in range(64):
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_RAW):
        try:
            socket.socket(family, kind).close()
            made.add(family)
        except OSError as exc:
            refused.setdefault(family, exc.errno)
a, b = socket.socketpair()
print(json.dumps({"made": sorted(made), "vsock": refused.get(40), "netlink": refused.get(16)}))
"""


def test_the_seccomp_filter_allows_three_socket_families_only():
    """The filter itself, loaded by the unshare launcher's loader into a plain child process
    (no sandbox around it): vsock, netlink and every other family fail with EAFNOSUPPORT;
    AF_UNIX, AF_INET and AF_INET6 work. Without the filter the same child creates netlink
    sockets."""
    import json
    import subprocess
    import sys

    from causaltrace.tools.seccomp import SECCOMP_LOADER, seccomp_filter

    program = seccomp_filter()
    assert program is not None
    loader = [sys.executable, "-I", "-S", "-c", SECCOMP_LOADER, program.hex()]
    child = [sys.executable, "-I", "-S", "-c", SOCKET_FAMILIES]
    filtered = subprocess.run([*loader, *child], capture_output=True, text=True, timeout=60)
    assert filtered.returncode == 0, filtered.stderr
    assert json.loads(filtered.stdout) == {"made": [1, 2, 10], "vsock": 97, "netlink": 97}
    bare = subprocess.run(child, capture_output=True, text=True, timeout=60)
    assert 16 in json.loads(bare.stdout)["made"]  # netlink, where nothing filters it


def test_the_seccomp_filter_is_well_formed():
    from causaltrace.tools.sandbox import seccomp_filter

    for machine in ("x86_64", "aarch64"):
        program = seccomp_filter(machine)
        assert program and len(program) % 8 == 0 and len(program) // 8 < 4096
    assert seccomp_filter("riscv64") is None


def test_refused_memfds_are_named_and_auto_goes_on_to_unshare(monkeypatch):
    """Where the machine refuses memfds (a container's seccomp filter), the bwrap launcher's
    probe says so (a SandboxError naming the memfd, not a bare PermissionError from inside
    select_launcher) and ``auto`` goes on to unshare, which needs none."""
    require_sandbox("bwrap")
    require_sandbox("unshare")

    def refuse(name, flags=0):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "memfd_create", refuse)
    with pytest.raises(SandboxUnavailableError, match=r"memfd 'bwrap-(seccomp|args)'"):
        select_launcher(tools_config(kind="bwrap"))
    assert select_launcher(tools_config(sandbox="auto")).name == "unshare"
