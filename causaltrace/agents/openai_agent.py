"""An agent backed by any OpenAI-compatible chat server with tool calling.

vLLM, SGLang, llama.cpp's server, Ollama and hosted APIs all speak ``POST /chat/completions``
with ``tools``; they differ in what they send back. This agent reads the reply as plain JSON
(not through the client's typed models) and tolerates:

- ``arguments`` as a JSON string or as an object; malformed JSON is passed on as the raw text,
  so the tool answers with a clear error and the episode goes on;
- ``content: null``; content given as a list of text parts;
- tool calls without an ``id`` (one is generated: ``call_<turn>_<i>``);
- ``reasoning_content`` / ``reasoning`` fields (kept in the transcript, not sent back);
- raw ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` blocks in the content when the
  server's tool parser is off (parsed as calls; an unterminated last block too);
- a legacy ``function_call`` instead of ``tool_calls``.

A reply without tool calls is the final answer (the session parses the JSON answer in the
text). Server errors are retried with exponential backoff and jitter (5xx, 408, 409, 429 and
connection errors; not other 4xx); one that survives the retries ends the episode without an
answer and records the error in the transcript, so an evaluation run carries on. Two kinds of
failure say nothing about the episode and stop the whole run instead
(:class:`ModelServerUnavailable`): a server that cannot be reached at all (connection refused, no
such host), and a request the server refuses for its configuration (HTTP 401, 403, 404: a
wrong key, URL or model name). The evaluation harness records no result for the episodes they
hit, so a re-run retries them.

Before any episode, :meth:`OpenAIAgent.preflight` makes one cheap request (``GET
{base_url}/models``, ``preflight_timeout`` seconds): a server that cannot be reached, or that
refuses the key, fails the run in seconds, before a run directory is written, instead of after
every first request's retries. ``preflight: false`` skips it (a server that answers ``GET
/models`` with anything, even 404, passes: the check is for reachability).

Config keys (``causaltrace/conf/agent/openai.yaml``): ``model`` (required), ``base_url``, ``api_key``
(default: ``$OPENAI_API_KEY``, else ``"EMPTY"``), ``temperature``, ``top_p``, ``max_tokens``,
``extra_body``, ``tool_choice``, ``retries``, ``backoff``, ``max_backoff``, ``timeout``,
``system_prompt``, ``preflight`` (true), ``preflight_timeout`` (5 s).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from causaltrace.agents.base import Agent
from causaltrace.errors import CausalTraceError, RunFailure

RETRY_STATUS = frozenset({408, 409, 429})
REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")
TOOL_CALL_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)
NAME_FIELD = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')

log = logging.getLogger(__name__)


class ModelServerError(RunFailure):
    """The chat server failed and retrying did not help (or the error is not retryable).

    Args:
        message: What failed, for the user.
        attempts: How many requests were made; 1 by default.
    """

    def __init__(self, message: str, attempts: int = 1):
        super().__init__(message)
        self.attempts = attempts


class ModelServerUnavailable(ModelServerError):
    """The chat server cannot be reached, or refuses requests for its configuration: no
    episode can run. ``abort_run`` tells the evaluation harness to stop the run and record no
    result for the episode (see ``causaltrace.eval.harness``)."""

    abort_run = True


def check_base_url(url: str) -> None:
    """A chat server's URL must be absolute http(s) with a host: anything else is a typo that
    would otherwise cost every episode its retries before the run fails (issue 26).

    Raises:
        CausalTraceError: ``url`` is not ``http://host[:port][/path]`` or ``https://...``.
    """
    parsed = urlsplit(url)
    try:
        parsed.port  # noqa: B018  (parses the port: a bad one raises ValueError)
    except ValueError as exc:
        raise CausalTraceError(f"agent.base_url {url!r} has a bad port: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise CausalTraceError(
            f"agent.base_url must be an http(s) URL with a host, e.g. http://localhost:8000/v1; "
            f"got {url!r}"
        )


# HTTP statuses that mean the agent's configuration is wrong (key, URL, model), not the request.
CONFIG_STATUS = frozenset({401, 403, 404})


@dataclass
class Reply:
    """One assistant reply, normalized."""

    content: str | None
    calls: list[dict[str, Any]] = field(default_factory=list)
    reasoning: str | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None


def _text(value: Any) -> str | None:
    """Message content as text: a string, ``None``, or a list of ``{"type": "text"}`` parts."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [p.get("text", "") if isinstance(p, Mapping) else str(p) for p in value]
        return "".join(parts)
    return str(value)


