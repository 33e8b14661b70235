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

With ``--tokenizer`` (a Hugging Face name or directory) and ``--max-length``, every row is
measured in tokens as the trainer will see it (chat template, tools included). A row longer
than ``--max-length`` would be cut before its answer (the ``submit`` call is its last message),
which teaches a model to investigate and never answer. ``--on-overflow`` decides: ``compact``
(default) shortens the row's tool outputs, keeping the head and tail of each, until it fits,
and drops it if it cannot; ``warn`` writes it as it is and says so; ``refuse`` stops with the
rows named. The meta file records the token lengths (p50, p95, max) and what was compacted.

    causaltrace-export rl --dataset data/ads_train --format verl --out data/ads_train.parquet

``rl`` writes a dataset's episodes as RL training rows: ``trl`` (JSONL: ``prompt``,
``episode_id``, ``ground_truth``, for ``GRPOTrainer`` with ``environment_factory``), ``verl``
(parquet, plus ``<out>.tools.yaml``, verl's tool config rendered from the tool contract) or
``hf`` (a ``datasets`` directory). User errors print one line; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from causaltrace.apps.errors import run_cli
from causaltrace.errors import CausalTraceError
from causaltrace.training.export import (
    GROUNDING_POLICIES,
    OVERFLOW_POLICIES,
    RL_FORMATS,
    TokenBudget,
    export_rl,
    export_sft,
    write_verl_tools,
)
from causaltrace.training.harbor import export_harbor
from causaltrace.training.records import RL_RULES, EpisodeRules


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
    sft.add_argument(
        "--tokenizer",
        default=None,
        help="measure rows in tokens with this tokenizer (Hugging Face name or directory)",
    )
    sft.add_argument(
        "--max-length",
        type=int,
        default=None,
        help="the trainer's max_length (SFTConfig.max_length); needs --tokenizer",
    )
    sft.add_argument(
        "--on-overflow",
        choices=OVERFLOW_POLICIES,
        default="compact",
        help="a row over --max-length: compact its tool outputs (default), warn, or refuse",
    )
    sft.add_argument(
        "--grounding",
        choices=GROUNDING_POLICIES,
        default="flag",
        help="rows citing a number no earlier tool output or prompt showed: count them "
        "(default), leave them out (refuse), or do not check (off)",
    )
    rl = sub.add_parser("rl", help="a dataset's episodes as RL training rows (TRL, verl, HF)")
    rl.add_argument("--dataset", required=True, metavar="DIR", help="a generated dataset")
    rl.add_argument("--format", required=True, choices=RL_FORMATS)
    rl.add_argument("--out", required=True, metavar="PATH", help="the file (or directory) to write")
    rl.add_argument("--limit", type=int, default=None, help="the first N episodes only")
    rl.add_argument(
        "--max-tool-calls",
        type=int,
        default=RL_RULES.max_tool_calls,
        help="the tool-call budget, stored in every ground truth (and verl's tool config)",
    )
    rl.add_argument(
        "--no-retry",
        action="store_true",
        help="a malformed submit ends the episode (default: it answers with the format error "
        "and the model may submit again within the budget)",
    )
    tools = sub.add_parser("verl-tools", help="verl's tool config, rendered from the contract")
    tools.add_argument("--dataset", required=True, metavar="DIR", help="a generated dataset")
    tools.add_argument("--out", required=True, metavar="YAML", help="the file to write")
    tools.add_argument("--max-tool-calls", type=int, default=RL_RULES.max_tool_calls)
    tools.add_argument("--idle-seconds", type=float, default=600)
    tools.add_argument(
        "--no-retry", action="store_true", help="a malformed submit ends the episode"
    )
    harbor = sub.add_parser("harbor", help="one Harbor task directory per episode")
    harbor.add_argument("--dataset", required=True, metavar="DIR", help="a generated dataset")
    harbor.add_argument("--out", required=True, metavar="DIR", help="the tasks' directory")
    harbor.add_argument(
        "--wheel",
        required=True,
        metavar="WHL",
        help="the causaltrace wheel each task's container installs (pip wheel . --no-deps)",
    )
    harbor.add_argument("--limit", type=int, default=None, help="the first N episodes only")
    harbor.add_argument(
        "--agent-timeout", type=float, default=1800.0, help="the agent's seconds per task"
    )
    args = parser.parse_args(argv)
    if args.command == "harbor":
        written = export_harbor(
            args.dataset,
            args.out,
            args.wheel,
            limit=args.limit,
            agent_timeout=args.agent_timeout,
        )
        print(json.dumps(written, sort_keys=True))
        return 0
    if args.command == "rl":
        rules = EpisodeRules(args.max_tool_calls, not args.no_retry)
        written = export_rl(args.dataset, args.out, args.format, limit=args.limit, rules=rules)
        print(json.dumps(written, sort_keys=True))
        return 0
    if args.command == "verl-tools":
        write_verl_tools(
            args.dataset,
            args.out,
            max_tool_calls=args.max_tool_calls,
            idle_seconds=args.idle_seconds,
            retry_malformed_submit=not args.no_retry,
        )
        print(f"wrote verl's tool config for {args.dataset} to {args.out}")
        return 0
    if (args.tokenizer is None) != (args.max_length is None):
        raise CausalTraceError("--tokenizer and --max-length go together")
    budget = (
        TokenBudget(args.tokenizer, args.max_length, args.on_overflow)
        if args.tokenizer is not None
        else None
    )
    counts = export_sft(
        args.run,
        args.out,
        limit=args.limit,
        system=args.system,
        reasoning=args.reasoning,
        arguments=args.arguments,
        budget=budget,
        grounding=args.grounding,
    )
    print(json.dumps(counts, sort_keys=True))
    print(f"wrote {counts['written']} trajectories to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
