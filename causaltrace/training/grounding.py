"""Whether a row's reasoning cites only numbers it was shown (issue 40).

An SFT row is imitated token by token. If its assistant text quotes a z-value, a share of the move
or a baseline that no tool output above it printed, the model learns to write plausible
statistics instead of computing them. This checker reads a row's messages in order and, for each
number an assistant message's *text* cites, asks whether a message the model could see before it
printed that number: the prompt (system and user messages: the page) or a tool result. A cited
number is grounded when some shown number rounds to it at the precision it is written with
(``0.3141`` shown grounds ``0.31`` and ``31%`` and ``31.4%``; ``1,234,567`` grounds ``1.23M``),
sign ignored (``fell 12%`` cites ``-0.12``).

Not counted as citations: dates and times, integers below 10 written without a decimal or a
percent sign (counts of days or campaigns), and digits inside names (``us_west2``,
``brand_rsa_1``, ``test-000012``). Numbers in the assistant's own tool-call arguments are neither
citations nor shown (a query's constants are the model's choice, not a reading).

    python -m causaltrace.training.grounding data/sft.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

_DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?)?\b|\b\d{1,2}:\d{2}(?::\d{2})?\b"
)
# A number: not inside a name (no letter, digit, underscore, dot or dash just before it), an
# optional sign, digits with optional thousands separators and decimals, an optional scale or
# percent; not followed by a letter or digit (a name such as 2d or v3), except the scales.
_NUMBER = re.compile(
    r"(?<![\w.\-+−])([-+−])?((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)(%|[kKMB]\b|x\b|pp\b)?(?![\w])"
)
_SCALE = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9}


@dataclass(frozen=True)
class Citation:
    """One number an assistant message cites: where, as written, and whether it was shown."""

    message: int
    written: str
    grounded: bool


@dataclass(frozen=True)
class Number:
    """A number as written: its magnitude, its decimals, and whether it is a percentage."""

    value: float
    decimals: int
    percent: bool
    written: str


def parse_numbers(text: str) -> list[Number]:
    """Every number of ``text`` (dates and times removed first), magnitudes only."""
    out = []
    for match in _NUMBER.finditer(_DATE.sub(" ", text or "")):
        _, digits, suffix = match.groups()
        plain = digits.replace(",", "")
        decimals = len(plain.split(".")[1]) if "." in plain else 0
        scale = _SCALE.get(suffix or "")
        value = abs(float(plain)) * (scale or 1.0)
        if scale:  # 1.2M is written to 0.1M: its precision is in the scaled unit
            decimals -= round(math.log10(scale))
        out.append(Number(value, decimals, suffix == "%", match.group(0)))
    return out


def is_citation(number: Number) -> bool:
    """Whether a number counts as a citation (integers below 10 written bare do not)."""
    return number.percent or number.decimals != 0 or number.value >= 10


def grounded(number: Number, shown: np.ndarray) -> bool:
    """Whether some shown magnitude rounds to ``number`` at its written precision (or, for a
    percentage, a shown ratio does after x100)."""
    if shown.size == 0:
        return False
    half = 0.5 * 10.0 ** (-number.decimals) + 1e-9 * max(number.value, 1.0)
    candidates = [shown, shown * 100.0] if number.percent else [shown]
    return any(bool(np.any(np.abs(c - number.value) <= half)) for c in candidates)


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return "" if content is None else str(content)


@dataclass(frozen=True)
class RowGrounding:
    """A row's citations, in order."""

    citations: tuple[Citation, ...]

    @property
    def cited(self) -> int:
        return len(self.citations)

    @property
    def ungrounded(self) -> tuple[Citation, ...]:
        return tuple(c for c in self.citations if not c.grounded)

    @property
    def ok(self) -> bool:
        return not self.ungrounded


def row_grounding(messages: Sequence[Mapping[str, Any]]) -> RowGrounding:
    """Check every assistant message's text against what the row showed before it."""
    shown: list[float] = []
    citations = []
    for i, message in enumerate(messages):
        role = message.get("role")
        numbers = parse_numbers(_text(message))
        if role == "assistant":
            seen = np.asarray(shown, dtype=np.float64)
            citations.extend(
                Citation(i, n.written, grounded(n, seen)) for n in numbers if is_citation(n)
            )
        elif role in ("system", "user", "tool"):
            shown.extend(n.value for n in numbers)
    return RowGrounding(tuple(citations))


def grounding_report(rows: Iterable[Mapping[str, Any]], examples: int = 10) -> dict[str, Any]:
    """Over ``rows``: numbers cited, the share grounded, the rows with any ungrounded number,
    and the first ``examples`` ungrounded citations (row, message, number)."""
    cited = grounded_n = rows_n = bad_rows = 0
    shown_examples = []
    for r, row in enumerate(rows):
        rows_n += 1
        result = row_grounding(row.get("messages") or [])
        cited += result.cited
        grounded_n += result.cited - len(result.ungrounded)
        bad_rows += not result.ok
        for c in result.ungrounded:
            if len(shown_examples) < examples:
                episode = (row.get("metadata") or {}).get("episode_id", r)
                shown_examples.append({"row": episode, "message": c.message, "number": c.written})
    return {
        "rows": rows_n,
        "numbers_cited": cited,
        "numbers_grounded": grounded_n,
        "grounded_share": grounded_n / cited if cited else 1.0,
        "rows_with_ungrounded": bad_rows,
        "examples": shown_examples,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m causaltrace.training.grounding",
        description="Share of the numbers an SFT set's assistant messages cite that a tool "
        "output or the prompt showed before them.",
    )
    parser.add_argument("rows", help="SFT JSONL written by causaltrace-export sft")
    args = parser.parse_args(argv)
    path = Path(args.rows)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    json.dump(grounding_report(rows), sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
