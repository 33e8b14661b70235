"""The engine's layers, checked on its import graph (module level and function bodies alike).

    errors < core < plotting < model < episodes < datasets < (structure, interop)
    < (tools, scoring) < env < (agents, serve) < (eval, audit) < training < apps < cli

A module imports only from its own package or from lower layers; packages of one layer do not
import each other; no module imports the ``causaltrace`` facade (``causaltrace/__init__.py``);
the graph has no circle; and an import inside a function body is either of a module that needs
an optional dependency (so that the optional dependency stays optional) or says why in a
``# lazy:``/``# optional:`` comment. ``causaltrace`` never imports the domains.

The checks read the source with :mod:`ast` (nothing is imported), so a planted violation in a
copy of the package is found the same way (:func:`test_a_planted_upward_import_is_caught`).
"""

from __future__ import annotations

import ast
import importlib.util
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from importlib.metadata import packages_distributions
from pathlib import Path

import networkx as nx
import pytest

ENGINE = Path(importlib.util.find_spec("causaltrace").origin).parent
REPO = ENGINE.parent

# Lowest first. A set is one layer; its packages are independent of each other.
LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(layer)
    for layer in (
        {"errors"},
        {"core"},
        {"plotting"},
        {"model"},
        {"episodes"},
        {"datasets"},
        {"structure", "interop"},
        {"tools", "scoring"},
        {"env"},
        {"agents", "serve"},
        {"eval", "audit"},
        {"training"},
        {"apps", "conf"},
        {"cli"},
        {"__main__", "__init__"},
    )
)
RANK = {unit: rank for rank, layer in enumerate(LAYERS) for unit in layer}
# The package's runtime dependencies (pyproject [project].dependencies), by import name: a
# function-body import of anything else is of an optional dependency.
ALLOWED_REASONS = ("# lazy:", "# optional:")


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, dotted
    target: str  # the imported module, dotted (resolved to a module of the package if internal)
    line: int
    in_function: bool
    type_checking: bool
    comment: str  # the text of the import's lines (for the reason comment)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def package_modules(root: Path) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def read_imports(root: Path) -> list[Import]:
    """Every import statement of every module under ``root`` (a package directory)."""
    modules = package_modules(root)
    out: list[Import] = []
    for module, path in modules.items():
        text = path.read_text()
        lines = text.splitlines()
        is_package = path.name == "__init__.py"

        def visit(
            node: ast.AST,
            in_function: bool,
            type_checking: bool,
            module: str = module,
            is_package: bool = is_package,
            lines: list[str] = lines,
        ) -> None:
            for child in ast.iter_child_nodes(node):
                function = in_function or isinstance(
                    child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
                )
                checking = type_checking or (
                    isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test)
                )
                if isinstance(child, ast.Import | ast.ImportFrom):
                    if isinstance(child, ast.Import):
                        targets = [alias.name for alias in child.names]
                    else:
                        base = _resolve(module, is_package, child)
                        targets = [
                            f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                            for a in child.names
                        ]
                    # The statement and the comments and imports right above it (one reason
                    # comment may head a group of lazy imports).
                    start = child.lineno - 1
                    while start > 0 and lines[start - 1].strip().startswith(
                        ("#", "import ", "from ")
                    ):
                        start -= 1
                    span = lines[start : child.end_lineno]
                    for target in targets:
                        while (
                            target not in modules
                            and "." in target
                            and target.startswith(root.name + ".")
                        ):
                            target = target.rsplit(".", 1)[0]
                        out.append(
                            Import(
                                module,
                                target,
                                child.lineno,
                                in_function,
                                checking,
                                "\n".join(span),
                            )
                        )
                visit(child, function, checking, module, is_package, lines)

        visit(ast.parse(text), False, False)
    return out


