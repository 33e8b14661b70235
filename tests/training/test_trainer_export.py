"""Trainer rows from datasets and runs: ``causaltrace-export rl`` in each format (read back by
the trainers' own loaders), and SFT rows measured in tokens so that none is cut before its
answer (compacted, refused, or written with a warning)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from _training_support import require, small_dataset

from causaltrace.apps.export import main
from causaltrace.datasets.reading import DatasetSource
from causaltrace.errors import CausalTraceError
from causaltrace.training.export import TokenBudget, export_rl, export_sft

pytestmark = [pytest.mark.train, pytest.mark.sandbox]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return small_dataset(tmp_path_factory.mktemp("export") / "ds")


@pytest.fixture(scope="module")
def teacher_run(dataset, tmp_path_factory) -> Path:
    """The scripted teacher on the six episodes (real tools, real transcripts)."""
    from causaltrace.agents import make_agent
    from causaltrace.eval.harness import evaluate

    out = tmp_path_factory.mktemp("export") / "run"
    agent = make_agent("teacher")
    asyncio.run(evaluate(agent, DatasetSource(dataset), out, concurrency=2, progress=False))
    return out


@pytest.fixture(scope="module")
def tokenizer(dataset, teacher_run, tmp_path_factory):
    """A tiny tokenizer trained on the dataset's prompts, the tool schemas and the teacher's
    trajectories (5-9k tokens per trajectory, about what Qwen's tokenizer gives on ads)."""
    require("trl")
    from causaltrace.env.contract import ToolContract
    from causaltrace.training.tiny import build_tokenizer

    source = DatasetSource(dataset)
    texts = [source.prompt(e) for e in source.episode_ids]
    texts.append(json.dumps(ToolContract.for_dataset(source).openai()))
    plain = tmp_path_factory.mktemp("corpus") / "plain.jsonl"
    export_sft([teacher_run], plain)
    texts += [json.dumps(m) for row in _rows(plain) for m in row["messages"]]
    return build_tokenizer(texts, vocab_size=4096)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_sft_rows_fit_max_length_with_their_submit_call(teacher_run, tokenizer, tmp_path):
    plain = export_sft([teacher_run], tmp_path / "plain.jsonl")
    assert plain["written"] >= 3  # the teacher is right on most of the six
    budget = TokenBudget(tokenizer, 10**9)
    lengths = sorted(
        budget.length(r["messages"], r["tools"]) for r in _rows(tmp_path / "plain.jsonl")
    )
    # A max_length between the shortest and the longest row: the long rows must be compacted.
    limit = (lengths[0] + lengths[-1]) // 2
    counts = export_sft(
        [teacher_run], tmp_path / "fit.jsonl", budget=TokenBudget(tokenizer, limit, "compact")
    )
    meta = json.loads((tmp_path / "fit.meta.json").read_text())
    rows = _rows(tmp_path / "fit.jsonl")
    assert meta["tokens"]["lengths"]["max"] <= limit and counts["over_max_length"] == 0
    assert sum(meta["tokens"]["compacted_rows_by_chars_kept"].values()) >= 1
    assert len(rows) + sum(counts["skipped"].values()) == plain["written"]
    for row in rows:
        assert budget.length(row["messages"], row["tools"]) <= limit
        last = row["messages"][-1]
        assert last["role"] == "assistant"
        assert last["tool_calls"][-1]["function"]["name"] == "submit"
    compacted = [
        m for r in rows for m in r["messages"] if "characters cut)" in str(m.get("content"))
    ]
    assert compacted and all(m["role"] == "tool" for m in compacted)


def test_sft_overflow_refuse_and_warn(teacher_run, tokenizer, tmp_path, capsys):
    with pytest.raises(CausalTraceError, match="cut it before its submit call"):
        export_sft([teacher_run], tmp_path / "r.jsonl", budget=TokenBudget(tokenizer, 64, "refuse"))
    counts = export_sft(
        [teacher_run], tmp_path / "w.jsonl", budget=TokenBudget(tokenizer, 64, "warn")
    )
    assert counts["over_max_length"] == counts["written"] > 0
    assert "will be cut before their answer" in capsys.readouterr().err
    with pytest.raises(CausalTraceError, match="on_overflow"):
        TokenBudget(tokenizer, 64, "truncate")


def test_sft_rows_train_with_trl(teacher_run, tokenizer, tmp_path):
    """TRL's SFTTrainer takes the rows as written (messages + tools) for one step, and keeps
    every row's submit call inside max_length."""
    require("torch")
    from datasets import load_dataset
    from trl import SFTConfig, SFTTrainer

    from causaltrace.training.tiny import build_model

    budget = TokenBudget(tokenizer, 8192, "compact")
    counts = export_sft([teacher_run], tmp_path / "sft.jsonl", budget=budget)
    assert counts["written"] >= 3
    data = load_dataset("json", data_files=str(tmp_path / "sft.jsonl"), split="train")
    data = data.remove_columns(["metadata"])
    trainer = SFTTrainer(
        model=build_model(tokenizer),
        processing_class=tokenizer,
        train_dataset=data,
        args=SFTConfig(
            output_dir=str(tmp_path / "out"),
            max_steps=1,
            per_device_train_batch_size=1,
            max_length=8192,
            use_cpu=True,
            report_to="none",
            save_strategy="no",
            gradient_checkpointing=False,
        ),
    )
    submit_id = tokenizer.convert_tokens_to_ids("</tool_call>")
    for example in trainer.train_dataset:
        assert len(example["input_ids"]) <= 8192
        assert submit_id in example["input_ids"][-8:]  # the final submit call is kept
    trainer.train()
    assert trainer.state.global_step == 1


def test_rl_export_formats_load_in_the_trainers(dataset, tmp_path):
    source = DatasetSource(dataset)
    # TRL: JSONL rows GRPOTrainer takes with environment_factory (prompt + episode_id).
    export_rl(dataset, tmp_path / "trl.jsonl", "trl")
    from datasets import load_dataset

    trl_rows = load_dataset("json", data_files=str(tmp_path / "trl.jsonl"), split="train")
    assert trl_rows["episode_id"] == source.episode_ids
    assert trl_rows[0]["prompt"] == [
        {"role": "user", "content": source.prompt(source.episode_ids[0])}
    ]
    # HF: a datasets directory with the ground truth column.
    export_rl(dataset, tmp_path / "hf", "hf")
    from datasets import load_from_disk

    assert load_from_disk(str(tmp_path / "hf"))["episode_id"] == source.episode_ids
    # verl: parquet plus the tool config; every tool gets the episode in create_kwargs.
    written = export_rl(dataset, tmp_path / "verl.parquet", "verl")
    import pandas as pd

    frame = pd.read_parquet(tmp_path / "verl.parquet")
    assert list(frame["extra_info"].map(lambda e: e["episode_id"])) == source.episode_ids
    kwargs = frame["extra_info"][0]["tools_kwargs"]
    assert {k: v["create_kwargs"]["episode_id"] for k, v in kwargs.items()} == {
        t: source.episode_ids[0] for t in ("sql", "python", "submit")
    }
    assert Path(written["tools"]).exists()


def test_rl_export_command_line(dataset, tmp_path, capsys):
    assert (
        main(
            [
                "rl",
                "--dataset",
                str(dataset),
                "--format",
                "trl",
                "--out",
                str(tmp_path / "x.jsonl"),
                "--limit",
                "2",
            ]
        )
        == 0
    )
    assert len(_rows(tmp_path / "x.jsonl")) == 2
    assert (
        main(
            [
                "rl",
                "--dataset",
                str(tmp_path / "nope"),
                "--format",
                "trl",
                "--out",
                str(tmp_path / "y"),
            ]
        )
        != 0
    )
    assert "not a complete dataset" in capsys.readouterr().err
