"""Adversarial agent programs, through both tools and under every sandbox this machine offers.

Each attack must fail with a clear message to the agent, the attacked episode must keep
working, another live episode must be unaffected, and the planted label (beside the episode
directory, in the host environment) must never appear in a tool result.
"""

from __future__ import annotations

import os
import shutil
import site
import socket
import sys
import sysconfig
import threading
from pathlib import Path

import pytest
from _tools_support import LABEL, SEED, make_episode, tools_config

import causaltrace
from causaltrace.tools import SyncToolRuntime
from causaltrace.tools.config import SandboxError, SandboxUnavailableError, ToolConfig
from causaltrace.tools.sandbox import PythonRuntime, select_launcher

REPO = Path(causaltrace.__file__).resolve().parents[1]
# Package directories of this interpreter, of its base (in a venv) and of the user.
SITE_DIRS = sorted(
    {
        *site.getsitepackages([sys.prefix, sys.base_prefix]),
        site.getusersitepackages(),
        sysconfig.get_paths()["purelib"],
    }
)


# Both sandbox kinds always run: a missing tool or a sandbox that cannot start is a failure
# that says how to fix it, never a skip.
# A sandbox shows its own interpreter at its host path (sandbox.py binds it after mounting the
# private /tmp): where that path is under /tmp (a venv made there), /tmp lists its first
# directory and nothing else of the host's /tmp.
INTERPRETER_UNDER_TMP = [
    repr(top)
    for top in [
        sorted(
            {
                Path(p).relative_to("/tmp").parts[0]
                for p in PythonRuntime.discover(ToolConfig().sandbox_packages).visible
                if Path(p).is_relative_to("/tmp")
            }
        )
    ]
    if top
]

SANDBOXES = {
    "bwrap": ("bwrap", "apt-get install bubblewrap"),
    "bwrap-cold": ("bwrap", "apt-get install bubblewrap"),
    "unshare": ("unshare", "util-linux"),
}


pytestmark = pytest.mark.sandbox


def require_sandbox(kind: str) -> None:
    tool, package = SANDBOXES[kind]
    if shutil.which(tool) is None:
        pytest.fail(f"{tool} is not installed: the {kind} security tests need it ({package})")
    try:
        select_launcher(tools_config(kind=kind))
    except (SandboxUnavailableError, SandboxError) as exc:
        pytest.fail(f"the {kind} sandbox does not work on this machine: {exc}")


class Env:
    """A runtime with an attacked episode and a bystander episode, plus host-side secrets."""

    def __init__(self, kind: str, root: Path):
        self.root = root
        self.attacked_dir = make_episode(root, "attacked")
        self.bystander_dir = make_episode(root, "bystander", seed=1)
        self.labels = root / "attacked" / "labels.jsonl"
        self.manifest = root / "attacked" / "manifest.json"
        # 1 GiB: filling memory up to the limit takes ~2 us per page here, and the runaway-code
        # attacks below must end in MemoryError well within the 4 s time limit, even under load.
        self.runtime = SyncToolRuntime(tools_config(kind=kind, memory_bytes=1 << 30))
        self.tools = self.runtime.episode(self.attacked_dir)
        self.bystander = self.runtime.episode(self.bystander_dir)
        self.bystander.python("marker = 'still here'")
        self.outputs: list[str] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            conn.sendall(LABEL.encode())
            conn.close()

    def fill(self, text: str) -> str:
        bystander_slot = self.bystander.tools._worker.slot
        return text.format(
            labels=self.labels,
            manifest=self.manifest,
            root=self.root,
            repo=REPO,
            bystander=self.bystander_dir,
            bystander_slot=bystander_slot,
            port=self.port,
            site_dirs=SITE_DIRS,
        )

    def python(self, code: str) -> str:
        out = self.tools.python(self.fill(code))
        self.outputs.append(out)
        return out

    def sql(self, query: str) -> str:
        out = self.tools.sql(self.fill(query))
        self.outputs.append(out)
        return out

    def check_alive(self) -> None:
        assert self.tools.python("orders.shape") == "(400, 5)"
        assert "400" in self.tools.sql("SELECT count(*) FROM orders")
        assert self.bystander.python("marker") == "'still here'"
        assert "400" in self.bystander.sql("SELECT count(*) FROM orders")
        for out in self.outputs:
            assert LABEL not in out and SEED not in out

    def close(self) -> None:
        self.server.close()
        self.tools.close()
        self.bystander.close()
        self.runtime.close()


@pytest.fixture(scope="module", params=sorted(SANDBOXES))
def env(request, tmp_path_factory):
    require_sandbox(request.param)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CT_TEST_SECRET", LABEL)  # a secret in the host environment
        e = Env(request.param, tmp_path_factory.mktemp(f"security-{request.param}"))
        yield e
        e.close()


