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

from collections.abc import Sequence
from typing import Any

from hydra import compose, initialize_config_module
from hydra.core.plugins import Plugins
from omegaconf import OmegaConf

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


def compose_config(config_name: str, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """An app's config (``generate``, ``eval``, ``audit``) as its command composes it, resolved
    to plain containers: for scripts and notebooks that run an app's work in-process.

    The domains' search path and the apps' schemas are registered first, as the commands do:
    composing without them fails in an editable install (``Could not load
    'generate_schema'``), whatever the working directory.

    Args:
        config_name: The primary config, e.g. ``"generate"``.
        overrides: Command-line style overrides, e.g. ``["domain=shop", "out_dir=/tmp/x"]``.

    Raises:
        hydra.errors.HydraException: An override or config group option is unknown.
    """
    register_search_path()
    with initialize_config_module(config_module="causaltrace.conf", version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=list(overrides))
    return OmegaConf.to_container(cfg, resolve=True)
