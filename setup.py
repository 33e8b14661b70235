"""Package layout that pyproject.toml cannot express: the repository's ``domains/`` folder is
installed as ``causaltrace_domains`` (a name this project owns; a top-level ``domains`` package
would collide with any other project doing the same). Each ``conf`` package (the engine's
``causaltrace/conf`` and each domain's ``domains/<name>/conf``) ships its Hydra YAML files (and JSON tables: the ads twins' measured
attributes), and ``hydra_plugins.causaltrace_searchpath`` (a package in Hydra's ``hydra_plugins`` namespace) puts
the domains' ones on the apps' search path. Everything else is in pyproject.toml."""

from setuptools import find_namespace_packages, find_packages, setup

ENGINE = find_packages(include=["causaltrace", "causaltrace.*"])
DOMAINS = [
    "causaltrace_domains" + name[len("domains") :]
    for name in find_packages(include=["domains", "domains.*"])
]
HYDRA_PLUGINS = ["hydra_plugins.causaltrace_searchpath"]  # hydra_plugins is a namespace package


def config_groups(conf: str) -> list[str]:
    """The config-group folders under a ``conf`` package (``causaltrace.conf.verifier``...),
    listed as data-only packages so that setuptools ships their YAML files."""
    folder = conf.replace("causaltrace_domains", "domains", 1).replace(".", "/")
    found = find_namespace_packages(where=folder, exclude=["*__pycache__*"])
    return [f"{conf}.{name}" for name in found]


CONF = [name for name in ENGINE + DOMAINS if name.endswith(".conf")]
GROUPS = [group for conf in CONF for group in config_groups(conf)]

setup(
    packages=ENGINE + DOMAINS + GROUPS + HYDRA_PLUGINS,
    package_dir={"causaltrace_domains": "domains"},
    package_data={name: ["*.yaml", "*.json"] for name in CONF + GROUPS},
)
