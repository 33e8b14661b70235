"""Where the Hydra apps' configs come from: the engine's from its package
(:data:`CONFIG_PATH`, the apps' ``config_path``), each installed domain's from the domain's own
``conf`` package, which the search-path plugin ``hydra_plugins.causaltrace_searchpath`` appends
to the search path.

Hydra finds that plugin by scanning the ``hydra_plugins`` namespace package, which works for an
installed wheel. An editable install by setuptools 64 or later (``pip install -e .``) makes the
plugin importable but hides it from that scan (Hydra issue 2359), so the apps also register it
themselves (:func:`register_search_path`, with Hydra's ``Plugins.register``) before Hydra
starts: they find the domains' configs however causaltrace was installed.
"""

from __future__ import annotations

from hydra.core.plugins import Plugins

from causaltrace.apps.schema import register_schemas
from hydra_plugins.causaltrace_searchpath.causaltrace_searchpath import (
    CausalTraceSearchPathPlugin,
)

CONFIG_PATH = "pkg://causaltrace.conf"  # causaltrace/conf: generate.yaml, eval.yaml, audit.yaml


def register_search_path() -> None:
    """Register the domains' search-path plugin with Hydra (again: a no-op), and the apps'
    structured-config schemas the primary configs start from (:mod:`causaltrace.apps.schema`)."""
    register_schemas()
    Plugins.instance().register(CausalTraceSearchPathPlugin)
