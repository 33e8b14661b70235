"""A tiny causal language model and tokenizer built locally, for CPU smoke runs of the training
recipe (no download: CI machines have no model hub).

The tokenizer is a byte-level BPE trained on a few lines of the environment's own vocabulary
(any text still round-trips, byte by byte) with Qwen2.5's chat template (tools, ``<tool_call>``
blocks, no thinking blocks a tiny model would have to learn to skip). The model is a Qwen3 architecture with a few hundred thousand parameters. It learns
nothing useful; it exercises every code path a real model does.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]
SPECIAL += ["<tool_response>", "</tool_response>", "<think>", "</think>"]


def _with_qwen_template(tokenizer):
    """Qwen2.5's chat template in TRL's training form (prefix-preserving, with generation
    marks), and the response schema TRL parses tool calls with. GRPO renders multi-turn
    prompts with the training form, so SFT and GRPO then see the same text; the schema is
    attached first, while the template is still the one TRL recognizes."""
    # optional: the train extra
    from trl.chat_template_utils import (
        add_response_schema,
        qwen2_5_chat_template,
        qwen2_5_training_chat_template,
    )

    tokenizer.chat_template = qwen2_5_chat_template
    tokenizer = add_response_schema(tokenizer)
    tokenizer.chat_template = qwen2_5_training_chat_template
    return tokenizer


def _corpus(extra: Iterable[str]) -> list[str]:
    base = [
        "SELECT date, campaign, SUM(spend) AS spend FROM perf_daily GROUP BY 1, 2 ORDER BY 1;",
        "print(tables['perf_daily'].groupby('date').sum().tail())",
        '{"name": "submit", "arguments": {"root_cause": "BUDGET_CAP", "slice": "geo=US"}}',
        "The conversions dropped after the budget change on the search campaign.",
    ]
    return base + [str(t) for t in extra]


def build_tokenizer(texts: Iterable[str] = (), vocab_size: int = 1024):
    """A byte-level BPE tokenizer (any text round-trips) with the chat template.

    Args:
        texts: Extra text to train the BPE merges on, after a built-in sample of prompts, SQL,
            Python and tool calls; none by default.
        vocab_size: The vocabulary's size, special tokens included; 1024 by default.
    """
    # optional: the train extra
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    # optional: the train extra
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(texts), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL[1:],
    )
    return _with_qwen_template(fast)


def build_model(tokenizer, *, hidden: int = 32, layers: int = 2, seed: int = 0):
    """A Qwen3 causal LM with random weights (seeded), sized to the tokenizer.

    Args:
        tokenizer (PreTrainedTokenizerFast): The tokenizer the model is sized to (its length,
            pad and end tokens).
        hidden: The hidden size (divisible by 4, the number of heads); 32 by default.
        layers: The number of decoder layers; 2 by default.
        seed: The seed of torch's generator, which draws the weights; 0 by default.
    """
    # optional: the train extra
    import torch

    # optional: the train extra
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden // 4,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)  # transformers initializes weights from torch's global generator
    model = Qwen3ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def save_tiny(out: str | os.PathLike, texts: Iterable[str] = (), seed: int = 0) -> Path:
    """Write a tiny model and its tokenizer to ``out`` (loadable with ``from_pretrained``).

    Args:
        out: The directory to write.
        texts: Extra text to train the tokenizer on; none by default.
        seed: The seed of the model's weights; 0 by default.

    Returns:
        ``out`` as a path.
    """
    out = Path(out)
    tokenizer = build_tokenizer(texts)
    model = build_model(tokenizer, seed=seed)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
