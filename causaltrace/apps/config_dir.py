"""Where the project's Hydra configs live (``configs/`` beside the package)."""

from __future__ import annotations

import os
from pathlib import Path

from causaltrace.errors import CausalTraceError


def config_dir() -> str:
    """``$CAUSALTRACE_CONFIG_DIR`` if set, else ``configs/`` at the project root."""
    override = os.environ.get("CAUSALTRACE_CONFIG_DIR")
    path = Path(override) if override else Path(__file__).resolve().parents[2] / "configs"
    if not path.is_dir():
        raise CausalTraceError(
            f"Hydra config directory {path} not found: install the project in editable mode "
            f"(pip install -e .) or set CAUSALTRACE_CONFIG_DIR"
        )
    return str(path)
