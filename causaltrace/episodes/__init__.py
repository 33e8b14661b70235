"""The episode layer: domains (a named SCM with its root causes), the sampling of an episode
(a hidden cause, both worlds, the rendered tables), its oracle label, its alert, the verifier
that accepts it, the composition of a split and difficulty knobs.

``causaltrace.episodes`` was a module before the engine was grouped in layers; its names
(``sample_episode`` and the rest) are still found here, from :mod:`causaltrace.episodes.sampling`.
"""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    if not name.startswith("__"):
        sampling = importlib.import_module("causaltrace.episodes.sampling")
        if name == "sampling" or hasattr(sampling, name):
            return sampling if name == "sampling" else getattr(sampling, name)
    raise AttributeError(f"module 'causaltrace.episodes' has no attribute {name!r}")
