"""The reference recipe's two training steps with TRL, driven by ``configs/train/*.yaml``:
supervised fine-tuning on the exported trajectories, then GRPO with the environment.

    python3 -m causaltrace.training.recipe sft  --config configs/train/trl_sft.yaml
    python3 -m causaltrace.training.recipe grpo --config configs/train/trl_grpo.yaml

A config holds the model, the data and ``config`` (the fields of TRL's ``SFTConfig`` or
``GRPOConfig``); ``overrides`` replace fields (the CPU smoke uses them to shrink a run).
See docs/training.md for the whole recipe, verl included.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from causaltrace.errors import CausalTraceError


def load_recipe(path: str | Path, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A recipe config as a plain dict, with ``overrides`` (top-level keys, or ``config.<field>``
    for the trainer's fields) applied."""
    from omegaconf import OmegaConf

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
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(model), AutoTokenizer.from_pretrained(model)


def sft(recipe: Mapping[str, Any]) -> Path:
    """Fine-tune ``model`` on ``train_file`` (``causaltrace-export sft`` rows); returns the
    directory the model and tokenizer were saved to (``config.output_dir``)."""
    from datasets import load_dataset
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
    the only reward is :func:`causaltrace.env.trl.trl_reward` (the TRACE composite)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from causaltrace.env.trl import make_trl_environment, trl_reward, trl_rows

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


def main(argv: Sequence[str] | None = None) -> int:
    from causaltrace.apps.errors import run_cli

    return run_cli("causaltrace.training.recipe", _main, argv)


def _main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m causaltrace.training.recipe")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    parser.add_argument("step", choices=("sft", "grpo"))
    parser.add_argument(
        "--config", required=True, help="configs/train/trl_sft.yaml or trl_grpo.yaml"
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override (YAML value)"
    )
    args = parser.parse_args(argv)
    import yaml

    overrides = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise CausalTraceError(f"--set takes KEY=VALUE, got {item!r}")
        overrides[key] = yaml.safe_load(value)
    recipe = load_recipe(args.config, overrides)
    out = (sft if args.step == "sft" else grpo)(recipe)
    print(f"saved the {args.step} model to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
