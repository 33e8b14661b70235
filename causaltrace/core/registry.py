"""One registry for every pluggable kind (domains, agents, rewards).

A name resolves, in this order of sources, to:

- an object registered at run time (:meth:`Registry.register`, or the :meth:`Registry.add`
  decorator), or a ``"module:attr"`` path registered the same way (imported on first use);
- an installed package's entry point in the registry's group (``causaltrace.domains``,
  ``causaltrace.agents``, ``causaltrace.rewards``);
- a ``"module:attr"`` string given directly as the name.

Nothing is imported to list names: :meth:`Registry.names` reads paths and entry-point metadata
only, so registering a built-in costs no import and has no side effects. One rule for
duplicates everywhere: a name defined by two sources (twice at run time, at run time and by an
entry point, or by two entry points pointing at different objects) is an error naming both,
unless the later registration passes ``overwrite=True``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from causaltrace.errors import CausalTraceError

T = TypeVar("T")


class RegistryError(CausalTraceError):
    """A name that is unknown, defined twice, or that does not load as its kind."""


class DuplicateNameError(RegistryError, ValueError):
    """A name registered by two sources."""


def load_path(path: str) -> Any:
    """The object at ``"module:attr"`` (``attr`` may be dotted).

    Args:
        path: ``"package.module:attr"``; the module is imported.

    Raises:
        ValueError: ``path`` is not of the form ``module:attr``.
        ImportError: The module does not import.
        AttributeError: The module has no such attribute.
    """
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{path!r} is not a 'module:attr' path")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


class Registry(Generic[T]):
    """Named ``T`` objects of one kind.

    ``kind`` names the kind in messages ("domain", "agent", "reward"); ``group`` is the
    entry-point group read for installed plug-ins; ``convert(name, obj)`` checks a loaded object
    (and may wrap it, e.g. a reward function into its spec), raising ``TypeError`` or
    ``ValueError`` with the reason when it is not a ``T``; ``error`` is the exception class for
    unknown or unloadable names (a :class:`RegistryError` unless the kind has its own).

    Args:
        kind: The kind's name in messages.
        group: The entry-point group of installed plug-ins; none (no plug-ins) by default.
        convert: Checks (and may wrap) a loaded object; by default objects are taken as they
            are.
        error: The exception raised for unknown or unloadable names; :class:`RegistryError`
            by default.
    """

    def __init__(
        self,
        kind: str,
        group: str | None = None,
        convert: Callable[[str, Any], T] | None = None,
        error: type[CausalTraceError] = RegistryError,
    ):
        self.kind, self.group, self.error = kind, group, error
        self._convert = convert or (lambda name, obj: obj)
        self._entries: dict[str, T | str] = {}  # run-time registrations: objects or paths
        self._loaded: dict[str, T] = {}

    # -- registering ---------------------------------------------------------------------
    def register(self, name: str, target: T | str, *, overwrite: bool = False) -> None:
        """Register ``target`` (an object, or a ``"module:attr"`` path loaded on first use).

        Args:
            name: The name to register.
            target: The object (converted now), or a ``"module:attr"`` path (loaded on first
                :meth:`get`).
            overwrite: Replace an existing registration or entry point; off by default.

        Raises:
            DuplicateNameError: ``name`` is taken and ``overwrite`` is off.
        """
        if not overwrite:
            held = self._entries.get(name) or self._entry_points().get(name)
            if held is not None:
                raise DuplicateNameError(
                    f"{self.kind} {name!r} is already registered ({_shown(held)}); "
                    f"pass overwrite=True to replace it with {_shown(target)}"
                )
        if not isinstance(target, str):
            target = self._convert(name, target)
            self._loaded[name] = target
        else:
            self._loaded.pop(name, None)
        self._entries[name] = target

    def add(self, name: str | None = None, *, overwrite: bool = False) -> Callable[[Any], Any]:
        """Decorator form of :meth:`register` (``name`` defaults to the object's ``__name__``);
        returns the object itself, so a decorated function or class is unchanged.

        Args:
            name: The name to register; the decorated object's ``__name__`` by default.
            overwrite: Replace an existing registration; off by default.
        """

        def decorate(obj: Any) -> Any:
            self.register(name or obj.__name__, obj, overwrite=overwrite)
            return obj

        return decorate

    def unregister(self, name: str) -> None:
        """Forget a run-time registration (entry points stay).

        Args:
            name: The name; an unknown name is ignored.
        """
        self._entries.pop(name, None)
        self._loaded.pop(name, None)

    # -- reading -------------------------------------------------------------------------
    def _entry_points(self) -> dict[str, str]:
        if self.group is None:
            return {}
        found: dict[str, str] = {}
        for ep in entry_points(group=self.group):
            if ep.name in found and found[ep.name] != ep.value:
                raise DuplicateNameError(
                    f"{self.kind} {ep.name!r} is defined by two installed entry points in "
                    f"{self.group!r}: {found[ep.name]} and {ep.value}"
                )
            found[ep.name] = ep.value
        return found

    def paths(self) -> dict[str, str]:
        """Every registered name and where it points (a path, or the object's repr)."""
        out = dict(self._entry_points())
        out.update({name: _shown(target) for name, target in self._entries.items()})
        return dict(sorted(out.items()))

    def names(self) -> list[str]:
        return list(self.paths())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.paths()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def get(self, name: str) -> T:
        """The object registered as ``name`` (or at the ``"module:attr"`` path ``name``).

        Args:
            name: A registered name, or a ``"module:attr"`` path.

        Raises:
            RegistryError: An unknown name, or one that does not load or convert (the
                registry's ``error`` class).
        """
        if name in self._loaded:
            return self._loaded[name]
        target: Any = self._entries.get(name)
        if target is None:
            target = self._entry_points().get(name)
        if target is None and ":" not in name:
            known = ", ".join(self.names()) or "(none registered; is the package installed?)"
            raise self.error(f"unknown {self.kind} {name!r}; registered {self.kind}s: {known}")
        target = name if target is None else target
        if isinstance(target, str):
            try:
                obj = load_path(target)
            except (ImportError, AttributeError, ValueError) as exc:
                raise self.error(f"cannot load {self.kind} {name!r} from {target}: {exc}") from None
        else:
            obj = target
        try:
            loaded = self._convert(name, obj)
        except (TypeError, ValueError) as exc:
            raise self.error(f"{self.kind} {name!r} ({_shown(target)}): {exc}") from None
        self._loaded[name] = loaded
        return loaded


def _shown(target: Any) -> str:
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", None)
    return f"{module}:{qualname}" if module and qualname else repr(target)