def unit(module: str) -> str:
    """The layer unit of a module: its subpackage, or its file at the package root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def internal(imports: list[Import], root: Path) -> list[Import]:
    return [i for i in imports if i.target == root.name or i.target.startswith(root.name + ".")]


def layer_violations(imports: list[Import], root: Path) -> list[str]:
    found = []
    for imp in internal(imports, root):
        here, there = unit(imp.source), unit(imp.target)
        where = f"{imp.source}:{imp.line} imports {imp.target}"
        if imp.target == root.name and imp.source != root.name:
            found.append(f"{where} (the facade: import the module that defines the name)")
        elif here == there:
            continue
        elif there not in RANK or here not in RANK:
            found.append(f"{where} ({here if here not in RANK else there} is in no layer)")
        elif RANK[there] > RANK[here]:
            found.append(f"{where} (upward: {there} is above {here})")
        elif RANK[there] == RANK[here]:
            found.append(f"{where} ({here} and {there} are independent packages of one layer)")
    return found


def circles(imports: list[Import], root: Path) -> list[list[str]]:
    graph = nx.DiGraph()
    for imp in internal(imports, root):
        if not imp.type_checking and imp.source != imp.target:
            graph.add_edge(imp.source, imp.target)
    return [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]


def required_import_names() -> set[str]:
    """Import names of the runtime dependencies, and of the standard library."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = {
        dep.split(";")[0].split("[")[0].split(">")[0].split("<")[0].split("=")[0].split("~")[0]
        for dep in project["dependencies"]
    }
    wanted = {w.strip().lower().replace("_", "-") for w in wanted}
    names = set(sys.stdlib_module_names)
    for name, dists in packages_distributions().items():
        if any(d.lower().replace("_", "-") in wanted for d in dists):
            names.add(name)
    return names


def needs_optional(module: str, imports: list[Import], required: set[str], root: Path) -> bool:
    """Whether importing ``module`` imports, at module level, a library that is not required."""
    return any(
        imp.source == module
        and not imp.in_function
        and not imp.type_checking
        and not imp.target.startswith(root.name)
        and imp.target.split(".")[0] not in required
        for imp in imports
    )


def body_import_violations(imports: list[Import], root: Path) -> list[str]:
    required = required_import_names()
    found = []
    for imp in imports:
        if not imp.in_function or imp.type_checking:
            continue
        where = f"{imp.source}:{imp.line} imports {imp.target} in a function body"
        reason = any(tag in imp.comment for tag in ALLOWED_REASONS)
        if imp.target.startswith(root.name):
            if not needs_optional(imp.target, imports, required, root):
                found.append(
                    f"{where}: {imp.target} needs no optional dependency; import it at the top"
                )
            elif not reason:
                found.append(f"{where}: say why in a '# optional:' comment")
        elif not reason:
            found.append(f"{where}: import it at the top, or say why in a '# lazy:' comment")
    return found


# The sandbox's worker scripts are bound alone into the sandbox and import each other by file name.
SANDBOX_SCRIPTS = {"worker_protocol", "python_worker", "sql_worker"}
# The only modules whose import needs an optional dependency: the integrations with it.
OPTIONAL_INTEGRATIONS = {
    "causaltrace.interop.dowhy_gcm": {"dowhy"},  # the dowhy export (dowhy, bench extras)
    # DoWhy's effect estimators on identify_effect's answers (dowhy, bench extras)
    "causaltrace.structure.dowhy_estimation": {"dowhy"},
    "causaltrace.env.gymnasium_env": {"gymnasium"},  # Gymnasium registration (gym extra)
    "causaltrace.serve.client": {"httpx"},  # the HTTP client (serve extra)
    "causaltrace.serve.http": {"fastapi", "pydantic"},  # the HTTP server (serve extra)
    # the OpenEnv server and client (openenv extra; its token guard is the serve extra's,
    # and the client's handshake header goes through openenv's own websockets)
    "causaltrace.serve.openenv_env": {"openenv", "pydantic", "fastapi", "websockets"},
    "causaltrace.training.verl_tools": {"verl"},  # verl's tools (train extra)
    # the verifiers environment (verifiers extra)
    "causaltrace.training.verifiers_env": {"verifiers", "mcp", "pydantic"},
    "causaltrace.training.skyrl_env": {"skyrl_gym"},  # the SkyRL environment (skyrl extra)
    "causaltrace.serve.ors_env": {"openreward", "pydantic"},  # the ORS environment (ors extra)
    "causaltrace.training.art_rollout": {"art"},  # the OpenPipe ART rollout (art extra)
}


