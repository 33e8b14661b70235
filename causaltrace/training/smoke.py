"""The reference recipe end to end on CPU with a tiny model, in a few minutes: generate a
training and an evaluation split, run the teacher, export the oracle-filtered SFT rows
(measured in tokens), fine-tune, export the RL rows, run GRPO with the environment, and evaluate
the trained checkpoint with the harness. Every step is the one the GPU recipe runs, with the
recipe's own configs (causaltrace/conf/train/trl_*.yaml) shrunk by overrides; only the model is tiny.

    python3 -m causaltrace.training.smoke --out /tmp/smoke

Prints (and writes to ``<out>/smoke.json``) what each step produced. CI runs it
(tests/training/test_training_recipe.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from causaltrace.agents import make_agent
from causaltrace.datasets.generation import Job, run
from causaltrace.datasets.reading import DatasetSource
from causaltrace.env.contract import ToolContract
from causaltrace.eval.harness import evaluate
from causaltrace.training import recipe
from causaltrace.training.export import TokenBudget, export_rl, export_sft
from causaltrace.training.tiny import build_model, build_tokenizer

CONFIGS = Path(__file__).resolve().parents[1] / "conf" / "train"  # the recipe's own configs

CPU = {  # what makes the recipe's trainer configs run on a CPU in seconds
    "config.bf16": False,
    "config.use_cpu": True,
    "config.gradient_checkpointing": False,
    "config.report_to": "none",
    "config.save_strategy": "no",
    "config.logging_steps": 1,
}


def small_split(
    out: Path, name: str, n: int, seed: int, *, sliced: int | None = None, shard_size: int = 4
) -> Path:
    """A verified split of ``n`` episodes of the small ads preset (``sliced`` of them sliced,
    default half; one 2-D), in a few seconds: the smoke's data, and the trainer tests'.

    Args:
        out: The split's directory.
        name: The dataset's name and split.
        n: The number of episodes.
        seed: The dataset's generation seed.
        sliced: How many episodes have a sliced cause; ``n // 2`` by default.
        shard_size: Episodes per shard; 4 by default.

    Returns:
        ``out``.
    """

    sliced = n // 2 if sliced is None else sliced
    job = Job.from_config(
        {
            "out_dir": str(out),
            "domain": {"name": "ads", "preset": "small"},
            "dataset": {
                "name": name,
                "split": name,
                "seed": seed,
                "n_episodes": n,
                "composition": {"kind": "quotas", "total": n, "sliced": sliced, "two_d": 1},
                "shard_size": shard_size,
                # As every shipped dataset config: a 2-D slice of a segment cause can need a
                # few hundred attempts on the small account.
                "max_attempts": 400,
            },
        }
    )
    run(job, show_progress=False)
    return out


def _evaluate(agent, dataset: Path, out: Path) -> dict[str, Any]:

    asyncio.run(evaluate(agent, DatasetSource(dataset), out, concurrency=2, progress=False))
    report = json.loads((out / "metrics.json").read_text())
    overall = report["metrics"]["overall"]
    return {
        "run": str(out),
        "full_attr_at_1": overall["full_attr_at_1"]["value"],
        "parse_rate": overall["parse_rate"]["value"],
        "mean_tool_calls": overall["mean_tool_calls"]["value"],
        "counts": report["counts"],
    }


def run_smoke(out: str | Path, *, n_train: int = 8, n_eval: int = 2) -> dict[str, Any]:
    """The whole chain under ``out``; returns a summary of every step.

    Args:
        out: The directory every step writes under (data, runs, exports, checkpoints).
        n_train: Episodes in the training split; 8 by default.
        n_eval: Episodes in the held-out split; 2 by default.
    """

    out = Path(out)
    summary: dict[str, Any] = {}
    train = small_split(out / "data" / "train", "smoke_train", n_train, seed=11)
    held_out = small_split(out / "data" / "eval", "smoke_eval", n_eval, seed=12)
    summary["data"] = {"train": n_train, "eval": n_eval}

    teacher = _evaluate(make_agent("teacher"), train, out / "runs" / "teacher")
    summary["teacher"] = teacher

    # The tokenizer is trained on the data (no hub here); a real run uses the model's own.
    plain = out / "sft" / "all.jsonl"
    export_sft([teacher["run"]], plain)
    source = DatasetSource(train)
    texts = [source.prompt(e) for e in source.episode_ids]
    texts.append(json.dumps(ToolContract.for_dataset(source).openai()))
    texts += [line for line in plain.read_text().splitlines()]
    tokenizer = build_tokenizer(texts, vocab_size=4096)
    max_length = 8192
    counts = export_sft(
        [teacher["run"]], out / "sft" / "train.jsonl", budget=TokenBudget(tokenizer, max_length)
    )
    summary["sft_export"] = counts

    sft_cfg = recipe.load_recipe(
        CONFIGS / "trl_sft.yaml",
        {
            **CPU,
            "model": (build_model(tokenizer), tokenizer),
            "train_file": str(out / "sft" / "train.jsonl"),
            "config.output_dir": str(out / "checkpoints" / "sft"),
            "config.max_length": max_length,
            "config.max_steps": 2,
            "config.num_train_epochs": 1,
        },
    )
    summary["sft"] = str(recipe.sft(sft_cfg))

    summary["rl_export"] = export_rl(train, out / "rl" / "train.jsonl", "trl")
    grpo_cfg = recipe.load_recipe(
        CONFIGS / "trl_grpo.yaml",
        {
            **CPU,
            "model": summary["sft"],
            "dataset": str(train),
            "limit": 2,
            "config.output_dir": str(out / "checkpoints" / "grpo"),
            "config.max_steps": 1,
            "config.num_generations": 2,
            "config.per_device_train_batch_size": 2,
            "config.gradient_accumulation_steps": 1,
            "config.max_completion_length": 64,
            "config.max_tool_calling_iterations": 2,
        },
    )
    summary["grpo"] = str(recipe.grpo(grpo_cfg))

    agent = make_agent("transformers", {"model": summary["grpo"], "max_new_tokens": 48})
    summary["evaluation"] = _evaluate(agent, held_out, out / "runs" / "grpo")
    (out / "smoke.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m causaltrace.training.smoke")
    parser.add_argument("--out", required=True, help="a directory for everything the chain writes")
    args = parser.parse_args(argv)
    print(json.dumps(run_smoke(args.out), indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
