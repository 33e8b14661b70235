"""``causaltrace-export``: turn evaluation runs into training data.

    causaltrace-export sft --run runs/teacher-ads_train --out data/sft.jsonl [--limit 1200]

``sft`` keeps the episodes of one or more runs that were fully right (FullAttr@1 = 1, no error)
and writes them as chat-format JSONL for supervised fine-tuning, in the format Hugging Face TRL's
``SFTTrainer`` takes for tool calling: a ``messages`` column (``user``, ``assistant`` with
``tool_calls``, ``tool`` results with ``tool_call_id`` and ``name``, optionally a ``system``
message first) and a ``tools`` column (the JSON schemas the agent had). Each row's ``metadata``
records the episode, the dataset's name, split and manifest hash, the evaluation seed and the
agent; never the dataset's generation seed, which would let anyone regenerate the labels.
A ``<out>.meta.json`` file beside the JSONL records the runs, the filter and the counts.
User errors print one line; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from causaltrace.apps.errors import run_cli
from causaltrace.errors import CausalTraceError
from causaltrace.eval.harness import RESULTS_FILE, RUN_FILE, TRANSCRIPT_DIR, read_results
from causaltrace.eval.report import read_transcript
from causaltrace.storage import atomic_write_text, canonical_json, json_load

SUBMIT = "submit"


class SkipEpisode(Exception):
    """An episode that cannot be written as training data (the reason is the message)."""


def _arguments(raw: Any, mode: str) -> Any:
    """Tool-call arguments as an object (what chat templates expect) or as JSON text."""
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            raise SkipEpisode("a tool call's arguments are not valid JSON") from None
    else:
        value = raw
    if not isinstance(value, Mapping):
        raise SkipEpisode("a tool call's arguments are not a JSON object")
    return dict(value) if mode == "object" else json.dumps(value, ensure_ascii=False)


def sft_messages(
    transcript: Sequence[Mapping[str, Any]],
    *,
    system: str | None = None,
    reasoning: str = "drop",
    arguments: str = "object",
) -> list[dict[str, Any]]:
    """Chat messages for SFT from a transcript's messages (see the module docstring).

    The environment's reply to ``submit`` is dropped: a trajectory ends with the assistant's
    submit call. ``reasoning="keep"`` keeps a reasoning field as ``reasoning_content``.
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for m in transcript:
        role = m.get("role")
        if role in ("system", "user"):
            out.append({"role": role, "content": str(m.get("content") or "")})
        elif role == "assistant":
            if m.get("error"):
                raise SkipEpisode("the episode ended on an agent error")
            message: dict[str, Any] = {"role": "assistant", "content": m.get("content") or ""}
            calls = []
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function") or {}
                calls.append(
                    {
                        "id": tc.get("id"),
                        "type": "function",
                        "function": {
                            "name": fn.get("name"),
                            "arguments": _arguments(fn.get("arguments"), arguments),
                        },
                    }
                )
            if calls:
                message["tool_calls"] = calls
            if reasoning == "keep" and m.get("reasoning"):
                message["reasoning_content"] = m["reasoning"]
            out.append(message)
        elif role == "tool":
            if m.get("name") == SUBMIT and not m.get("tool_call_id"):
                continue  # "Submission received": not part of what the model should learn
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": m.get("tool_call_id"),
                    "name": m.get("name"),
                    "content": str(m.get("content") or ""),
                }
            )
    _check(out)
    return out


def _check(messages: list[dict[str, Any]]) -> None:
    """Every tool result answers a call made before it; the last message is the assistant's."""
    open_calls: dict[str, str] = {}
    for m in messages:
        if m["role"] == "assistant":
            for tc in m.get("tool_calls") or []:
                open_calls[tc["id"]] = tc["function"]["name"]
        elif m["role"] == "tool" and m["tool_call_id"] not in open_calls:
            raise SkipEpisode("a tool result answers no earlier call")
    if not messages or messages[-1]["role"] != "assistant":
        raise SkipEpisode("the trajectory does not end with the assistant")


