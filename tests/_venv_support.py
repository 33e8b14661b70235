"""Virtual environments that see the running interpreter's packages, made from inside a venv too.

``python -m venv --system-site-packages`` makes a venv whose "system" packages are those of the
*base* interpreter (``sys.base_prefix``), not of the venv it was run from: from inside the
README's venv a nested venv saw neither the editable causaltrace nor its dependencies, and three
isolated-integration tests failed. :func:`make_venv` adds a ``.pth`` file to the new venv that
runs ``site.addsitedir`` on each of the creating interpreter's site-packages directories, so
they come after the new venv's own (its pins still shadow them) and their own ``.pth`` files
(an editable install's finder) are processed.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

OUTER_PTH = "_causaltrace_outer_site.pth"


def site_dirs(python: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> list[str]:
    """``python``'s site-packages directories (its own venv's and, where it sees them, the
    system's), in its search order."""
    code = "import site, sys; print('\\n'.join(p for p in site.getsitepackages()))"
    done = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    if done.returncode != 0:
        raise RuntimeError(f"{python}: cannot list its site-packages: {done.stderr[-2000:]}")
    return [line for line in done.stdout.splitlines() if line and os.path.isdir(line)]


def make_venv(
    creator: str | os.PathLike[str],
    venv: Path,
    env: Mapping[str, str] | None = None,
    *,
    with_pip: bool = True,
    timeout: float = 300,
) -> subprocess.CompletedProcess:
    """A venv at ``venv`` made by the interpreter ``creator`` that sees ``creator``'s packages
    (module docstring): ``--system-site-packages``, then :func:`see_creator_site`. Returns the
    venv command's run."""
    argv = [str(creator), "-m", "venv", "--system-site-packages", str(venv)]
    if not with_pip:
        argv.insert(3, "--without-pip")
    made = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    if made.returncode == 0:
        see_creator_site(creator, venv, env)
    return made


def see_creator_site(
    creator: str | os.PathLike[str], venv: Path, env: Mapping[str, str] | None = None
) -> list[str]:
    """Make the venv at ``venv`` see the site-packages of ``creator`` that it does not see
    already (none when ``creator`` is not in a venv of its own), through :data:`OUTER_PTH`;
    idempotent, so a venv kept from an earlier run is mended too. Returns the directories
    added."""
    inner = venv / "bin" / "python"
    own = set(site_dirs(inner, env))
    missing = [d for d in site_dirs(creator, env) if d not in own]
    done = subprocess.run(
        [str(inner), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    pth = Path(done.stdout.strip(), OUTER_PTH)
    if missing:
        pth.write_text("".join(f"import site; site.addsitedir({d!r})\n" for d in missing))
    return missing
