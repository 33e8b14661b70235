"""A wheel, not the editable install: built from a copy of the sources, installed into a fresh
virtual environment without the system's site-packages (where the editable install's finder
would shadow it), and run from a folder outside the repository. The apps then find their Hydra
configs in the installed packages (``pkg://causaltrace.conf``, the domains' ``conf`` packages
through the search-path plugin): the README's main job, as the README writes it, generates the
small split and evaluates the teacher and the random agent on it.

Slow (a minute or two: pip resolves and installs the dependencies into the new environment);
``-m "not slow"`` leaves it out.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("causaltrace", "domains", "hydra_plugins", "setup.py", "pyproject.toml", "README.md")


def run(argv: list, cwd: Path, env: dict, timeout: float = 600) -> str:
    done = subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{argv}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.slow
@pytest.mark.sandbox  # the teacher runs its queries in the tools' sandbox
@pytest.mark.timeout(1800)
def test_the_wheel_runs_the_main_job_from_anywhere(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSAFEPATH")
    }
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    # Build from a copy: pip builds in the source folder, and the repository stays untouched.
    source = tmp_path / "src"
    source.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=skip)
        else:
            shutil.copy(REPO / name, source / name)
    wheels = tmp_path / "wheels"
    run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", wheels, source],
        tmp_path,
        env,
    )
    [wheel] = wheels.glob("causaltrace-*.whl")

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv], tmp_path, env)
    bin_dir = venv / "bin"
    python = bin_dir / "python"
    run([python, "-m", "pip", "install", "-q", wheel], tmp_path, env, timeout=1500)
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])

    work = tmp_path / "work"  # not the repository: nothing of it is on the path
    work.mkdir()
    # What the venv imports, and Hydra's own discovery of the plugin (no app registers it here).
    code = """
import json
import causaltrace, causaltrace.conf, causaltrace_domains
import hydra_plugins.causaltrace_searchpath as plugin
from hydra import compose, initialize_config_module
with initialize_config_module(config_module="causaltrace.conf", version_base="1.3"):
    cfg = compose("generate", overrides=["domain=services", "dataset=services_smoke"])
files = [m.__file__ for m in (causaltrace, causaltrace.conf, causaltrace_domains, plugin)]
print(json.dumps({"files": files, "dataset": cfg.dataset.name}))
"""
    probe = json.loads(run([python, "-c", code], work, env))
    assert probe["dataset"] == "services_smoke"
    where = probe["files"]
    site = venv.resolve()
    for path in where:
        assert Path(path).resolve().is_relative_to(site), path
        assert not Path(path).resolve().is_relative_to(REPO), path

    searchpath = run([bin_dir / "causaltrace-generate", "--info", "searchpath"], work, env)
    for source in (
        "causaltrace.conf",
        *(f"causaltrace_domains.{d}.conf" for d in ("ads", "services")),
    ):
        assert f"pkg://{source}" in searchpath, searchpath

    # The README's main job as written (its install step is the wheel's, above): it generates
    # the small split the eval config names and evaluates the teacher, then the random agent.
    main_job = readme_main_job()
    install, _, commands = main_job.partition(" && ")
    assert install == "python3 -m pip install -e .", main_job
    for command in commands.split(" && "):
        run(command.split(), work, env, timeout=1500)
    scores = {}
    for agent in ("teacher", "random"):
        out = work / "runs" / f"{agent}-ads_smoke"
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["counts"]["errors"] == 0, (agent, metrics["counts"])
        for name in ("results.jsonl", "summary.md", "report.html"):
            assert (out / name).exists(), (agent, name)
        scores[agent] = metrics["metrics"]["overall"]["full_attr_at_1"]["value"]
    manifest = json.loads((work / "data" / "ads_smoke" / "manifest.json").read_text())
    assert manifest["config"]["domain"] == {"name": "ads", "preset": "small"}
    # The teacher diagnoses (it reads the tables through the sandboxed tools); the random agent
    # is the floor: on 24 episodes with 12 causes and their slices, random FullAttr@1 is at most
    # a few hits, the teacher's well above.
    assert scores["teacher"] > scores["random"] + 0.3, scores


def readme_main_job() -> str:
    """The line under ``# main job:`` in the README's set-up block."""
    lines = (REPO / "README.md").read_text().splitlines()
    return lines[lines.index(next(line for line in lines if line.startswith("# main job:"))) + 1]