def _arguments(value: Any) -> str | dict[str, Any]:
    """Arguments as the session takes them: a mapping, or the raw text (even if malformed)."""
    if value is None:
        return "{}"
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        return value
    return json.dumps(value)  # a list or a number: the tool says it is not an object


def _call(name: Any, arguments: Any, call_id: Any) -> dict[str, Any]:
    return {
        "name": str(name or ""),
        "arguments": _arguments(arguments),
        "id": str(call_id) if call_id else None,
    }


def parse_tool_call_blocks(content: str) -> tuple[list[dict[str, Any]], str | None]:
    """Hermes-style ``<tool_call>`` blocks in ``content`` (outside ``<think>``): the calls and
    the content without them. A block that is not valid JSON becomes a call whose arguments are
    the raw block, so the tool reports the problem to the agent.

    Args:
        content: The assistant message's text.
    """
    visible = THINK_BLOCK.sub("", content)
    if "<tool_call>" not in visible:
        return [], content
    calls = []
    for match in TOOL_CALL_BLOCK.finditer(visible):
        raw = match.group(1).strip()
        try:
            obj = json.loads(raw)
        except ValueError:
            obj = None
        if isinstance(obj, Mapping) and "name" in obj:
            args = obj.get("arguments", obj.get("parameters"))
            calls.append(_call(obj["name"], args, obj.get("id")))
        else:
            name = NAME_FIELD.search(raw)
            calls.append(_call(name.group(1) if name else "", raw, None))
    rest = TOOL_CALL_BLOCK.sub("", content).strip()
    return calls, rest or None


