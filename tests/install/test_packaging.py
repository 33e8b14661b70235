"""What the wheel installs: ``causaltrace`` and ``causaltrace_domains`` (the repository's
``domains/``), never a top-level ``domains`` package that would collide with other projects;
their Hydra configs (each ``conf`` package's YAML files); and the Hydra search-path plugin in
Hydra's ``hydra_plugins`` namespace (tests/install/test_wheel_install.py runs an installed wheel).
And what the extras install: none caps the numerical stack (numpy, scipy, pandas), directly or
through a package the ``dev`` extra names, so ``pip install -e ".[dev]"`` never downgrades a
user's newer scipy (dowhy, which does, is the opt-in ``dowhy`` extra)."""

from __future__ import annotations

import configparser
import importlib.metadata
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

import causaltrace

REPO = Path(causaltrace.__file__).resolve().parents[1]


def test_the_wheel_installs_the_domains_under_the_projects_own_name(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    for name in ("causaltrace", "domains", "hydra_plugins"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "wheel"),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    [wheel] = (tmp_path / "wheel").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"causaltrace", "causaltrace_domains", "hydra_plugins"}
    # Every package of the repository is in it, under its installed name.
    for init in (REPO / "domains").rglob("__init__.py"):
        rel = init.relative_to(REPO / "domains").as_posix()
        assert f"causaltrace_domains/{rel}" in names, rel
    for init in (REPO / "causaltrace").rglob("__init__.py"):
        assert init.relative_to(REPO).as_posix() in names
    # Every Hydra config, the engine's and each domain's, ships with its package, and so do
    # the JSON tables beside them (the ads twins' measured attributes).
    for conf in (REPO / "causaltrace" / "conf", *(REPO / "domains").glob("*/conf")):
        configs = sorted(conf.rglob("*.yaml"))
        assert configs, conf
        for config in (*configs, *sorted(conf.rglob("*.json"))):
            rel = config.relative_to(REPO).as_posix()
            assert rel.replace("domains/", "causaltrace_domains/", 1) in names, rel
    # The search-path plugin, in the namespace package that other Hydra plugins share.
    assert "hydra_plugins/causaltrace_searchpath/causaltrace_searchpath.py" in names
    assert "hydra_plugins/__init__.py" not in names
    # Its entry points name only installed modules.
    [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    parser = configparser.ConfigParser()
    parser.read_string(zipfile.ZipFile(wheel).read(entry_points).decode())
    targets = [v.split(":")[0] for s in parser.sections() for v in parser[s].values()]
    assert targets and all(
        t.split(".")[0] in ("causaltrace", "causaltrace_domains") for t in targets
    )


NUMERICAL = frozenset({"numpy", "scipy", "pandas"})
# Extras that install a capping package on purpose, opt-in and documented: dowhy 0.13+ requires
# scipy<=1.15.3 on Python < 3.13 (pyproject.toml's dowhy extra, docs/benchmarks.md).
CAPPING_ON_PURPOSE = {"dowhy": {"dowhy"}, "bench": {"dowhy"}}


def project() -> dict:
    with open(REPO / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)["project"]


def upper_bounds(requirement: Requirement) -> list[str]:
    """Every specifier of ``requirement`` that holds its package below some version."""
    return [str(s) for s in requirement.specifier if s.operator in ("<", "<=", "==", "===", "~=")]


def caps(requirement: Requirement) -> list[str]:
    """The upper bounds of ``requirement`` but a cap at the next major version (``numpy<3``: a
    compatibility promise, not a downgrade of any release there is)."""
    out = []
    for spec in requirement.specifier:
        if spec.operator == "<" and not any(Version(spec.version).release[1:]):
            continue
        if spec.operator in ("<", "<=", "==", "===", "~="):
            out.append(str(spec))
    return out


def applies(requirement: Requirement) -> bool:
    """The requirement applies to this interpreter when no extra of its package is asked for."""
    return requirement.marker is None or requirement.marker.evaluate({"extra": ""})


def test_no_dependency_list_caps_numpy_scipy_or_pandas():
    meta = project()
    lists = {"dependencies": meta["dependencies"]}
    lists.update({f"extra {k}": v for k, v in meta["optional-dependencies"].items()})
    found = [
        f"{where}: {text}"
        for where, requirements in lists.items()
        for text in requirements
        if canonicalize_name(Requirement(text).name) in NUMERICAL
        and upper_bounds(Requirement(text))
    ]
    assert not found, found


def test_no_package_an_extra_names_caps_numpy_scipy_or_pandas():
    """The packages each extra names, as installed here: their own requirements (for this
    Python) must not hold numpy, scipy or pandas below a release, as dowhy's scipy<=1.15.3 did
    when it was in the dev extra. Packages not installed here cannot be read and are left out;
    the dev extra must be installed (it is what the tests run with)."""
    extras = project()["optional-dependencies"]
    found, read = [], set()
    for extra, requirements in extras.items():
        for text in requirements:
            name = canonicalize_name(Requirement(text).name)
            if name in CAPPING_ON_PURPOSE.get(extra, ()):
                continue
            try:
                dist = importlib.metadata.distribution(name)
            except importlib.metadata.PackageNotFoundError:
                if extra == "dev":
                    pytest.fail(f"{name} (dev extra) is not installed: pip install -e '.[dev]'")
                continue
            read.add(name)
            for line in dist.requires or ():
                requirement = Requirement(line)
                name_of = canonicalize_name(requirement.name)
                if name_of in NUMERICAL and applies(requirement) and caps(requirement):
                    found.append(f"extra {extra}: {name} {dist.version} requires {line}")
    assert read, "no package of any extra is installed"
    assert not found, found


def test_the_cap_check_sees_dowhys_scipy_pin():
    assert caps(Requirement('scipy<=1.15.3; python_version < "3.13"')) == ["<=1.15.3"]
    assert caps(Requirement("numpy<2.5,>=1.23.5")) == ["<2.5"]
    assert caps(Requirement("numpy<3,>=1.23.5")) == []  # the next major: allowed
    assert caps(Requirement("scipy>=1.11")) == []
