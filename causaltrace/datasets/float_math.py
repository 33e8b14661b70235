"""Where a dataset's bytes depend on the machine: numpy's vector float math.

numpy computes float64 ``exp``, ``log``, ``power``, ``expm1``, ``tanh``... with AVX-512 code on
CPUs that have it (its dispatch targets ``X86_V4``, ``AVX512_*``), and with the C library's
functions elsewhere; the two disagree in the last bit of a few percent of values. A split
generated on one kind of CPU therefore regenerates on the other with the same specs, prompts
and tables but with label and statistics values that differ in their last bits (measured on
the committed splits: ``ads_hard``'s scan statistics and ``services_test``'s label effects, at
most a few units in the 16th significant digit). Nothing else moves: the verifier's decisions,
the answers, the agent's tables are the same.

So a regenerated row that differs from the stored one *only* in float values within
:data:`FLOAT_TOLERANCE` (relative) is reported as float rounding, not as another content
(:func:`rounding_only`); every other byte must match. In a process started with
:func:`portable_env` numpy uses the C library's functions on every x86 CPU with AVX-512, and a
split made that way regenerates byte for byte on x86 CPUs with AVX2 (the committed splits do;
the CI check runs so). Not below that: with numpy's ``X86_V3`` (AVX2) targets switched off as
well, a CPU of the x86-64-v2 level, ``ads_easy``'s label rows differ in 3 values each, by at
most 6.2e-16 relative (measured 2026-12-07; issue 42, finding 7, open). The variable must be
set before numpy is imported, which is why it is an environment for a new process and not a
switch.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

try:
    from numpy._core import _multiarray_umath as _umath
except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core import _multiarray_umath as _umath

# The relative difference float rounding may make: the vector math is within a few units in
# the last place (2.2e-16 relative) of the C library's, and the few operations after it
# (sums, ratios, square roots) widen that by little. A value moved further than this is
# another content.
FLOAT_TOLERANCE = 1e-12
DISABLE = "NPY_DISABLE_CPU_FEATURES"


def _dispatch() -> tuple[list[str], dict[str, bool]]:
    return list(_umath.__cpu_dispatch__), dict(_umath.__cpu_features__)


def vector_math_targets() -> list[str]:
    """The AVX-512 dispatch targets numpy uses in this process (empty where the CPU has none or
    they were disabled at numpy's import)."""
    targets, active = _dispatch()
    return [t for t in targets if (t == "X86_V4" or t.startswith("AVX512")) and active.get(t)]


def portable_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment for a new Python process whose numpy computes float64 math with the C
    library's functions (:data:`DISABLE` naming every AVX-512 target this process uses), so
    that it regenerates a split made on any x86 CPU with AVX2 byte for byte (module
    docstring: not one without).

    Args:
        environ: The environment to extend; ``os.environ`` by default.
    """
    env = dict(os.environ if environ is None else environ)
    targets = vector_math_targets()
    if targets:
        tokens = env.get(DISABLE, "").replace(",", " ").split()
        env[DISABLE] = " ".join(dict.fromkeys([*tokens, *targets]))
    return env


def rounding_only(
    old: Any, new: Any, tolerance: float = FLOAT_TOLERANCE
) -> tuple[int, float] | None:
    """Whether two JSON values are equal but for floats within ``tolerance`` (relative): the
    number of floats that differ and the largest relative difference, or None when anything
    else differs (a key, a string, an integer, a list's length, a float beyond the tolerance).

    Args:
        old: The stored value (parsed JSON).
        new: The regenerated value (parsed JSON).
        tolerance: The largest relative difference counted as rounding.
    """
    count, worst = 0, 0.0
    stack = [(old, new)]
    while stack:
        a, b = stack.pop()
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            if set(a) != set(b):
                return None
            stack.extend((a[k], b[k]) for k in a)
        elif isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                return None
            stack.extend(zip(a, b, strict=True))
        elif isinstance(a, float) and isinstance(b, float):
            if a == b or (math.isnan(a) and math.isnan(b)):
                continue
            if not (math.isfinite(a) and math.isfinite(b)):
                return None
            relative = abs(a - b) / max(abs(a), abs(b))
            if relative > tolerance:
                return None
            count, worst = count + 1, max(worst, relative)
        elif type(a) is not type(b) or a != b:
            return None
    return count, worst