def export_sft(
    runs: Sequence[str | Path],
    out: str | Path,
    *,
    limit: int | None = None,
    system: str | None = None,
    reasoning: str = "drop",
    arguments: str = "object",
) -> dict[str, Any]:
    """Write the fully correct episodes of ``runs`` as SFT JSONL; returns the counts."""
    if reasoning not in ("drop", "keep") or arguments not in ("object", "string"):
        raise CausalTraceError("reasoning is 'drop' or 'keep'; arguments 'object' or 'string'")
    rows: list[str] = []
    counts: dict[str, Any] = {"episodes": 0, "correct": 0, "written": 0, "skipped": {}}
    sources = []
    for run_dir in map(Path, runs):
        info_path = run_dir / RUN_FILE
        if not info_path.exists():
            raise CausalTraceError(f"{run_dir} is not an evaluation run (no {RUN_FILE})")
        info = json_load(info_path)
        ds = info["dataset"]
        agent = info["agent"]
        run_system = (
            system if system is not None else (agent.get("config") or {}).get("system_prompt")
        )
        results = read_results(run_dir / RESULTS_FILE)
        sources.append(
            {
                "run": str(run_dir),
                "agent": agent["name"],
                "dataset": ds["name"],
                "split": ds["split"],
                "manifest_sha256": ds["manifest_sha256"],
                "eval_seed": info["seed"],
                "episodes": len(results),
            }
        )
        for episode, record in sorted(results.items()):  # dataset order, not finishing order
            counts["episodes"] += 1
            if record.get("error") or float(record.get("full_attribution") or 0.0) != 1.0:
                continue
            counts["correct"] += 1
            if limit is not None and counts["written"] >= limit:
                continue
            transcript = read_transcript(run_dir / TRANSCRIPT_DIR / f"{episode}.jsonl")
            try:
                if not transcript:
                    raise SkipEpisode("no transcript file")
                messages = sft_messages(
                    transcript, system=run_system, reasoning=reasoning, arguments=arguments
                )
            except SkipEpisode as exc:
                counts["skipped"][str(exc)] = counts["skipped"].get(str(exc), 0) + 1
                continue
            row = {
                "messages": messages,
                "tools": info["tools"],
                "metadata": {
                    "episode_id": episode,
                    "dataset": ds["name"],
                    "split": ds["split"],
                    "manifest_sha256": ds["manifest_sha256"],
                    "eval_seed": info["seed"],
                    "agent": agent["name"],
                    "model": (agent.get("config") or {}).get("model"),
                    "score": record.get("score"),
                    "tool_calls": record.get("tool_calls"),
                    "turns": record.get("turns"),
                },
            }
            rows.append(json.dumps(row, ensure_ascii=False) + "\n")
            counts["written"] += 1
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(rows)
    atomic_write_text(out, text)
    meta = {
        "format": "causaltrace-sft/1",
        "file": out.name,
        "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "filter": "full_attribution == 1 and no error",
        "limit": limit,
        "reasoning": reasoning,
        "arguments": arguments,
        "runs": sources,
        "counts": counts,
    }
    atomic_write_text(out.with_name(out.stem + ".meta.json"), canonical_json(meta))
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    return run_cli("causaltrace-export", _main, argv)


def _main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="causaltrace-export", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    sub = parser.add_subparsers(dest="command", required=True)
    sft = sub.add_parser("sft", help="fully correct trajectories as chat-format JSONL (TRL SFT)")
    sft.add_argument(
        "--run",
        action="append",
        required=True,
        metavar="DIR",
        help="an evaluation run directory (repeat to combine runs)",
    )
    sft.add_argument("--out", required=True, metavar="JSONL", help="the file to write")
    sft.add_argument(
        "--limit",
        type=int,
        default=None,
        help="write at most this many trajectories (runs in order, episodes by id)",
    )
    sft.add_argument(
        "--system",
        default=None,
        help="a system message for every row (default: the run agent's, if any)",
    )
    sft.add_argument(
        "--reasoning",
        choices=("drop", "keep"),
        default="drop",
        help="keep the model's reasoning as reasoning_content (default: drop)",
    )
    sft.add_argument(
        "--arguments",
        choices=("object", "string"),
        default="object",
        help="tool-call arguments as JSON objects (chat templates) or JSON text",
    )
    args = parser.parse_args(argv)
    counts = export_sft(
        args.run,
        args.out,
        limit=args.limit,
        system=args.system,
        reasoning=args.reasoning,
        arguments=args.arguments,
    )
    print(json.dumps(counts, sort_keys=True))
    print(f"wrote {counts['written']} trajectories to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
