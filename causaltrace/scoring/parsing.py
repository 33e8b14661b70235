"""Find and validate the agent's final answer in whatever it produced. Never raises.

Accepted agent outputs:

- a list of chat messages (``{"role", "content", "tool_calls"}``; OpenAI / Hugging Face style);
- a string: a final message, or a whole decoded multi-turn response as verl passes it, with chat
  template markers (ChatML ``<|im_start|>role``, Llama 3 ``<|start_header_id|>role<|end_header_id|>``,
  Gemma ``<start_of_turn>role``) and tool outputs in ``<tool_response>...</tool_response>`` or
  ``[TOOL_RESULTS]...[/TOOL_RESULTS]`` blocks, or none of these;
- a mapping: an answer object, a ``submit`` call (``{"name": "submit", "arguments": ...}``), or
  one chat message.

Policy (see ``docs/rewards.md``):

1. Only the agent's own text counts. Tool outputs, user, system and prompt text are never
   searched, so a tool (or a prompt) that echoes an answer cannot supply one.
2. If the agent called the submit tool (``submit`` by default) anywhere, its arguments are the
   answer. The arguments may be a JSON string or an object. Submit calls that parse must all
   agree; several different submitted answers are a format error. With
   ``retry_malformed_submit`` (the environment answered a malformed submit with its error and
   let the agent try again), the first submit that parses is the answer, and each malformed
   one before it cost a tool call.
   Calls are read in every format of :mod:`causaltrace.scoring.call_formats` (Hermes and
   Llama 3 JSON, Qwen3.5 / Qwen3-Coder XML, GLM, Kimi), or those ``call_formats`` names.
3. Otherwise the answer is the JSON object with a ``root_cause`` (or ``causes``) key in the
   agent's final message (outside ``<think>`` blocks). Answers in earlier turns are ignored; several different
   answers in the final message are a format error (identical repeats are accepted).
4. Content is strict: unknown causes, dimensions or levels, duplicate JSON keys, unknown keys,
   answers longer than ``max_answer_chars`` and outputs longer than ``max_output_chars`` are
   format errors, each with a reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from causaltrace.episodes.answers import Answer, AnswerFormatError, AnswerSpace
from causaltrace.scoring.call_formats import (
    CALL_FORMATS,
    JSON_FORMAT,
    find_markup_calls,
    mask_spans,
)

AGENT_ROLES = frozenset({"assistant", "model", "gpt", "bot", "agent"})
TOOL_ROLES = frozenset({"tool", "ipython", "function", "observation", "tool_response"})


@dataclass(frozen=True)
class ParsePolicy:
    """How strict the parser is, and where it looks.

    - ``submit_tools``: tool names whose arguments are the answer.
    - ``max_answer_chars``: longest answer object (its JSON text), beyond which it is refused.
    - ``max_output_chars``: longest agent output searched; a longer one is a format error.
    - ``max_answers``: most answer objects (or submit calls) tolerated in one output.
    - ``allow_extra_keys``: accept (and ignore) keys other than the answer schema's.
    - ``submit_wrapper_keys``: a submit call whose arguments are ``{"diagnosis": <answer>}``
      (one of these keys alone) is unwrapped; a text value is searched like a final message.
    - ``max_tool_calls``: the environment's tool-call budget, if any. More non-submit calls
      than this before the first submit is "tool-call budget exhausted", as the environment
      ends the episode there (so that scoring a completion and running it agree).
    - ``retry_malformed_submit``: a malformed submit does not end the episode: the environment
      answers with the format error, the call costs one unit of ``max_tool_calls``, and the
      first submit that parses is the answer. Off by default (evaluation: one submit); the RL
      exports turn it on.
    - ``call_formats``: the tool-call text formats read (see
      :mod:`causaltrace.scoring.call_formats`); every one by default (their markers do not
      overlap, so none needs declaring).
    """

    submit_tools: tuple[str, ...] = ("submit", "submit_answer")
    submit_wrapper_keys: tuple[str, ...] = ("diagnosis", "answer")
    max_answer_chars: int = 2048
    max_output_chars: int = 1_000_000
    max_answers: int = 16
    allow_extra_keys: bool = False
    max_tool_calls: int | None = None
    retry_malformed_submit: bool = False
    call_formats: tuple[str, ...] = CALL_FORMATS

    def __post_init__(self) -> None:
        unknown = sorted(set(self.call_formats) - set(CALL_FORMATS))
        if unknown or not self.call_formats:
            raise ValueError(
                f"parse.call_formats: unknown or no format(s) {unknown}; known: {list(CALL_FORMATS)}"
            )
        if self.max_tool_calls is not None and self.max_tool_calls < 0:
            raise ValueError(f"parse.max_tool_calls must be >= 0, got {self.max_tool_calls}")

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None) -> ParsePolicy:
        """A policy from a mapping with this class's fields (``None`` gives the defaults).

        Args:
            cfg: The ``parse`` section of a reward config, or ``None``.

        Raises:
            ValueError: An unknown option.
        """
        cfg = dict(cfg or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise ValueError(f"unknown parse option(s) {unknown}; known: {sorted(known)}")
        for key in ("submit_tools", "submit_wrapper_keys", "call_formats"):
            if key in cfg:
                cfg[key] = tuple(cfg[key])
        return cls(**cfg)


@dataclass(frozen=True)
class ParsedAnswer:
    """The outcome of parsing one agent output against an answer space.

    ``answer`` is ``None`` when no valid answer was found; ``error`` then says why. ``source`` is
    ``"submit"``, ``"message"`` (a JSON object in the final message), ``"object"`` (a mapping
    given directly) or ``"none"``. ``tool_calls`` counts the agent's tool calls other than
    submit; ``turns`` counts the agent's turns (assistant messages or segments);
    ``malformed_submits`` counts submit calls refused before the answer (only with
    ``retry_malformed_submit``).
    """

    answer: Answer | None
    space: AnswerSpace = field(repr=False)
    error: str | None = None
    source: str = "none"
    tool_calls: int = 0
    turns: int = 0
    notes: tuple[str, ...] = ()
    malformed_submits: int = 0

    @property
    def ok(self) -> bool:
        return self.answer is not None

    @classmethod
    def of(cls, answer: Answer | None, space: AnswerSpace, **kwargs: Any) -> ParsedAnswer:
        """Wrap an already validated answer (or ``None``: a format error).

        Args:
            answer: The answer, or ``None``.
            space: The answer space it belongs to.
            **kwargs: Further fields (``source`` defaults to ``"object"``, ``error`` to
                ``"no answer"`` when ``answer`` is ``None``).
        """
        if answer is None:
            kwargs.setdefault("error", "no answer")
        return cls(answer, space, source=kwargs.pop("source", "object"), **kwargs)


def parse_answer(
    output: Any,
    space: AnswerSpace,
    *,
    policy: ParsePolicy | None = None,
    tool_calls: int | None = None,
    turns: int | None = None,
) -> ParsedAnswer:
    """Find the agent's final answer in ``output`` and validate it against ``space``.

    Never raises on agent output: every failure is a :class:`ParsedAnswer` with ``error`` set.
    ``tool_calls`` and ``turns``, when given (e.g. by the environment), override the counts
    read off the output.

    Args:
        output: The agent's output: a list of chat messages, a decoded transcript (text), a
            submit call, or an answer object.
        space: The domain's answer space the answer is validated against.
        policy: How strict to be, and where to look; :class:`ParsePolicy` defaults by default.
        tool_calls: Overrides the count of non-submit tool calls read off the output.
        turns: Overrides the count of agent turns read off the output.

    Returns:
        The answer, or ``None`` with ``error`` saying why; never raises on agent output.
    """
    policy = policy or ParsePolicy()
    try:
        result = _Parser(space, policy).run(output)
    except RecursionError:
        result = ParsedAnswer(None, space, error="output nests too deeply to parse")
    except _TooManyObjects:
        result = ParsedAnswer(None, space, error="output holds too many JSON objects to search")
    except Exception as exc:  # never raise on agent output
        result = ParsedAnswer(None, space, error=f"unparseable output ({type(exc).__name__})")
    if tool_calls is not None or turns is not None:
        result = ParsedAnswer(
            result.answer,
            space,
            result.error,
            result.source,
            result.tool_calls if tool_calls is None else int(tool_calls),
            result.turns if turns is None else int(turns),
            result.notes,
            result.malformed_submits,
        )
    return result


# -- segmentation of decoded transcripts ---------------------------------------------------
_HEADER = re.compile(
    r"<\|im_start\|>[ \t]*(?P<chatml>[A-Za-z_]+)"
    r"|<\|start_header_id\|>[ \t]*(?P<llama>[A-Za-z_]+)[ \t]*<\|end_header_id\|>"
    r"|<start_of_turn>[ \t]*(?P<gemma>[A-Za-z_]+)"
    r"|<\|(?P<glm>system|user|assistant|observation)\|>"
    r"|<\|im_(?:system|user|assistant)\|>[ \t]*(?P<kimi>[A-Za-z_]+)[ \t]*<\|im_middle\|>"
)
_TOOL_BLOCK = re.compile(
    r"<tool_response>.*?(?:</tool_response>|\Z)|\[TOOL_RESULTS\].*?(?:\[/TOOL_RESULTS\]|\Z)",
    re.DOTALL,
)
_SEGMENT = re.compile(f"(?P<tool>{_TOOL_BLOCK.pattern})|{_HEADER.pattern}", re.DOTALL)
_END_MARKERS = re.compile(
    r"<\|im_end\|>|<\|eot_id\|>|<\|eom_id\|>|<end_of_turn>|<\|end\|>|<\|endoftext\|>|</s>"
)
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)
_BARE_ROLE_LINE = re.compile(r"^[ \t]*(?:assistant|user|system|tool|model)[ \t]*$", re.MULTILINE)


def split_segments(text: str) -> list[tuple[str, str]]:
    """Split a decoded transcript into ``(role, text)`` segments in order.

    Roles are ``"agent"``, ``"tool"`` or ``"other"`` (user, system). Text before the first role
    header is the agent's (verl's response starts inside the assistant turn). Tool-output
    blocks are tool segments wherever they appear, and are read first: a role header inside a
    tool output (a table that prints ``<|im_start|>assistant``) is the tool's text, never a
    turn of the agent. Segments that are empty once end markers and the role words left by
    ``skip_special_tokens`` decoding are removed are dropped.
    """
    raw: list[tuple[str, str]] = []
    pos, role = 0, "agent"
    for m in _SEGMENT.finditer(text):
        raw.append((role, text[pos : m.start()]))
        pos = m.end()
        if m.lastgroup == "tool":
            raw.append(("tool", m.group(0)))
            continue
        name = next((g for g in m.groups()[1:] if g), "").lower()
        role = "agent" if name in AGENT_ROLES else "tool" if name in TOOL_ROLES else "other"
    raw.append((role, text[pos:]))
    out = [(role, _END_MARKERS.sub("", chunk)) for role, chunk in raw]
    return [
        (role, chunk)
        for role, chunk in out
        if (chunk.strip() if role == "tool" else _BARE_ROLE_LINE.sub("", chunk).strip())
    ]


# -- finding JSON objects in text -----------------------------------------------------------
_KEY = re.compile(r"\"(?:root_cause|causes|name)\"\s*:")
_MAX_BACKTRACK = 12
_MAX_KEYS = 1024  # key occurrences examined per text; more is a format error


class _Obj(dict):
    """A decoded JSON object that remembers keys it saw more than once."""

    duplicates: tuple[str, ...] = ()


def _object_hook(pairs: list[tuple[str, Any]]) -> _Obj:
    obj = _Obj(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        obj.duplicates = tuple(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
    return obj


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(object_pairs_hook=_object_hook, parse_constant=_reject_constant)


def _duplicate_keys(value: Any) -> tuple[str, ...]:
    if isinstance(value, _Obj):
        found = list(value.duplicates)
        for v in value.values():
            found.extend(_duplicate_keys(v))
        return tuple(found)
    if isinstance(value, list):
        return tuple(k for v in value for k in _duplicate_keys(v))
    return ()


@dataclass
class _Found:
    start: int
    end: int
    obj: Any


class _TooManyObjects(ValueError):
    pass


def _find_objects(text: str, window: int) -> tuple[list[_Found], int]:
    """Top-level JSON objects in ``text`` that have a ``root_cause``, ``causes`` or ``name`` key.

    Found from each occurrence of such a key by trying the nearest ``{`` before it; objects
    nested inside another found object are dropped. Returns the objects and the number of key
    occurrences for which no object could be decoded (an answer that is not valid JSON).
    Raises :class:`_TooManyObjects` past ``_MAX_KEYS`` occurrences (bounds the work).
    """
    found: list[_Found] = []
    undecoded = 0
    decoded: dict[int, tuple[Any, int] | None] = {}  # start -> (object, end), memoized
    for i, m in enumerate(_KEY.finditer(text)):
        if i >= _MAX_KEYS:
            raise _TooManyObjects
        key_pos = m.start()
        if any(f.start < key_pos < f.end for f in found):
            continue
        start = key_pos
        hit = None
        for _ in range(_MAX_BACKTRACK):
            start = text.rfind("{", max(0, key_pos - window), start)
            if start < 0:
                break
            if start not in decoded:
                try:
                    obj, end = _DECODER.raw_decode(text[start : start + window])
                    decoded[start] = (obj, start + end)
                except (ValueError, RecursionError):
                    decoded[start] = None
            if decoded[start] is not None and decoded[start][1] > key_pos:
                hit = _Found(start, decoded[start][1], decoded[start][0])
                break
        if hit is None or not isinstance(hit.obj, dict):
            if "name" not in m.group(0):
                undecoded += 1
            continue
        if not _is_answer(hit.obj) and "name" not in hit.obj:
            continue  # the key was inside a string value
        found = [f for f in found if not (hit.start <= f.start and f.end <= hit.end)]
        found.append(hit)
    found.sort(key=lambda f: f.start)
    return found, undecoded


def _is_answer(obj: Any) -> bool:
    """Whether a decoded object is an answer (one cause, or a ``causes`` list)."""
    return isinstance(obj, Mapping) and ("root_cause" in obj or "causes" in obj)


def _as_call(obj: Any) -> tuple[str, Any] | None:
    """``(tool name, arguments)`` if ``obj`` is a tool call in a common format."""
    if not isinstance(obj, Mapping):
        return None
    fn = obj.get("function")
    if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
        obj = fn
    name = obj.get("name")
    if not isinstance(name, str):
        return None
    for key in ("arguments", "parameters", "args", "input"):
        if key in obj:
            return name, obj[key]
    if set(obj) == {"name"}:
        return name, {}
    return None


def tool_calls_in(
    text: str, formats: Sequence[str] = CALL_FORMATS, *, window: int = 16_384
) -> list[tuple[str, Any]]:
    """The tool calls written in one agent text, as ``(name, arguments)`` in order, read as the
    parser reads them: the markup formats of :mod:`causaltrace.scoring.call_formats` (Qwen3.5 /
    Qwen3-Coder XML, GLM, Kimi) and the JSON search (Hermes ``<tool_call>`` JSON, Llama 3's bare
    ``{"name", "parameters"}``, OpenAI's ``{"function": {"name", "arguments"}}``). JSON inside a
    markup call's arguments (a query, code) is never read as a call of its own. An environment
    that runs the calls a model wrote in text uses this, so it runs the calls the reward reads.

    Args:
        text: One agent message (no tool outputs in it).
        formats: The formats to read (:data:`~causaltrace.scoring.call_formats.CALL_FORMATS`
            names); every one by default.
        window: The longest JSON object searched, in characters; the parser's default
            (16,384) by default.

    Returns:
        The calls; arguments as written (a mapping, or JSON text for OpenAI's form).

    Raises:
        ValueError: An unknown format, or a text with more candidate objects than the parser
            searches (1,024).
    """
    formats = tuple(formats)
    markup = find_markup_calls(text, formats)
    found = [(c.start, (c.name, c.arguments)) for c in markup]
    if JSON_FORMAT in formats:
        objs, _ = _find_objects(mask_spans(text, markup), window)
        found.extend((f.start, call) for f in objs if (call := _as_call(f.obj)) is not None)
    found.sort(key=lambda item: item[0])
    return [call for _, call in found]


# -- the parser ---------------------------------------------------------------------------
class _Parser:
    def __init__(self, space: AnswerSpace, policy: ParsePolicy):
        self.space = space
        self.policy = policy
        self.window = max(4 * policy.max_answer_chars, 16_384)

    def fail(self, error: str, **kw: Any) -> ParsedAnswer:
        if len(error) > 400:  # reasons quote agent text: keep logs readable
            error = error[:397] + "..."
        return ParsedAnswer(None, self.space, error=error, **kw)

    def run(self, output: Any) -> ParsedAnswer:
        if isinstance(output, bytes):
            output = output.decode("utf-8", errors="replace")
        if output is None:
            return self.fail("empty output")
        if isinstance(output, str):
            return self.from_text(output)
        if isinstance(output, Mapping):
            if "role" in output:
                return self.from_messages([output])
            call = _as_call(output)
            if call is not None and "root_cause" not in output:
                return self.decide([call], None, tool_calls=0, turns=1)
            result = self.answer_from(output, source="object", size=_json_len(output))
            return ParsedAnswer(
                result.answer, self.space, result.error, result.source, 0, 1, result.notes
            )
        if isinstance(output, Sequence) and all(isinstance(m, Mapping) for m in output):
            if not output:
                return self.fail("empty output")
            return self.from_messages(list(output))
        return self.fail(f"unsupported output type {type(output).__name__}")

    # -- sources --------------------------------------------------------------------------
    def from_text(self, text: str) -> ParsedAnswer:
        if len(text) > self.policy.max_output_chars:
            return self.fail(
                f"output has {len(text)} characters; at most {self.policy.max_output_chars}"
            )
        segments = split_segments(text)
        agent = [chunk for role, chunk in segments if role == "agent"]
        n_tool_outputs = sum(1 for role, _ in segments if role == "tool")
        if not agent:
            return self.fail("no agent text in the output", turns=0)
        calls: list[tuple[str, Any]] = []
        for chunk in agent:
            calls.extend(self.calls_in(chunk))
        # A transcript that ends on a tool output has no final message (the agent was cut off).
        final = None if segments[-1][0] == "tool" else _THINK.sub("", agent[-1])
        n_calls = self.count_calls(calls, n_tool_outputs)
        return self.decide(calls, final, tool_calls=n_calls, turns=len(agent))

    def from_messages(self, messages: list[Mapping[str, Any]]) -> ParsedAnswer:
        calls: list[tuple[str, Any]] = []
        n_tool_outputs = 0
        agent_texts: list[str] = []
        ends_on_tool = False
        for msg in messages:
            role = str(msg.get("role", "")).lower()
            ends_on_tool = role in TOOL_ROLES
            if role in TOOL_ROLES:
                n_tool_outputs += 1
                continue
            if role not in AGENT_ROLES:
                continue
            text = _content_text(msg.get("content"))
            if len(text) > self.policy.max_output_chars:
                return self.fail(
                    f"a message has {len(text)} characters; at most {self.policy.max_output_chars}"
                )
            structured = msg.get("tool_calls") or []
            if not isinstance(structured, list):
                structured = []
            for tc in structured:
                call = _as_call(tc)
                if call is not None:
                    calls.append(call)
            calls.extend(self.calls_in(text))
            if text.strip() or structured:
                agent_texts.append(text)
        if not agent_texts:
            return self.fail("no assistant message in the output", turns=0)
        final = None if ends_on_tool else _THINK.sub("", agent_texts[-1])
        n_calls = self.count_calls(calls, n_tool_outputs)
        return self.decide(calls, final, tool_calls=n_calls, turns=len(agent_texts))

    def calls_in(self, text: str) -> list[tuple[str, Any]]:
        """The tool calls written in one agent text, in order, in every format read."""
        return tool_calls_in(text, self.policy.call_formats, window=self.window)

    def count_calls(self, calls: list[tuple[str, Any]], n_tool_outputs: int) -> int:
        submits = sum(1 for name, _ in calls if name in self.policy.submit_tools)
        return max(len(calls) - submits, n_tool_outputs - submits, 0)

    # -- deciding ---------------------------------------------------------------------------
    def decide(
        self, calls: list[tuple[str, Any]], final: str | None, *, tool_calls: int, turns: int
    ) -> ParsedAnswer:
        counts = {"tool_calls": tool_calls, "turns": turns}
        budget = self.policy.max_tool_calls
        if self.policy.retry_malformed_submit and any(
            name in self.policy.submit_tools for name, _ in calls
        ):
            return self.first_valid_submit(calls, counts)
        if budget is not None:
            first_submit = next(
                (i for i, (name, _) in enumerate(calls) if name in self.policy.submit_tools),
                len(calls),
            )
            if first_submit > budget:
                return self.fail("tool-call budget exhausted", **counts)
        submits = [args for name, args in calls if name in self.policy.submit_tools]
        if len(submits) > self.policy.max_answers:
            return self.fail(
                f"{len(submits)} submit calls; at most {self.policy.max_answers}", **counts
            )
        if submits:
            results = [self.submit_args(args) for args in submits]
            return self.agree(results, "submit", counts)
        if final is None:
            return self.fail(
                "no answer: no submit call, and the output ends on a tool output", **counts
            )
        objs, undecoded = _find_objects(final, self.window)
        answers = [f for f in objs if _is_answer(f.obj)]
        if not answers:
            if undecoded or "root_cause" in final or '"causes"' in final:
                return self.fail(
                    "the final message mentions root_cause but holds no valid JSON answer object",
                    **counts,
                )
            return self.fail(
                "no answer: no submit call and no JSON answer in the final message", **counts
            )
        if len(answers) > self.policy.max_answers:
            return self.fail(
                f"{len(answers)} answer objects in the final message; at most {self.policy.max_answers}",
                **counts,
            )
        results = [self.answer_from(f.obj, source="message", size=f.end - f.start) for f in answers]
        return self.agree(results, "message", counts)

    def first_valid_submit(
        self, calls: list[tuple[str, Any]], counts: dict[str, int]
    ) -> ParsedAnswer:
        """With retries: the first submit that parses is the answer; each call before it, a
        malformed submit included, costs one unit of the budget (as in the environment)."""
        budget = self.policy.max_tool_calls
        spent, malformed, last = 0, 0, None
        for name, args in calls:
            if name not in self.policy.submit_tools:
                spent += 1
                continue
            last = self.submit_args(args)
            if budget is not None and spent > budget:
                return self.fail("tool-call budget exhausted", **counts)
            if last.ok:
                return ParsedAnswer(
                    last.answer,
                    self.space,
                    None,
                    last.source,
                    notes=last.notes,
                    malformed_submits=malformed,
                    **counts,
                )
            spent += 1
            malformed += 1
        assert last is not None  # there was a submit call
        return self.fail(
            f"submit call: {last.error}", source="submit", malformed_submits=malformed, **counts
        )

    def agree(
        self, results: list[ParsedAnswer], where: str, counts: dict[str, int]
    ) -> ParsedAnswer:
        """One answer from several candidates: submit calls that parse must agree; answers
        in the final message must all parse and agree."""
        what = "submit call" if where == "submit" else "answer in the final message"
        valid = [r for r in results if r.ok]
        if where == "message" and len(valid) != len(results):
            bad = next(r for r in results if not r.ok)
            if len(results) == 1:
                return self.fail(bad.error or "invalid answer", source=bad.source, **counts)
            return self.fail(
                f"{len(results)} answers in the final message and one is invalid: {bad.error}",
                source="message",
                **counts,
            )
        if not valid:
            last = results[-1]
            return self.fail(f"{what}: {last.error}", source=last.source, **counts)
        distinct = {r.answer for r in valid}
        if len(distinct) > 1:
            where_text = "submit calls" if where == "submit" else "answers in the final message"
            return self.fail(
                f"{len(distinct)} different {where_text}; give one final answer",
                source=valid[-1].source,
                **counts,
            )
        best = valid[-1]
        return ParsedAnswer(best.answer, self.space, None, best.source, notes=best.notes, **counts)

    def submit_args(self, args: Any) -> ParsedAnswer:
        if isinstance(args, str):
            # The answer's own size is checked once unwrapped (see submit_object).
            if len(args) > self.policy.max_output_chars:
                return self.fail(
                    f"submit arguments have {len(args)} characters; "
                    f"at most {self.policy.max_output_chars}",
                    source="submit",
                )
            try:
                obj, end = _DECODER.raw_decode(args.strip())
            except (ValueError, RecursionError) as exc:
                return self.fail(f"submit arguments are not valid JSON ({exc})", source="submit")
            if args.strip()[end:].strip():
                return self.fail("submit arguments hold more than one JSON value", source="submit")
            return self.submit_object(obj, size=len(args))
        return self.submit_object(args, size=_json_len(args))

    def submit_object(self, obj: Any, *, size: int) -> ParsedAnswer:
        wrapped = (
            isinstance(obj, Mapping)
            and len(obj) == 1
            and next(iter(obj)) in self.policy.submit_wrapper_keys
        )
        if not wrapped:
            return self.answer_from(obj, source="submit", size=size)
        inner = next(iter(obj.values()))
        if isinstance(inner, str):
            objs, _ = _find_objects(inner, self.window)
            answers = [f for f in objs if _is_answer(f.obj)]
            if not answers:
                return self.fail(
                    "the submitted diagnosis holds no JSON answer object", source="submit"
                )
            results = [
                self.answer_from(f.obj, source="submit", size=f.end - f.start) for f in answers
            ]
            return self.agree(results, "message", {"tool_calls": 0, "turns": 0})
        return self.answer_from(inner, source="submit", size=size)

    def answer_from(self, obj: Any, *, source: str, size: int) -> ParsedAnswer:
        if size > self.policy.max_answer_chars:
            return self.fail(
                f"answer has {size} characters; at most {self.policy.max_answer_chars}",
                source=source,
            )
        dupes = _duplicate_keys(obj)
        if dupes:
            return self.fail(f"duplicate key {dupes[0]!r} in the answer", source=source)
        try:
            answer, notes = self.space.answer_from_object(
                obj, allow_extra_keys=self.policy.allow_extra_keys
            )
        except AnswerFormatError as exc:
            return self.fail(str(exc), source=source)
        return ParsedAnswer(answer, self.space, None, source, notes=notes)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return ""


def _json_len(obj: Any) -> int:
    try:
        return len(json.dumps(obj, default=str))
    except (TypeError, ValueError, RecursionError):
        return 10**9
