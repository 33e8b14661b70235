"""The README's Commands section, run as written on a fresh clone.

The commands are read from README.md's "Commands" code block, in order, and the arguments that
make each small from the table under it (its "added to run it small" column; placeholders
``{fake_openai}``, a local fake OpenAI-compatible server, and ``{tiny_model}``, a tiny model
built locally). Each runs with the installed package (this working tree's code) in a fresh
``git clone`` of the repository as its working directory, must exit 0, and must leave
``git status --porcelain`` empty: what a command writes is git-ignored, and a command over a
committed split (``causaltrace-generate dataset=ads_test``) finds it finished, ``"attempts": 0``,
and writes nothing.

The clone is of HEAD; the working tree's README.md, .gitignore and data/ (what decides what the
commands do and where they write), if they differ from HEAD, are applied to it and committed
there, in the clone only, so that the test checks the files as they will be committed. A
command that cannot run here says why in its skip (no sandbox, no training stack...).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# The files that decide what the commands do and where they write, taken from the working tree.
OVERLAY = ("README.md", ".gitignore", "data")


@dataclass(frozen=True)
class Command:
    line: str  # as the README writes it, without its comment
    argv: tuple[str, ...]
    added: tuple[str, ...]  # the table's arguments, placeholders unresolved
    needs: tuple[str, ...]  # pytest markers: what it needs beyond `pip install -e .`

    @property
    def key(self) -> str:
        return " ".join(self.argv[:3])


def _section(text: str) -> str:
    start = text.index("\n## Commands\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def readme_commands(text: str | None = None) -> list[Command]:
    """The Commands section's commands, each with its row of the table."""
    section = _section(README.read_text() if text is None else text)
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "README.md's Commands section has no bash block"
    rows = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        key = re.match(r"`([^`]+)`", cells[0]).group(1)
        first = re.match(r"`([^`]+)`", cells[2])
        added = tuple(shlex.split(first.group(1))) if first else ()
        needs = tuple(n.strip() for n in cells[3].split(",") if n.strip())
        rows[key] = (added, needs)
    commands, used = [], set()
    for line in block.group(1).splitlines():
        argv = shlex.split(line, comments=True)
        if not argv:
            continue
        text = " ".join(argv)
        keys = [k for k in rows if text == k or text.startswith(k + " ")]
        assert len(keys) == 1, f"README command {text!r} matches table rows {keys} (need one)"
        used.add(keys[0])
        commands.append(Command(text, tuple(argv), *rows[keys[0]]))
    assert used == set(rows), f"table rows without a command: {sorted(set(rows) - used)}"
    return commands


COMMANDS = readme_commands()
MARKERS = {"sandbox": pytest.mark.sandbox, "train": pytest.mark.train}


def _params():
    out = []
    for command in COMMANDS:
        unknown = set(command.needs) - set(MARKERS)
        assert not unknown, f"{command.line}: unknown needs {sorted(unknown)}"
        marks = [pytest.mark.slow, *(MARKERS[n] for n in command.needs)]
        out.append(pytest.param(command, marks=marks, id=command.key))
    return out


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the test clones the repository")
    if not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} is not a git checkout (an installed copy): nothing to clone")
    target = tmp_path_factory.mktemp("readme") / "causaltrace"
    git("clone", "-q", str(ROOT), str(target), cwd=ROOT)
    patch = subprocess.run(
        ["git", "diff", "HEAD", "--binary", "--", *OVERLAY],
        cwd=ROOT,
        capture_output=True,
        timeout=300,
        check=True,
    ).stdout
    if patch:
        subprocess.run(["git", "apply", "-"], cwd=target, input=patch, check=True, timeout=300)
        identity = ["-c", "user.name=readme-test", "-c", "user.email=readme-test@localhost"]
        git(*identity, "-c", "commit.gpgsign=false", "commit", "-qam", "working tree", cwd=target)
    assert git("status", "--porcelain", cwd=target) == ""
    return target


@pytest.fixture(scope="module")
def fake_openai():
    """A local OpenAI-compatible chat server whose model submits an answer at once."""
    from _openai_stub import StubServer, call, completion

    def answer(request):
        return completion(None, [call("submit", {"root_cause": "NO_ANOMALY", "slice": ""})])

    with StubServer(answer) as server:
        yield server


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny") / "model"
    code = "import sys; from causaltrace.training.tiny import save_tiny; save_tiny(sys.argv[1])"
    subprocess.run([sys.executable, "-c", code, str(out)], check=True, timeout=600)
    return out


def _why_not(command: Command) -> str | None:
    """Why this machine cannot run the command, or None."""
    if shutil.which(command.argv[0]) is None:
        return f"{command.argv[0]} is not on PATH (install the package: pip install -e .)"
    if "sandbox" in command.needs and not (shutil.which("bwrap") or shutil.which("unshare")):
        return "the agent's tools need bubblewrap or unshare: sh scripts/install-test-deps.sh"
    if "train" in command.needs:
        missing = [m for m in ("torch", "transformers", "trl") if not importlib.util.find_spec(m)]
        if missing:
            return f"the train extra is not installed ({', '.join(missing)}): " + (
                "sh scripts/install-train-deps.sh"
            )
    if "agent=openai" in command.argv and not importlib.util.find_spec("openai"):
        return "the openai client is not installed: pip install -e '.[eval]'"
    return None


def _resolve(command: Command, request) -> list[str]:
    args = []
    for arg in command.added:
        if "{fake_openai}" in arg:
            arg = arg.replace("{fake_openai}", request.getfixturevalue("fake_openai").base_url)
        if "{tiny_model}" in arg:
            arg = arg.replace("{tiny_model}", str(request.getfixturevalue("tiny_model")))
        assert "{" not in arg, f"{command.line}: unknown placeholder in {arg!r}"
        args.append(arg)
    return [*command.argv, *args]


def test_the_commands_and_the_table_agree():
    keys = [c.key for c in COMMANDS]
    assert len(COMMANDS) >= 8 and len(set(keys)) == len(keys), keys
    assert any(c.argv[:2] == ("causaltrace-generate", "dataset=ads_test") for c in COMMANDS)
    broken = "\n## Commands\n```bash\nfoo bar\n```\n| `causaltrace simulate` | x |  |  |\n"
    with pytest.raises(AssertionError, match="matches table rows"):
        readme_commands(broken)


@pytest.mark.parametrize("command", _params())
def test_a_readme_command_runs_on_a_fresh_clone(command, clone, request):
    reason = _why_not(command)
    if reason:
        pytest.skip(reason)
    argv = _resolve(command, request)
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    done = subprocess.run(argv, cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (
        f"{shlex.join(argv)} exited {done.returncode}:\n{done.stderr[-3000:]}\n"
        f"{done.stdout[-2000:]}"
    )
    status = git("status", "--porcelain", cwd=clone)
    assert status == "", f"{shlex.join(argv)} left the clone dirty:\n{status}"
    if argv[0] == "causaltrace-generate":
        dataset = next(a.split("=", 1)[1] for a in argv if a.startswith("dataset="))
        if git("ls-files", f"data/{dataset}/manifest.json", cwd=clone).strip():
            # A committed split: checked, reported finished, nothing generated or written.
            summary = json.loads(done.stdout.strip().splitlines()[-1])
            assert summary["already_finished"] and summary["attempts"] == 0, summary
            assert f"dataset already finished: data/{dataset} (nothing written)" in done.stdout
