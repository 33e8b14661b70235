"""Integrations whose libraries cannot be installed into the main environment (their pins would
change a package installed there), each tested in a virtual environment of its own.

For each entry of :data:`INTEGRATIONS` (the library's requirement, its test files, extra pip
arguments): a venv made with ``--system-site-packages`` (so it sees the main environment's
packages, the editable causaltrace among them; from inside a venv, that venv's too:
``tests/_venv_support.py``) gets the library installed on top; inside the
venv its pins shadow the main environment's packages, and outside it nothing changes, which the
test checks (the main environment's distributions and versions before and after). The entry's
test files then run in a subprocess with the venv's Python, from the repository's root, with
``CAUSALTRACE_REQUIRE_INTEGRATION=<name>``: a library that did not install fails them instead of
skipping them (``tests/_integration_support.py``); the run must exit 0, pass tests and skip none.

The venvs are kept under ``$XDG_CACHE_HOME/causaltrace/compat/<name>-<hash>`` (``~/.cache`` by
default; the hash is of the requirement, the pip arguments and the interpreter), so a later run
only checks the install; ``CAUSALTRACE_COMPAT_DIR`` names another folder, and
``CAUSALTRACE_COMPAT_DIR=tmp`` makes fresh venvs in the test's temporary folder. Each entry
prints how long its install and its tests took.

Slow (a cold install downloads each library and its pins) and ``sandbox`` (the inner tests run
the tools); network access to PyPI is needed for a cold install.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from _integration_support import REQUIRE_ENV
from _venv_support import make_venv, see_creator_site

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Integration:
    """One library tested in its own venv.

    Args:
        name: The integration's name (what ``CAUSALTRACE_REQUIRE_INTEGRATION`` says).
        requirement: The library's pip requirement.
        tests: The test files to run, relative to the repository's root.
        pip_args: More pip arguments for the install (packages, options).
        why: Why it cannot be installed into the main environment.
    """

    name: str
    requirement: str
    tests: tuple[str, ...]
    pip_args: tuple[str, ...] = ()
    why: str = ""

    @property
    def key(self) -> str:
        text = json.dumps([self.requirement, self.pip_args, sys.version, sys.executable])
        return f"{self.name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


INTEGRATIONS = (
    Integration(
        "openenv",
        "openenv-core==0.3.0",
        ("tests/serve/test_openenv.py",),
        why="gradio (required by openenv-core 0.3) caps pillow<13",
    ),
    Integration(
        "verifiers",
        "verifiers==0.4.0",
        ("tests/training/test_verifiers_env.py",),
        # verifiers' chat-loop harness runs as a uv script; without uv on PATH verifiers would
        # `pip install --user uv`, into the main environment's user site
        pip_args=("uv>=0.5",),
        why="verifiers 0.4 requires openai<3 and mcp==2.0.0",
    ),
    Integration(
        "ors",
        "openreward==0.1.167",
        ("tests/serve/test_ors.py",),
        why="openreward 0.1.167 caps sse-starlette<3, which mcp 2.3 (the dev extra) needs >= 3",
    ),
    Integration(
        "art",
        "openpipe-art==0.5.18",
        ("tests/training/test_art_rollout.py",),
        # art.Model.openai_client() fails with openai 3 (a float + Timeout TypeError)
        pip_args=("openai>=2.14,<3",),
        why="openpipe-art 0.5 raises graphql-core to 3.3 and needs openai<3",
    ),
)


def compat_dir(tmp_path: Path) -> Path:
    chosen = os.environ.get("CAUSALTRACE_COMPAT_DIR")
    if chosen == "tmp":
        return tmp_path
    if chosen:
        return Path(chosen)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "causaltrace" / "compat"


def clean_env() -> dict[str, str]:
    drop = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSAFEPATH", "PYTEST_ADDOPTS"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run(argv: list, env: dict, timeout: float, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


DISTRIBUTIONS = """
import importlib.metadata as m, json
seen = {}
for d in m.distributions():  # in path order: the one imported first wins
    seen.setdefault((d.metadata["Name"] or "").lower().replace("_", "-"), d.version)
print(json.dumps(seen))
"""


def distributions(python: Path | str, env: dict) -> dict[str, str]:
    """Every distribution ``python`` sees, with its version (the first one on its path)."""
    done = run([python, "-c", DISTRIBUTIONS], env, 120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def summary_counts(output: str) -> dict[str, int]:
    """pytest's closing line as counts (``{"passed": 6, "skipped": 0, ...}``)."""
    lines = [line for line in output.strip().splitlines() if re.search(r" in [\d.]+s", line)]
    assert lines, f"no pytest summary line in:\n{output[-3000:]}"
    return {word: int(n) for n, word in re.findall(r"(\d+) ([a-z]+)", lines[-1])}


@pytest.mark.slow
@pytest.mark.sandbox  # the inner tests run the agent tools
@pytest.mark.timeout(900)
@pytest.mark.parametrize("integration", INTEGRATIONS, ids=lambda i: i.name)
def test_an_integration_passes_in_its_own_venv(integration: Integration, tmp_path):
    env = clean_env()
    system_before = distributions(sys.executable, env)
    venv = compat_dir(tmp_path) / integration.key
    python = venv / "bin" / "python"
    started = time.monotonic()
    if not python.exists():
        shutil.rmtree(venv, ignore_errors=True)
        venv.parent.mkdir(parents=True, exist_ok=True)
        made = make_venv(sys.executable, venv, env)  # sees this venv's packages too
        assert made.returncode == 0, made.stderr
    else:
        see_creator_site(sys.executable, venv, env)  # a venv kept from before the fix
    install = [python, "-m", "pip", "install", "-q", integration.requirement, *integration.pip_args]
    installed = run(install, env, 600)
    assert installed.returncode == 0, f"{install}\n{installed.stdout[-3000:]}\n{installed.stderr}"
    install_seconds = time.monotonic() - started

    # The venv holds its pins; the main environment is unchanged.
    inside = distributions(python, env)
    library = re.split(r"[<>=!~\[; ]", integration.requirement)[0].lower()
    wanted = integration.requirement.split("==")[-1] if "==" in integration.requirement else None
    assert library in inside and (wanted is None or inside[library] == wanted)
    assert distributions(sys.executable, env) == system_before
    shadowed = {
        k: f"{system_before[k]} -> {v}"
        for k, v in inside.items()
        if k in system_before and v != system_before[k]
    }

    inner = {
        **env,
        REQUIRE_ENV: integration.name,
        "VIRTUAL_ENV": str(venv),
        "PATH": os.pathsep.join([str(venv / "bin"), env.get("PATH", "")]),
    }
    started = time.monotonic()
    tests = run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *integration.tests], inner, 780
    )
    test_seconds = time.monotonic() - started
    report = (
        f"{integration.name} ({integration.requirement}; {integration.why}): install "
        f"{install_seconds:.1f} s, tests {test_seconds:.1f} s; shadowed here: {shadowed}"
    )
    print(report)
    output = tests.stdout + tests.stderr
    assert tests.returncode == 0, f"{report}\n{output[-6000:]}"
    counts = summary_counts(tests.stdout)
    assert counts.get("passed", 0) > 0 and not counts.get("skipped"), f"{report}\n{output[-3000:]}"
    assert distributions(sys.executable, env) == system_before
