"""Count distributions driven by uniform noise (inverse CDF), for counterfactual coupling.

Drawing ``rng.poisson(lam)`` separately in the factual and counterfactual worlds would make
every count differ between them, even where the cause changed nothing. Driving a count by a
shared uniform ``u`` through the inverse CDF keeps the two worlds equal wherever the parameters
are equal and monotonically coupled where they differ (the standard construction for
counterfactuals of discrete variables).

scipy's ``ppf`` methods are exact but cost about 1 microsecond per element. Here every answer is
the exact quantile, the smallest ``k`` with ``cdf(k) >= u``, found in two stages:

- the compiled kernels of :mod:`causaltrace.model.count_kernels` (numba) settle most elements in one
  pass, by sums from zero for small means and bracketed tail sums for moderate spreads,
  accepting an answer only where it is clear of rounding;
- the exact path takes the rest (all elements without numba): a Cornish-Fisher guess
  (mean + sd*z + skew*(z**2-1)/6), the exact CDF there (``scipy.special``), a walk by the PMF
  recurrence and, far from the guess, a galloping search.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
from scipy import special

from causaltrace.model import count_kernels, kernel_cache

# -- coupling memo ------------------------------------------------------------------------------
# The factual and counterfactual worlds draw a node's counts from the same (read-only) uniform
# array, one right after the other, and most causes change the count parameters on a slice
# only. The second call reuses the first call's quantiles wherever the parameters are equal and
# computes the rest: the same values (each quantile depends only on its own element), at the
# cost of the changed elements. Keyed by the uniform array's identity, checked through a weak
# reference whose callback drops the entry as soon as the array is freed: the memo holds only
# the live episode's entries (a few MB per count node), never a backlog of finished ones.
_MEMO: dict[int, tuple[Any, Any, list[np.ndarray], np.ndarray]] = {}


def _forget(key: int, ref: weakref.ref) -> None:
    entry = _MEMO.get(key)
    if entry is not None and entry[0] is ref:
        del _MEMO[key]


def _coupled(kind: Any, compute: Callable[..., np.ndarray], u: Any, *params: Any) -> np.ndarray:
    u_arr = np.asarray(u)
    if u_arr is not u or u_arr.flags.writeable or u_arr.ndim == 0:
        return compute(*params, u)  # not a shared, frozen noise array: nothing to reuse
    params = [np.broadcast_to(_frozen(p), u_arr.shape) for p in params]
    hit = _MEMO.get(id(u_arr))
    if hit is not None and hit[0]() is u_arr and hit[1] == kind:
        previous_params, previous = hit[2], hit[3]
        changed = np.zeros(u_arr.shape, dtype=bool)
        for new, old in zip(params, previous_params):
            changed |= new != old
        if not changed.any():
            return previous.copy()  # callers own what they get: they may edit it in place
        result = previous.copy()
        result[changed] = compute(*(p[changed] for p in params), u_arr[changed])
    else:
        result = compute(*params, u_arr)
    key = id(u_arr)
    ref = weakref.ref(u_arr, lambda r, key=key: _forget(key, r))
    _MEMO[key] = (ref, kind, params, result.copy())
    return result


def _frozen(param: Any) -> np.ndarray:
    """``param`` as a float64 array that nobody can change while the memo holds it: a
    read-only array as it is (the nodes' outputs), a conversion as made, anything else copied."""
    arr = np.asarray(param, dtype=np.float64)
    if arr is not param:
        return arr
    view = arr
    while isinstance(view, np.ndarray):  # a read-only view of a writable array may change
        if view.flags.writeable:
            return arr.copy()
        view = view.base
    return arr


_MAX_ROUNDS = 64  # galloping doubles the step each round: 64 rounds cover any int64 count.


def _quantile(
    cdf: Callable[[np.ndarray, np.ndarray], np.ndarray],
    guess: np.ndarray,
    u: np.ndarray,
    upper: np.ndarray | None = None,
) -> np.ndarray:
    """Smallest integer k >= 0 (and <= upper) with cdf(k) >= u, starting from ``guess``.

    Gallops away from the guess to bracket the answer as ``cdf(lo) < u <= cdf(hi)`` (``lo = -1``
    stands for the empty sum, whose CDF is 0), then bisects; only the unsettled elements are
    evaluated in each round. ``cdf(k, idx)`` evaluates the CDF at ``k`` for the elements selected
    by the flat index ``idx``. A guess within one count settles in two CDF evaluations.
    """
    shape = guess.shape
    u = np.broadcast_to(u, shape).ravel()
    top = (
        np.full(u.shape, np.inf)
        if upper is None
        else np.broadcast_to(upper, shape).ravel().astype(np.float64)
    )
    k = np.minimum(np.maximum(np.rint(guess.ravel()), 0.0), top)
    lo, hi = k - 1.0, k.copy()
    ok = cdf(k, None) >= u
    # Answer above the guess: gallop hi upwards (it cannot pass ``top``, where cdf = 1).
    lo[~ok] = k[~ok]
    idx, step = np.flatnonzero(~ok), 1.0
    for _ in range(_MAX_ROUNDS):
        if idx.size == 0:
            break
        hi[idx] = np.minimum(k[idx] + step, top[idx])
        below = cdf(hi[idx], idx) < u[idx]
        lo[idx[below]] = hi[idx[below]]
        idx, step = idx[below], step * 2
    # Answer below the guess: gallop lo downwards while cdf(lo) >= u.
    idx, step = np.flatnonzero(ok & (lo >= 0)), 1.0
    for _ in range(_MAX_ROUNDS):
        if idx.size == 0:
            break
        above = cdf(lo[idx], idx) >= u[idx]
        idx = idx[above]
        hi[idx] = lo[idx]
        step *= 2
        lo[idx] = np.maximum(k[idx] - step, -1.0)
        idx = idx[lo[idx] >= 0]
    # Bisect the brackets that are wider than one count.
    idx = np.flatnonzero(hi - lo > 1)
    for _ in range(_MAX_ROUNDS):
        if idx.size == 0:
            break
        mid = np.floor((lo[idx] + hi[idx]) / 2)
        at_least = cdf(mid, idx) >= u[idx]
        hi[idx[at_least]] = mid[at_least]
        lo[idx[~at_least]] = mid[~at_least]
        idx = idx[hi[idx] - lo[idx] > 1]
    return hi.reshape(shape).astype(np.int64)


_WALK_STEPS = 24

# Walk kinds (the PMF recurrence used by ``_walk``): a and b are per-element parameters.
BINOMIAL, POISSON, NEGBINOM = 0, 1, 2  # (a, b) = (n, odds), (lam, unused), (r, 1 - p)


def _up(kind: int, k: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """pmf(k + 1) / pmf(k)."""
    if kind == BINOMIAL:
        return (a - k) / (k + 1.0) * b
    if kind == POISSON:
        return a / (k + 1.0)
    return (k + a) / (k + 1.0) * b


def _down(kind: int, k: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """pmf(k - 1) / pmf(k)."""
    if kind == BINOMIAL:
        return k / (a - k + 1.0) / b
    if kind == POISSON:
        return k / a
    return k / ((k - 1.0 + a) * b)


def _walk(
    kind: int,
    k: np.ndarray,
    cdf_k: np.ndarray,
    pmf_k: np.ndarray,
    u: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    top: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Walk from ``k`` (with its CDF and PMF) to the smallest k' with cdf(k') >= u, using the
    PMF recurrences pmf(k+1) = pmf(k) * up(k) and pmf(k-1) = pmf(k) * down(k): after one CDF
    and one PMF evaluation each step costs a multiplication. Returns the quantiles and a mask
    of the elements settled within ``_WALK_STEPS`` steps (the others need a search).

    Runs the compiled loop of :mod:`causaltrace.model.count_kernels` when numba is available, else
    the numpy reference below; both perform the same operations and return the same numbers."""
    kernels = _kernels()
    if kernels is not None:
        k, settled = k.astype(np.float64, copy=True), np.empty(k.shape, dtype=bool)
        kernels.walk(kind, k, cdf_k, pmf_k, u, a, b, top, _WALK_STEPS, settled)
        return k, settled
    k, c, f = k.copy(), cdf_k.copy(), pmf_k.copy()
    settled = np.zeros(k.shape, dtype=bool)
    # Upwards while cdf(k) < u.
    idx = np.flatnonzero(c < u)
    for _ in range(_WALK_STEPS):
        if idx.size == 0:
            break
        f[idx] *= _up(kind, k[idx], a[idx], b[idx])
        k[idx] += 1
        c[idx] += f[idx]
        idx = idx[(c[idx] < u[idx]) & (k[idx] < top[idx])]
    stuck_up = np.zeros(k.shape, dtype=bool)
    stuck_up[idx] = True
    # Downwards while cdf(k - 1) = cdf(k) - pmf(k) >= u.
    idx = np.flatnonzero(~stuck_up & (k > 0) & (c - f >= u))
    for _ in range(_WALK_STEPS):
        if idx.size == 0:
            break
        c[idx] -= f[idx]
        f[idx] *= _down(kind, k[idx], a[idx], b[idx])
        k[idx] -= 1
        idx = idx[(k[idx] > 0) & (c[idx] - f[idx] >= u[idx])]
    settled[:] = ~stuck_up
    settled[idx] = False
    return k, settled


# -- compiled kernels ---------------------------------------------------------------------------
_KERNELS: Any = False  # False: not looked up yet; None: unavailable

# Elements whose count has at most this standard deviation are bracketed by the compiled
# kernels (about two standard deviations of PMF terms, cheaper than an incomplete beta up to
# here); wider ones take the exact path. Negative binomials with an integer shape are always
# bracketed, through a binomial tail whose spread is at most sqrt(shape).
BRACKET_MAX_SD = 24.0


def _kernels() -> Any:
    """The numba kernels module once its compiled code is on disk, or None (numba missing, or
    being compiled by another process meanwhile: the exact numpy path gives the same numbers).
    Looked up on first use: numba's import should not be paid by ``import causaltrace``; the
    compilation is left to a separate process (:mod:`causaltrace.model.kernel_cache`) so that it
    is not paid by the first episode either."""
    global _KERNELS
    if _KERNELS is False:
        if not count_kernels.AVAILABLE:
            _KERNELS = None
        elif (
            os.environ.get("CAUSALTRACE_NUMBA_WARMUP") == "inline"
            or kernel_cache.cache_dir(count_kernels) is None
            or kernel_cache.is_warm(count_kernels)
        ):
            _KERNELS = count_kernels
        else:
            _KERNELS = kernel_cache.Warmup(count_kernels)
    if isinstance(_KERNELS, ModuleType) or _KERNELS is None:
        return _KERNELS
    ready = _KERNELS.ready()  # a warm-up in progress
    if ready is None:
        return None
    _KERNELS = _KERNELS.kernels  # warm (loaded from the cache) or failed (compiled here)
    return _KERNELS


def use_kernels(kernels: ModuleType | None) -> None:
    """Force the compiled kernels (a module) or the exact numpy path (None) from now on.

    Args:
        kernels: The compiled kernels module, or ``None`` for the numpy path.
    """
    global _KERNELS
    _KERNELS = kernels


def _compiled(kernel: Callable[..., None], *arrays: Any) -> tuple[np.ndarray, np.ndarray]:
    """Run a ``*_quantiles`` kernel on flat float64 arrays: (quantiles, elements left to do)."""
    out = np.empty(arrays[0].shape, dtype=np.float64)
    todo = np.empty(arrays[0].shape, dtype=bool)
    kernel(*arrays, BRACKET_MAX_SD, out, todo)
    return out, todo


def _select(a: np.ndarray, idx: np.ndarray | None) -> np.ndarray:
    return a if idx is None else a[idx]


def poisson_icdf(lam: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Poisson quantile of ``u`` with mean ``lam`` (int64, broadcast shape).

    Args:
        lam: The means (non-negative).
        u: Uniforms in [0, 1).
    """
    return _coupled("poisson", _poisson_icdf, u, lam)


def _poisson_icdf(lam: np.ndarray, u: np.ndarray) -> np.ndarray:
    lam, u = np.broadcast_arrays(np.maximum(np.asarray(lam, dtype=np.float64), 0.0), u)
    shape, lam, u = lam.shape, _flat(lam), _flat(u)
    kernels = _kernels()
    if kernels is not None:
        out, live = _compiled(kernels.poisson_quantiles, lam, u)
    else:
        out, live = np.zeros(lam.shape), lam > 0
    if live.any():
        out[live] = _poisson_general(lam[live], u[live])
    return out.reshape(shape).astype(np.int64)


def _poisson_general(ll: np.ndarray, ul: np.ndarray) -> np.ndarray:
    """The exact path: Cornish-Fisher guess, exact CDF and PMF there, walk; search if far."""
    z = special.ndtri(np.clip(ul, 1e-15, 1 - 1e-15))
    guess = ll + np.sqrt(ll) * z + (z * z - 1.0) / 6.0
    k0 = np.maximum(np.rint(guess), 0.0)
    pmf = np.exp(k0 * np.log(ll) - ll - special.gammaln(k0 + 1))
    top = np.full(ll.shape, np.inf)
    k, settled = _walk(POISSON, k0, special.pdtr(k0, ll), pmf, ul, ll, ll, top)
    if not settled.all():
        far = ~settled
        lr = ll[far]
        k[far] = _quantile(lambda kk, i: special.pdtr(kk, _select(lr, i)), guess[far], ul[far])
    return k


def _flat(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64).ravel()


def binomial_icdf(n: np.ndarray, p: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Binomial quantile of ``u`` with ``n`` trials and success probability ``p`` (int64).

    Args:
        n: The numbers of trials.
        p: The success probabilities, in [0, 1].
        u: Uniforms in [0, 1).
    """
    return _coupled("binomial", _binomial_icdf, u, n, p)


def _binomial_icdf(n: np.ndarray, p: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Binomial quantile of ``u`` with ``n`` trials and success probability ``p`` (int64).

    Degenerate elements (no trials, p = 0 or p = 1) are settled without the CDF, and with the
    compiled kernels so are the elements with a small mean: in a sparse panel they are most of
    the cells.
    """
    n, p, u = np.broadcast_arrays(
        np.maximum(np.asarray(n, dtype=np.float64), 0.0),
        np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0),
        u,
    )
    shape, n, p, u = n.shape, _flat(n), _flat(p), _flat(u)
    kernels = _kernels()
    if kernels is not None:
        out, live = _compiled(kernels.binomial_quantiles, n, p, u)
    else:
        out = np.where(p >= 1.0, n, 0.0)
        live = (n > 0) & (p > 0.0) & (p < 1.0)
    if live.any():
        out[live] = _binomial_general(n[live], p[live], u[live])
    return out.reshape(shape).astype(np.int64)


def _binomial_general(nl: np.ndarray, pl: np.ndarray, ul: np.ndarray) -> np.ndarray:
    """The exact path: Cornish-Fisher guess, exact CDF and PMF there, walk; search if far."""
    z = special.ndtri(np.clip(ul, 1e-15, 1 - 1e-15))
    guess = nl * pl + np.sqrt(nl * pl * (1.0 - pl)) * z + (1.0 - 2.0 * pl) * (z * z - 1.0) / 6.0
    k0 = np.minimum(np.maximum(np.rint(guess), 0.0), nl)
    odds = pl / (1.0 - pl)
    log_pmf = (
        special.gammaln(nl + 1)
        - special.gammaln(k0 + 1)
        - special.gammaln(nl - k0 + 1)
        + k0 * np.log(pl)
        + (nl - k0) * np.log1p(-pl)
    )
    cdf = _binom_cdf_at_guess(k0, nl, pl)
    k, settled = _walk(BINOMIAL, k0, cdf, np.exp(log_pmf), ul, nl, odds, nl)
    if not settled.all():  # far from the guess (extreme tails): exact search
        far = ~settled
        nr, pr = nl[far], pl[far]
        k[far] = _quantile(
            lambda kk, i: _binom_cdf(kk, _select(nr, i), _select(pr, i)),
            guess[far],
            ul[far],
            upper=nr,
        )
    return k


def _binom_cdf_at_guess(k: np.ndarray, n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The binomial CDF, evaluating the incomplete beta only strictly inside (0, n): at n it is
    1, at 0 it is (1 - p)**n. Most cells of a sparse panel sit at one of the two ends (no
    conversions today; every old conversion already reported)."""
    out = np.ones_like(k, dtype=np.float64)
    zero = k <= 0
    out[zero] = np.exp(n[zero] * np.log1p(-p[zero]))
    inside = ~zero & (k < n)
    out[inside] = _binom_cdf(k[inside], n[inside], p[inside])
    return out


def _binom_cdf(k: np.ndarray, n: np.ndarray, p: np.ndarray) -> np.ndarray:
    # P(X <= k) = I_{1-p}(n - k, k + 1) for k < n; betainc is several times faster than bdtr.
    with np.errstate(invalid="ignore", divide="ignore"):
        out = special.betainc(np.maximum(n - k, 1e-300), k + 1.0, 1.0 - p)
    return np.where(k >= n, 1.0, out)


def negbinom_icdf(mean: np.ndarray, dispersion: float, u: np.ndarray) -> np.ndarray:
    """Negative binomial quantile of ``u`` (mean ``mean``, shape ``dispersion``; int64).

    Args:
        mean: The means (non-negative).
        dispersion: The shape; the variance is ``mean + mean**2 / dispersion``.
        u: Uniforms in [0, 1).
    """
    r = float(dispersion)
    return _coupled(("negbinom", r), lambda m, uu: _negbinom_icdf(m, r, uu), u, mean)


def _negbinom_icdf(mean: np.ndarray, dispersion: float, u: np.ndarray) -> np.ndarray:
    """Negative binomial quantile of ``u`` with the given mean and shape ``dispersion``.

    Variance is ``mean + mean**2 / dispersion``: overdispersed counts such as auction
    opportunities, whose rate itself fluctuates from day to day. The CDF at ``k`` is the
    regularized incomplete beta ``I_p(r, k + 1)`` with ``p = r / (r + mean)``.
    """
    mean, u = np.broadcast_arrays(np.maximum(np.asarray(mean, dtype=np.float64), 1e-12), u)
    shape, mean, u = mean.shape, _flat(mean), _flat(u)
    r = float(dispersion)
    p = r / (r + mean)
    kernels = _kernels()
    if kernels is not None:
        out, todo = _compiled(kernels.negbinom_quantiles, mean, r, p, u)
    else:
        out, todo = np.zeros(mean.shape), np.ones(mean.shape, dtype=bool)
    if todo.any():
        out[todo] = _negbinom_general(mean[todo], r, p[todo], u[todo])
    return out.reshape(shape).astype(np.int64)


def _negbinom_general(mean: np.ndarray, r: float, fp: np.ndarray, fu: np.ndarray) -> np.ndarray:
    """The exact path: Cornish-Fisher guess, exact CDF and PMF there, walk; search if far."""
    z = special.ndtri(np.clip(fu, 1e-15, 1 - 1e-15))
    sd = np.sqrt(mean + mean * mean / r)
    guess = mean + sd * z + (2.0 - fp) / np.sqrt(r * (1.0 - fp) + 1e-300) * sd * (z * z - 1.0) / 6.0
    k0 = np.maximum(np.rint(guess), 0.0)
    log_pmf = (
        special.gammaln(k0 + r)
        - special.gammaln(r)
        - special.gammaln(k0 + 1)
        + r * np.log(fp)
        + k0 * np.log1p(-fp)
    )
    k, settled = _walk(
        NEGBINOM,
        k0,
        special.betainc(r, k0 + 1.0, fp),
        np.exp(log_pmf),
        fu,
        np.full(fp.shape, r),
        1.0 - fp,
        np.full(fp.shape, np.inf),
    )
    if not settled.all():
        far = ~settled
        pr = fp[far]
        k[far] = _quantile(
            lambda kk, i: special.betainc(r, kk + 1.0, _select(pr, i)),
            guess[far],
            fu[far],
        )
    return k


def normal_icdf(u: np.ndarray) -> np.ndarray:
    """Standard normal quantile of ``u`` (for latent Gaussian shocks driven by uniforms).

    Args:
        u: Uniforms in (0, 1).
    """
    return special.ndtri(np.clip(u, 1e-15, 1 - 1e-15))


# -- CDFs, for abduction ------------------------------------------------------------------------
# The inverse-CDF draws above return the smallest k with cdf(k) >= u. Abducting the uniform of an
# observed count x inverts that: u lies in (cdf(x - 1), cdf(x)]. These are the CDFs the exact
# quantile path evaluates (``scipy.special``), so an abducted uniform reproduces its count.


def count_interval(cdf: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> tuple:
    """``(cdf(x - 1), cdf(x)]``: the uniforms an inverse-CDF draw maps to the count ``x``.

    Args:
        cdf: The count distribution's CDF, vectorized.
        x: The counts.

    Returns:
        The lower and upper bounds of the uniforms, as arrays.
    """
    x = np.asarray(x, dtype=np.float64)
    lower = np.where(x > 0, cdf(np.maximum(x - 1.0, 0.0)), 0.0)
    return lower, np.asarray(cdf(x), dtype=np.float64)


def poisson_cdf(k: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """P(X <= k) for a Poisson of mean ``lam`` (k < 0 gives 0).

    Args:
        k: The counts.
        lam: The means.
    """
    k, lam = np.broadcast_arrays(np.asarray(k, np.float64), np.asarray(lam, np.float64))
    with np.errstate(invalid="ignore"):
        out = special.pdtr(np.maximum(k, 0.0), np.maximum(lam, 0.0))
    return np.where(k < 0, 0.0, np.where(lam <= 0, 1.0, out))


def binomial_cdf(k: np.ndarray, n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """P(X <= k) for a binomial with ``n`` trials and success probability ``p``.

    Args:
        k: The counts.
        n: The numbers of trials.
        p: The success probabilities.
    """
    k, n, p = np.broadcast_arrays(
        np.asarray(k, np.float64),
        np.maximum(np.asarray(n, np.float64), 0.0),
        np.clip(np.asarray(p, np.float64), 0.0, 1.0),
    )
    out = np.ones(k.shape)
    degenerate_zero = p <= 0.0  # all mass at 0
    degenerate_n = p >= 1.0  # all mass at n
    inside = (k >= 0) & (k < n) & ~degenerate_zero & ~degenerate_n
    out[inside] = _binom_cdf(k[inside], n[inside], p[inside])
    out[k < 0] = 0.0
    out[degenerate_n & (k < n)] = 0.0
    return out


def negbinom_cdf(k: np.ndarray, mean: np.ndarray, dispersion: float) -> np.ndarray:
    """P(X <= k) for the negative binomial of :func:`negbinom_icdf`.

    Args:
        k: The counts.
        mean: The means.
        dispersion: The shape.
    """
    k, mean = np.broadcast_arrays(
        np.asarray(k, np.float64), np.maximum(np.asarray(mean, np.float64), 1e-12)
    )
    r = float(dispersion)
    out = special.betainc(r, np.maximum(k, 0.0) + 1.0, r / (r + mean))
    return np.where(k < 0, 0.0, out)
