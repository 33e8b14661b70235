"""Compiled per-element loops for the count quantiles of :mod:`causaltrace.distributions`.

Inverting a count CDF is a short sequential search per element (add one PMF term, compare with
``u``, stop). In numpy every step is a pass over the still-unsettled elements with boolean
indexing and temporary arrays, which cost more than the arithmetic; here each element runs its
own loop in compiled code (numba, without fastmath, so the floating-point operations are exactly
the ones written, in the order written).

Three stages, each handing what it cannot settle to the next:

- ``*_from_zero`` settles the elements whose mean is small by summing the PMF upwards from
  ``k = 0`` (the CDF at 0 is a closed form, and where ``u`` is well below its Bernoulli lower
  bound ``1 - mean`` the answer is 0 without even that). Most cells of a sparse panel are such
  elements (a few clicks or conversions a day).
- ``bracketed`` settles the elements with a moderate spread from the Cornish-Fisher guess,
  without the exact CDF: it bounds the CDF by a partial tail sum and a geometric bound on the
  rest (valid because these PMFs are log-concave), and adds terms until ``u`` is clearly on one
  side. A negative binomial with an integer shape uses the narrow binomial tail that equals its
  CDF.
- the rest take the exact path of :mod:`causaltrace.distributions`: the incomplete beta (or
  gamma) at the guess, then ``walk``, which repeats the numpy reference's operations element by
  element, then a galloping search for the far tails.

The first two stages sum PMF terms in another order than ``scipy.special`` computes the CDF, so
they accept an answer only when ``u`` is clear of the CDF at the answer and below it by a margin
far above the rounding of either computation (``ZERO_MARGIN``, and a slack that grows with the
size of the log-PMF terms); closer calls go to the exact path. Every element therefore gets the
answer the exact path gives; ``tests/test_distributions.py`` checks this on fixed grids that
include ``u`` within 1e-14 of 0 and 1, and checks both against scipy's ``ppf``.

``AVAILABLE`` is False when numba cannot be imported (a platform without wheels) or when the
environment sets ``CAUSALTRACE_NUMBA=0``; :mod:`causaltrace.distributions` then takes the exact
path for everything, which gives the same quantiles (three to ten times slower on a panel).
"""

from __future__ import annotations

import math
import os

import numpy as np

SMALL_MEAN = 48.0  # at most ~48 + 10 sd steps from zero: cheaper than one incomplete beta
MAX_STEPS = 256  # from-zero searches longer than this go to the general path
MIN_LOG_PMF0 = -700.0  # exp(-700) is still a normal double: no underflow at k = 0
# A u this far below a lower bound of cdf(0) gives 0 without evaluating cdf(0): far more than
# the rounding of any evaluation of cdf(0), so the answer is the one an evaluation would give.
ZERO_MARGIN = 1e-12

try:
    if os.environ.get("CAUSALTRACE_NUMBA", "1") == "0":
        raise ImportError("disabled by CAUSALTRACE_NUMBA=0")
    from numba import njit

    AVAILABLE = True
except ImportError:  # pragma: no cover - exercised only where numba is missing
    AVAILABLE = False

    def njit(*args, **kwargs):  # type: ignore[no-redef]
        def wrap(fn):
            return fn

        return wrap


# PMF ratios by kind: 0 binomial (a = n, b = p / (1 - p)), 1 Poisson (a = lam),
# 2 negative binomial (a = r, b = 1 - p).


@njit(cache=True, nogil=True, inline="always")
def _up(kind, k, a, b):  # pragma: no cover - compiled
    if kind == 0:
        return (a - k) / (k + 1.0) * b
    if kind == 1:
        return a / (k + 1.0)
    return (k + a) / (k + 1.0) * b


@njit(cache=True, nogil=True, inline="always")
def _down(kind, k, a, b):  # pragma: no cover - compiled
    if kind == 0:
        return k / (a - k + 1.0) / b
    if kind == 1:
        return k / a
    return k / ((k - 1.0 + a) * b)


