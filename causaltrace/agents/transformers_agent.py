"""A local Hugging Face checkpoint as an agent: the model generates on this machine with
transformers, no server needed (for small models and for checking a checkpoint a training run
just wrote; serve large models with vLLM and use the ``openai`` agent).

Each turn renders the conversation with the checkpoint's chat template (tools included, as the
harness schemas), generates greedily, and reads Hermes-style ``<tool_call>{"name", "arguments"}
</tool_call>`` blocks (Qwen, Hermes, and most open tool-calling models) as tool calls; a turn
without one is the final answer. Greedy decoding keeps evaluation deterministic (no global
random state is touched).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from typing import Any

import numpy as np

from causaltrace.agents.base import Agent
from causaltrace.errors import CausalTraceError
from causaltrace.scoring.call_formats import find_markup_calls

_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def parse_hermes(text: str) -> tuple[str, list[dict[str, Any]]]:
    """``(content, calls)`` of a generated turn: the text outside ``<tool_call>`` blocks and
    each block's ``{"name", "arguments"}`` (a block that is not such JSON is passed on as a call
    of tool ``""`` so that the environment answers with an error, as it would for a server).

    Args:
        text: The generated turn.
    """
    calls = []
    for block in _CALL.findall(text):
        try:
            obj = json.loads(block)
            name, arguments = str(obj["name"]), obj.get("arguments", {})
        except (ValueError, KeyError, TypeError):
            name, arguments = "", block
        calls.append(
            {
                "name": name,
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
            }
        )
    return _CALL.sub("", text).strip(), calls


_EMPTY_WRAPPERS = re.compile(
    r"<tool_call>\s*</tool_call>|<\|tool_calls_section_begin\|>|<\|tool_calls_section_end\|>"
)


def parse_tool_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """``(content, calls)`` of a generated turn in any tool-call format the scorer reads
    (Hermes JSON, Qwen3.5 / Qwen3-Coder XML, GLM, Kimi: see
    :mod:`causaltrace.scoring.call_formats`), so a model that writes its family's format gets
    its tools run, as the reward will read them.

    Args:
        text: The generated turn.
    """
    markup = find_markup_calls(text)
    calls = [{"name": c.name, "arguments": json.dumps(c.arguments)} for c in markup]
    rest = "".join(
        text[start:end]
        for start, end in zip(
            [0, *(c.end for c in markup)], [*(c.start for c in markup), len(text)]
        )
    )
    content, hermes = parse_hermes(_EMPTY_WRAPPERS.sub("", rest))
    calls += hermes
    if not calls:  # Llama 3 writes a call as the whole turn: {"name", "parameters"}
        try:
            obj = json.loads(content)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("name"), str):
            arguments = obj.get("parameters", obj.get("arguments", {}))
            return "", [{"name": obj["name"], "arguments": json.dumps(arguments)}]
    return content, calls


def _object(arguments: str) -> dict[str, Any]:
    """Arguments as the chat template renders them (an object; {} when they were not JSON)."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class TransformersAgent(Agent):
    """Config: ``model`` (a checkpoint directory or hub name), ``max_new_tokens`` per turn
    (default 1024), ``system_prompt`` (optional), ``device`` (default ``cpu``).

    Args:
        config (Mapping | None): The agent's config, as above; ``model`` is required.

    Raises:
        CausalTraceError: ``model`` is not set.
    """

    name = "transformers"

    def __init__(self, config=None):
        super().__init__(config)
        if not self.config.get("model"):
            raise CausalTraceError("the transformers agent needs agent.model (a checkpoint)")
        self._loaded = None
        # Episodes run concurrently; one model is loaded once and generates one turn at a time.
        self._lock = threading.Lock()

    def _load(self):
        if self._loaded is None:
            # optional: the train extra
            from transformers import AutoModelForCausalLM, AutoTokenizer

            path = str(self.config["model"])
            tokenizer = AutoTokenizer.from_pretrained(path)
            model = AutoModelForCausalLM.from_pretrained(path)
            model.to(self.config.get("device", "cpu")).eval()
            self._loaded = tokenizer, model
        return self._loaded

    def _generate(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        with self._lock:
            return self._generate_locked(messages, tools)

    def _generate_locked(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        # optional: the train extra
        import torch

        tokenizer, model = self._load()
        inputs = tokenizer.apply_chat_template(
            messages, tools=tools, add_generation_prompt=True, return_tensors="pt", return_dict=True
        ).to(model.device)
        with torch.no_grad():
            out = model.generate(
                **inputs,
                max_new_tokens=int(self.config.get("max_new_tokens", 1024)),
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
            )
        new = out[0][inputs["input_ids"].shape[1] :]
        text = tokenizer.decode(new, skip_special_tokens=False)
        for stop in (tokenizer.eos_token, tokenizer.pad_token):
            if stop:
                text = text.split(stop)[0]
        return text

    async def run(self, session, rng: np.random.Generator) -> None:
        tools = session.tool_schemas()
        messages: list[dict[str, Any]] = []
        if self.config.get("system_prompt"):
            messages.append({"role": "system", "content": str(self.config["system_prompt"])})
        messages.append({"role": "user", "content": session.prompt})
        while not session.done:
            text = await asyncio.to_thread(self._generate, messages, tools)
            content, calls = parse_tool_calls(text)
            if not calls:
                await session.turn([], content)
                return
            turn = session.turns + 1
            calls = [{**c, "id": f"call_{turn}_{i}"} for i, c in enumerate(calls)]
            results = await session.turn(calls, content)
            messages.append(
                {
                    "role": "assistant",
                    "content": content,
                    "tool_calls": [
                        {
                            "id": c["id"],
                            "type": "function",
                            "function": {"name": c["name"], "arguments": _object(c["arguments"])},
                        }
                        for c in calls
                    ],
                }
            )
            for call, result in zip(calls, results):
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": result.observation}
                )
