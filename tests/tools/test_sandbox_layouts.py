"""The generator stays out of the sandbox whatever the host's Python layout (issue 12, D3).

Layouts, each driving the tools from its own interpreter (a subprocess), under both sandboxes:

* ``host``: the interpreter running the tests (pyenv or system Python, causaltrace editable);
* ``venv-system-site``: a venv made with ``--system-site-packages`` on a base interpreter whose
  own site-packages holds the data packages *and a non-editable causaltrace* (the base is a
  hard-linked copy of this interpreter's prefix, so that installing into it touches nothing of
  the machine's);
* ``venv``: a plain venv on the same base, with the data packages and a non-editable
  causaltrace of its own (the base's site-packages, inside the bound standard library, is the
  one the review found importable from the sandbox).

In each, agent code must not import ``causaltrace`` or ``domains`` (even after adding every
package directory it can find to ``sys.path``), must find no file of theirs anywhere on the
visible file system, must see no non-empty site-packages or dist-packages directory, must not
list the host's package directories (the venv's, its base's, the user's), and must be able to
import nothing but the standard library and the allowed packages.

The layouts are built once per test session (one download from the package index, one local
install without byte-compiling, hard links for the rest).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from _tools_support import make_episode

import causaltrace

PACKAGES = ("numpy", "pandas", "pyarrow", "duckdb", "networkx")
TOOLS = {"bwrap": ("bwrap", "apt-get install bubblewrap"), "unshare": ("unshare", "util-linux")}

# Run by each layout's interpreter: start the tools in sandbox argv[1] on episode argv[2] and run
# AGENT_CODE as agent code; print what the host saw and what the agent found, as JSON.
HOST_SCRIPT = r"""
import hashlib, importlib.util, json, os, pkgutil, site, sys, sysconfig
from pathlib import Path
import causaltrace
from causaltrace.tools import SyncToolRuntime, ToolConfig
from causaltrace.tools.sandbox import WORKER_FILES  # bound into every sandbox on purpose

kind, episode, agent_code = sys.argv[1], sys.argv[2], sys.argv[3]
generator = {}  # file name -> sha256 of each file of the generator (not trivially small)
for package in ("causaltrace", "causaltrace_domains"):
    root = Path(importlib.util.find_spec(package).origin).parent
    for path in root.rglob("*"):
        if path.is_file() and path.name not in WORKER_FILES and path.stat().st_size > 200:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            generator.setdefault(path.name, []).append(digest)
host_dirs = sorted({
    *site.getsitepackages([sys.prefix, sys.exec_prefix, sys.base_prefix]),
    site.getusersitepackages(),
    sysconfig.get_paths()["purelib"],
    sysconfig.get_paths()["platlib"],
})
stdlib_dirs = [os.path.dirname(os.__file__), *(p for p in sys.path if p.endswith("lib-dynload"))]
stdlib = sorted({m.name for m in pkgutil.iter_modules(stdlib_dirs)} | set(sys.stdlib_module_names))
config = ToolConfig(
    sandbox=kind, warm_workers=0, python_timeout=90,
    sandbox_packages=("pandas", "numpy", "pyarrow", "duckdb"),
    preload=("numpy", "pandas", "pyarrow.parquet", "duckdb"),
)
code = agent_code.replace("GENERATOR", repr(generator)).replace("HOST_DIRS", repr(host_dirs))
code = code.replace("STDLIB", repr(stdlib))
with SyncToolRuntime(config) as runtime, runtime.episode(episode) as tools:
    out = tools.python(code)
