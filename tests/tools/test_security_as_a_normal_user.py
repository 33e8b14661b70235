"""The security suite as a normal user (issue 42): CI runs as root, where the fork server's
workers switch to random uids; a cluster that trains as a normal user runs them in user
namespaces of their own instead (docs/tools.md), a different code path with different
attacks open to it. As root, this runs ``tests/tools/test_tools_security.py`` (every attack of
the outside review) and the tests of issue 42's findings 1-3 that run agent code through
``scripts/nonroot-check.sh``, which creates an unprivileged user and a venv it can read and runs
pytest as that user. As a normal user the whole suite already runs that way, so there is
nothing more to run here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The outside review's attacks (test_tools_security.py) and the tests of issue 42's findings
# 1-3 that run agent code: SQL refused by what executes (the size channel), replies a worker
# forges, and what a call's processes leave running or hold.
ISOLATION = "tests/tools/test_sandbox_isolation.py"
SUITE = " ".join(
    (
        "tests/tools/test_tools_security.py",
        "tests/tools/test_tools_size_channel.py",
        "tests/tools/test_untrusted_replies.py",
        f"{ISOLATION}::test_processes_a_call_starts_die_even_with_the_reaper_disarmed",
        f"{ISOLATION}::test_memory_is_counted_over_every_process_a_call_starts",
    )
)

pytestmark = pytest.mark.sandbox


@pytest.mark.skipif(os.geteuid() != 0, reason="a normal user runs every security test as itself")
def test_the_security_suite_passes_as_a_normal_user():
    missing = [tool for tool in ("setpriv", "useradd", "bwrap") if shutil.which(tool) is None]
    assert not missing, f"nonroot-check needs {missing} (scripts/install-test-deps.sh)"
    env = {**os.environ, "CAUSALTRACE_NONROOT_TESTS": SUITE}
    done = subprocess.run(
        ["sh", "scripts/nonroot-check.sh", "--no-bench"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    ran_as = re.search(r"running as (\S+) \(uid (\d+)\)", out)
    assert ran_as and int(ran_as.group(2)) != 0, out[-2000:]
    summary = re.search(r"(\d+) passed", done.stdout)
    assert summary and int(summary.group(1)) >= 20, done.stdout[-2000:]
    assert "failed" not in done.stdout.splitlines()[-1], done.stdout[-2000:]
