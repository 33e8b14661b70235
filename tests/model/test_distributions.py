"""The fast inverse-CDF count samplers return exactly scipy's quantiles, and the compiled
kernels return exactly what the numpy exact path returns."""

import numpy as np
import pytest
from scipy import stats

from causaltrace.model import count_kernels
from causaltrace.model import distributions as dist
from causaltrace.model.distributions import binomial_icdf, negbinom_icdf, poisson_icdf

# Every test here runs on both paths: the numba kernels (where numba is available) and the
# numpy exact path.
PATHS = ["compiled", "numpy"] if count_kernels.AVAILABLE else ["numpy"]


@pytest.fixture(params=PATHS, autouse=True)
def count_path(request, monkeypatch):
    monkeypatch.setattr(dist, "_KERNELS", count_kernels if request.param == "compiled" else None)
    return request.param


@pytest.fixture
def u(rng):
    return rng.random(20_000)


@pytest.mark.parametrize("scale", [0.0, 0.02, 0.7, 4.0, 60.0, 3e3, 2e6])
def test_poisson_matches_scipy(u, rng, scale):
    lam = scale * rng.uniform(0.5, 1.5, u.size)
    expected = np.nan_to_num(stats.poisson.ppf(u, lam)).astype(np.int64)
    np.testing.assert_array_equal(poisson_icdf(lam, u), expected)


@pytest.mark.parametrize(
    ("n_max", "p"),
    [(0, 0.3), (1, 0.5), (20, 0.01), (5000, 0.03), (10**6, 0.9), (40, 1.0), (40, 0.0)],
)
def test_binomial_matches_scipy(u, rng, n_max, p):
    n = rng.integers(0, n_max + 1, u.size)
    expected = np.minimum(np.nan_to_num(stats.binom.ppf(u, n, p)), n).astype(np.int64)
    np.testing.assert_array_equal(binomial_icdf(n, np.full(u.size, p), u), expected)


@pytest.mark.parametrize("mean", [0.05, 3.0, 400.0, 2e5])
def test_negbinom_matches_scipy(u, mean):
    r = 6.0
    expected = stats.nbinom.ppf(u, r, r / (r + mean)).astype(np.int64)
    np.testing.assert_array_equal(negbinom_icdf(np.full(u.size, mean), r, u), expected)


def test_coupling_is_monotone(u):
    """Shared uniforms: a lower rate never gives a higher count (counterfactual coupling)."""
    lam = np.full(u.size, 30.0)
    assert np.all(poisson_icdf(0.8 * lam, u) <= poisson_icdf(lam, u))
    n = np.full(u.size, 500)
    assert np.all(
        binomial_icdf(n, np.full(u.size, 0.05), u) <= binomial_icdf(n, np.full(u.size, 0.06), u)
    )


def test_coupled_draws_reuse_equal_parameters_exactly(rng):
    """A frozen uniform array drawn twice (the two worlds) gives the same counts as fresh draws,
    whether the second call's parameters changed everywhere, nowhere or on a slice."""
    u = rng.random((50, 40))
    u.setflags(write=False)
    lam = rng.uniform(1, 80, u.shape)
    changed = lam.copy()
    changed[:10] *= 0.5
    first = poisson_icdf(lam, u)
    second = poisson_icdf(changed, u)
    np.testing.assert_array_equal(second, poisson_icdf(changed, u.copy()))  # uncached path
    np.testing.assert_array_equal(first[10:], second[10:])
    first[:] = -1  # a caller editing its result in place must not corrupt the memo
    np.testing.assert_array_equal(poisson_icdf(lam, u), poisson_icdf(lam, u.copy()))
    n = rng.integers(0, 500, u.shape)
    p = np.full(u.shape, 0.3)
    np.testing.assert_array_equal(binomial_icdf(n, p, u), binomial_icdf(n, p, u.copy()))
    np.testing.assert_array_equal(negbinom_icdf(lam, 5.0, u), negbinom_icdf(lam, 5.0, u.copy()))
    np.testing.assert_array_equal(negbinom_icdf(lam, 7.0, u), negbinom_icdf(lam, 7.0, u.copy()))


def test_coupling_memo_forgets_freed_noise():
    """The memo keeps an entry only while its uniform array lives: a generation run holds the
    current episode's entries, not a backlog (peak memory stays flat over long runs)."""
    import gc

    before = len(dist._MEMO)
    u = np.random.default_rng(1).random((40, 30))
    u.setflags(write=False)
    poisson_icdf(np.full(u.shape, 5.0), u)
    binomial_icdf(np.full(u.shape, 20), np.full(u.shape, 0.3), u)  # same array: one entry
    assert len(dist._MEMO) == before + 1
    del u
    gc.collect()
    assert len(dist._MEMO) == before


def test_coupling_memo_survives_callers_editing_their_parameters(rng):
    """The memo keeps read-only parameters by reference (the nodes' outputs) and copies writable
    ones, and read-only views of writable arrays. A parameter edited after the call to the
    values of the next call must not make the memo return the first call's counts."""
    u = rng.random((30, 20))
    u.setflags(write=False)
    first, second = rng.uniform(1, 40, u.shape), rng.uniform(1, 40, u.shape)
    expected = poisson_icdf(second, u.copy())
    base = first.copy()
    view = base[:]
    view.setflags(write=False)  # read-only view of a writable array
    for param, backing in ((first.copy(), None), (view, base)):
        poisson_icdf(param, u)
        (param if backing is None else backing)[:] = second  # now equal to the next call's
        np.testing.assert_array_equal(poisson_icdf(second, u), expected)
