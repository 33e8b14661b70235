"""Binomial intervals: every accuracy in the audit comes with a Wilson 95% interval."""

from __future__ import annotations

import math


def wilson(successes: float, n: int, z: float = 1.959964) -> tuple[float, float, float]:
    """The rate ``successes / n`` and its Wilson score interval (``(nan, 0, 1)`` when n = 0).

    Wilson rather than the normal approximation: it stays inside [0, 1] and is close to nominal
    coverage for the small per-cause counts an audit has (tens of episodes)."""
    if n <= 0:
        return math.nan, 0.0, 1.0
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return p, max(0.0, centre - half), min(1.0, centre + half)


def fmt_rate(successes: float, n: int) -> str:
    """``0.812 [0.741, 0.866] (n=160)``: a rate with its interval, for the report."""
    p, lo, hi = wilson(successes, n)
    if n <= 0:
        return "n/a (n=0)"
    return f"{p:.3f} [{lo:.3f}, {hi:.3f}] (n={n})"
