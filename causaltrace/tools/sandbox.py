"""Isolation of agent Python code: how a worker process is launched.

Agent code runs in a fresh set of Linux namespaces built by `bubblewrap
<https://github.com/containers/bubblewrap>`_ (``bwrap``), the sandbox Flatpak uses, or, where
``bwrap`` is missing, by util-linux ``unshare`` plus ``mount``/``pivot_root``/``setpriv``. In
both cases the worker sees:

* a new, empty root file system holding read-only binds of ``/usr`` (and the ``/bin``, ``/lib``
  links), the interpreter with its standard library, the allowed data packages
  (pandas, numpy, scipy, duckdb, pyarrow and their dependencies) under ``/opt/causaltrace/site``,
  the worker scripts, and the episode's visible files at ``/episode`` (its working directory);
* no package directory of the host (each that a bind would show is masked by an empty tmpfs:
  the interpreter's, its base's when it runs in a venv, the user's, and every
  ``site-packages``/``dist-packages`` directory under ``/usr``), hence neither ``causaltrace``
  nor ``domains``, nor any other installed package; no ``/home``, ``/root``, ``/work``, host
  ``/tmp`` or ``/etc`` (so no labels, manifests, seeds or other episodes);
* a private ``/proc`` (its own processes only), a minimal ``/dev``, a small private ``/tmp``;
* no network (a new network namespace with only loopback), its own IPC, UTS and PID namespaces;
* an empty environment apart from a few fixed variables;
* a seccomp filter (:func:`seccomp_filter`) refusing what would reach past the sandbox or
  outlive it: kernel keyrings, file locks and notifications on shared files, memfds and System V
  IPC, new namespaces and mounts, ``ptrace``, ``bpf``, ``io_uring`` and the like;
* the worker as PID 1 of its PID namespace (bwrap ``--as-pid-1``), where it supervises the REPL
  (see ``python_worker.py``);
* no privileges: as root, the worker drops to a random unprivileged uid (``setpriv``) so that
  ``RLIMIT_NPROC`` applies and counts this sandbox only; as a normal user, bwrap uses an
  unprivileged user namespace (``--disable-userns`` forbids nesting another one).

Resource limits (address space, CPU time, processes, file size) are set by the worker itself
before it runs anything (see ``python_worker.py``). Where no sandbox can be built, agent code is
refused unless the operator passes ``allow_unsandboxed=True``, which logs a loud warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.metadata as metadata
import importlib.util
import json
import logging
import os
import random
import re
import shlex
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from causaltrace.tools.config import (
    FORBIDDEN_PACKAGES,
    SandboxError,
    SandboxUnavailableError,
    ToolConfig,
)
from causaltrace.tools.seccomp import SECCOMP_LOADER, seccomp_filter

log = logging.getLogger("causaltrace.tools")
PIPE = asyncio.subprocess.PIPE

# The worker programs, bound read-only (and alone: no other file of causaltrace) into every
# sandbox under SANDBOX_WORKERS; they import only the standard library, worker_protocol and the
# data packages.
WORKER_FILES = ("python_worker.py", "sql_worker.py", "worker_protocol.py", "fork_server.py")
WORKER_DIR = Path(__file__).parent
SANDBOX_WORKERS = "/opt/causaltrace"
SANDBOX_SITE = f"{SANDBOX_WORKERS}/site"
SANDBOX_DATA = "/episode"
# Where a fork server sees the slots of every worker (each forked worker unmounts it).
SANDBOX_SLOTS = f"{SANDBOX_WORKERS}/slots"
# Top-level entries of the host mirrored into the sandbox (read-only), as links or binds.
SYSTEM_ROOTS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache",)
SANDBOX_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_MAX_THREADS": "1",
    "MALLOC_ARENA_MAX": "2",
    # pyarrow's default pool (mimalloc) keeps what a Parquet read freed; malloc gives it back.
    "ARROW_DEFAULT_MEMORY_POOL": "system",
    "MPLCONFIGDIR": "/tmp",
}
# The environment of the launcher process itself: nothing from the host (a sandboxed process
# could otherwise read it from /proc/1/environ).
LAUNCHER_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
# Random uids for sandboxes started by root: high enough never to name a real account.
SANDBOX_UID_RANGE = (1 << 30, (1 << 31) - 2)
UNSANDBOXED_WARNING = (
    "causaltrace.tools: RUNNING AGENT PYTHON CODE WITHOUT A SANDBOX (allow_unsandboxed=True). "
    "Agent code can read any file this process can (labels, seeds, other episodes), import the "
    "generator, use the network and read environment variables. Use this only for debugging "
    "with trusted code; install bubblewrap (apt-get install bubblewrap) and allow user "
    "namespaces for real runs."
)


@dataclass(frozen=True)
class PythonRuntime:
    """What of the host's Python the sandbox needs.

    ``visible`` are host paths bound read-only at the same path (the interpreter binary, its
    shared library, the standard library); ``site_units`` are (host path, name) pairs bound under
    :data:`SANDBOX_SITE`: the top-level files and directories of the allowed distributions, as
    listed in their installed ``RECORD``; ``masks`` are host directories hidden by an empty
    tmpfs (every site-packages directory, and wherever the generator's code lives).
    """

    executable: str
    visible: tuple[str, ...]
    site_units: tuple[tuple[str, str], ...]
    masks: tuple[str, ...]
    host_site: tuple[str, ...]

    @classmethod
    def discover(cls, packages: tuple[str, ...]) -> PythonRuntime:
        return _discover_runtime(tuple(packages))


@functools.cache
def _discover_runtime(packages: tuple[str, ...]) -> PythonRuntime:
    executable = os.path.realpath(sys.executable)
    paths = sysconfig.get_paths()
    visible = [executable]
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        libdir = sysconfig.get_config_var("LIBDIR") or ""
        soname = sysconfig.get_config_var("INSTSONAME") or sysconfig.get_config_var("LDLIBRARY")
        if libdir and soname and os.path.exists(os.path.join(libdir, soname)):
            visible.append(os.path.realpath(os.path.join(libdir, soname)))
    for key in ("stdlib", "platstdlib"):
        path = os.path.realpath(paths[key])
        if path not in visible:
            visible.append(path)
    host_site = _site_dirs()
    masks = set(host_site)
    # Third-party packages next to a standard library that is bound (a venv's base interpreter
    # keeps its site-packages inside it), and every package directory of any Python
    # installation under the system roots (/usr is bound whole).
    for base in visible[1:]:
        for name in ("site-packages", "dist-packages"):
            if os.path.isdir(os.path.join(base, name)):
                masks.add(os.path.realpath(os.path.join(base, name)))
    masks.update(_package_dirs_under(SYSTEM_ROOTS))
    masks.update(_generator_roots())
    units = _distribution_units(packages)
    return PythonRuntime(
        executable=executable,
        visible=tuple(visible),
        site_units=tuple(sorted(units.items(), key=lambda kv: kv[1])),
        masks=tuple(sorted(masks)),
        host_site=tuple(host_site),
    )


PACKAGE_DIR_NAMES = frozenset({"site-packages", "dist-packages"})


def _package_dirs_under(roots: tuple[str, ...]) -> set[str]:
    """Every Python package directory below ``roots`` (``site-packages``, ``dist-packages``, of
    the system Python, of /usr/local, of a Python bundled with some tool, of a venv), and every
    copy of the generator's packages there (a ``causaltrace`` or ``domains`` directory with an
    ``__init__.py``). One walk, at most a second, once per process."""
    found: set[str] = set()
    for root in roots:
        if os.path.islink(root) or not os.path.isdir(root):
            continue
        for top, dirs, _files in os.walk(root, onerror=lambda error: None):
            keep = []
            for name in dirs:
                path = os.path.join(top, name)
                if name in PACKAGE_DIR_NAMES or (
                    name in FORBIDDEN_PACKAGES and os.path.isfile(os.path.join(path, "__init__.py"))
                ):
                    found.add(os.path.realpath(path))
                else:
                    keep.append(name)
            dirs[:] = keep
    return found


def _site_dirs() -> list[str]:
    """Package directories of this interpreter: its own, its base's (in a venv), the user's."""
    prefixes = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
    dirs = list(site.getsitepackages(sorted(prefixes)))
    with contextlib.suppress(AttributeError, OSError):
        dirs.append(site.getusersitepackages())
    paths = sysconfig.get_paths()
    dirs += [paths["purelib"], paths["platlib"]]
    out = []
    for d in dirs:
        if d and os.path.isdir(d):
            real = os.path.realpath(d)
            if real not in out:
                out.append(real)
    return out


def _generator_roots() -> set[str]:
    """Directories holding the generator's code (the repo root for an editable install)."""
    roots = set()
    for name in FORBIDDEN_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        for location in (spec.submodule_search_locations or []) if spec else []:
            roots.add(os.path.realpath(os.path.dirname(location)))
    return roots


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _distribution_units(packages: tuple[str, ...]) -> dict[str, str]:
    """Host paths of the top-level entries of ``packages`` and their installed dependencies."""
    units: dict[str, str] = {}
    seen: set[str] = set()
    todo = list(packages)
    while todo:
        name = todo.pop()
        key = _normalize(name)
        if key in seen:
            continue
        seen.add(key)
        if key in FORBIDDEN_PACKAGES:
            raise SandboxError(f"package {name!r} is the generator and may not enter the sandbox")
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            if name in packages:
                raise SandboxError(
                    f"package {name!r} (ToolConfig.sandbox_packages) is not installed"
                ) from None
            continue  # an optional dependency that is not installed
        for requirement in dist.requires or []:
            if "extra ==" in requirement or "extra==" in requirement:
                continue
            match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
            if match:
                todo.append(match.group(1))
        base = Path(dist.locate_file(""))
        if dist.files is None:  # no RECORD (e.g. a Debian-packaged egg-info): use top_level.txt
            for top in (dist.read_text("top_level.txt") or "").split():
                if top.split(".")[0] in FORBIDDEN_PACKAGES:
                    raise SandboxError(f"distribution {name!r} ships {top!r}, a generator name")
                for host in [base / top, base / f"{top}.py", *base.glob(f"{top}.*.so")]:
                    if host.exists():
                        units[str(host)] = host.name
        for file in dist.files or []:
            parts = file.parts
            if not parts or parts[0] == ".." or file.suffix == ".pth":
                continue
            rel = parts[0] if parts[0] != "__pycache__" else "/".join(parts[:2])
            if parts[0] != "__pycache__" and len(parts) > 1 and parts[0].endswith(".data"):
                continue
            if parts[0].split(".")[0] in FORBIDDEN_PACKAGES:
                raise SandboxError(
                    f"distribution {dist.metadata['Name']!r} ships {parts[0]!r}, a name of the "
                    "generator; it may not enter the sandbox"
                )
            host = base / rel
            if host.exists():
                units[str(host)] = rel
    return units


