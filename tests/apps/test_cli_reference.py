"""docs/cli.md lists every entry point the code has: the installed commands (pyproject's
``[project.scripts]``) and every module with a ``__main__`` guard or a ``__main__.py``, in the
engine and the domains, but the sandbox's worker scripts (started by the tools, not users)."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = (REPO / "docs" / "cli.md").read_text()
SANDBOX_SCRIPTS = {"python_worker", "sql_worker", "fork_server"}


def module_entry_points() -> set[str]:
    found = set()
    for package, folder in (
        ("causaltrace", REPO / "causaltrace"),
        ("causaltrace_domains", REPO / "domains"),
    ):
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [package, *rel.parts]
            if parts[-1] == "__main__":
                name = ".".join(parts[:-1])
            elif 'if __name__ == "__main__"' in path.read_text():
                name = ".".join(parts)
            else:
                continue
            if parts[-1] not in SANDBOX_SCRIPTS:
                found.add(name)
    return found


def test_every_installed_command_is_on_the_page():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    missing = [name for name in scripts if f"`{name}`" not in PAGE]
    assert not missing, missing


def test_every_module_entry_point_is_on_the_page():
    modules = module_entry_points()
    # The installed commands' modules are listed by command name (the test above).
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    installed = {target.split(":")[0] for target in scripts.values()} | {"causaltrace"}
    missing = sorted(m for m in modules - installed if f"python3 -m {m}" not in PAGE)
    assert not missing, missing