@njit(cache=True, nogil=True, inline="always")
def _sum_from_zero(kind, log_f0, u, a, b, top):  # pragma: no cover - compiled
    """(k, settled): add PMF terms from k = 0 until the CDF reaches ``u``. Settled only if the
    CDF at the answer and below it are clearly (``ZERO_MARGIN``) on their sides of ``u``: the
    sums carry rounding (worst near 1, where tiny terms are added to almost 1), and a close
    call is left to the exact path."""
    if log_f0 < MIN_LOG_PMF0:
        return 0.0, False
    f = math.exp(log_f0)
    below = 0.0  # cdf(k - 1)
    c = f
    k = 0.0
    steps = 0
    while c < u and k < top and steps < MAX_STEPS and f > 0.0:
        f *= _up(kind, k, a, b)
        k += 1.0
        below = c
        c += f
        steps += 1
    if k >= top:  # cdf(top) = 1 exactly
        return k, u - below > ZERO_MARGIN
    return k, c - u > ZERO_MARGIN and (k == 0.0 or u - below > ZERO_MARGIN)


@njit(cache=True, nogil=True)
def binomial_from_zero(n, p, u, out, todo):  # pragma: no cover - compiled
    """Binomial quantiles of the elements with a small mean; ``todo`` marks the others.

    Degenerate elements (no trials, p = 0, p = 1) are settled here too."""
    for i in range(n.size):
        ni, pi, ui = n[i], p[i], u[i]
        todo[i] = False
        if ni <= 0.0 or pi <= 0.0:
            out[i] = 0.0
        elif pi >= 1.0:
            out[i] = ni
        elif ni * pi > SMALL_MEAN:
            todo[i] = True
        elif ui <= 1.0 - ni * pi - ZERO_MARGIN:  # cdf(0) = (1 - p)^n >= 1 - n p (Bernoulli)
            out[i] = 0.0
        else:
            k, ok = _sum_from_zero(0, ni * math.log1p(-pi), ui, ni, pi / (1.0 - pi), ni)
            out[i] = k
            todo[i] = not ok


@njit(cache=True, nogil=True)
def poisson_from_zero(lam, u, out, todo):  # pragma: no cover - compiled
    """Poisson quantiles of the elements with a small mean; ``todo`` marks the others."""
    for i in range(lam.size):
        li, ui = lam[i], u[i]
        todo[i] = False
        if li <= 0.0:
            out[i] = 0.0
        elif li > SMALL_MEAN:
            todo[i] = True
        elif ui <= 1.0 - li - ZERO_MARGIN:  # cdf(0) = exp(-lam) >= 1 - lam
            out[i] = 0.0
        else:
            k, ok = _sum_from_zero(1, -li, ui, li, li, np.inf)
            out[i] = k
            todo[i] = not ok


@njit(cache=True, nogil=True)
def negbinom_from_zero(mean, r, p, u, out, todo):  # pragma: no cover - compiled
    """Negative binomial quantiles (shape ``r``, ``p = r / (r + mean)``) of the elements with a
    small mean; ``todo`` marks the others."""
    for i in range(mean.size):
        mi, pi, ui = mean[i], p[i], u[i]
        todo[i] = False
        if mi > SMALL_MEAN:
            todo[i] = True
        elif ui <= 1.0 - max(r, 1.0) * (1.0 - pi) - ZERO_MARGIN:  # cdf(0) = p^r (Bernoulli)
            out[i] = 0.0
        else:
            k, ok = _sum_from_zero(2, r * math.log(pi), ui, r, 1.0 - pi, np.inf)
            out[i] = k
            todo[i] = not ok


# -- the general path ----------------------------------------------------------------------


@njit(cache=True, nogil=True)
def walk(kind, k, c, f, u, a, b, top, walk_steps, settled):  # pragma: no cover - compiled
    """In place: move ``k`` from the guess to the smallest k' with cdf(k') >= u (see
    :func:`causaltrace.distributions._walk`, whose operations this repeats element by element).
    ``settled[i]`` is False where ``walk_steps`` steps did not reach the answer."""
    for i in range(k.size):
        ki, ci, fi, ui, ai, bi, ti = k[i], c[i], f[i], u[i], a[i], b[i], top[i]
        ok = True
        if ci < ui:
            for _ in range(walk_steps):
                fi *= _up(kind, ki, ai, bi)
                ki += 1.0
                ci += fi
                if not (ci < ui and ki < ti):
                    break
            ok = not (ci < ui and ki < ti)
        elif ki > 0.0 and ci - fi >= ui:
            for _ in range(walk_steps):
                ci -= fi
                fi *= _down(kind, ki, ai, bi)
                ki -= 1.0
                if not (ki > 0.0 and ci - fi >= ui):
                    break
            ok = not (ki > 0.0 and ci - fi >= ui)
        k[i] = ki
        settled[i] = ok


