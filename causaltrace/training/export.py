"""Training data from evaluation runs and datasets: SFT rows from fully correct trajectories
(:func:`export_sft`), RL rows for TRL, verl and Hugging Face ``datasets`` (:func:`export_rl`),
and verl's tool config (:func:`write_verl_tools`). The ``causaltrace-export`` command
(:mod:`causaltrace.apps.export`) is a thin command line over these functions; its page says
what each output holds."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from causaltrace.core.files import atomic_write_text, canonical_json, json_load
from causaltrace.datasets.reading import DatasetSource
from causaltrace.env.contract import ToolContract
from causaltrace.errors import CausalTraceError
from causaltrace.eval.harness import RESULTS_FILE, RUN_FILE, TRANSCRIPT_DIR, read_results
from causaltrace.eval.report import read_transcript
from causaltrace.training.grounding import row_grounding
from causaltrace.training.hf import export_hf_dataset
from causaltrace.training.records import (
    RL_RULES,
    EpisodeRules,
    dataset_records,
    ground_truth_json,
)
from causaltrace.training.verl_reward import export_verl_parquet

GROUNDING_POLICIES = ("flag", "refuse", "off")  # export_sft(grounding=...)

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

    Args:
        transcript: The transcript's messages, in order (OpenAI chat format).
        system: A system prompt to put first; none by default.
        reasoning: ``"drop"`` (the default) leaves reasoning out; ``"keep"`` writes it as
            ``reasoning_content``.
        arguments: Tool-call arguments as a JSON ``"object"`` (the default, what chat templates
            expect) or as JSON text (``"string"``).

    Returns:
        The messages, ending with the assistant's submit call.

    Raises:
        SkipEpisode: The episode ended on an agent error, a tool call's arguments are not a JSON
            object, or the trajectory is not well formed.
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


OVERFLOW_POLICIES = ("compact", "warn", "refuse")
COMPACT_STEPS = (4000, 2000, 1000, 500, 250, 120)  # tool-output characters kept, tried in turn


def compact_tool_outputs(messages: list[dict[str, Any]], keep: int) -> list[dict[str, Any]]:
    """The messages with every tool output longer than ``keep`` characters cut to its head
    (two thirds) and tail (one third) around a marker saying how much was left out.

    Args:
        messages: The chat messages; not modified.
        keep: The most characters of one tool output to keep.

    Returns:
        A copy of the messages with long tool outputs cut.
    """
    out = []
    for m in messages:
        content = m.get("content")
        if m.get("role") == "tool" and isinstance(content, str) and len(content) > keep:
            head, tail = (2 * keep) // 3, keep // 3
            cut = len(content) - head - tail
            content = f"{content[:head]}\n...({cut} characters cut)...\n{content[-tail:]}"
            m = {**m, "content": content}
        out.append(m)
    return out


class TokenBudget:
    """Rows measured in tokens with a trainer's tokenizer and chat template (tools included).

    Args:
        tokenizer (Any): The trainer's tokenizer, or a name or path that
            ``transformers.AutoTokenizer.from_pretrained`` loads.
        max_length: The most tokens a row may have (positive).
        on_overflow: What to do with a longer row: ``"compact"`` (the default) cuts tool outputs
            until it fits, ``"warn"`` writes it and counts it, ``"refuse"`` raises.

    Raises:
        CausalTraceError: ``on_overflow`` is not a known policy or ``max_length`` is not positive.
    """

    def __init__(self, tokenizer: Any, max_length: int, on_overflow: str = "compact"):
        if on_overflow not in OVERFLOW_POLICIES:
            raise CausalTraceError(
                f"on_overflow is one of {', '.join(OVERFLOW_POLICIES)}, not {on_overflow!r}"
            )
        if int(max_length) <= 0:
            raise CausalTraceError(f"max_length must be positive, got {max_length}")
        if isinstance(tokenizer, (str, Path)):
            # optional: the train extra
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(tokenizer))
        self.tokenizer, self.max_length, self.on_overflow = tokenizer, int(max_length), on_overflow

    def length(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        ids = self.tokenizer.apply_chat_template(messages, tools=tools, tokenize=True)
        if isinstance(ids, Mapping):  # transformers >= 5 returns a BatchEncoding
            ids = ids["input_ids"]
        return len(ids)

    def fit(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], int, int | None]:
        """``(messages, tokens, kept)``: the row as written, its length, and the tool-output
        characters kept if it was compacted (None if not). Raises :class:`SkipEpisode` when
        it cannot fit (compact) and :class:`CausalTraceError` under ``refuse``.

        Args:
            messages: The row's chat messages.
            tools: The tool schemas the chat template renders with the messages.
        """
        n = self.length(messages, tools)
        if n <= self.max_length or self.on_overflow == "warn":
            return messages, n, None
        if self.on_overflow == "refuse":
            raise CausalTraceError(
                f"a row has {n} tokens, more than max_length={self.max_length}: a trainer "
                "would cut it before its submit call (use --on-overflow compact, or a larger "
                "--max-length)"
            )
        for keep in COMPACT_STEPS:
            shorter = compact_tool_outputs(messages, keep)
            n = self.length(shorter, tools)
            if n <= self.max_length:
                return shorter, n, keep
        raise SkipEpisode(f"longer than max_length={self.max_length} tokens even compacted")


def _quantiles(values: list[int]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def q(p: float) -> float:
        return float(ordered[min(len(ordered) - 1, int(p * (len(ordered) - 1) + 0.5))])

    return {"p50": q(0.5), "p95": q(0.95), "max": float(ordered[-1]), "n": len(ordered)}


def export_sft(
    runs: Sequence[str | Path],
    out: str | Path,
    *,
    limit: int | None = None,
    system: str | None = None,
    reasoning: str = "drop",
    arguments: str = "object",
    budget: TokenBudget | None = None,
    grounding: str = "flag",
) -> dict[str, Any]:
    """Write the fully correct episodes of ``runs`` as SFT JSONL; returns the counts.

    With ``budget``, rows are measured (and compacted, or refused) in tokens: see the module
    docstring. Every row, as written (after any compaction, so a number whose output was cut
    counts as unshown), is checked by :func:`~causaltrace.training.grounding.row_grounding`:
    the counts report the share of cited numbers a tool output or the prompt showed before
    them, and ``grounding="refuse"`` leaves out each row that cites one it did not.

    Args:
        runs: Evaluation run directories (each with its run file and results).
        out: The JSONL file to write.
        limit: The most rows to write; all by default.
        system: The system prompt of every row; each run's agent's own by default.
        reasoning: ``"drop"`` (the default) or ``"keep"`` the assistant's reasoning.
        arguments: Tool-call arguments as an ``"object"`` (the default) or a JSON ``"string"``.
        budget: Measure rows in tokens against this budget; not measured by default.
        grounding: ``"flag"`` (the default: count rows citing unshown numbers, keep them),
            ``"refuse"`` (leave them out) or ``"off"``.

    Returns:
        The counts: episodes read, correct, written and skipped (by reason), with token
        statistics under a budget.

    Raises:
        CausalTraceError: A directory is not an evaluation run, or an option has an unknown value.
    """
    if reasoning not in ("drop", "keep") or arguments not in ("object", "string"):
        raise CausalTraceError("reasoning is 'drop' or 'keep'; arguments 'object' or 'string'")
    if grounding not in GROUNDING_POLICIES:
        raise CausalTraceError(f"grounding is one of {list(GROUNDING_POLICIES)}, got {grounding!r}")
    cited = {"numbers_cited": 0, "numbers_grounded": 0, "rows_with_ungrounded": 0}
    rows: list[str] = []
    counts: dict[str, Any] = {"episodes": 0, "correct": 0, "written": 0, "skipped": {}}
    tokens: list[int] = []
    compacted: dict[str, int] = {}
    over = 0
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
                if budget is not None:
                    messages, n_tokens, kept = budget.fit(messages, info["tools"])
                    tokens.append(n_tokens)
                    over += n_tokens > budget.max_length
                    if kept is not None:
                        compacted[str(kept)] = compacted.get(str(kept), 0) + 1
                if grounding != "off":
                    checked = row_grounding(messages)
                    cited["numbers_cited"] += checked.cited
                    cited["numbers_grounded"] += checked.cited - len(checked.ungrounded)
                    cited["rows_with_ungrounded"] += not checked.ok
                    if grounding == "refuse" and not checked.ok:
                        raise SkipEpisode("cites a number no earlier output showed")
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
    if grounding != "off":
        n = cited["numbers_cited"]
        counts["grounding"] = {
            **cited,
            "policy": grounding,
            "grounded_share": cited["numbers_grounded"] / n if n else 1.0,
        }
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
    if budget is not None:
        meta["tokens"] = {
            "tokenizer": getattr(budget.tokenizer, "name_or_path", None),
            "max_length": budget.max_length,
            "on_overflow": budget.on_overflow,
            "lengths": _quantiles(tokens),
            "compacted_rows_by_chars_kept": compacted,
            "rows_over_max_length": over,  # only under "warn"
        }
        counts["tokens_p95"] = meta["tokens"]["lengths"].get("p95")
        counts["over_max_length"] = over
        if over:
            print(
                f"warning: {over} row(s) are longer than max_length={budget.max_length} tokens "
                "and will be cut before their answer by a trainer with that max_length",
                file=sys.stderr,
            )
    atomic_write_text(out.with_name(out.stem + ".meta.json"), canonical_json(meta))
    return counts


RL_FORMATS = ("trl", "verl", "hf")


def write_verl_tools(
    dataset: str | Path,
    out: str | Path,
    *,
    max_tool_calls: int = RL_RULES.max_tool_calls,
    idle_seconds: float = 600,
    retry_malformed_submit: bool = RL_RULES.retry_malformed_submit,
) -> Path:
    """verl's tool-config YAML for ``dataset``, rendered from its tool contract.

    Args:
        dataset: The dataset directory whose tool contract is rendered.
        out: The YAML file to write.
        max_tool_calls: The most tool calls per episode; 30 by default.
        idle_seconds: How long a session may sit idle before it is closed; 600 by default.
        retry_malformed_submit: A malformed submit answers with its format error and the
            sample may submit again; on by default (as the exported ground truths say).

    Returns:
        ``out``.
    """

    config = ToolContract.for_dataset(dataset).verl_tool_config(
        str(dataset),
        max_tool_calls=max_tool_calls,
        idle_seconds=idle_seconds,
        retry_malformed_submit=retry_malformed_submit,
    )
    header = (
        "# verl tool config rendered by `causaltrace-export verl-tools` from the tool contract\n"
        "# (causaltrace/env/contract.py); regenerate it rather than editing it by hand.\n"
    )
    out = Path(out)
    atomic_write_text(out, header + yaml.safe_dump(config, sort_keys=False, width=100))
    return out


def export_rl(
    dataset: str | Path,
    out: str | Path,
    fmt: str,
    *,
    limit: int | None = None,
    rules: EpisodeRules = RL_RULES,
) -> dict[str, Any]:
    """Write a dataset's episodes as RL rows in ``fmt`` (see the module docstring).

    Args:
        dataset: The dataset directory.
        out: The file (or, for ``"hf"``, the directory) to write.
        fmt: ``"trl"`` (JSONL), ``"verl"`` (Parquet, with its tool config next to it) or
            ``"hf"`` (a saved ``datasets.Dataset``).
        limit: Write only the first ``limit`` episodes; all by default.
        rules: The environment's rules, stored in every ground truth and (for verl) written
            into the tool config, so that the tools and the reward apply one budget;
            :data:`~causaltrace.training.records.RL_RULES` by default.

    Returns:
        What was written: the format, the number of rows, the output path (and the tool config
        for verl).

    Raises:
        CausalTraceError: ``fmt`` is not one of :data:`RL_FORMATS`.
    """

    if fmt not in RL_FORMATS:
        raise CausalTraceError(f"--format is one of {', '.join(RL_FORMATS)}, not {fmt!r}")
    source = DatasetSource(dataset)
    episodes = source.episode_ids[:limit] if limit is not None else source.episode_ids
    records = dataset_records(source, episodes)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    written: dict[str, Any] = {"format": fmt, "rows": len(records), "out": str(out)}
    if fmt == "verl":
        split = str(records[0].metadata.get("split", "train"))
        export_verl_parquet(records, out, split=split, rules=rules)
        tools = out.with_name(out.stem + ".tools.yaml")
        write_verl_tools(
            source.root,
            tools,
            max_tool_calls=rules.max_tool_calls,
            retry_malformed_submit=rules.retry_malformed_submit,
        )
        written["tools"] = str(tools)
    elif fmt == "hf":
        export_hf_dataset(records, out, rules=rules)
    else:
        lines = [
            json.dumps(
                {
                    "prompt": [dict(m) for m in r.prompt],
                    "episode_id": r.episode_id,
                    "ground_truth": ground_truth_json(r.label, r.space, rules=rules),
                },
                ensure_ascii=False,
                sort_keys=True,
            )
            + "\n"
            for r in records
        ]
        atomic_write_text(out, "".join(lines))
    return written