# (name, code, substrings of which at least one must be in the output)
PYTHON_ATTACKS = [
    ("read-labels", "open('{labels}').read()", ["FileNotFoundError"]),
    ("read-manifest", "open('{manifest}').read()", ["FileNotFoundError"]),
    ("read-labels-relative", "open('../labels.jsonl').read()", ["FileNotFoundError"]),
    ("read-root-labels", "open('{root}/labels.jsonl').read()", ["FileNotFoundError"]),
    ("read-etc-passwd", "open('/etc/passwd').read()", ["FileNotFoundError"]),
    ("read-etc-shadow", "open('/etc/shadow').read()", ["FileNotFoundError"]),
    ("list-etc", "import os; os.listdir('/etc')", ["['ld.so.cache']", "[]"]),
    ("list-other-episode", "import os; os.listdir('{bystander}')", ["FileNotFoundError"]),
    ("open-other-slot", "import os; os.listdir('{bystander_slot}')", ["FileNotFoundError"]),
    ("list-host-tmp", "import os; os.listdir('/tmp')", ["[]", *INTERPRETER_UNDER_TMP]),
    ("list-root", "import os; sorted(os.listdir('/'))", ["'episode'"]),
    (
        "list-host-site-packages",
        "import os\nfor d in {site_dirs}:\n    try: print(d, os.listdir(d))\n"
        "    except OSError as e: print(d, type(e).__name__)",
        ["site-packages"],
    ),
    ("write-episode", "open('orders.parquet', 'wb').write(b'x')", ["Read-only file system"]),
    ("import-generator", "import causaltrace", ["No module named 'causaltrace'"]),
    ("import-domains", "from domains.example import ExampleDomain", ["No module named 'domains'"]),
    (
        "import-installed-domains",
        "from causaltrace_domains.example import ExampleDomain",
        ["No module named 'causaltrace_domains'"],
    ),
    (
        "import-generator-from-repo",
        "import sys; sys.path.insert(0, '{repo}'); import causaltrace.model.simulate",
        ["No module named 'causaltrace'"],
    ),
    (
        "read-generator-source",
        "open('{repo}/causaltrace/model/simulate.py').read()",
        ["FileNotFoundError"],
    ),
    (
        "find-generator-on-disk",
        "import os\n[d for d, _, fs in os.walk('/') if not d.startswith('/proc') and ("
        "{{'scm.py', 'intervention_points.py'}} <= set(fs) or {{'labels.jsonl', 'manifest.json'}}"
        " & set(fs) or any('causaltrace' in f for f in fs))]",
        ["[]"],
    ),
    ("environ", "import os; sorted(os.environ)", ["'PATH'"]),
    (
        "environ-of-other-processes",
        "import glob\nout = []\nfor p in glob.glob('/proc/[0-9]*/environ'):\n"
        "    try: out.append(open(p, 'rb').read().decode())\n    except OSError: pass\n"
        "print('CT_TEST_SECRET' in ''.join(out), len(out))",
        ["False"],
    ),
    (
        "host-processes",
        "import os; len([p for p in os.listdir('/proc') if p.isdigit()]) < 6",
        ["True"],
    ),
    (
        "socket-internet",
        "import socket; socket.create_connection(('1.1.1.1', 80), timeout=2)",
        ["Network is unreachable", "timed out"],
    ),
    (
        "socket-host-loopback",
        "import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2).recv(100)",
        ["Connection refused", "Network is unreachable"],  # the sandbox's own loopback
    ),
    ("dns", "import socket; socket.getaddrinfo('example.com', 80)", ["gaierror"]),
    # Socket families a network namespace does not isolate (vsock reaches the hypervisor) or
    # that configure the kernel (netlink): only AF_UNIX, AF_INET and AF_INET6 can be created.
    (
        "socket-vsock",
        "import socket; socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)",
        ["Address family not supported"],
    ),
    (
        "socket-netlink",
        "import socket; socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)",
        ["Address family not supported"],
    ),
    (
        "socket-other-families",
        "import socket\nmade = []\nfor family in range(64):\n"
        "    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_RAW):\n"
        "        for make in (socket.socket, socket.socketpair):\n"
        "            try: make(family, kind)\n            except OSError: continue\n"
        "            made.append(family)\n"
        "print(sorted(set(made) - {{1, 2, 10}}), 1 in made)",
        ["[] True"],
    ),
    (
        # The table files leave the slot after loading; no descriptor of them may stay open
        # (os.fstat would show their sizes and times).
        "table-descriptors",
        "import os, stat\nslot = os.stat('/episode').st_dev\nseen = []\n"
        "for fd in map(int, os.listdir('/proc/self/fd')):\n"
        "    try: st, target = os.fstat(fd), os.readlink(f'/proc/self/fd/{{fd}}')\n"
        "    except OSError: continue\n"
        "    if stat.S_ISREG(st.st_mode) and (st.st_dev == slot or 'episode' in target\n"
        "            or target.endswith(('.arrow', '.parquet', '.arrow (deleted)'))):\n"
        "        seen.append((target, st.st_size))\n"
        "print('table descriptors:', seen)",
        ["table descriptors: []"],
    ),
    (
        "fork-bomb",
        "import os\nwhile True:\n    os.fork()",
        ["BlockingIOError", "Resource temporarily"],
    ),
    (
        "fork-bomb-children-spin",
        "import os\nfor _ in range(500):\n    if os.fork() == 0:\n        while True: pass",
        # The spinning children starve the parent of CPU: it may hit the time limit first.
        ["BlockingIOError", "Resource temporarily", "(time limit) and was stopped"],
    ),
    ("memory-bytearray", "x = bytearray(3 * 1024**3)", ["MemoryError"]),
    ("memory-numpy", "import numpy as np; x = np.ones((40000, 40000))", ["Unable to allocate"]),
    (
        "memory-grow",
        "chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 1024**2))",
        ["MemoryError"],
    ),
    ("infinite-loop", "while True:\n    pass", ["(time limit) and was stopped"]),
    ("sleep-forever", "import time; time.sleep(3600)", ["(time limit) and was stopped"]),
    ("huge-print", "print('x' * 50_000_000)", ["[output truncated: showing the first 4000 of"]),
    ("many-prints", "for i in range(10**6): print(i)", ["[output truncated"]),
    ("huge-fd-write", "import os; os.write(2, b'e' * 10**7)", ["[output truncated"]),
    (
        "huge-file",
        "open('/tmp/big', 'wb').write(b'0' * 300 * 1024**2)",
        ["File too large", "No space"],
    ),
    (
        "forge-protocol",
        "import os\nfor fd in range(3, 64):\n    try: os.write(fd, b'\\xff\\xff\\xff\\xff' + b'x' * 64)\n"
        "    except OSError: pass",
        ["the Python process stopped", "(no output)"],
    ),
    (
        "kill-init",
        "import os, signal; os.kill(1, signal.SIGKILL)",
        ["PermissionError", "(no output)"],
    ),
    # PermissionError where uid 0 exists (real root started the sandbox); where the sandbox's
    # user namespace maps only the worker's own uid, uid 0 does not exist at all (EINVAL). The
    # unshare fallback of a normal user maps the user as root of its namespace: the worker is
    # uid 0 already (setuid(0) changes nothing) and holds no capability (empty bounding set,
    # SECBIT_NOROOT locked).
    (
        "setuid-root",
        "import os\nos.setuid(0)\n"
        "print('CapEff', [l.split()[1] for l in open('/proc/self/status') if l[:7] == 'CapEff:'])",
        ["PermissionError", "[Errno 22] Invalid argument", "CapEff ['0000000000000000']"],
    ),
    (
        "new-user-namespace-mount",
        "import subprocess\nr = subprocess.run(['unshare', '-r', 'mount', '-t', 'tmpfs', 'x', '/opt'],"
        " capture_output=True, text=True)\nprint(r.returncode != 0 or 'mounted only in own ns')",
        ["True", "mounted only in own ns"],
    ),
    ("exit", "import os; os._exit(0)", ["the Python process stopped"]),
]


