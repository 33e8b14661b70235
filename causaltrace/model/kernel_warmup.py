"""Compile the count kernels into numba's on-disk cache: ``python -m
causaltrace.model.kernel_warmup``, started by :mod:`causaltrace.model.kernel_cache` on first
use (or by hand, ahead of time, e.g. in an image build)."""

from __future__ import annotations

import fcntl
import json
import os

import numpy as np

from causaltrace.model import count_kernels, distributions, kernel_cache


def exercise() -> None:
    """Run every kernel through the simulator's own entry points on a grid of parameters wide
    enough to reach each path (degenerate, from zero, bracketed, exact with a walk)."""
    rng = np.random.default_rng(0)
    frozen = rng.random(4096)
    frozen.setflags(write=False)  # the simulator's noise; a world's changed part is a copy
    mean = np.geomspace(1e-3, 1e6, frozen.size)
    for u in (frozen, frozen.copy()):
        distributions.poisson_icdf(mean, u)
        distributions.binomial_icdf(np.rint(mean * 3).astype(np.int64), np.full(u.size, 0.3), u)
        for dispersion in (0.5, 2.0, 3.7):
            distributions.negbinom_icdf(mean, dispersion, u)


def warm() -> None:
    """Compile the kernels into numba's cache and write the marker (under a lock)."""
    if not count_kernels.AVAILABLE:
        return
    where = kernel_cache.cache_dir(count_kernels)
    if where is None:
        return
    where.mkdir(parents=True, exist_ok=True)
    with open(where / "causaltrace-kernels.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if kernel_cache.is_warm(count_kernels):
            return
        distributions.use_kernels(count_kernels)
        exercise()
        signatures = {
            name: [str(s) for s in getattr(count_kernels, name).signatures]
            for name in ("walk", "poisson_quantiles", "binomial_quantiles", "negbinom_quantiles")
        }
        marker = where / kernel_cache.marker_name(count_kernels)
        partial = marker.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(signatures, indent=1))
        partial.replace(marker)


if __name__ == "__main__":
    warm()
