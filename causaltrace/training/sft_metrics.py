"""What a set of SFT rows teaches, measured (issue 24).

A model fine-tuned on a teacher's rows learns what the rows do: how many tool calls it makes, how
long its episodes are, whether the text after a tool result reads that result, and whether every
episode starts the same way. This module computes those figures on rows written by
``causaltrace-export sft`` (``messages`` with ``tool_calls`` and ``tool`` results, ``tools``):

- ``tool_calls``: calls per row (every call of every assistant message, ``submit`` included),
  p50 and p95;
- ``tokens``: per row with a real chat template (``apply_chat_template`` of a Hugging Face
  tokenizer, tools included) when one is given, else ``chars``: the characters of the messages'
  text and call arguments (no tokenizer is needed for that);
- ``quote_share``: of the assistant messages that follow a tool result, the share whose text
  contains a number printed in that result (dates and times, single digits, the sql tool's row
  count, and numbers that the call itself contained are not counted: repeating a query's
  constants is not reading its result); ``quote_share_numeric`` the same over the messages whose
  result printed such a number at all;
- ``distinct_openings``: distinct sequences of the first three calls (tool and arguments,
  whitespace-normalized) over rows; ``distinct_opening_kinds`` the same on tool names and the
  first word of each query, a coarser view of the same;
- ``max_argument_chars``: the longest single argument value of any call (the issue's bound is
  1,500 characters).

    python -m causaltrace.training.sft_metrics data/sft.jsonl [--tokenizer DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?)?")
_ROW_COUNT = re.compile(r"\(\d+ rows?\)")  # the sql tool's footer, not a reading
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w])")


def numbers(text: str) -> set[str]:
    """The numbers printed in ``text`` worth quoting: dates and times left out, and single
    digits (a count of rows, a period's length) too; ``-`` and a trailing ``.0`` normalized."""
    out = set()
    for token in _NUMBER.findall(_DATE.sub(" ", _ROW_COUNT.sub(" ", text or ""))):
        token = token.lstrip("-")
        if token.endswith(".0"):
            token = token[:-2]
        digits = token.replace(".", "")
        if len(digits.lstrip("0")) >= 2:
            out.add(token)
    return out


def _arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    raw = (call.get("function") or call).get("arguments")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {"_raw": raw}
    return dict(raw) if isinstance(raw, Mapping) else {"_raw": str(raw)}


def _calls(row: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for message in row["messages"]:
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                name = (call.get("function") or call).get("name", "")
                out.append((name, _arguments(call)))
    return out


def quotes(row: Mapping[str, Any]) -> tuple[int, int, int]:
    """(assistant messages that follow a tool result, those whose result printed a number,
    those quoting one of its numbers)."""
    messages = row["messages"]
    follows = numeric = quoted = 0
    last_args: dict[str, str] = {}
    for i, message in enumerate(messages):
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                last_args[call.get("id", "")] = json.dumps(_arguments(call))
        if message.get("role") != "assistant" or i == 0 or messages[i - 1].get("role") != "tool":
            continue
        results, j = [], i - 1
        while j >= 0 and messages[j].get("role") == "tool":
            results.append(messages[j])
            j -= 1
        printed = set()
        for result in results:
            asked = numbers(last_args.get(result.get("tool_call_id", ""), ""))
            printed |= numbers(str(result.get("content") or "")) - asked
        follows += 1
        numeric += bool(printed)
        if printed & numbers(str(message.get("content") or "")):
            quoted += 1
    return follows, numeric, quoted


def _normal(text: str) -> str:
    return " ".join(str(text).split())


def opening(row: Mapping[str, Any], n: int = 3) -> tuple:
    return tuple(
        (name, json.dumps({k: _normal(v) for k, v in sorted(args.items())}))
        for name, args in _calls(row)[:n]
    )


def opening_kind(row: Mapping[str, Any], n: int = 3) -> tuple:
    """The first calls by tool and the shape of what they ask (the tables a query reads)."""
    out = []
    for name, args in _calls(row)[:n]:
        text = str(args.get("query") or args.get("code") or "")
        tables = tuple(sorted(set(re.findall(r"\b(?:FROM|JOIN)\s+(\w+)", text, re.IGNORECASE))))
        out.append((name, tables))
    return tuple(out)


def row_chars(row: Mapping[str, Any]) -> int:
    total = 0
    for message in row["messages"]:
        total += len(str(message.get("content") or ""))
        for call in message.get("tool_calls") or []:
            total += len(json.dumps(_arguments(call)))
    return total


def row_tokens(row: Mapping[str, Any], tokenizer) -> int:
    """Tokens of the row as the trainer sees it: the chat template over messages and tools."""
    ids = tokenizer.apply_chat_template(
        [dict(m) for m in row["messages"]], tools=row.get("tools"), tokenize=True
    )
    if isinstance(ids, Mapping):  # some tokenizers return a BatchEncoding
        ids = ids["input_ids"]
    return len(ids)


def _quantiles(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p95": 0.0, "max": 0.0, "mean": 0.0}
    arr = np.asarray(values, dtype=float)
    return {
        "p50": float(np.percentile(arr, 50)),
        "p95": float(np.percentile(arr, 95)),
        "max": float(arr.max()),
        "mean": float(arr.mean()),
    }


def sft_metrics(rows: Iterable[Mapping[str, Any]], tokenizer=None) -> dict[str, Any]:
    """The figures of the module docstring for ``rows`` (dicts as exported)."""
    rows = list(rows)
    calls = [len(_calls(r)) for r in rows]
    follows = numeric = quoted = 0
    for r in rows:
        f, n, q = quotes(r)
        follows, numeric, quoted = follows + f, numeric + n, quoted + q
    arg_chars = [
        len(v if isinstance(v, str) else json.dumps(v))
        for r in rows
        for _, args in _calls(r)
        for v in args.values()
    ]
    out: dict[str, Any] = {
        "rows": len(rows),
        "tool_calls": _quantiles(calls),
        "chars": _quantiles([row_chars(r) for r in rows]),
        "assistant_after_tool": follows,
        "quoting": quoted,
        "quote_share": quoted / follows if follows else 0.0,
        "quote_share_numeric": quoted / numeric if numeric else 0.0,
        "distinct_openings": len({opening(r) for r in rows}) / len(rows) if rows else 0.0,
        "distinct_opening_kinds": len({opening_kind(r) for r in rows}) / len(rows) if rows else 0.0,
        "max_argument_chars": max(arg_chars, default=0),
        "tokens": None,
    }
    if tokenizer is not None:
        out["tokens"] = _quantiles([row_tokens(r, tokenizer) for r in rows])
    return out


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", help="an SFT JSONL file written by causaltrace-export sft")
    parser.add_argument("--tokenizer", help="a Hugging Face tokenizer name or directory")
    args = parser.parse_args(argv)
    tokenizer = None
    if args.tokenizer:
        # optional: the train extra
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    json.dump(sft_metrics(read_rows(args.rows), tokenizer), sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