def _parents(paths: list[str]) -> list[str]:
    """Every proper ancestor directory of ``paths`` except ``/``, parents first."""
    out: list[str] = []
    for path in paths:
        parts = Path(path).parts[1:-1]
        for i in range(1, len(parts) + 1):
            parent = "/" + "/".join(parts[:i])
            if parent not in out:
                out.append(parent)
    return out


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


@dataclass(frozen=True)
class LaunchSpec:
    """A command that starts one worker, and how to run it.

    ``pass_fds`` are inherited by the command and must be closed by the caller once it has
    started (:meth:`close`).
    """

    argv: tuple[str, ...]
    env: dict[str, str]
    sandboxed: bool
    pass_fds: tuple[int, ...] = ()

    def close(self) -> None:
        for fd in self.pass_fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    async def start(self, stdin: Any = PIPE, stdout: Any = PIPE) -> asyncio.subprocess.Process:
        """Run the command in a session of its own (stderr piped), then close ``pass_fds``."""
        try:
            return await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=stdin,
                stdout=stdout,
                stderr=PIPE,
                env=self.env,
                cwd="/",
                start_new_session=True,
                pass_fds=self.pass_fds,
            )
        finally:
            self.close()


class Launcher(ABC):
    """Builds the command that starts a worker whose data directory is ``data_dir``."""

    name: str = ""
    sandboxed: bool = True

    def __init__(self, config: ToolConfig):
        self.config = config
        self.runtime = PythonRuntime.discover(config.sandbox_packages)
        # Set by the tool runtime when it runs a fork server for this launcher (forking.py):
        # workers are then forked from it instead of started one sandbox each.
        self.fork_server: Any = None

    def worker_config(self, data_dir: str, site_dirs: list[str]) -> dict[str, Any]:
        c = self.config
        return {
            "site": site_dirs,
            "data_dir": data_dir,
            "sandboxed": self.sandboxed,
            "preload": list(c.preload),
            "max_output_chars": c.python_max_output_chars,
            "limits": {
                "data_bytes": c.memory_bytes,
                "cpu_seconds": c.cpu_seconds,
                "processes": c.max_processes,
                "file_bytes": c.max_file_bytes,
                "open_files": c.max_open_files,
            },
        }

    @abstractmethod
    def spec(self, slot: Path, program: list[str] | None = None) -> LaunchSpec:
        """The command for a worker whose files are ``slot/episode`` (``slot`` is private).

        ``program`` replaces the worker script and its config on the interpreter's command line
        (the probe runs ``-c <code>`` instead).
        """

    def data_dir(self, slot: Path) -> str:
        """Where the worker sees its episode's files."""
        return SANDBOX_DATA

    def script(self, name: str) -> str:
        """Where the worker sees the worker program ``name`` (one of :data:`WORKER_FILES`)."""
        return f"{SANDBOX_WORKERS}/{name}"

    def worker_program(self, slot: Path, program: list[str] | None = None) -> list[str]:
        """The worker script and its arguments (``program``, or the Python tool's worker)."""
        if program is None:
            config = self.worker_config(self.data_dir(slot), [SANDBOX_SITE])
            program = [self.script("python_worker.py"), json.dumps(config)]
        return program

    def python_argv(self, slot: Path, program: list[str] | None) -> list[str]:
        return [self.runtime.executable, "-I", "-S", "-B", *self.worker_program(slot, program)]

    def fork_server_settings(self) -> dict[str, Any]:
        """What ``fork_server.py`` needs: where the packages and the slots are, what to import,
        the size of each worker's /tmp, and the seccomp filter each worker installs on itself."""
        seccomp = getattr(self, "seccomp", None)
        return {
            "site": [SANDBOX_SITE],
            "slots": SANDBOX_SLOTS,
            "preload": list(self.config.preload),
            "tmp_bytes": self.config.tmp_bytes,
            "seccomp": seccomp.hex() if seccomp else "",
        }

    def fork_server_spec(self, slot: Path, slot_root: Path) -> LaunchSpec:
        """The command that starts this launcher's fork server (``fork_server.py``), which sees
        ``slot_root`` (every worker's slot) read-only at :data:`SANDBOX_SLOTS`."""
        raise SandboxUnavailableError(f"the {self.name} launcher has no fork server")

    def drop_privileges(self) -> list[str]:
        """As root: switch to a random unprivileged uid with no capabilities, via setpriv."""
        if os.geteuid() != 0:
            return []
        setpriv = shutil.which("setpriv", path=LAUNCHER_ENV["PATH"])
        if setpriv is None:
            raise SandboxUnavailableError(
                "setpriv (util-linux) is needed to drop root in the sandbox"
            )
        uid = random.randint(*SANDBOX_UID_RANGE)
        return [
            setpriv,
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--pdeathsig=KILL",
            "--",
        ]

    def probe(self) -> None:
        """Start a throwaway sandbox running a trivial program; raise if that fails."""
        code = "import os; assert not os.path.exists('/etc/passwd'); print('uid', os.getuid())"
        with tempfile.TemporaryDirectory(prefix="causaltrace-probe-") as tmp:
            slot = Path(tmp)
            os.chmod(slot, 0o755)
            (slot / "episode").mkdir(mode=0o755)
            spec = self.spec(slot, ["-c", code])
            try:
                done = subprocess.run(
                    spec.argv,
                    env=spec.env,
                    cwd="/",
                    capture_output=True,
                    timeout=60,
                    start_new_session=True,
                    stdin=subprocess.DEVNULL,
                    pass_fds=spec.pass_fds,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise SandboxError(f"{self.name}: cannot start a sandbox: {exc}") from None
            finally:
                spec.close()
            if done.returncode != 0 or b"uid" not in done.stdout:
                err = done.stderr.decode(errors="replace").strip()[-800:]
                raise SandboxError(
                    f"{self.name}: a test sandbox failed (exit status {done.returncode}): {err}"
                )


class BwrapLauncher(Launcher):
    """Bubblewrap: every namespace unshared, a root file system made of read-only binds."""

    name = "bwrap"

    def __init__(self, config: ToolConfig):
        super().__init__(config)
        bwrap = shutil.which("bwrap", path=LAUNCHER_ENV["PATH"])
        if bwrap is None:
            raise SandboxUnavailableError("bwrap (bubblewrap) is not installed")
        self.bwrap = bwrap
        self.as_pid_1 = "--as-pid-1" in _bwrap_help(bwrap)
        self.seccomp = seccomp_filter()

    def spec(self, slot: Path, program: list[str] | None = None) -> LaunchSpec:
        command = [*self.drop_privileges(), *self.python_argv(slot, program)]
        return self._launch(slot, command, self.seccomp, caps=("CAP_SETUID", "CAP_SETGID"))

    def fork_server_spec(self, slot: Path, slot_root: Path) -> LaunchSpec:
        """The fork server's sandbox: a worker's, except that it keeps root with the
        capabilities each fork needs to make its own namespaces and drop to its own uid (it
        never runs agent code), has no seccomp filter (each fork installs it last), and sees
        every slot of the runtime (each fork keeps only its own).

        Started by real root, it needs no user namespace and its forks switch to random uids.
        Started by a normal user, it is root of an unprivileged user namespace (bwrap ``--uid
        0``), without ``--disable-userns``: each fork makes a user namespace of its own, nested
        in the server's, to map its random uid (``CAP_SETFCAP`` lets it map the server's root,
        the only id an unprivileged namespace has).
        """
        program = [self.script("fork_server.py"), json.dumps(self.fork_server_settings())]
        command = [self.runtime.executable, "-I", "-S", "-B", *program]
        caps = ("CAP_SETUID", "CAP_SETGID", "CAP_SYS_ADMIN", "CAP_SETPCAP")
        if os.geteuid() != 0:
            caps += ("CAP_SETFCAP",)
        return self._launch(slot, command, None, caps=caps, slots=slot_root, server=True)

    def fork_server_settings(self) -> dict[str, Any]:
        """The launcher's settings, and whether each fork makes a user namespace of its own
        (a server started by a normal user has only its own uid to give away)."""
        return {**super().fork_server_settings(), "userns": os.geteuid() != 0}

    def _launch(
        self,
        slot: Path,
        command: list[str],
        seccomp: bytes | None,
        caps: tuple[str, ...],
        slots: Path | None = None,
        server: bool = False,
    ) -> LaunchSpec:
        rt = self.runtime
        args = [self.bwrap, "--die-with-parent", "--new-session"]
        if os.geteuid() == 0:
            # Real root needs no user namespace; the worker drops to a random uid (setpriv).
            args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
            args += ["--unshare-cgroup-try"]
            for cap in caps:
                args += ["--cap-add", cap]
        elif server:
            # Root of an unprivileged user namespace, with the capabilities a fork needs there
            # (and nowhere else); its forks nest user namespaces, so none is disabled here.
            args += ["--unshare-all", "--unshare-user", "--uid", "0", "--gid", "0"]
            for cap in caps:
                args += ["--cap-add", cap]
        else:
            args += ["--unshare-all", "--unshare-user", "--disable-userns"]
        args += ["--hostname", "sandbox"]
        if self.as_pid_1:  # the worker is PID 1 and supervises its REPL (python_worker.py)
            args += ["--as-pid-1"]
        size = str(self.config.tmp_bytes)
        # The private /tmp first: an interpreter that lives under the host's /tmp is bound into it.
        args += ["--perms", "1777", "--size", size, "--tmpfs", "/tmp"]
        visible_roots = []
        for root in SYSTEM_ROOTS:
            if os.path.islink(root):
                args += ["--symlink", os.readlink(root), root]
            elif os.path.isdir(root):
                args += ["--ro-bind", root, root]
                visible_roots.append(root)
        binds = [p for p in (*SYSTEM_FILES, *rt.visible) if os.path.exists(p)]
        binds = [p for p in binds if not _under(p, visible_roots)]
        # bwrap gives the parents it creates the host's modes (/root is 0700): open them up so
        # the unprivileged sandbox uid can reach what is bound below them.
        for parent in _parents([*binds, SANDBOX_SITE + "/x"]):
            if parent != "/tmp":
                args += ["--perms", "0755", "--dir", parent]
        for path in binds:
            args += ["--ro-bind", path, path]
        visible_roots += list(rt.visible)
        for mask in rt.masks:
            if _under(mask, visible_roots) and mask not in ("/", "/usr"):
                args += ["--tmpfs", mask, "--remount-ro", mask]
        for host, rel in rt.site_units:
            args += ["--ro-bind", host, f"{SANDBOX_SITE}/{rel}"]
        for name in WORKER_FILES:
            args += ["--ro-bind", str(WORKER_DIR / name), self.script(name)]
        args += ["--ro-bind", str(slot / "episode"), SANDBOX_DATA]
        if slots is not None:
            args += ["--ro-bind", str(slots), SANDBOX_SLOTS]
        args += ["--proc", "/proc", "--dev", "/dev"]
        args += ["--perms", "1777", "--size", size, "--tmpfs", "/dev/shm"]
        args += ["--remount-ro", "/", "--chdir", SANDBOX_DATA, "--clearenv"]
        for key, value in SANDBOX_ENV.items():
            args += ["--setenv", key, value]
        fds = []
        try:
            if seccomp is not None:
                fds.append(_memfd("bwrap-seccomp", seccomp))
                args += ["--seccomp", str(fds[-1])]
            # Hand the options over through a memfd (--args) so that the sandbox's
            # /proc/1/cmdline shows no host path (the slot directory, the worker's location).
            fds.append(_memfd("bwrap-args", b"".join(a.encode() + b"\0" for a in args[1:])))
        except SandboxError:
            for fd in fds:
                os.close(fd)
            raise
        argv = (self.bwrap, "--args", str(fds[-1]), "--", *command)
        return LaunchSpec(argv, dict(LAUNCHER_ENV), sandboxed=True, pass_fds=tuple(fds))


def _memfd(name: str, data: bytes) -> int:
    """A close-on-exec memfd holding ``data``, read from its start. Where memfds are refused
    (a container's seccomp filter, a kernel without them) a :class:`SandboxError` says so, so
    that ``sandbox="auto"`` goes on to the next launcher instead of raising a bare OSError."""
    try:
        fd = os.memfd_create(name, os.MFD_CLOEXEC)
    except OSError as exc:
        raise SandboxError(
            f"bwrap: cannot create the memfd {name!r} that hands bwrap its options "
            f"({type(exc).__name__}: {exc.strerror or exc}); this machine refuses memfds "
            "(a container's seccomp filter or an old kernel)"
        ) from None
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError as exc:
        os.close(fd)
        raise SandboxError(f"bwrap: cannot write the memfd {name!r}: {exc}") from None
    return fd


@functools.cache
def _bwrap_help(bwrap: str) -> str:
    try:
        done = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout + done.stderr


class UnshareLauncher(Launcher):
    """Fallback without bwrap: ``unshare`` namespaces, a shell script of binds, ``pivot_root``.

    The script runs inside the new namespaces (as real root, or as root of a new user namespace
    for a normal user), builds the root file system in a tmpfs, pivots into it and execs the
    worker through ``setpriv`` with every capability dropped.
    """

    name = "unshare"

    def __init__(self, config: ToolConfig):
        super().__init__(config)
        tools = {
            t: shutil.which(t, path=LAUNCHER_ENV["PATH"]) for t in ("unshare", "setpriv", "sh")
        }
        missing = [t for t, p in tools.items() if p is None]
        if missing:
            raise SandboxUnavailableError(f"unshare fallback needs {missing} (util-linux)")
        self.tools = tools
        self.seccomp = seccomp_filter()

    def spec(self, slot: Path, program: list[str] | None = None) -> LaunchSpec:
        rt = self.runtime
        q = shlex.quote
        root = slot / "root"
        root.mkdir(mode=0o700, exist_ok=True)
        lines = [
            "set -eu",
            f"R={q(str(root))}",
            'mount -t tmpfs -o mode=0755,size=4m tmpfs "$R"',
            # Read-only bind of a directory or file, keeping locked flags of the source mount.
            'b() { if [ -d "$1" ]; then mkdir -p "$R$2"; else mkdir -p "$(dirname "$R$2")";'
            ' : > "$R$2"; fi; mount --bind "$1" "$R$2";'
            ' mount -o remount,bind,ro,nosuid,nodev "$R$2" 2>/dev/null ||'
            ' mount -o remount,bind,ro,nosuid,nodev,noexec "$R$2"; }',
            # The private /tmp first: an interpreter under the host's /tmp is bound into it.
            'mkdir -p "$R/tmp"',
            f'mount -t tmpfs -o mode=1777,nosuid,nodev,size={self.config.tmp_bytes} tmpfs "$R/tmp"',
        ]
        visible_roots = []
        links = []
        for top in SYSTEM_ROOTS:
            if os.path.islink(top):
                links.append(f'ln -s {q(os.readlink(top))} "$R"{q(top)}')
            elif os.path.isdir(top):
                lines.append(f"b {q(top)} {q(top)}")
                visible_roots.append(top)
        for path in SYSTEM_FILES:
            if os.path.exists(path):
                lines.append(f"b {q(path)} {q(path)}")
        for path in rt.visible:
            if not _under(path, visible_roots):
                lines.append(f"b {q(path)} {q(path)}")
        visible_roots += list(rt.visible)
        for mask in rt.masks:
            if _under(mask, visible_roots) and mask not in ("/", "/usr"):
                lines.append(f'mount -t tmpfs -o ro,size=4k,mode=0755 tmpfs "$R"{q(mask)}')
        for host, rel in rt.site_units:
            lines.append(f"b {q(host)} {q(SANDBOX_SITE + '/' + rel)}")
        for name in WORKER_FILES:
            lines.append(f"b {q(str(WORKER_DIR / name))} {self.script(name)}")
        lines.append(f"b {q(str(slot / 'episode'))} {SANDBOX_DATA}")
        size = self.config.tmp_bytes
        lines += [
            'mkdir -p "$R/proc" "$R/dev"',
            'mount -t proc -o nosuid,nodev,noexec proc "$R/proc"',
            'mount -t tmpfs -o mode=0755,nosuid,size=1m tmpfs "$R/dev"',
            'for d in null zero full random urandom tty; do : > "$R/dev/$d";'
            ' mount --bind "/dev/$d" "$R/dev/$d"; done',
            'mkdir -p "$R/dev/shm" "$R/dev/pts"',
            f'mount -t tmpfs -o mode=1777,nosuid,nodev,size={size} tmpfs "$R/dev/shm"',
            'ln -s /proc/self/fd "$R/dev/fd"',
            *links,
            'cd "$R"',
            "mkdir .oldroot",
            "pivot_root . .oldroot",
            "cd /",
            "umount -l /.oldroot",
            "rmdir /.oldroot",
            "mount -o remount,ro,bind /",
        ]
        if os.geteuid() != 0:
            # No nested user namespaces (the seccomp filter refuses them too). This sysctl
            # belongs to the user namespace of the writer, here the one `unshare --user` just
            # made; as root there is no new user namespace and it would be the host's: never.
            lines.append("echo 0 > /proc/sys/user/max_user_namespaces 2>/dev/null || true")
        lines.append(f"cd {SANDBOX_DATA}")
        env = " ".join(f"{k}={q(v)}" for k, v in SANDBOX_ENV.items())
        if os.geteuid() == 0:
            drop = self.drop_privileges()
        else:
            drop = [
                self.tools["setpriv"],
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--securebits=+noroot,+noroot_locked,+no_setuid_fixup,+no_setuid_fixup_locked",
                "--no-new-privs",
                "--pdeathsig=KILL",
                "--",
            ]
        python = self.python_argv(slot, program)
        if self.seccomp is not None:  # setpriv has set no_new_privs: load the filter, then exec
            loader = [python[0], "-I", "-S", "-B", "-c", SECCOMP_LOADER, self.seccomp.hex()]
            python = [*loader, *python]
        command = [*drop, *python]
        lines.append(f"exec /usr/bin/env -i {env} " + " ".join(q(a) for a in command))
        script = "\n".join(lines)
        args = [self.tools["unshare"], "--mount", "--pid", "--net", "--ipc", "--uts", "--fork"]
        args += ["--kill-child", "--propagation", "private"]
        if os.geteuid() != 0:
            args += ["--user", "--map-root-user"]
        args += ["--", self.tools["sh"], "-c", script, "sandbox-setup"]
        return LaunchSpec(tuple(args), dict(LAUNCHER_ENV), sandboxed=True)


class UnsandboxedLauncher(Launcher):
    """No isolation at all: only for debugging with trusted code (loud warning)."""

    name = "none"
    sandboxed = False

    def data_dir(self, slot: Path) -> str:
        return str(slot / "episode")

    def script(self, name: str) -> str:
        return str(WORKER_DIR / name)

    def spec(self, slot: Path, program: list[str] | None = None) -> LaunchSpec:
        if program is None:
            config = self.worker_config(self.data_dir(slot), list(self.runtime.host_site))
            program = [self.script("python_worker.py"), json.dumps(config)]
        argv = [self.runtime.executable, "-I", "-S", "-B", *program]
        env = {**LAUNCHER_ENV, **{k: v for k, v in SANDBOX_ENV.items() if k != "PATH"}}
        return LaunchSpec(tuple(argv), env, sandboxed=False)

    def probe(self) -> None:
        return None


_LAUNCHERS: dict[str, type[Launcher]] = {"bwrap": BwrapLauncher, "unshare": UnshareLauncher}


def select_launcher(config: ToolConfig) -> Launcher:
    """The first sandbox that works on this machine, per ``config.sandbox``.

    ``"auto"`` tries bwrap, then unshare; each candidate is probed by starting a throwaway
    sandbox. If none works, :class:`SandboxUnavailableError` explains why, unless the config
    allows unsandboxed mode, which is then used with a loud warning.
    """
    if config.sandbox == "none":
        return _unsandboxed(config, reasons=["ToolConfig.sandbox='none'"])
    names = ["bwrap", "unshare"] if config.sandbox == "auto" else [config.sandbox]
    reasons = []
    for name in names:
        try:
            launcher = _LAUNCHERS[name](config)
            launcher.probe()
            return launcher
        except (SandboxUnavailableError, SandboxError) as exc:
            reasons.append(str(exc))
    if config.allow_unsandboxed:
        return _unsandboxed(config, reasons)
    raise SandboxUnavailableError(
        "cannot isolate agent Python code on this machine, so it will not run: "
        + "; ".join(reasons)
        + ". Install bubblewrap (apt-get install bubblewrap) and allow unprivileged user "
        "namespaces (sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu 24.04+ "
        "kernel.apparmor_restrict_unprivileged_userns=0), or run as root. To run agent code "
        "WITHOUT isolation (unsafe, debugging only), pass allow_unsandboxed=True."
    )


def _unsandboxed(config: ToolConfig, reasons: list[str]) -> Launcher:
    message = UNSANDBOXED_WARNING + " Reason: " + "; ".join(reasons)
    log.critical(message)
    warnings.warn(message, RuntimeWarning, stacklevel=3)
    print(message, file=sys.stderr)
    return UnsandboxedLauncher(config)
