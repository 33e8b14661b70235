"""Venvs made from inside a venv see that venv's packages (tests/_venv_support.py).

``--system-site-packages`` alone reaches the base interpreter's packages only: a venv made
from inside the README's venv saw neither the editable causaltrace nor its dependencies, and
the isolated-integration tests that make such venvs failed (issue 42, finding 7).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _venv_support import OUTER_PTH, make_venv, see_creator_site, site_dirs


def imports(python: Path, module: str) -> bool:
    done = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True, timeout=60)
    return done.returncode == 0


@pytest.mark.slow
def test_a_venv_made_inside_a_venv_sees_the_outer_venvs_packages(tmp_path):
    outer = tmp_path / "outer"
    made = make_venv(sys.executable, outer, with_pip=False)
    assert made.returncode == 0, made.stderr
    outer_python = outer / "bin" / "python"
    # A module that only the outer venv has.
    own_site = site_dirs(outer_python)[0]
    assert own_site.startswith(str(outer))
    Path(own_site, "only_in_outer_venv.py").write_text("VALUE = 7\n")
    assert imports(outer_python, "only_in_outer_venv")
    # The venv module alone: the nested venv sees the base interpreter's packages, not these.
    bare = tmp_path / "bare"
    argv = [outer_python, "-m", "venv", "--without-pip", "--system-site-packages", bare]
    subprocess.run(argv, check=True, timeout=300)
    assert not imports(bare / "bin" / "python", "only_in_outer_venv")
    # make_venv adds them, after the nested venv's own directory, and mends the bare one.
    nested = tmp_path / "nested"
    made = make_venv(outer_python, nested, with_pip=False)
    assert made.returncode == 0, made.stderr
    assert imports(nested / "bin" / "python", "only_in_outer_venv")
    order = subprocess.run(
        [nested / "bin" / "python", "-c", "import sys; print('\\n'.join(sys.path))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert order.index(site_dirs(nested / "bin" / "python")[0]) < order.index(own_site)
    assert see_creator_site(outer_python, bare) == [own_site]
    assert imports(bare / "bin" / "python", "only_in_outer_venv")


@pytest.mark.slow
def test_outside_a_venv_nothing_is_added(tmp_path):
    """Made by an interpreter that is not in a venv of its own, the new venv already sees
    every site-packages directory of it: no file is written."""
    if sys.prefix != sys.base_prefix:
        base = Path(sys.base_prefix, "bin", "python3")
    else:
        base = Path(sys.executable)
    venv = tmp_path / "venv"
    made = make_venv(base, venv, with_pip=False)
    assert made.returncode == 0, made.stderr
    purelib = subprocess.run(
        [
            venv / "bin" / "python",
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert not Path(purelib, OUTER_PTH).exists()
    assert see_creator_site(base, venv) == []
