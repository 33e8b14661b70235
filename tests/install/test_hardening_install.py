"""Issue 12, a fresh machine: the README's test command installs what the tests need.

``scripts/install-test-deps.sh`` is run with fake ``apt-get``/``sudo`` programs on a private
``PATH``, so that each case (installed already; missing as root; missing as a normal user with
and without sudo) is exercised without touching the machine's packages.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "install-test-deps.sh"
NOBODY = 65534

FAKE_APT = """#!/bin/sh
echo "apt-get $*" >> {log}
case "$*" in
  *install*) for t in bwrap chromium; do printf '#!/bin/sh\\n' > {bin}/$t; /bin/chmod 755 {bin}/$t; done ;;
esac
"""
FAKE_SUDO = """#!/bin/sh
echo "sudo $*" >> {log}
exec "$@"
"""


@pytest.fixture
def sandbox():
    root = Path(tempfile.mkdtemp(prefix="ct-install-"))
    root.chmod(0o777)  # reachable by the unprivileged user of the non-root cases
    bin_dir, log = root / "bin", root / "log"
    bin_dir.mkdir(mode=0o777)
    bin_dir.chmod(0o777)
    log.touch()
    log.chmod(0o666)
    for tool in ("id", "env"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    yield root, bin_dir, log
    shutil.rmtree(root, ignore_errors=True)


def put(bin_dir: Path, name: str, text: str) -> None:
    (bin_dir / name).write_text(text)
    (bin_dir / name).chmod(0o755)


def run_script(bin_dir: Path, user: int | None = None) -> subprocess.CompletedProcess:
    script = bin_dir.parent / SCRIPT.name  # a copy the unprivileged user can read
    shutil.copyfile(SCRIPT, script)
    script.chmod(0o644)
    argv = ["/bin/sh", str(script)]
    if user is not None:
        setpriv = shutil.which("setpriv")
        if setpriv is None or os.geteuid() != 0:
            pytest.skip("needs root and setpriv to run the script as another user")
        argv = [setpriv, f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
    return subprocess.run(
        argv, env={"PATH": str(bin_dir)}, capture_output=True, text=True, timeout=60, cwd="/"
    )


def test_quiet_and_idle_when_everything_is_installed(sandbox):
    _, bin_dir, log = sandbox
    put(bin_dir, "bwrap", "#!/bin/sh\n")
    put(bin_dir, "chromium", "#!/bin/sh\n")
    put(bin_dir, "apt-get", FAKE_APT.format(log=log, bin=bin_dir))
    done = run_script(bin_dir)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""
    assert log.read_text() == ""


def test_installs_as_root_after_updating_the_package_lists(sandbox):
    if os.geteuid() != 0:
        pytest.skip("the root case runs as root")
    _, bin_dir, log = sandbox
    put(bin_dir, "apt-get", FAKE_APT.format(log=log, bin=bin_dir))
    done = run_script(bin_dir)
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    assert calls == ["apt-get update -qq", "apt-get install -y -qq bubblewrap chromium"]
    assert "sudo" not in log.read_text()
    # Idempotent: a second run finds both and does nothing.
    again = run_script(bin_dir)
    assert again.returncode == 0 and again.stderr == "" and len(log.read_text().splitlines()) == 2


def test_installs_only_what_is_missing(sandbox):
    if os.geteuid() != 0:
        pytest.skip("the root case runs as root")
    _, bin_dir, log = sandbox
    put(bin_dir, "bwrap", "#!/bin/sh\n")
    put(bin_dir, "apt-get", FAKE_APT.format(log=log, bin=bin_dir))
    assert run_script(bin_dir).returncode == 0
    assert log.read_text().splitlines()[-1] == "apt-get install -y -qq chromium"


def test_a_normal_user_goes_through_sudo(sandbox):
    _, bin_dir, log = sandbox
    put(bin_dir, "apt-get", FAKE_APT.format(log=log, bin=bin_dir))
    put(bin_dir, "sudo", FAKE_SUDO.format(log=log))
    done = run_script(bin_dir, user=NOBODY)
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    assert calls[0].startswith("sudo env DEBIAN_FRONTEND=noninteractive apt-get update")
    assert calls[2].startswith("sudo env DEBIAN_FRONTEND=noninteractive apt-get install")


def test_a_normal_user_without_sudo_is_told_what_to_install(sandbox):
    _, bin_dir, log = sandbox
    put(bin_dir, "apt-get", FAKE_APT.format(log=log, bin=bin_dir))
    done = run_script(bin_dir, user=NOBODY)
    assert done.returncode == 1
    assert "bubblewrap chromium" in done.stderr and "as root" in done.stderr
    assert log.read_text() == ""


def readme_test_command() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^# tests:.*\n(.+)$", text, re.MULTILINE)
    assert match, "the README states its test command under a '# tests:' comment"
    return match.group(1).strip()


def test_the_readme_test_command_installs_the_test_dependencies_and_ci_runs_it():
    command = readme_test_command()
    assert "sh scripts/install-test-deps.sh" in command and "pytest" in command
    assert command.index("install-test-deps") < command.index("pytest")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "# tests:" in ci and "README.md" in ci  # .ci/run reads and runs that very line
    assert "apt-get install" not in ci  # the script installs system packages, not CI itself
    done = subprocess.run(
        [
            "bash",
            "-c",
            'source <(sed -n "/^readme_test_command()/,/^}/p" .ci/run); readme_test_command',
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0 and done.stdout.strip() == command, done.stderr
