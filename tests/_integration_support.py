"""Optional integrations in the tests: a library that is not installed skips its tests, except
where a run says it must be there.

``CAUSALTRACE_REQUIRE_INTEGRATION`` names the integrations (comma-separated, or ``all``) whose
library a run requires: their tests then fail when it is missing instead of skipping, so an
install step that went wrong cannot pass as a run of skips.
``tests/install/test_isolated_integrations.py`` sets it for the integration it installed.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

REQUIRE_ENV = "CAUSALTRACE_REQUIRE_INTEGRATION"


def required_integrations() -> set[str]:
    """The integrations this run requires (from :data:`REQUIRE_ENV`)."""
    return {n.strip() for n in os.environ.get(REQUIRE_ENV, "").split(",") if n.strip()}


def require_integration(module: str, name: str) -> ModuleType:
    """Import ``module``, the library of integration ``name``: skip the calling test module
    without it, or fail if :data:`REQUIRE_ENV` names ``name`` (or ``all``).

    Args:
        module: The library's import name (``openenv``, ``verifiers``).
        name: The integration's name, as the isolated-integration table and the env var say it.
    """
    wanted = required_integrations()
    if name in wanted or "all" in wanted:
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"{module} is not installed ({name} integration)")
