"""The compiled count kernels on disk: compile them once, out of the way of the first episodes.

numba compiles :mod:`causaltrace.model.count_kernels` on first call and keeps the machine code in
its on-disk cache (``cache=True``). On a fresh install that first call costs 20-70 s, all of it
inside the first simulated episode, which is then an outlier of hundreds of attempts' cost.
Instead, when the cache is not known to be warm, the first process that needs the kernels starts
``python -m causaltrace.model.kernel_warmup`` (which runs every kernel on a small grid that
reaches each of its paths, so numba writes every specialization the simulator uses, and then
writes a marker) and keeps simulating on the exact numpy path, which gives the same quantiles
(:mod:`causaltrace.model.count_kernels`); once the marker appears, it loads the cached kernels.

The marker is keyed like numba's own cache index: the kernels' source (size and modification
time), numba's and Python's versions. Concurrent warm-ups (several workers starting at once)
serialize on a lock file, and a warm-up that finds the marker written by another exits at once.

``CAUSALTRACE_NUMBA_WARMUP=inline`` compiles in the calling process instead (the behaviour
before; what a machine without a writable cache directory gets anyway).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path
from types import ModuleType

POLL_SECONDS = 0.5  # how often a process still on the numpy path looks for the marker


def cache_dir(kernels: ModuleType) -> Path | None:
    """numba's cache directory for the kernels module (None when numba cannot say)."""
    try:
        return Path(kernels.walk._cache._cache_path)
    except AttributeError:  # a numba without this layout: compile in process
        return None


def marker_name(kernels: ModuleType) -> str:
    """The marker's file name: changes with the kernels' source, numba and Python."""
    source = Path(kernels.__file__).stat()
    key = f"{source.st_size}-{source.st_mtime_ns}-{version('numba')}-{sys.version_info[:2]}"
    return f"causaltrace-kernels-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def is_warm(kernels: ModuleType) -> bool:
    where = cache_dir(kernels)
    return where is not None and (where / marker_name(kernels)).is_file()


class Warmup:
    """A warm-up running in another process, polled without blocking."""

    def __init__(self, kernels: ModuleType):
        self.kernels = kernels
        self.next_check = 0.0
        env = {**os.environ, "CAUSALTRACE_NUMBA_WARMUP": "inline"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "causaltrace.model.kernel_warmup"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )

    def ready(self) -> bool | None:
        """True once the cache is warm; None while compiling; False if the warm-up failed
        (the caller then compiles in process)."""
        now = time.monotonic()
        if now < self.next_check:
            return None
        self.next_check = now + POLL_SECONDS
        if is_warm(self.kernels):
            return True
        code = self.process.poll()
        if code is None:
            return None
        return is_warm(self.kernels) or False
