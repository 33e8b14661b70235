"""The generator's fingerprint covers the code that shapes a dataset, and only that code.

The domain part of the fingerprint is the static import closure of the domain's entry module
(causaltrace/datasets/source_closure.py). Two properties keep it honest:

- complete: generating a verified, materialized episode in a fresh interpreter loads no module
  of the domain's package outside the closure (a module imported by a computed name would be
  missed by the static reading; this test would see it);
- minimal: the domain's agents, teacher, notebook and realism scripts are outside it, so
  editing them leaves the fingerprint, and with it every committed split, as it is.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from causaltrace.datasets.job import generator_fingerprint
from causaltrace.datasets.source_closure import import_closure

GENERATE_AND_LIST = textwrap.dedent(
    """
    import json, sys
    from causaltrace.datasets.generation import Job, run
    cfg = {{
        "out_dir": sys.argv[1],
        "domain": {domain},
        "dataset": {{"name": "closure", "split": "closure", "seed": 3, "n_episodes": 2,
                     "shard_size": 2, "max_attempts": 400, "materialize": True,
                     "composition": {{"kind": "prior"}}}},
    }}
    run(Job.from_config(cfg), show_progress=False)
    print(json.dumps(sorted(m for m in sys.modules if m.startswith("causaltrace_domains"))))
    """
)


@pytest.mark.parametrize(
    ("domain", "entry"),
    [
        ({"name": "ads", "preset": "small"}, "causaltrace_domains.ads"),
        ({"name": "services"}, "causaltrace_domains.services"),
    ],
    ids=["ads", "services"],
)
def test_generating_loads_only_the_closure(tmp_path, domain, entry):
    code = GENERATE_AND_LIST.format(domain=repr(domain))
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    closure = set(import_closure(entry))
    assert loaded, "nothing of the domain was loaded: the probe is broken"
    assert loaded <= closure, sorted(loaded - closure)


def test_agents_and_teacher_are_outside_the_ads_closure():
    closure = set(import_closure("causaltrace_domains.ads"))
    assert {"causaltrace_domains.ads.twins", "causaltrace_domains.ads.background"} <= closure
    outside = {
        "causaltrace_domains.ads.agents",
        "causaltrace_domains.ads.agents_gcm",
        "causaltrace_domains.ads.notebook",
        "causaltrace_domains.ads.realism",
        "causaltrace_domains.ads.teacher",
        "causaltrace_domains.ads.teacher.agent",
    }
    assert not closure & outside, sorted(closure & outside)


def test_the_fingerprint_follows_the_closure(tmp_path, monkeypatch):
    """A copy of a small package: editing a module its entry imports changes the fingerprint,
    editing one it does not (an agent) leaves it."""
    package = tmp_path / "closurepkg"
    package.mkdir()
    (package / "__init__.py").write_text("from closurepkg.domain import Dom\n")
    (package / "domain.py").write_text("from .mech import f\n\nclass Dom:\n    pass\n")
    (package / "mech.py").write_text("def f():\n    return 1\n")
    (package / "agent.py").write_text("from closurepkg import domain\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def fingerprint() -> str:
        generator_fingerprint.cache_clear()
        return generator_fingerprint("closurepkg")["code_sha256"]

    first = fingerprint()
    (package / "agent.py").write_text("from closurepkg import domain\nX = 2\n")
    assert fingerprint() == first
    (package / "mech.py").write_text("def f():\n    return 2\n")
    assert fingerprint() != first
    assert set(import_closure("closurepkg")) == {
        "closurepkg",
        "closurepkg.domain",
        "closurepkg.mech",
    }


def test_engine_edits_that_shape_bytes_change_the_fingerprint(tmp_path, monkeypatch):
    """The engine's part of the fingerprint is the whole causaltrace package but its tools,
    environment, evaluation, agents and apps: an edit to the simulator, the sampler or the
    oracle (which decides acceptance) changes it; an edit to a tool does not."""
    import shutil

    from causaltrace.datasets import job

    copy = tmp_path / "causaltrace"
    shutil.copytree(job.ENGINE_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(job, "ENGINE_ROOT", copy)
    hashed = {p.relative_to(copy).as_posix() for p in job.engine_generator_sources()}
    assert {"model/simulate.py", "episodes/oracle.py", "datasets/generation.py"} <= hashed
    assert not any(p.startswith(("tools/", "env/", "agents/", "apps/")) for p in hashed)

    def fingerprint() -> str:
        generator_fingerprint.cache_clear()
        return generator_fingerprint("ads")["code_sha256"]

    first = fingerprint()
    tool = next(p for p in (copy / "tools").rglob("*.py"))
    tool.write_text(tool.read_text() + "\n# a comment in a tool\n")
    assert fingerprint() == first
    for module in ("model/simulate.py", "episodes/oracle.py"):
        path = copy / module
        path.write_text(path.read_text() + "\n# an edit\n")
        changed = fingerprint()
        assert changed != first
        first = changed
    generator_fingerprint.cache_clear()