print(json.dumps({
    "causaltrace": causaltrace.__file__, "prefix": sys.prefix, "base_prefix": sys.base_prefix,
    "host_dirs": host_dirs, "agent": out,
}))
"""

AGENT_CODE = r"""
import hashlib, importlib, json, os, pkgutil, sys
generator, host_dirs = GENERATOR, HOST_DIRS
found, package_dirs = [], []
for top, subdirs, files in os.walk("/"):
    if top.startswith(("/proc", "/sys", "/dev")):
        subdirs[:] = []
        continue
    if os.path.basename(top) in ("site-packages", "dist-packages") and (subdirs or files):
        package_dirs.append(top)
    for name in files:
        path = os.path.join(top, name)
        if "causaltrace" in name or name.startswith("__editable__"):
            found.append(path)
        elif name in generator:
            try:
                with open(path, "rb") as handle:
                    digest = hashlib.sha256(handle.read()).hexdigest()
            except OSError:
                continue
            if digest in generator[name]:
                found.append(path)
listed = {}
for path in host_dirs:
    try:
        listed[path] = os.listdir(path)
    except OSError as exc:
        listed[path] = type(exc).__name__
sys.path.extend(package_dirs)  # whatever package directory is visible, try importing from it
imports = {}
for name in ("causaltrace", "causaltrace_domains", "domains", "ct_user_site_marker"):
    try:
        importlib.import_module(name)
        imports[name] = "IMPORTED"
    except BaseException as exc:
        imports[name] = f"{type(exc).__name__}: {exc}"
modules = {m.name for m in pkgutil.iter_modules()}
site_dir = "/opt/causaltrace/site"
allowed = set(STDLIB) | {m.name for m in pkgutil.iter_modules([site_dir])}
print(json.dumps({
    "found": found, "package_dirs": package_dirs, "listed": listed, "imports": imports,
    "unexpected_modules": sorted(modules - allowed), "sys_path": sys.path,
}))
"""


pytestmark = pytest.mark.sandbox


def require_sandbox(kind: str) -> None:
    tool, package = TOOLS[kind]
    if shutil.which(tool) is None:
        pytest.fail(f"{tool} is not installed: the {kind} sandbox tests need it ({package})")


def run(*argv: str | os.PathLike[str], timeout: float = 300, **kwargs) -> str:
    done = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, **kwargs
    )
    if done.returncode != 0:
        raise AssertionError(f"{argv[:6]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


def pip(python: Path, *args: str | os.PathLike[str]) -> None:
    """This interpreter's pip, acting on ``python``'s environment."""
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-compile", "-q", *args)


def causaltrace_wheel(target: Path) -> Path:
    """A wheel of the causaltrace sources being tested (``causaltrace``, and ``domains/``
    installed as ``causaltrace_domains``, as setup.py maps it), made directly: building in the
    repository would write there, and an isolated build downloads."""
    repo = Path(causaltrace.__file__).resolve().parents[1]
    version = metadata.version("causaltrace")
    info = f"causaltrace-{version}.dist-info"
    files: dict[str, bytes] = {}
    for folder, package in (("causaltrace", "causaltrace"), ("domains", "causaltrace_domains")):
        for path in sorted((repo / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files[f"{package}/{path.relative_to(repo / folder).as_posix()}"] = path.read_bytes()
    files[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: causaltrace\nVersion: {version}\n".encode()
    )
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    wheel = target / f"causaltrace-{version}-py3-none-any.whl"
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return wheel


def base_copy(target: Path) -> Path:
    """A Python installation of its own: this interpreter's binary and standard library,
    hard-linked (fast, no space), with an empty site-packages."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    executable = Path(os.path.realpath(sys.executable))
    (target / "bin").mkdir(parents=True)
    os.link(executable, target / "bin" / executable.name)
    lib = target / "lib" / stdlib.name
    ignore = shutil.ignore_patterns("site-packages", "dist-packages", "__pycache__", "test")
    shutil.copytree(stdlib, lib, ignore=ignore, copy_function=os.link)
    (lib / "site-packages").mkdir()
    return target / "bin" / executable.name