def optional_needed_on_import(imports: list[Import], root: Path) -> dict[str, set[str]]:
    """For every module, the optional libraries that importing it imports (module level, its
    parent packages and everything they import at module level, transitively)."""
    required = required_import_names() | SANDBOX_SCRIPTS
    internal_edges: dict[str, set[str]] = {}
    external: dict[str, set[str]] = {}
    for imp in imports:
        if imp.in_function or imp.type_checking:
            continue
        if imp.target == root.name or imp.target.startswith(root.name + "."):
            internal_edges.setdefault(imp.source, set()).add(imp.target)
        elif imp.target.split(".")[0] not in required:
            external.setdefault(imp.source, set()).add(imp.target.split(".")[0])
    out = {}
    for module in package_modules(root):
        seen: set[str] = set()
        stack = [module]
        while stack:
            current = stack.pop()
            parts = current.split(".")
            for k in range(1, len(parts) + 1):
                parent = ".".join(parts[:k])
                if parent not in seen:
                    seen.add(parent)
                    stack.extend(internal_edges.get(parent, ()))
        needed = set().union(*(external.get(m, set()) for m in seen))
        if needed:
            out[module] = needed
    return out


@pytest.fixture(scope="module")
def engine_imports() -> list[Import]:
    return read_imports(ENGINE)


def test_every_import_goes_down_the_layers(engine_imports):
    assert not layer_violations(engine_imports, ENGINE), "\n".join(
        layer_violations(engine_imports, ENGINE)
    )


def test_the_import_graph_has_no_circle(engine_imports):
    assert circles(engine_imports, ENGINE) == []


def test_function_body_imports_are_for_optional_dependencies_or_say_why(engine_imports):
    found = body_import_violations(engine_imports, ENGINE)
    assert not found, "\n".join(found)


def test_optional_dependencies_stay_optional(engine_imports):
    """Importing any module of the engine but the integrations themselves needs only the
    runtime dependencies: the environment, the evaluation and the training adapters import
    without TRL, verl, Ray, FastAPI or the OpenAI client installed."""
    needed = optional_needed_on_import(engine_imports, ENGINE)
    assert needed == OPTIONAL_INTEGRATIONS


def test_every_subpackage_is_in_a_layer():
    units = {unit(m) for m in package_modules(ENGINE)}
    assert units <= set(RANK), sorted(units - set(RANK))


def test_the_engine_never_imports_the_domains(engine_imports):
    offenders = [
        f"{i.source}:{i.line} imports {i.target}"
        for i in engine_imports
        if i.target.split(".")[0] in {"domains", "causaltrace_domains"}
    ]
    assert offenders == []


def test_a_planted_upward_import_is_caught(tmp_path):
    """The checks find what they are for: a copy of the package with one upward import (the
    model importing the environment), one hidden in a function body, and one circle."""
    copy = tmp_path / "causaltrace"
    shutil.copytree(ENGINE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "model" / "panel.py", "a") as fh:
        fh.write("\nfrom causaltrace.env.session import DiagnosisSession  # noqa\n")
        fh.write("\n\ndef _hidden():\n    from causaltrace.eval import harness  # noqa\n")
    with open(copy / "core" / "files.py", "a") as fh:
        fh.write("\nimport causaltrace.core.seeds  # noqa\n")
    with open(copy / "core" / "seeds.py", "a") as fh:
        fh.write("\nimport causaltrace.core.files  # noqa\n")
    planted = read_imports(copy)
    violations = layer_violations(planted, copy)
    assert any("model.panel" in v and "causaltrace.env.session" in v for v in violations)
    assert any("model.panel" in v and "causaltrace.eval.harness" in v for v in violations)
    body = body_import_violations(planted, copy)
    assert any("causaltrace.eval.harness" in v for v in body)
    assert ["causaltrace.core.files", "causaltrace.core.seeds"] in circles(planted, copy)


def private_imports(root: Path) -> list[str]:
    """``from module import _name``: a module reaching into another's private names."""
    found = []
    for module, path in package_modules(root).items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(root.name):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{module}:{node.lineno} imports {node.module}.{alias.name}")
    return found


def test_no_module_imports_another_modules_private_names():
    assert private_imports(ENGINE) == []


def test_importing_the_package_stays_light():
    """``import causaltrace`` (the model, the episodes' facade, identification) loads numpy and
    networkx only: pandas, scipy, pgmpy, matplotlib, DuckDB and OmegaConf wait for the
    functions that need them, so that scripts, sandbox layouts and reward workers start fast.
    Measured against a bare interpreter, whose site hooks may load modules of their own."""
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import causaltrace\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "print(sorted(new - set(sys.stdlib_module_names) - {'causaltrace'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # Cython's runtime modules come with numpy's compiled extensions.
    loaded = {m for m in ast.literal_eval(out.stdout.strip()) if "cython" not in m.lower()}
    assert loaded <= {"numpy", "networkx"}, sorted(loaded)