@njit(cache=True, nogil=True)
def bracketed(
    kind, k0, f0, a, b, top, tail_kind, j0, g0, ta, tb, ttop, upward, c0, sign,
    slack, u, max_terms, out, todo,
):  # pragma: no cover - compiled  # fmt: skip
    """Quantiles from a guess ``k0`` and its PMF ``f0`` without an exact CDF: bound the CDF.

    The CDF at ``k0`` is ``c0 + sign * S``, where ``S`` is a tail sum of a log-concave PMF
    (``tail_kind`` with parameters ``ta``, ``tb``, ``ttop``) starting at ``j0`` with the term
    ``g0`` and running upwards or downwards. Usually that PMF is the count's own (``S`` the mass
    up to ``k0``, or above it); for a negative binomial with an integer shape ``r`` it is the
    binomial of ``k0 + r`` trials (``I_p(r, k0 + 1) = P(Bin(k0 + r, p) >= r)``), whose spread is
    much smaller. Away from the mode the terms shrink and, by log-concavity, the ratio of
    consecutive terms only falls, so what is left of ``S`` is at most ``g * rho / (1 - rho)``
    (``g`` the last term, ``rho`` the next ratio): the CDF lies in a known interval.

    Walking from ``k0`` moves the interval by PMF steps of the count (``kind``, ``a``, ``b``,
    ``top``). An element is settled once ``u`` falls clearly on one side of the interval at the
    answer and at the count below it; while ``u`` is inside, one more term narrows the interval.
    ``slack`` widens every interval by the rounding of the PMFs (their logarithms come from
    ``gammaln`` of large numbers) and of the sums, so a settled answer is the exact quantile.
    Elements not settled within ``max_terms`` terms and 64 steps, or with ``u`` within ``slack``
    of a CDF value, stay in ``todo`` for the exact incomplete-beta path.
    """
    for i in range(k0.size):
        todo[i] = True
        kk, ff, ui, ai, bi, ti, sl = k0[i], f0[i], u[i], a[i], b[i], top[i], slack[i]
        j, g, tai, tbi, tti, up = j0[i], g0[i], ta[i], tb[i], ttop[i], upward[i]
        base, sg = c0[i], sign[i]
        if not (ff > 0.0) or not (g >= 0.0) or not (ui > 0.0) or not (ui < 1.0):
            continue
        s = g  # the tail sum so far, its start term included
        delta = 0.0  # F(current k) - F(k0), by PMF steps
        terms = 0
        steps = 0
        while terms <= max_terms and steps <= 64:
            if up:
                rho = _up(tail_kind, j, tai, tbi) if j < tti else 0.0
            else:
                rho = _down(tail_kind, j, tai, tbi) if j > 0.0 else 0.0
            if rho <= 0.0 or g == 0.0:
                rest = 0.0
            elif rho < 1.0:
                rest = g * rho / (1.0 - rho)
            else:
                rest = np.inf
            if sg > 0.0:
                lo, hi = base + s, base + (s + rest)
            else:
                lo, hi = base - (s + rest), base - s
            lo += delta - sl
            hi += delta + sl
            if hi < ui:  # F(kk) < u: the answer is above
                if kk >= ti:
                    break
                ff *= _up(kind, kk, ai, bi)
                kk += 1.0
                delta += ff
                steps += 1
                continue
            if lo >= ui:  # F(kk) >= u: the answer is kk or below
                if kk <= 0.0 or hi - ff < ui:
                    out[i] = kk
                    todo[i] = False
                    break
                if lo - ff >= ui:
                    delta -= ff
                    ff *= _down(kind, kk, ai, bi)
                    kk -= 1.0
                    steps += 1
                    continue
            if rest == 0.0:  # nothing left to add: u is within the slack of a CDF value
                break
            g *= rho  # u inside the interval: one more term narrows it
            j += 1.0 if up else -1.0
            s += g
            terms += 1
