"""The engine's layout: layers, not a flat root, and the domains imported by their installed
name. (Who imports whom is tests/core/test_layers.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import causaltrace

ENGINE = Path(causaltrace.__file__).parent
# What may stay at the engine's root: the package, its command line, its errors and pictures.
# Everything else belongs to a layer (a subpackage).
ROOT_MODULES = {"__init__.py", "__main__.py", "cli.py", "errors.py", "plotting.py"}


def test_the_engine_root_holds_only_its_entry_modules():
    flat = {p.name for p in ENGINE.glob("*.py")}
    assert flat == ROOT_MODULES, sorted(flat ^ ROOT_MODULES)


def test_no_code_imports_the_checkout_only_domains_name():
    """The domains install as causaltrace_domains: a top-level ``domains`` exists only in a
    checkout, so code importing it breaks for anyone who installed the package."""
    repo = ENGINE.parent
    checkout_only = re.compile(r"^\s*(?:from|import)\s+domains\b", re.M)
    offenders = [
        f"{path}: {match.strip()}"
        for folder in ("causaltrace", "domains", "tests", "bench", "scripts", "docs")
        for path in (repo / folder).rglob("*.py")
        for match in checkout_only.findall(path.read_text())
    ]
    assert not offenders, offenders


def test_tests_share_code_through_support_modules_not_each_other():
    """A test module importing another (``from test_x import ...``) works only when pytest
    happened to put the other's folder on the path first: a layer's tests run alone would
    break. Shared pieces live in ``tests/_*_support.py``."""
    tests = ENGINE.parent / "tests"
    pattern = re.compile(r"^\s*(?:from|import)\s+test_\w+", re.M)
    offenders = [str(p) for p in tests.rglob("*.py") if pattern.search(p.read_text())]
    assert offenders == []
