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
most 6.2e-16 relative (measured 2026-12-07). On a CPU without AVX2 a split therefore
*reproduces* (every decision, prompt, table and spec the same; floats within
:data:`FLOAT_TOLERANCE`) but is not byte for byte the one an AVX2 CPU makes;
:func:`has_baseline_vector_math` says which of the two a process can promise, and the
committed-split check asks for bytes only where it can. OpenBLAS, under numpy's and scipy's
linear algebra, chooses its kernels by CPU as well; :func:`portable_env` pins its AVX2
("Haswell") kernels, without which the same 3 values moved on an AVX-512 CPU. The variables
must be set before numpy is imported, which is why they are an environment for a new process
and not a switch.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping, Sequence
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
BLAS_CORE = "OPENBLAS_CORETYPE"


def _dispatch() -> tuple[list[str], dict[str, bool]]:
    return list(_umath.__cpu_dispatch__), dict(_umath.__cpu_features__)


def vector_math_targets() -> list[str]:
    """The AVX-512 dispatch targets numpy uses in this process (empty where the CPU has none or
    they were disabled at numpy's import)."""
    targets, active = _dispatch()
    return [t for t in targets if (t == "X86_V4" or t.startswith("AVX512")) and active.get(t)]


def has_baseline_vector_math() -> bool:
    """Whether this process's numpy runs its ``X86_V3`` (AVX2) targets, the vector math every
    split here is made with (:func:`portable_env` leaves them on): only then does a split
    regenerate byte for byte; without them, to float rounding (module docstring)."""
    targets, active = _dispatch()
    return "X86_V3" in targets and bool(active.get("X86_V3"))


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
    if _dispatch()[1].get("AVX2"):
        # OpenBLAS (numpy's and scipy's linear algebra) picks its kernels by CPU too: its
        # AVX-512 (SkylakeX) kernels sum in another order than its AVX2 (Haswell) ones, and
        # moved 3 label values of ads_easy's first episode by up to 6.2e-16 (measured on an
        # AVX-512 CPU, 2026-12-07). A value the caller set is kept.
        env.setdefault(BLAS_CORE, "Haswell")
    return env


USAGE = (
    "usage: python -m causaltrace.datasets.float_math COMMAND [ARG ...]\n"
    "Run COMMAND (e.g. causaltrace-generate ...) with numpy's AVX-512 math off and OpenBLAS's\n"
    "AVX2 kernels, as the committed splits are made (docs/datasets.md)."
)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m causaltrace.datasets.float_math COMMAND ...``: run a command (e.g.
    ``causaltrace-generate ...``) in :func:`portable_env`, as the committed splits are made, so
    that its float math is the one every x86 CPU with AVX2 reproduces."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--"]:
        args = args[1:]
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    os.execvpe(args[0], args, portable_env())
    return 1  # pragma: no cover - execvpe does not return


if __name__ == "__main__":
    sys.exit(main())


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
