"""The compiled count kernels (numba) give exactly the numpy exact path's quantiles, and can be
switched off."""

import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from causaltrace.model import count_kernels
from causaltrace.model import distributions as dist

pytestmark = pytest.mark.skipif(
    not count_kernels.AVAILABLE, reason="numba is not available (or CAUSALTRACE_NUMBA=0)"
)


def _grid_uniforms(rng, size):
    """Uniforms with the hard cases planted: within 1e-14 and 1e-11 of 1, within 1e-14 of 0."""
    u = rng.random(size)
    u[::17], u[::19], u[::23], u[::29] = 1 - 1e-14, 1e-14, 1 - 1e-11, 0.5
    return u


def _both_paths(monkeypatch, fn, *args):
    monkeypatch.setattr(dist, "_KERNELS", count_kernels)  # compiled (in process if need be)
    compiled = fn(*args)
    monkeypatch.setattr(dist, "_KERNELS", None)  # numpy exact path
    return compiled, fn(*args)


@pytest.mark.parametrize("scale", [0.01, 0.3, 3.0, 30.0, 300.0, 3000.0])
def test_compiled_kernels_equal_the_exact_path(monkeypatch, scale):
    """From-zero sums, bracketed tails and the compiled walk accept an answer only where it is
    clear of rounding, so they give the exact path's quantile for every element, including u
    within 1e-14 of 0 and 1, degenerate parameters, and means on both sides of the thresholds
    (SMALL_MEAN = 48, BRACKET_MAX_SD = 24) at every scale."""
    rng = np.random.default_rng(int(scale * 100))
    size = 60_000
    u = _grid_uniforms(rng, size)
    n = rng.integers(0, int(scale * 20) + 2, size).astype(np.float64)
    p = rng.uniform(0, 1, size) ** 3
    p[::11], p[::13] = 1.0, 0.0
    lam = rng.uniform(0, 2 * scale, size)
    cases = [
        (dist._binomial_icdf, (n, p, u)),
        (dist._poisson_icdf, (lam, u)),
        (dist._negbinom_icdf, (lam, 40.0, u)),  # integer shape: the binomial-tail bracket
        (dist._negbinom_icdf, (lam, 3.5, u)),  # its own tail (log-concave, shape >= 1)
        (dist._negbinom_icdf, (lam, 0.5, u)),  # shape < 1: not log-concave, exact path
    ]
    for fn, args in cases:
        compiled, exact = _both_paths(monkeypatch, fn, *args)
        np.testing.assert_array_equal(compiled, exact, err_msg=f"{fn.__name__} at scale {scale}")


@pytest.mark.parametrize(
    ("kernel", "params"),
    [
        ("poisson_quantiles", lambda rng, n: (rng.uniform(60, 400, n),)),  # sd 8-20
        ("binomial_quantiles", lambda rng, n: (rng.integers(100, 900, n) * 1.0, np.full(n, 0.5))),
        ("negbinom_quantiles", lambda rng, n: _negbinom_params(rng.uniform(60, 5000, n), 40.0)),
        (
            "negbinom_quantiles",
            lambda rng, n: _negbinom_params(rng.uniform(60, 180, n), 100.5),
        ),  # sd <= 23
    ],
)
def test_kernels_settle_nearly_everything_exactly(kernel, params):
    """The kernels are what make panels fast: above the from-zero means, with a moderate spread
    (or an integer negative-binomial shape, whatever the spread) nearly every element is settled
    without the incomplete beta, and every settled answer is scipy's quantile."""
    rng = np.random.default_rng(3)
    args = params(rng, 20_000)
    u = rng.random(20_000)
    out, todo = np.empty(u.size), np.empty(u.size, dtype=bool)
    getattr(count_kernels, kernel)(*args, u, dist.BRACKET_MAX_SD, out, todo)
    # u within the slack (~1e-12) of a CDF value is left to the exact path: essentially never
    assert todo.mean() < 1e-3
    if kernel == "poisson_quantiles":
        expected = stats.poisson.ppf(u, args[0])
    elif kernel == "binomial_quantiles":
        expected = stats.binom.ppf(u, args[0], args[1])
    else:
        expected = stats.nbinom.ppf(u, args[1], args[2])
    np.testing.assert_array_equal(out[~todo], expected[~todo])


def _negbinom_params(mean: np.ndarray, r: float) -> tuple:
    return mean, r, r / (r + mean)


def test_numba_can_be_switched_off():
    """CAUSALTRACE_NUMBA=0 makes the kernels unavailable (the numpy path runs) without
    importing numba at all."""
    code = (
        "import sys, numpy as np\n"
        "from causaltrace.model import count_kernels, distributions as d\n"
        "u = np.random.default_rng(0).random(1000)\n"
        "k = d.binomial_icdf(np.full(1000, 30), np.full(1000, 0.2), u)\n"
        "print(count_kernels.AVAILABLE, 'numba' in sys.modules, k.sum())\n"
    )
    env = {**os.environ, "CAUSALTRACE_NUMBA": "0"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    available, imported, total = done.stdout.split()
    u = np.random.default_rng(0).random(1000)
    assert (available, imported) == ("False", "False")
    assert int(total) == int(stats.binom.ppf(u, 30, 0.2).sum())
