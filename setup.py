"""Package layout that pyproject.toml cannot express: the repository's ``domains/`` folder is
installed as ``causaltrace_domains`` (a name this project owns; a top-level ``domains`` package
would collide with any other project doing the same). Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

ENGINE = find_packages(include=["causaltrace", "causaltrace.*"])
DOMAINS = [
    "causaltrace_domains" + name[len("domains") :]
    for name in find_packages(include=["domains", "domains.*"])
]

setup(packages=ENGINE + DOMAINS, package_dir={"causaltrace_domains": "domains"})
