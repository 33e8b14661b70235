"""The engine's layout: layers, not a flat root, the old module paths still importable, and
the domains imported by their installed name."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

import causaltrace
from causaltrace._moved import MOVED

ENGINE = Path(causaltrace.__file__).parent
# What may stay at the engine's root: the package, its command line, its errors, pictures, and
# the table of moved modules. Everything else belongs to a layer (a subpackage).
ROOT_MODULES = {"__init__.py", "__main__.py", "_moved.py", "cli.py", "errors.py", "plotting.py"}


def test_the_engine_root_holds_only_its_entry_modules():
    flat = {p.name for p in ENGINE.glob("*.py")}
    assert flat == ROOT_MODULES, sorted(flat - ROOT_MODULES)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_path_imports_the_moved_module_and_warns(old):
    new = importlib.import_module(MOVED[old])
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=MOVED[old].replace(".", r"\.")):
        module = importlib.import_module(old)
    assert module is new
    sys.modules.pop(old, None)


def test_no_code_of_the_repository_uses_an_old_module_path():
    """The shim is for users' code; ours imports the layers."""
    repo = ENGINE.parent
    dotted = re.compile(r"^\s*(?:from|import)\s+(causaltrace\.\w+)\b(?!\.)", re.M)
    short = {old.split(".")[1] for old in MOVED}
    from_root = re.compile(r"^\s*from\s+causaltrace\s+import\s+([\w, ]+)", re.M)
    # The domains install as causaltrace_domains: a top-level `domains` exists only in a checkout.
    checkout_only = re.compile(r"^\s*(?:from|import)\s+domains\b", re.M)
    offenders = []
    for folder in ("causaltrace", "domains", "tests", "bench", "scripts", "docs"):
        for path in (repo / folder).rglob("*.py"):
            if path.name == "_moved.py" or path.name == Path(__file__).name:
                continue
            text = path.read_text()
            offenders += [f"{path}: {m}" for m in dotted.findall(text) if m in MOVED]
            offenders += [f"{path}: {m.strip()}" for m in checkout_only.findall(text)]
            for names in from_root.findall(text):
                used = {n.split(" as ")[0].strip() for n in names.split(",")}
                offenders += [f"{path}: from causaltrace import {n}" for n in used & short]
    assert not offenders, offenders
