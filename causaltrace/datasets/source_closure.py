"""The source files a domain's generator is made of: the static import closure of its module.

A dataset's fingerprint must change when, and only when, code that shapes its bytes changes.
Hashing a domain's whole package made every edit to its agents, teacher or notebooks refuse
the committed splits ("holds a finished dataset made with a different generator") though no
byte of them depended on it. The closure follows every ``import`` and ``from ... import``
statement (function bodies included) from the domain's entry module through the modules of
the same top-level package, plus the ``__init__`` of every package on the way (importing
``a.b.c`` runs ``a`` and ``a.b`` first). A module the generator imports only through
``importlib`` by a computed name would be missed: the test that generates an episode and
compares ``sys.modules`` against the closure is the guard.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path


def _origin(module: str) -> Path | None:
    """The module's source file, or None (not found, a namespace package, not Python)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin).resolve()


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _imports(module: str, path: Path) -> set[str]:
    """Every module name ``path``'s import statements may load (absolute, resolved)."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    package = module if _is_package(path) else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.add(target)
            # ``from pkg import name`` loads pkg.name when name is a submodule.
            found.update(f"{target}.{alias.name}" for alias in node.names if alias.name != "*")
    return found


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_closure(module: str) -> dict[str, Path]:
    """``module`` and every module of its top-level package it imports, directly or not, with
    the packages that contain them: name -> source file, sorted by name."""
    top = module.partition(".")[0]
    seen: dict[str, Path] = {}
    todo = [module, *_parents(module)]
    while todo:
        name = todo.pop()
        if name in seen or name.partition(".")[0] != top:
            continue
        path = _origin(name)
        if path is None:
            continue
        seen[name] = path
        for imported in _imports(name, path):
            if imported.partition(".")[0] == top and imported not in seen:
                todo.extend([imported, *_parents(imported)])
    return dict(sorted(seen.items()))
