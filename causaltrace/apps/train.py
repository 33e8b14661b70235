"""``causaltrace-train``: the reference recipe's two training steps with TRL (see
:mod:`causaltrace.training.recipe` and docs/training.md).

    causaltrace-train sft  --config causaltrace/conf/train/trl_sft.yaml
    causaltrace-train grpo --config causaltrace/conf/train/trl_grpo.yaml --set config.max_steps=10
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import yaml

from causaltrace.apps.errors import run_cli
from causaltrace.errors import CausalTraceError
from causaltrace.training import recipe as recipe_module


def main(argv: Sequence[str] | None = None) -> int:
    return run_cli("causaltrace-train", _main, argv)


def _main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="causaltrace-train", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    parser.add_argument("step", choices=("sft", "grpo"))
    parser.add_argument(
        "--config",
        required=True,
        help="a recipe config, e.g. causaltrace/conf/train/trl_sft.yaml or trl_grpo.yaml",
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override (YAML value)"
    )
    args = parser.parse_args(argv)

    overrides = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise CausalTraceError(f"--set takes KEY=VALUE, got {item!r}")
        overrides[key] = yaml.safe_load(value)
    recipe = recipe_module.load_recipe(args.config, overrides)
    out = (recipe_module.sft if args.step == "sft" else recipe_module.grpo)(recipe)
    print(f"saved the {args.step} model to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
