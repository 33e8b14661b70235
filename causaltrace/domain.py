"""Domains: a named SCM (with its intervention points) that the engine can look up by name.

The engine never imports ``domains/``. A domain is found through the ``causaltrace.domains``
entry-point group (declared in the domain package's ``pyproject.toml``) or by an explicit
``"package.module:ClassName"`` path, so a new domain is a new folder, not an edit to the engine.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any, ClassVar

from causaltrace.errors import CausalTraceError
from causaltrace.scm import SCM

ENTRY_POINT_GROUP = "causaltrace.domains"


class DomainError(CausalTraceError):
    """A domain could not be found or configured."""


class Domain(ABC):
    """Base class of a diagnostic domain.

    Subclasses set ``name`` and implement :meth:`build_scm`; ``config`` is the domain's
    (Hydra) configuration as a plain mapping. Later stages of the pipeline (rendering tables,
    verification statistics, prompts) are further hooks on this class.
    """

    name: ClassVar[str] = ""

    def __init__(self, config: Mapping[str, Any] | None = None):
        self.config: dict[str, Any] = dict(config or {})
        self._scm: SCM | None = None

    @abstractmethod
    def build_scm(self) -> SCM:
        """Build the domain's SCM (panel, nodes, intervention points) from ``self.config``."""

    @property
    def scm(self) -> SCM:
        """The SCM, built once per domain instance (construction validates every mechanism)."""
        if self._scm is None:
            self._scm = self.build_scm()
        return self._scm


def available_domains() -> dict[str, str]:
    """Registered domain names and the object path each points to."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def load_domain(name: str, config: Mapping[str, Any] | None = None) -> Domain:
    """Instantiate a domain by registered name or by ``"module:ClassName"`` path."""
    registered = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    if name in registered:
        cls = registered[name].load()
    elif ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise DomainError(f"cannot load domain {name!r}: {exc}") from None
    else:
        known = ", ".join(sorted(registered)) or "(none registered; is the package installed?)"
        raise DomainError(f"unknown domain {name!r}; registered domains: {known}")
    if not (isinstance(cls, type) and issubclass(cls, Domain)):
        raise DomainError(f"domain {name!r} resolves to {cls!r}, which is not a Domain subclass")
    return cls(config)
