"""Config sections as frozen dataclasses, checked against their own type hints.

Every section of a config the engine reads (the environment's budgets, the tools' limits, a
dataset split, a difficulty tier, a domain's options) is a frozen dataclass. :func:`typed_config`
builds one from a mapping (a Hydra/OmegaConf node, YAML, JSON) in one way for all of them: an
unknown key, a missing required key, or a value that does not fit the field's annotation is one
error that names the section, the key, the value and what was expected. Range checks and checks
across fields stay in the dataclass's ``__post_init__``, where a direct construction meets them
too. The Hydra apps' own options are structured configs (``causaltrace.apps.schema``); this is
the same idea for sections that also arrive from Python, YAML files and HTTP bodies.

Supported annotations: ``int``, ``float`` (an int is accepted as it is), ``bool``, ``str``, ``None``,
unions of these (``X | None``), ``Literal[...]``, ``tuple[X, ...]`` and ``tuple[X, Y]`` (from a
list or tuple), ``Mapping``/``dict`` (plain data, converted from OmegaConf), ``Any``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from causaltrace.errors import CausalTraceError

T = TypeVar("T")
_NOTHING = object()


class ConfigTypeError(CausalTraceError):
    """A config value does not fit its field (used internally to build the message)."""


def _is_list(value: Any) -> bool:
    """A list, tuple or OmegaConf ``ListConfig`` (a Sequence that is not text)."""
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def plain(value: Any) -> Any:
    """Plain Python data (dicts and lists) from mappings and sequences, OmegaConf nodes included
    (a ``DictConfig`` is a Mapping and a ``ListConfig`` a Sequence; reading their items resolves
    interpolations), without importing OmegaConf: the model layer stays light."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if _is_list(value):
        return [plain(v) for v in value]
    return value


def _describe(annotation: Any) -> str:
    if annotation is type(None):
        return "null"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_describe(args[0])}"
        return f"a list of {len(args)} values ({', '.join(_describe(a) for a in args)})"
    if origin in (dict, Mapping) or annotation in (dict, Mapping):
        return "a mapping"
    names = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def coerce(value: Any, annotation: Any) -> Any:
    """``value`` checked (and, for tuples and mappings, converted) against ``annotation``;
    a :class:`ConfigTypeError` saying what was expected otherwise."""
    if annotation is Any:
        return plain(value)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is type(None):
        if value is None:
            return None
    elif origin in (typing.Union, types.UnionType):
        for option in args:
            try:
                return coerce(value, option)
            except ConfigTypeError:
                continue
    elif origin is typing.Literal:
        if any(value == a and type(value) is type(a) for a in args):
            return value
    elif origin is tuple or annotation is tuple:
        if _is_list(value):
            items = list(value)
            if len(args) == 2 and args[1] is Ellipsis:
                return tuple(coerce(v, args[0]) for v in items)
            if not args:
                return tuple(plain(v) for v in items)
            if len(items) == len(args):
                return tuple(coerce(v, a) for v, a in zip(items, args))
    elif origin in (dict, Mapping) or annotation in (dict, Mapping):
        if isinstance(value, Mapping):
            return plain(value)
    elif annotation is bool:
        if isinstance(value, bool):
            return value
    elif annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif annotation is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value  # an int stays an int (as Python's numeric tower has it)
    elif annotation is str:
        if isinstance(value, str):
            return value
    elif dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        if isinstance(value, annotation):
            return value
        if isinstance(value, Mapping):
            return typed_config(annotation, value, annotation.__name__, ConfigTypeError)
    else:  # a type this helper does not know: accept it as it is
        return value
    raise ConfigTypeError(f"must be {_describe(annotation)}, got {value!r}")


def typed_config(
    cls: type[T],
    data: Mapping[str, Any] | None,
    where: str,
    error: type[Exception] = CausalTraceError,
) -> T:
    """An instance of the frozen dataclass ``cls`` from ``data`` (``None``: the defaults; an
    instance of ``cls``: itself).

    Args:
        cls: The dataclass of the section.
        data: The section's keys and values (plain or OmegaConf).
        where: The section's name in messages (e.g. ``"dataset config"``).
        error: The exception class raised (a :class:`~causaltrace.errors.CausalTraceError`
            subclass of the caller's, so that callers keep their own error types).

    Raises:
        error: ``data`` is not a mapping, has an unknown key, lacks a required key, or holds a
            value that does not fit its field's annotation (the message names the key).
    """
    if isinstance(data, cls):
        return data
    values = typed_overrides(cls, data, where, error)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    missing = sorted(
        name
        for name, f in fields.items()
        if name not in values
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    )
    if missing:
        raise error(f"{where}: missing key(s) {missing}")
    return cls(**values)


def typed_overrides(
    cls: type, data: Mapping[str, Any] | None, where: str, error: type[Exception] = CausalTraceError
) -> dict[str, Any]:
    """The keys of ``data`` checked against ``cls``'s fields, as values for
    ``dataclasses.replace`` (a domain's preset overridden by a config): like
    :func:`typed_config` without requiring every field.

    Args:
        cls: The dataclass of the section.
        data: The keys to check (``None``: none).
        where: The section's name in messages.
        error: The exception class raised.

    Raises:
        error: ``data`` is not a mapping, has an unknown key or a value that does not fit.
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise error(f"{where} must be a mapping, got {data!r}")
    data = {str(k): v for k, v in data.items()}
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - fields)
    if unknown:
        raise error(f"{where}: unknown key(s) {unknown}; known: {sorted(fields)}")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, value in data.items():
        try:
            values[name] = coerce(value, hints.get(name, Any))
        except ConfigTypeError as exc:
            raise error(f"{where}: {name} {exc}") from None
    return values