@pytest.mark.parametrize("name,code,expected", PYTHON_ATTACKS, ids=[a[0] for a in PYTHON_ATTACKS])
def test_python_attack(env, name, code, expected):
    out = env.python(code)
    assert any(e in out for e in expected), f"{name}: {out[:1500]}"
    if name == "list-host-site-packages":  # masked (empty) or absent, never the real listing
        for line in out.splitlines():
            assert line.endswith(("[]", "FileNotFoundError")), line
    env.check_alive()


def test_oversized_code_is_refused_by_name(env):
    """Code past the python tool's limit is refused with a message, like SQL past its own; the
    namespace is untouched. Code at the limit runs."""
    from causaltrace.tools.runtime import MAX_CODE_CHARS

    env.tools.python("kept = 'namespace intact'")
    restarts = env.tools.tools.restarts
    out = env.tools.python("#" * 70_000_000)
    assert out.startswith("Error: the code is 70000000 characters long"), out[:300]
    assert f"at most {MAX_CODE_CHARS}" in out
    assert env.tools.python("kept") == "'namespace intact'"
    at_limit = "#" * (MAX_CODE_CHARS - 6) + "\n1 + 1"
    assert len(at_limit) == MAX_CODE_CHARS and env.tools.python(at_limit) == "2"
    assert env.tools.tools.restarts == restarts
    env.check_alive()


SQL_ATTACKS = [
    "SELECT * FROM read_csv('{labels}')",
    "SELECT * FROM read_text('{manifest}')",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM glob('{root}/*')",
    "SELECT * FROM read_parquet('{bystander}/orders.parquet')",
    "ATTACH '{root}/x.duckdb' AS x",
    "COPY orders TO '{root}/leak.csv'",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "SELECT getenv('CT_TEST_SECRET')",
]


@pytest.mark.parametrize("query", SQL_ATTACKS)
def test_sql_attack(env, query):
    out = env.sql(query)
    assert out.startswith("Error:"), out
    assert not (env.root / "leak.csv").exists()
    env.check_alive()


def test_no_label_in_any_output(env):
    assert env.outputs, "the attacks ran"
    for out in env.outputs:
        assert LABEL not in out and SEED not in out
    assert shutil.which("bwrap") or shutil.which("unshare")
    assert os.environ.get("CT_TEST_SECRET") == LABEL
