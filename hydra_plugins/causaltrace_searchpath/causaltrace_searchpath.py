"""Hydra search-path plugin: each installed domain brings its own config presets.

A domain registered under the ``causaltrace.domains`` entry points whose package has a ``conf``
package (a ``conf/`` folder with an ``__init__.py``) ships its Hydra presets there, in the
engine's groups: ``conf/domain/<name>.yaml``, ``conf/dataset/*.yaml``, ``conf/agent/*.yaml``...
This plugin appends ``pkg://<domain package>.conf`` to the search path of the causaltrace apps,
after the engine's own configs (``pkg://causaltrace.conf``), so that ``causaltrace-generate
domain=<name> dataset=<preset>`` finds them; a third-party domain package ships its presets
without touching the engine. Hydra finds the plugin because it sits in the ``hydra_plugins``
namespace package (installed with causaltrace); an editable install hides it from Hydra's scan,
so the apps also register it themselves (``causaltrace.apps.configs.register_search_path``).

Hydra runs every installed search-path plugin for every Hydra app in the environment, so this
one adds the domains only where the engine's configs are on the search path already (the
causaltrace apps, ``initialize_config_module("causaltrace.conf")``, or the same folder given
as a directory). Nothing is imported to find the domains' ``conf`` folders (only the parent
packages of dotted entry-point modules, as any spec lookup does); Hydra imports a ``conf``
package, and so its domain, when it reads configs from it.
"""

from __future__ import annotations

import importlib.util
import os
from importlib.metadata import entry_points

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

ENGINE_CONF = "causaltrace.conf"  # the apps' config_path, pkg://causaltrace.conf
DOMAINS_GROUP = "causaltrace.domains"  # the entry-point group of the domains


def _spec(name: str):
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a missing parent package, or a broken one
        return None


def _package_dirs(module: str) -> tuple[str, list[str]] | None:
    """The package that holds ``module`` (itself if it is a package) and its folders."""
    spec = _spec(module)
    if spec is None:
        return None
    if spec.submodule_search_locations is None:  # a plain module: its package holds conf/
        package = module.rpartition(".")[0]
        spec = _spec(package) if package else None
        if spec is None or spec.submodule_search_locations is None:
            return None
        module = package
    return module, list(spec.submodule_search_locations)


def domain_conf_packages() -> list[tuple[str, str]]:
    """``(entry-point name, "<package>.conf")`` of each registered domain with a ``conf``
    package, by entry-point name; a package registered under several names counts once."""
    found: dict[str, str] = {}
    for ep in sorted(entry_points(group=DOMAINS_GROUP), key=lambda e: (e.name, e.value)):
        located = _package_dirs(ep.module)
        if located is None:
            continue
        package, dirs = located
        conf = f"{package}.conf"
        if conf not in found.values() and any(
            os.path.isfile(os.path.join(d, "conf", "__init__.py")) for d in dirs
        ):
            found[ep.name] = conf
    return list(found.items())


def _engine_conf_dir() -> str | None:
    located = _package_dirs("causaltrace")
    return os.path.realpath(os.path.join(located[1][0], "conf")) if located else None


def _is_engine_conf(path: str, engine_dir: str | None) -> bool:
    if path.startswith("pkg://"):  # pkg://causaltrace.conf or pkg://causaltrace/conf
        return path.removeprefix("pkg://").replace("/", ".").strip(".") == ENGINE_CONF
    if "://" in path.removeprefix("file://") or engine_dir is None:  # structured:// ...
        return False
    path = path.removeprefix("file://")
    return os.path.isdir(path) and os.path.realpath(path) == engine_dir


class CausalTraceSearchPathPlugin(SearchPathPlugin):
    """Appends ``pkg://<domain package>.conf`` of every installed domain (see the module)."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        engine_dir = _engine_conf_dir()
        paths = [element.path for element in search_path.get_path()]
        if not any(_is_engine_conf(path, engine_dir) for path in paths):
            return  # another Hydra app: not ours to extend
        # The engine's primary configs start from structured-config schemas in the ConfigStore
        # (causaltrace.apps.schema): registered here too, for compose-API users.
        from causaltrace.apps.schema import (
            register_schemas,  # lazy: other Hydra apps never pay for it
        )

        register_schemas()
        for name, conf in domain_conf_packages():
            if f"pkg://{conf}" not in paths:
                search_path.append(f"causaltrace-domain-{name}", f"pkg://{conf}")
