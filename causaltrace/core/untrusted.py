"""Reading bytes that an agent controls: JSON that cannot raise anything but ``ValueError``.

Agent code runs inside the tool workers and writes the tool calls, so it controls bytes the
host parses: a worker's reply (agent code can patch the worker's reply encoder, or write to the
channel itself) and a call's arguments. ``json.loads`` accepts ``NaN`` and ``Infinity`` (a
counter of ``inf`` then raises ``OverflowError`` where the host makes it an ``int``) and
raises ``RecursionError`` on deeply nested input. These readers turn every such input into a
``ValueError`` that names what was wrong, so a caller answers a tool error and the episode goes
on; and they read counters and texts out of a reply with their types checked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# Replies and arguments nest a few levels; anything deeper is refused before it is walked.
MAX_DEPTH = 64
# A counter the host reads from a worker (characters, bytes): a float's exact integer range.
MAX_COUNT = 2**53


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _depth(value: Any) -> int:
    """The nesting depth of parsed JSON (iterative: a deep value cannot exhaust the stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                return deepest
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return deepest


def loads(data: str | bytes, what: str = "the message") -> Any:
    """Parse JSON from an untrusted source.

    Args:
        data: The JSON text.
        what: What it is, for the error message ("the worker's reply", "the arguments").

    Raises:
        ValueError: Not JSON, ``NaN``/``Infinity``, or nested deeper than :data:`MAX_DEPTH`.
    """
    try:
        value = json.loads(data, parse_constant=_constant)
    except RecursionError:
        raise ValueError(f"{what} could not be read: nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} could not be read: not valid JSON: {exc}") from None
    except ValueError as exc:  # NaN or Infinity
        raise ValueError(f"{what} could not be read: {exc}") from None
    if _depth(value) > MAX_DEPTH:
        raise ValueError(f"{what} could not be read: nested more than {MAX_DEPTH} levels deep")
    return value


def count(message: Mapping[str, Any], key: str) -> int:
    """A non-negative integer field of a reply; anything else (missing, a bool, a string, a
    float, a negative or huge number) reads as 0."""
    value = message.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return value if 0 <= value <= MAX_COUNT else 0


def text(message: Mapping[str, Any], key: str) -> str:
    """A string field of a reply, as valid UTF-8 (a lone surrogate, as ``print('\\ud800')``
    makes, becomes ``?``: it would fail every later write of the transcript or of an HTTP
    response); anything else reads as the empty string (never ``str()`` of an arbitrary
    object)."""
    value = message.get(key)
    if not isinstance(value, str):
        return ""
    return value.encode("utf-8", "replace").decode("utf-8")