def parse_reply(data: Any) -> Reply:
    """A chat-completions response body (decoded JSON) as a :class:`Reply`.

    Args:
        data: The decoded response body.
    """
    if not isinstance(data, Mapping):
        raise ModelServerError(f"the server's reply is not a JSON object: {str(data)[:200]!r}")
    if data.get("error") and not data.get("choices"):
        raise ModelServerError(f"the server returned an error: {str(data['error'])[:500]}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise ModelServerError(f"the server's reply has no choices: {json.dumps(data)[:300]}")
    choice = choices[0]
    message = choice.get("message") or {}
    if not isinstance(message, Mapping):
        raise ModelServerError(f"the server's reply has no message: {json.dumps(choice)[:300]}")
    content = _text(message.get("content"))
    reasoning = next((_text(message[k]) for k in REASONING_KEYS if message.get(k)), None)
    calls = []
    raw_calls = message.get("tool_calls") or []
    if isinstance(raw_calls, Mapping):
        raw_calls = [raw_calls]
    for tc in raw_calls if isinstance(raw_calls, list) else []:
        if not isinstance(tc, Mapping):
            continue
        fn = tc.get("function") if isinstance(tc.get("function"), Mapping) else tc
        calls.append(_call(fn.get("name"), fn.get("arguments", fn.get("parameters")), tc.get("id")))
    if not calls and isinstance(message.get("function_call"), Mapping):
        fc = message["function_call"]
        calls.append(_call(fc.get("name"), fc.get("arguments"), None))
    if not calls and content and "<tool_call>" in content:
        calls, content = parse_tool_call_blocks(content)
    usage = data.get("usage") if isinstance(data.get("usage"), Mapping) else None
    return Reply(
        content, calls, reasoning, choice.get("finish_reason"), dict(usage) if usage else None
    )


class OpenAIAgent(Agent):
    """Drives an episode through an OpenAI-compatible chat server (see the module docstring).

    Args:
        config: The agent's config: ``model`` (required), ``base_url`` and ``api_key`` (by
            default from ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``), the sampling options
            ``temperature``, ``top_p``, ``max_tokens``, ``tool_choice`` and ``extra_body``,
            ``retries`` (5), ``backoff`` (1 s), ``max_backoff`` (60 s), ``timeout`` (600 s),
            ``system_prompt``, and the check before a run: ``preflight`` (true) and
            ``preflight_timeout`` (5 s).

    Raises:
        CausalTraceError: A key is unknown, ``model`` is not set, a retry setting is negative,
            ``preflight`` is not a boolean or ``preflight_timeout`` is not > 0.
    """

    name = "openai"
    KNOWN = frozenset(
        {
            "name",
            "model",
            "base_url",
            "api_key",
            "temperature",
            "top_p",
            "max_tokens",
            "extra_body",
            "tool_choice",
            "retries",
            "backoff",
            "max_backoff",
            "timeout",
            "system_prompt",
            "preflight",
            "preflight_timeout",
        }
    )

    def __init__(self, config: Mapping[str, Any] | None = None):
        super().__init__(config)
        c = self.config
        unknown = sorted(set(c) - self.KNOWN)
        if unknown:
            raise CausalTraceError(
                f"openai agent: unknown config key(s) {unknown}; known: {sorted(self.KNOWN)}"
            )
        if not c.get("model") or c.get("model") == "???":
            raise CausalTraceError(
                "agent.model is required and not set: add agent.model=... to the command line "
                "(the served model's name, e.g. agent.model=Qwen/Qwen3-8B)"
            )
        self.model = str(c["model"])
        self.base_url = c.get("base_url") or os.environ.get("OPENAI_BASE_URL") or None
        if self.base_url is not None:
            check_base_url(str(self.base_url))
        self.api_key = c.get("api_key") or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.retries = int(_option(c, "retries", 5))
        self.backoff = float(_option(c, "backoff", 1.0))
        self.max_backoff = float(_option(c, "max_backoff", 60.0))
        self.timeout = float(_option(c, "timeout", 600.0))
        self.system_prompt = c.get("system_prompt") or None
        if self.retries < 0 or self.backoff < 0 or self.max_backoff < 0 or self.timeout <= 0:
            raise CausalTraceError(
                "openai agent: retries, backoff and max_backoff must be >= 0 and timeout > 0"
            )
        self.preflight_enabled = _option(c, "preflight", True)
        if not isinstance(self.preflight_enabled, bool):
            raise CausalTraceError(
                f"agent.preflight must be true or false, got {self.preflight_enabled!r}"
            )
        self.preflight_timeout = float(_option(c, "preflight_timeout", 5.0))
        if not self.preflight_timeout > 0:
            raise CausalTraceError(
                f"agent.preflight_timeout must be > 0 seconds, got {self.preflight_timeout!r}"
            )

    @property
    def server(self) -> str:
        """The server's URL as the client uses it (the default: OpenAI's API)."""
        return str(self.base_url or "https://api.openai.com/v1")

    # -- the check before a run -----------------------------------------------------------
    async def preflight(self) -> None:
        """Check, before any episode, that the server can be reached: one ``GET
        {base_url}/models`` within ``preflight_timeout`` seconds, not retried.

        Any HTTP answer but 401 and 403 passes (a server without ``/models`` answers 404 and
        is up; the chat requests decide the rest); a list of models that does not name
        ``model`` is logged as a warning, not refused (servers accept aliases they do not
        list). Skipped with ``preflight: false``.

        Raises:
            ModelServerUnavailable: No answer (connection refused, no such host, nothing within
                ``preflight_timeout``), or HTTP 401 or 403 (the key is refused).
        """
        if not self.preflight_enabled:
            return
        openai = _openai()
        url = f"{self.server.rstrip('/')}/models"
        skip = "agent.preflight=false skips this check"
        client = self._client(timeout=self.preflight_timeout)
        try:
            raw = await client.models.with_raw_response.list()
        except openai.APITimeoutError:
            raise ModelServerUnavailable(
                f"the chat server at {self.server} did not answer GET {url} within "
                f"{self.preflight_timeout:g} s; no episode was run (check agent.base_url and "
                f"the server, or raise agent.preflight_timeout; {skip})"
            ) from None
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc.__context__ or exc
            raise ModelServerUnavailable(
                f"the chat server at {self.server} cannot be reached (GET {url}: "
                f"{type(cause).__name__}: {_short(str(cause), 200)}); no episode was run: start "
                f"the server or fix agent.base_url, then re-run the same command to retry"
            ) from None
        except openai.APIStatusError as exc:
            if exc.status_code in (401, 403):
                raise ModelServerUnavailable(
                    f"the chat server at {self.server} refused GET {url} with HTTP "
                    f"{exc.status_code} (check the API key: $OPENAI_API_KEY or agent.api_key; "
                    f"{skip}): {_short(exc.message, 200)}"
                ) from None
            log.debug("GET %s answered HTTP %s: the server is up", url, exc.status_code)
            return
        finally:
            await client.close()
        self._check_listed(url, raw.text)

    def _check_listed(self, url: str, text: str) -> None:
        """Warn if the server's model list (``{"data": [{"id": ...}]}``) leaves out ``model``."""
        try:
            data = json.loads(text).get("data")
            served = [str(m["id"]) for m in data if isinstance(m, Mapping) and "id" in m]
        except (ValueError, AttributeError, TypeError):
            return  # not a model list: the server answered, which is all the check needs
        if served and self.model not in served:
            shown = ", ".join(served[:10]) + (" ..." if len(served) > 10 else "")
            log.warning(
                "agent.model %r is not among the models %s lists (%s): the chat requests may be "
                "refused",
                self.model,
                url,
                shown,
            )

    # -- the request --------------------------------------------------------------------
    def request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict:
        """The keyword arguments of ``chat.completions.create`` for one turn.

        Args:
            messages: The conversation so far.
            tools: The tool schemas.
        """
        c = self.config
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "tools": tools}
        for key in ("temperature", "top_p", "max_tokens", "tool_choice"):
            if c.get(key) is not None:
                kwargs[key] = c[key]
        if c.get("extra_body"):
            kwargs["extra_body"] = dict(c["extra_body"])
        return kwargs

    def _client(self, timeout: float | None = None):
        openai = _openai()
        return openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=self.api_key,
            max_retries=0,
            timeout=self.timeout if timeout is None else timeout,
        )

    def backoff_delay(
        self, attempt: int, rng: np.random.Generator, retry_after: float | None = None
    ) -> float:
        """Seconds to wait before retry ``attempt + 1``: exponential, times a jitter factor in
        [0.5, 1.5) drawn from the episode's rng, at least the server's ``Retry-After``.

        Args:
            attempt: The number of the attempt that failed, from 0.
            rng: The episode's generator (draws the jitter).
            retry_after: The server's ``Retry-After`` in seconds; none by default.
        """
        delay = min(self.max_backoff, self.backoff * 2.0**attempt) * (0.5 + rng.random())
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_backoff))
        return delay

    async def complete(self, client, messages, tools, rng: np.random.Generator) -> Reply:
        """One completion with retries; raises :class:`ModelServerError` when it cannot get one.

        Args:
            client (openai.AsyncOpenAI): The client.
            messages (list[dict]): The conversation so far.
            tools (list[dict]): The tool schemas.
            rng: The episode's generator (draws the backoff jitter).
        """
        openai = _openai()
        kwargs = self.request(messages, tools)
        attempt = 0
        while True:
            retry_after = None
            try:
                raw = await client.chat.completions.with_raw_response.create(**kwargs)
                try:
                    data = json.loads(raw.text)
                except ValueError:
                    raise ModelServerError(
                        f"the server's reply is not JSON: {raw.text[:200]!r}", attempt + 1
                    ) from None
                return parse_reply(data)
            except openai.APIStatusError as exc:
                status = exc.status_code
                retryable = status >= 500 or status in RETRY_STATUS
                error = f"HTTP {status} from the chat server: {_short(exc.message)}"
                retry_after = _retry_after(exc.response)
                unavailable = status in CONFIG_STATUS
                if unavailable:
                    error = (
                        f"the chat server at {self.server} refused the request with HTTP {status} "
                        f"(check agent.model, agent.base_url and the API key): {_short(exc.message)}"
                    )
            except openai.APIConnectionError as exc:  # includes timeouts
                retryable = True
                # No answer at all (refused, no such host) is the server being down or the URL
                # wrong; a timeout is a server that answered too slowly for this request.
                unavailable = not isinstance(exc, openai.APITimeoutError)
                error = f"{type(exc).__name__}: {_short(str(exc))}"
                if unavailable:
                    cause = exc.__cause__ or exc.__context__
                    detail = f" ({_short(str(cause), 200)})" if cause else ""
                    error = f"the chat server at {self.server} cannot be reached{detail}"
            except ModelServerError as exc:
                exc.attempts = attempt + 1
                raise
            if not retryable or attempt >= self.retries:
                kind = ModelServerUnavailable if unavailable else ModelServerError
                raise kind(f"{error} (after {attempt + 1} attempt(s))", attempt + 1)
            await asyncio.sleep(self.backoff_delay(attempt, rng, retry_after))
            attempt += 1

    # -- the episode --------------------------------------------------------------------
    async def run(self, session, rng: np.random.Generator) -> None:
        tools = session.tool_schemas()
        messages: list[dict[str, Any]] = []
        if self.system_prompt:
            messages.append({"role": "system", "content": str(self.system_prompt)})
        messages.append({"role": "user", "content": session.prompt})
        client = self._client()
        try:
            while not session.done:
                try:
                    reply = await self.complete(client, messages, tools, rng)
                except ModelServerUnavailable:
                    raise  # no episode can run: the harness stops the run
                except ModelServerError as exc:
                    await self.end_episode(session, str(exc))
                    return
                await self._turn(session, messages, reply)
        finally:
            await client.close()

    async def _turn(self, session, messages: list[dict[str, Any]], reply: Reply) -> None:
        """Send one reply to the session and extend the conversation with its results."""
        extra: dict[str, Any] = {}
        if reply.reasoning:
            extra["reasoning"] = reply.reasoning
        if reply.usage:
            extra["usage"] = reply.usage
        if not reply.calls:  # a final answer in text
            await session.turn([], reply.content or "", extra=extra or None)
            return
        turn = session.turns + 1
        calls = [{**c, "id": c["id"] or f"call_{turn}_{i}"} for i, c in enumerate(reply.calls)]
        results = await session.turn(calls, reply.content, extra=extra or None)
        messages.append(
            {
                "role": "assistant",
                "content": reply.content or "",
                "tool_calls": [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {
                            "name": c["name"],
                            "arguments": c["arguments"]
                            if isinstance(c["arguments"], str)
                            else json.dumps(c["arguments"]),
                        },
                    }
                    for c in calls
                ],
            }
        )
        for call, result in zip(calls, results):
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": result.observation}
            )


def _option(config: Mapping[str, Any], key: str, default: Any) -> Any:
    """A config value, with ``default`` for a missing key or a null."""
    value = config.get(key)
    return default if value is None else value


def _short(text: str, limit: int = 500) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


def _retry_after(response) -> float | None:
    try:
        value = response.headers.get("retry-after")
        return max(0.0, float(value)) if value is not None else None
    except (AttributeError, TypeError, ValueError):
        return None


def _openai():
    """The openai client module, or a one-line error that says how to install it (a missing
    optional package is the user's environment, not a bug)."""
    try:
        # optional: the openai client (the eval extra)
        import openai
    except ImportError as exc:
        raise CausalTraceError(
            "the openai agent needs the openai package: pip install 'causaltrace[eval]' "
            f"(or pip install openai; {exc})"
        ) from exc
    return openai