@pytest.fixture(scope="session")
def layouts(tmp_path_factory) -> Iterator[dict[str, Path]]:
    # Not under /tmp, where interpreters seldom live (and where a sandbox's own /tmp would be).
    parent = "/var/tmp" if os.access("/var/tmp", os.W_OK) else None
    root = Path(tempfile.mkdtemp(prefix="causaltrace-layouts-", dir=parent))
    try:
        yield build_layouts(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def build_layouts(root: Path) -> dict[str, Path]:
    wheels = root / "wheels"
    pins = [f"{name}=={metadata.version(name)}" for name in PACKAGES]
    run(sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", wheels, *pins)
    wheel = causaltrace_wheel(wheels)
    # The reviewer's layout: the host runs in a venv whose base has causaltrace installed.
    base = base_copy(root / "base")
    pip(base, "--no-index", "--find-links", wheels, *PACKAGES)
    pip(base, "--no-deps", wheel)
    run(base, "-m", "venv", "--without-pip", "--system-site-packages", root / "venv-system-site")
    # A plain venv holding everything itself (the same installed files, hard-linked) on the same
    # base: the host cannot import the base's packages, the sandbox must not either.
    run(base, "-m", "venv", "--without-pip", root / "venv")
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    base_site = root / "base" / "lib" / version / "site-packages"
    venv_site = root / "venv" / "lib" / version / "site-packages"
    shutil.rmtree(venv_site)
    shutil.copytree(base_site, venv_site, copy_function=os.link)
    return {
        "host": Path(sys.executable),
        "venv-system-site": root / "venv-system-site" / "bin" / "python",
        "venv": root / "venv" / "bin" / "python",
    }


@pytest.fixture(scope="module")
def episode_dir(tmp_path_factory):
    return make_episode(tmp_path_factory.mktemp("layouts-episode"))


@pytest.fixture(scope="module")
def user_base(tmp_path_factory) -> Path:
    """A user base directory (PYTHONUSERBASE) whose site-packages holds a marker package."""
    base = tmp_path_factory.mktemp("userbase")
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    package = base / "lib" / version / "site-packages" / "ct_user_site_marker"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("SECRET = 'user site'\n")
    return base


@pytest.mark.parametrize("kind", sorted(TOOLS))
@pytest.mark.parametrize("layout", ["host", "venv-system-site", "venv"])
def test_no_generator_and_no_host_packages_in_the_sandbox(
    layouts, layout, kind, episode_dir, user_base, tmp_path
):
    require_sandbox(kind)
    python = layouts[layout]
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "PYTHONUSERBASE": str(user_base),
    }
    if layout == "host" and "PYTHONPATH" in os.environ:  # the causaltrace being tested
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    out = run(python, "-c", HOST_SCRIPT, kind, episode_dir, AGENT_CODE, env=env, cwd=tmp_path)
    report = json.loads(out.strip().splitlines()[-1])
    if layout != "host":  # the layout is what it claims: a non-editable causaltrace, in a venv
        assert report["prefix"] != report["base_prefix"], report
        assert "site-packages" in report["causaltrace"], report["causaltrace"]
        assert str(Path(python).parents[1]) in report["host_dirs"][0] or any(
            d.startswith(str(Path(python).parents[1])) for d in report["host_dirs"]
        )
    agent = json.loads(report["agent"])
    summary = textwrap.shorten(json.dumps(agent), 3000)
    assert agent["found"] == [], summary
    assert agent["package_dirs"] == [], summary
    for path, listing in agent["listed"].items():
        assert listing in ([], "FileNotFoundError"), (path, listing)
    assert agent["imports"] == {
        "causaltrace": "ModuleNotFoundError: No module named 'causaltrace'",
        "causaltrace_domains": "ModuleNotFoundError: No module named 'causaltrace_domains'",
        "domains": "ModuleNotFoundError: No module named 'domains'",
        "ct_user_site_marker": "ModuleNotFoundError: No module named 'ct_user_site_marker'",
    }, summary
    assert agent["unexpected_modules"] == [], summary
