"""The reference recipe's two training steps with TRL, driven by ``causaltrace/conf/train/*.yaml``:
supervised fine-tuning on the exported trajectories, then GRPO with the environment.

    causaltrace-train sft  --config causaltrace/conf/train/trl_sft.yaml
    causaltrace-train grpo --config causaltrace/conf/train/trl_grpo.yaml

A config holds the model, the data and ``config`` (the fields of TRL's ``SFTConfig`` or
``GRPOConfig``); ``overrides`` replace fields (the CPU smoke uses them to shrink a run).
See docs/training.md for the whole recipe, verl included.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from causaltrace.errors import CausalTraceError
from causaltrace.training.trl_env import make_trl_environment, trl_reward, trl_rows

# How each model family's chat template writes a tool call, as verl's rollout must parse it
# (``actor_rollout_ref.rollout.multi_turn.format``: the names of verl's ToolParser registry).
# Longest prefix wins. A wrong parser is silent in verl: it logs "Failed to decode tool call"
# and no tool ever runs. causaltrace's own parser reads all of these formats (see
# causaltrace.scoring.call_formats), so compute_score needs no setting.
VERL_TOOL_PARSERS: Mapping[str, str] = {
    "Qwen/Qwen2.5": "hermes",
    "Qwen/Qwen3-": "hermes",  # Qwen3 (2504, 2507): Hermes JSON in <tool_call>
    "Qwen/Qwen3-Coder": "qwen3_coder",  # XML: <function=...><parameter=...>
    "Qwen/Qwen3.5": "qwen3_coder",
    "Qwen/Qwen3.6": "qwen3_coder",
    "zai-org/GLM-4.5": "glm",  # <arg_key>/<arg_value>
    "zai-org/GLM-4.6": "glm",
    "moonshotai/Kimi-K2": "kimi",  # <|tool_call_begin|>functions.name:0 ...
    "openai/gpt-oss": "gpt-oss",
}


def verl_tool_parser(model: str) -> str:
    """verl's ``multi_turn.format`` for a model (Hugging Face name), by its family.

    Args:
        model: The model's hub name, e.g. ``Qwen/Qwen3.5-35B-A3B``.

    Raises:
        CausalTraceError: No known family; say which parser its chat template needs.
    """
    matches = [prefix for prefix in VERL_TOOL_PARSERS if model.startswith(prefix)]
    if not matches:
        raise CausalTraceError(
            f"no known tool-call format for model {model!r}; set verl's multi_turn.format to the "
            f"parser its chat template needs (known families: {sorted(VERL_TOOL_PARSERS)})"
        )
    return VERL_TOOL_PARSERS[max(matches, key=len)]


def load_recipe(path: str | Path, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A recipe config as a plain dict, with ``overrides`` (top-level keys, or ``config.<field>``
    for the trainer's fields) applied.

    Args:
        path: The recipe's YAML file.
        overrides: Values to replace, by key; none by default.

    Raises:
        CausalTraceError: The file does not exist or has no ``config`` mapping.
    """

    path = Path(path)
    if not path.exists():
        raise CausalTraceError(f"no recipe config at {path}")
    data = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    if not isinstance(data, dict) or "config" not in data:
        raise CausalTraceError(f"{path}: a recipe config has a 'config' mapping (trainer fields)")
    for key, value in dict(overrides or {}).items():
        if key.startswith("config."):
            data["config"][key.split(".", 1)[1]] = value
        else:
            data[key] = value
    return data


def _model_and_tokenizer(recipe: Mapping[str, Any]):
    model = recipe["model"]
    if not isinstance(model, str):  # an in-memory (model, tokenizer) pair, e.g. the smoke's
        return model
    # optional: the train extra
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(model), AutoTokenizer.from_pretrained(model)


def sft(recipe: Mapping[str, Any]) -> Path:
    """Fine-tune ``model`` on ``train_file`` (``causaltrace-export sft`` rows); returns the
    directory the model and tokenizer were saved to (``config.output_dir``).

    Args:
        recipe: The config from :func:`load_recipe`: ``model`` (a Hugging Face name or
            directory, or an in-memory ``(model, tokenizer)`` pair), ``train_file`` and
            ``config`` (``SFTConfig``'s fields).
    """
    # optional: the train extra
    from datasets import load_dataset

    # optional: the train extra
    from trl import SFTConfig, SFTTrainer

    model, tokenizer = _model_and_tokenizer(recipe)
    data = load_dataset("json", data_files=str(recipe["train_file"]), split="train")
    data = data.remove_columns([c for c in data.column_names if c not in ("messages", "tools")])
    args = SFTConfig(**recipe["config"])
    trainer = SFTTrainer(model=model, processing_class=tokenizer, train_dataset=data, args=args)
    trainer.train()
    return _save(trainer, tokenizer, args.output_dir)


def grpo(recipe: Mapping[str, Any]) -> Path:
    """GRPO on ``dataset`` (a generated dataset directory) with the causaltrace environment;
    the only reward is :func:`causaltrace.training.trl_env.trl_reward` (the TRACE composite).

    Args:
        recipe: The config from :func:`load_recipe`: ``model`` (a name, a directory or a
            ``(model, tokenizer)`` pair), ``dataset``, an optional ``limit`` on the prompts and
            ``config`` (``GRPOConfig``'s fields).

    Returns:
        The directory the model and tokenizer were saved to (``config.output_dir``).
    """
    # optional: the train extra
    from datasets import Dataset

    # optional: the train extra
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer = _model_and_tokenizer(recipe)
    env = make_trl_environment(recipe["dataset"])
    rows = trl_rows(env)
    if recipe.get("limit") is not None:
        rows = rows[: int(recipe["limit"])]
    args = GRPOConfig(**recipe["config"])
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=args,
        train_dataset=Dataset.from_list(rows),
        environment_factory=env,
        reward_funcs=[trl_reward],
    )
    trainer.train()
    return _save(trainer, tokenizer, args.output_dir)


def _save(trainer, tokenizer, output_dir: str) -> Path:
    out = Path(output_dir)
    trainer.save_model(str(out))
    tokenizer.save_pretrained(str(out))
    return out
