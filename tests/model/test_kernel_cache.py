"""A fresh install's first episodes do not wait for numba: the kernels compile in another
process (into numba's on-disk cache) while the simulator takes the exact numpy path, which gives
the same worlds; once the cache is warm, processes load the compiled kernels without compiling."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from causaltrace.model import count_kernels

pytestmark = pytest.mark.skipif(
    not count_kernels.AVAILABLE, reason="numba is not available (or CAUSALTRACE_NUMBA=0)"
)

# One process: simulate a world of the small ads account, say which path ran and what it made.
PROBE = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    from causaltrace import load_domain
    from causaltrace.model import count_kernels, distributions
    scm = load_domain("ads", {"preset": "small"}).scm
    world = scm.sample(7)
    state = distributions._KERNELS
    kind = "module" if state is count_kernels else type(state).__name__
    compiled = {n: len(getattr(count_kernels, n).signatures) for n in
                ("walk", "poisson_quantiles", "binomial_quantiles", "negbinom_quantiles")}
    misses = sum(sum(getattr(count_kernels, n).stats.cache_misses.values()) for n in compiled)
    digest = {k: int(np.asarray(v, dtype=np.float64).sum() * 1000) for k, v in world.items()}
    print(json.dumps({"state": kind, "compiled": compiled, "misses": misses, "world": digest}))
    """
)


def _probe(cache, **env):
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**os.environ, "NUMBA_CACHE_DIR": str(cache), **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_first_use_does_not_compile_in_process_and_the_cache_warms(tmp_path):
    cache = tmp_path / "numba-cache"
    first = _probe(cache)
    # The first process simulated on the numpy path while another process compiled.
    assert first["state"] == "Warmup"
    assert sum(first["compiled"].values()) == 0
    # The warm-up runs on after the first process has exited; wait for its marker.
    warm = subprocess.run(  # joins the lock: returns once the warm-up has written the marker
        [sys.executable, "-m", "causaltrace.model.kernel_warmup"],
        env={**os.environ, "NUMBA_CACHE_DIR": str(cache)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert warm.returncode == 0, warm.stderr
    markers = list(cache.rglob("causaltrace-kernels-*.json"))
    assert len(markers) == 1
    signatures = json.loads(markers[0].read_text())
    assert all(signatures[name] for name in ("walk", "binomial_quantiles", "negbinom_quantiles"))
    second = _probe(cache)
    # Now the compiled kernels ran, loaded from the cache (no compilation in this process).
    assert second["state"] == "module"
    assert sum(second["compiled"].values()) > 0
    assert second["misses"] == 0
    # And both paths made the same world.
    assert second["world"] == first["world"]
