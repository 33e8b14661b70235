"""What the wheel installs: ``causaltrace`` and ``causaltrace_domains`` (the repository's
``domains/``), never a top-level ``domains`` package that would collide with other projects;
their Hydra configs (each ``conf`` package's YAML files); and the Hydra search-path plugin in
Hydra's ``hydra_plugins`` namespace (tests/install/test_wheel_install.py runs an installed wheel)."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

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
    # Every Hydra config, the engine's and each domain's, ships with its package.
    for conf in (REPO / "causaltrace" / "conf", *(REPO / "domains").glob("*/conf")):
        configs = sorted(conf.rglob("*.yaml"))
        assert configs, conf
        for config in configs:
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
