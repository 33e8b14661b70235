"""Tool calls written in the text formats of the model families people train.

A chat template decides how a model writes a tool call. JSON formats (Hermes'
``<tool_call>{"name": ..., "arguments": ...}</tool_call>``, Llama 3's bare
``{"name": ..., "parameters": ...}``) are read by the JSON search of
:mod:`causaltrace.scoring.parsing`; this module reads the others, whose markers do not overlap,
so a transcript needs no declared format:

- ``qwen3_coder``: Qwen3.5 and Qwen3-Coder write XML,
  ``<tool_call><function=submit><parameter=root_cause>X</parameter>...</function></tool_call>``
  (verl's parser of the same name);
- ``glm``: GLM-4.5/4.6 write ``<tool_call>submit<arg_key>root_cause</arg_key><arg_value>X</arg_value>
  ...</tool_call>`` (verl's ``glm``);
- ``kimi``: Kimi K2 writes ``<|tool_call_begin|>functions.submit:0<|tool_call_argument_begin|>
  {...}<|tool_call_end|>``; decoded with ``skip_special_tokens`` the markers vanish and
  ``functions.submit:0{...}`` remains, which is read too (verl's ``kimi``).

Argument values of the XML formats are text. They are converted the way verl converts them
before it runs the tool, so that the answer scored and the answer the environment received are
the same: ``null`` (and ``None``, what Qwen3.5's template writes for a Python ``None``) is
null; a value that starts with ``[`` or ``{`` is JSON when it parses; GLM values are JSON when
they parse, else text; everything else is text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

JSON_FORMAT = "json"
CALL_FORMATS = (JSON_FORMAT, "qwen3_coder", "glm", "kimi")
"""Every format read: ``json`` (Hermes, Llama 3), and the markup formats below."""


@dataclass(frozen=True)
class MarkupCall:
    """One tool call found in text: where it is, the tool's name and its arguments."""

    start: int
    end: int
    name: str
    arguments: Any


_QWEN_FUNCTION = re.compile(
    r"<function=(?P<name>[^>\n]{1,200})>(?P<body>.*?)(?:</function>|(?=<function=)|\Z)", re.DOTALL
)
_QWEN_PARAMETER = re.compile(
    r"<parameter=(?P<key>[^>\n]{1,200})>(?P<value>.*?)(?:</parameter>|(?=<parameter=)|\Z)",
    re.DOTALL,
)
_GLM_CALL = re.compile(r"<tool_call>(?P<body>.*?)</tool_call>", re.DOTALL)
_GLM_ARG = re.compile(
    r"<arg_key>(?P<key>.*?)</arg_key>\s*<arg_value>(?P<value>.*?)</arg_value>", re.DOTALL
)
_KIMI_CALL = re.compile(
    r"<\|tool_call_begin\|>\s*(?P<name>[^<]{1,200}?)\s*<\|tool_call_argument_begin\|>"
    r"(?P<args>.*?)(?:<\|tool_call_end\|>|\Z)",
    re.DOTALL,
)
_KIMI_BARE = re.compile(r"\bfunctions\.(?P<name>[A-Za-z_][\w-]{0,100}):\d+\s*(?=\{)")
_DECODER = json.JSONDecoder()


def find_markup_calls(text: str, formats: tuple[str, ...] = CALL_FORMATS) -> list[MarkupCall]:
    """The tool calls written in ``formats`` (other than ``json``) in ``text``, in order.

    Args:
        text: An agent segment (tool outputs already removed).
        formats: The formats to read; every one by default.

    Raises:
        ValueError: An unknown format name.
    """
    unknown = sorted(set(formats) - set(CALL_FORMATS))
    if unknown:
        raise ValueError(f"unknown tool-call format(s) {unknown}; known: {list(CALL_FORMATS)}")
    calls: list[MarkupCall] = []
    if "qwen3_coder" in formats and "<function=" in text:
        calls.extend(_qwen_calls(text))
    if "glm" in formats and "<arg_key>" in text:
        calls.extend(_glm_calls(text))
    if "kimi" in formats and ("functions." in text or "<|tool_call_begin|>" in text):
        calls.extend(_kimi_calls(text))
    calls.sort(key=lambda c: c.start)
    kept: list[MarkupCall] = []
    for call in calls:  # a call inside another one's span (e.g. in its code) is text
        if not kept or call.start >= kept[-1].end:
            kept.append(call)
    return kept


def mask_spans(text: str, calls: list[MarkupCall]) -> str:
    """``text`` with each call's span blanked (same length), so that JSON inside a markup
    call's arguments (a query, Python code) is never read as a call of its own."""
    if not calls:
        return text
    parts, last = [], 0
    for call in calls:
        parts.append(text[last : call.start])
        parts.append(" " * (call.end - call.start))
        last = call.end
    parts.append(text[last:])
    return "".join(parts)


def _qwen_calls(text: str) -> list[MarkupCall]:
    found = []
    for m in _QWEN_FUNCTION.finditer(text):
        arguments = {}
        for p in _QWEN_PARAMETER.finditer(m.group("body")):
            value = p.group("value")
            value = value[1:] if value.startswith("\n") else value
            value = value[:-1] if value.endswith("\n") else value
            arguments[p.group("key").strip()] = _qwen_value(value)
        found.append(MarkupCall(m.start(), m.end(), m.group("name").strip(), arguments))
    return found


def _qwen_value(value: str) -> Any:
    if value.strip().lower() == "null" or value.strip() == "None":
        return None
    if value.lstrip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _glm_calls(text: str) -> list[MarkupCall]:
    found = []
    for m in _GLM_CALL.finditer(text):
        body = m.group("body")
        first = body.find("<arg_key>")
        if first < 0:
            continue  # a Hermes call: JSON inside <tool_call>, read by the JSON search
        arguments = {}
        for a in _GLM_ARG.finditer(body, first):
            value = a.group("value").strip()
            try:
                arguments[a.group("key").strip()] = json.loads(value)
            except ValueError:
                arguments[a.group("key").strip()] = value
        found.append(MarkupCall(m.start(), m.end(), body[:first].strip(), arguments))
    return found


def _kimi_calls(text: str) -> list[MarkupCall]:
    found = []
    for m in _KIMI_CALL.finditer(text):
        found.append(
            MarkupCall(
                m.start(), m.end(), _kimi_name(m.group("name")), _json_or_text(m.group("args"))
            )
        )
    for m in _KIMI_BARE.finditer(text):
        if any(c.start <= m.start() < c.end for c in found):
            continue
        try:
            arguments, end = _DECODER.raw_decode(text, m.end())
        except ValueError:
            continue
        found.append(MarkupCall(m.start(), end, m.group("name"), arguments))
    return found


def _kimi_name(raw: str) -> str:
    """``functions.submit:0`` -> ``submit``."""
    name = raw.strip()
    name = name.split(":", 1)[0]
    return name[len("functions.") :] if name.startswith("functions.") else name


def _json_or_text(value: str) -> Any:
    try:
        return json.loads(value.strip())
    except ValueError:
        return value
