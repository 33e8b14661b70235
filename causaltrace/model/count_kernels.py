"""Compiled per-element loops for the count quantiles of :mod:`causaltrace.model.distributions`.

Inverting a count CDF is a short sequential search per element (add one PMF term, compare with
``u``, stop). In numpy every step is a pass over the still-unsettled elements with boolean
indexing and temporary arrays, which cost more than the arithmetic; here each element runs its
own loop in compiled code (numba, without fastmath, so the floating-point operations are exactly
the ones written, in the order written).

One kernel per distribution settles what it can of each element and marks the rest ``todo``:

- degenerate parameters (no trials, p = 0 or 1, a zero rate) directly;
- a small mean by summing the PMF upwards from ``k = 0`` (the CDF at 0 is a closed form, and
  where ``u`` is well below its Bernoulli lower bound ``1 - mean`` the answer is 0 without even
  that). Most cells of a sparse panel are such elements (a few clicks or conversions a day);
- a moderate spread by a bracket around a Cornish-Fisher guess, without the exact CDF: the CDF is
  bounded by a partial tail sum plus a geometric bound on the rest (valid because these PMFs are
  log-concave), and terms are added until ``u`` is clearly on one side. A negative binomial with
  an integer shape uses the narrow binomial tail that equals its CDF, whatever its spread.

``todo`` elements take the exact path of :mod:`causaltrace.model.distributions`: the incomplete beta
(or gamma) at the guess, then ``walk``, which repeats the numpy reference's operations element by
element, then a galloping search for the far tails.

The kernels sum PMF terms in another order than ``scipy.special`` computes the CDF, so
they accept an answer only when ``u`` is clear of the CDF at the answer and below it by a margin
far above the rounding of either computation (``ZERO_MARGIN``, and a slack that grows with the
size of the log-PMF terms); closer calls go to the exact path. Every element therefore gets the
answer the exact path gives; ``tests/model/test_count_kernels.py`` checks this on fixed grids that
include ``u`` within 1e-14 of 0 and 1, and checks both against scipy's ``ppf``.

``AVAILABLE`` is False when numba cannot be imported (a platform without wheels) or when the
environment sets ``CAUSALTRACE_NUMBA=0``; :mod:`causaltrace.model.distributions` then takes the exact
path for everything, which gives the same quantiles (three to ten times slower on a panel).
"""

from __future__ import annotations

import math
import os

import numpy as np

SMALL_MEAN = 48.0  # at most ~48 + 10 sd steps from zero: cheaper than one incomplete beta
MAX_STEPS = 256  # from-zero searches longer than this go to the bracket or the exact path
MIN_LOG_PMF0 = -700.0  # exp(-700) is still a normal double: no underflow at k = 0
# How clear of a CDF value u must be for a from-zero answer (and for u below the Bernoulli bound
# of cdf(0) to give 0 without evaluating it): far more than the rounding of a few hundred
# additions of values <= 1, or of any evaluation of cdf(0), so the answer is the exact path's.
ZERO_MARGIN = 1e-12
SLACK = 1e-12  # rounding of the bracket's tail sums and walks (a few hundred operations <= 1)
EPS = 2.220446049250313e-16  # float64 machine epsilon
MAX_TERMS = 4096  # tail terms a bracket may add before leaving the element to the exact path
MAX_WALK = 64  # steps from the guess a bracket may walk
BATCH = 8  # tail terms a bracket adds between two checks

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


# -- the general path ----------------------------------------------------------------------


@njit(cache=True, nogil=True)
def walk(kind, k, c, f, u, a, b, top, walk_steps, settled):  # pragma: no cover - compiled
    """In place: move ``k`` from the guess to the smallest k' with cdf(k') >= u (see
    :func:`causaltrace.model.distributions._walk`, whose operations this repeats element by element).
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


@njit(cache=True, nogil=True, inline="always")
def _ratio(kind, j, a, b, up):  # pragma: no cover - compiled
    """The next tail term's ratio to the current one: upwards or downwards."""
    return _up(kind, j, a, b) if up else _down(kind, j, a, b)


@njit(cache=True, nogil=True, inline="always")
def _bracket_one(
    kind, kk, ff, ai, bi, ti, tail_kind, j, g, tai, tbi, tti, up, base, sg, sl, ui
):  # pragma: no cover - compiled  # fmt: skip
    """(k, settled): the quantile from a guess ``kk`` with PMF ``ff``, without an exact CDF.

    The CDF at the guess is ``base + sg * S``, where ``S`` is a tail sum of a log-concave PMF
    (``tail_kind`` with parameters ``tai``, ``tbi``, ``tti``) starting at ``j`` with the term
    ``g`` and running upwards (``up``) or downwards. Usually that PMF is the count's own (``S``
    the mass up to the guess, or above it); for a negative binomial with an integer shape ``r``
    it is the binomial of ``k0 + r`` trials (``I_p(r, k0 + 1) = P(Bin(k0 + r, p) >= r)``), whose
    spread is at most sqrt(r). Away from the mode the terms shrink and, by log-concavity, the
    ratio of consecutive terms only falls, so what is left of ``S`` is at most
    ``g * rho / (1 - rho)`` (``g`` the last term, ``rho`` the next ratio): the CDF lies in a known
    interval.

    Walking from the guess moves the interval by PMF steps of the count (``kind``, ``ai``, ``bi``,
    ``ti``). The answer is settled once ``u`` falls clearly on one side of the interval at the
    answer and at the count below it; while ``u`` is inside, more terms narrow the interval.
    ``sl`` widens every interval by the rounding of the PMFs (their logarithms are sums of
    ``lgamma`` of large numbers) and of the sums, so a settled answer is the exact quantile. Not
    settled within ``MAX_TERMS`` terms and ``MAX_WALK`` steps, or with ``u`` within ``sl`` of a
    CDF value: left to the exact path.
    """
    if not (ff > 0.0) or not (g >= 0.0) or not (ui > 0.0) or not (ui < 1.0):
        return kk, False
    s = g  # the tail sum so far, its start term included
    delta = 0.0  # F(current k) - F(guess), by PMF steps
    terms = 0
    steps = 0
    while terms <= MAX_TERMS and steps <= MAX_WALK:
        inside = j < tti if up else j > 0.0
        rho = _ratio(tail_kind, j, tai, tbi, up) if inside else 0.0
        if rho <= 0.0 or g == 0.0:
            rest = 0.0
        elif rho < 1.0:
            rest = g * rho / (1.0 - rho)  # bound on the rest of the tail
        else:
            rest = np.inf
        # F(kk) lies in [lo, hi], widened by the slack
        if sg > 0.0:
            lo, hi = base + s + delta - sl, base + s + rest + delta + sl
        else:
            lo, hi = base - s - rest + delta - sl, base - s + delta + sl
        above, below = lo >= ui, hi < ui  # F(kk) >= u, F(kk) < u
        above_prev, below_prev = lo - ff >= ui, hi - ff < ui  # the same for F(kk - 1)
        if below:  # the answer is above kk
            if kk >= ti:
                return kk, False
            ff *= _up(kind, kk, ai, bi)
            kk += 1.0
            delta += ff
            steps += 1
            continue
        if above:  # the answer is kk or below
            if kk <= 0.0 or below_prev:
                return kk, True
            if above_prev:
                delta -= ff
                ff *= _down(kind, kk, ai, bi)
                kk -= 1.0
                steps += 1
                continue
        if rho <= 0.0 or g == 0.0:  # nothing left to add: u is within the slack of a CDF value
            return kk, False
        # u inside the interval: more terms narrow it, BATCH of them before the next check (the
        # terms form a chain of multiplications; checking after each one costs more than the
        # few terms a batch may add beyond what the answer needed).
        for _ in range(BATCH):
            g *= rho
            j += 1.0 if up else -1.0
            s += g
            terms += 1
            if not (j < tti if up else j > 0.0):
                break
            rho = _ratio(tail_kind, j, tai, tbi, up)
            if rho <= 0.0 or rho >= 1.0:
                break
    return kk, False


@njit(cache=True, nogil=True, inline="always")
def _normal_quantile(u):  # pragma: no cover - compiled
    """Acklam's rational approximation of the normal quantile (relative error ~1e-9): only the
    starting point of a search, so its accuracy does not affect any answer."""
    q = min(max(u, 1e-300), 1.0 - 1e-16)
    if q < 0.02425 or q > 0.97575:
        t = math.sqrt(-2.0 * math.log(q if q < 0.5 else 1.0 - q))
        x = (((((-7.784894002430293e-03 * t - 3.223964580411365e-01) * t - 2.400758277161838)
              * t - 2.549732539343734) * t + 4.374664141464968) * t + 2.938163982698783) / (
            (((7.784695709041462e-03 * t + 3.224671290700398e-01) * t + 2.445134137142996) * t
             + 3.754408661907416) * t + 1.0)  # fmt: skip
        return x if q < 0.5 else -x
    r = q - 0.5
    t = r * r
    return (((((-3.969683028665376e01 * t + 2.209460984245205e02) * t - 2.759285104469687e02)
             * t + 1.383577518672690e02) * t - 3.066479806614716e01) * t + 2.506628277459239) * r / (
        ((((-5.447609879822406e01 * t + 1.615858368580409e02) * t - 1.556989798598866e02) * t
          + 6.680131188771972e01) * t - 1.328068155288572e01) * t + 1.0)  # fmt: skip


@njit(cache=True, nogil=True, inline="always")
def _slack(magnitude):  # pragma: no cover - compiled
    """Interval widening for a PMF whose log is a sum of terms of total size ``magnitude``:
    each lgamma/log is within a couple of units in the last place of its value, the four
    additions add as much, and exp adds one more (inside the fixed part)."""
    return SLACK + 8.0 * EPS * magnitude


@njit(cache=True, nogil=True, inline="always")
def _binomial_log_pmf(k, n, p):  # pragma: no cover - compiled
    """(log pmf, size of its terms) of the binomial at ``k``."""
    t0 = math.lgamma(n + 1.0)
    t1 = math.lgamma(k + 1.0)
    t2 = math.lgamma(n - k + 1.0)
    t3 = k * math.log(p)
    t4 = (n - k) * math.log1p(-p)
    return t0 - t1 - t2 + t3 + t4, abs(t0) + abs(t1) + abs(t2) + abs(t3) + abs(t4)


@njit(cache=True, nogil=True, inline="always")
def _own_tail_bracket(kind, k0, log_f0, magnitude, a, b, top, u):  # pragma: no cover
    """Bracket from the guess with the count's own tail: the mass above the guess past the
    mode, the mass up to it before."""
    f0 = math.exp(log_f0)
    ratio = _up(kind, k0, a, b)
    upward = k0 < top and ratio < 1.0
    if upward:
        return _bracket_one(
            kind, k0, f0, a, b, top, kind, k0 + 1.0, f0 * ratio, a, b, top, True, 1.0, -1.0,
            _slack(magnitude), u,
        )  # fmt: skip
    return _bracket_one(
        kind, k0, f0, a, b, top, kind, k0, f0, a, b, top, False, 0.0, 1.0, _slack(magnitude), u
    )


@njit(cache=True, nogil=True)
def binomial_quantiles(n, p, u, max_sd, out, todo):  # pragma: no cover - compiled
    """Binomial quantiles (see the module docstring); ``todo`` marks what is left."""
    for i in range(n.size):
        ni, pi, ui = n[i], p[i], u[i]
        todo[i] = False
        if ni <= 0.0 or pi <= 0.0:
            out[i] = 0.0
            continue
        if pi >= 1.0:
            out[i] = ni
            continue
        mean = ni * pi
        odds = pi / (1.0 - pi)
        if mean <= SMALL_MEAN:
            if ui <= 1.0 - mean - ZERO_MARGIN:  # cdf(0) = (1 - p)^n >= 1 - n p (Bernoulli)
                out[i] = 0.0
                continue
            k, ok = _sum_from_zero(0, ni * math.log1p(-pi), ui, ni, odds, ni)
            if ok:
                out[i] = k
                continue
        var = mean * (1.0 - pi)
        if var > max_sd * max_sd:
            todo[i] = True
            continue
        z = _normal_quantile(ui)
        guess = mean + math.sqrt(var) * z + (1.0 - 2.0 * pi) * (z * z - 1.0) / 6.0
        k0 = min(max(math.floor(guess + 0.5), 0.0), ni)
        log_f0, magnitude = _binomial_log_pmf(k0, ni, pi)
        k, ok = _own_tail_bracket(0, k0, log_f0, magnitude, ni, odds, ni, ui)
        out[i] = k
        todo[i] = not ok


@njit(cache=True, nogil=True)
def poisson_quantiles(lam, u, max_sd, out, todo):  # pragma: no cover - compiled
    """Poisson quantiles (see the module docstring); ``todo`` marks what is left."""
    for i in range(lam.size):
        li, ui = lam[i], u[i]
        todo[i] = False
        if li <= 0.0:
            out[i] = 0.0
            continue
        if li <= SMALL_MEAN:
            if ui <= 1.0 - li - ZERO_MARGIN:  # cdf(0) = exp(-lam) >= 1 - lam
                out[i] = 0.0
                continue
            k, ok = _sum_from_zero(1, -li, ui, li, li, np.inf)
            if ok:
                out[i] = k
                continue
        if li > max_sd * max_sd:
            todo[i] = True
            continue
        z = _normal_quantile(ui)
        k0 = max(math.floor(li + math.sqrt(li) * z + (z * z - 1.0) / 6.0 + 0.5), 0.0)
        t0, t1, t2 = k0 * math.log(li), -li, math.lgamma(k0 + 1.0)
        k, ok = _own_tail_bracket(
            1, k0, t0 + t1 - t2, abs(t0) + abs(t1) + abs(t2), li, li, np.inf, ui
        )
        out[i] = k
        todo[i] = not ok


@njit(cache=True, nogil=True)
def negbinom_quantiles(mean, r, p, u, max_sd, out, todo):  # pragma: no cover - compiled
    """Negative binomial quantiles (shape ``r``, ``p = r / (r + mean)``; see the module
    docstring); ``todo`` marks what is left."""
    integer_shape = r >= 1.0 and r == math.floor(r)
    lgamma_r = math.lgamma(r)
    for i in range(mean.size):
        mi, pi, ui = mean[i], p[i], u[i]
        todo[i] = False
        q = 1.0 - pi
        if mi <= SMALL_MEAN:
            if ui <= 1.0 - max(r, 1.0) * q - ZERO_MARGIN:  # cdf(0) = p^r (Bernoulli)
                out[i] = 0.0
                continue
            k, ok = _sum_from_zero(2, r * math.log(pi), ui, r, q, np.inf)
            if ok:
                out[i] = k
                continue
        sd = math.sqrt(mi + mi * mi / r)
        if r < 1.0 or (not integer_shape and sd > max_sd):  # r < 1: not log-concave
            todo[i] = True
            continue
        z = _normal_quantile(ui)
        skew = (2.0 - pi) / math.sqrt(r * q + 1e-300)
        k0 = max(math.floor(mi + sd * z + skew * sd * (z * z - 1.0) / 6.0 + 0.5), 0.0)
        t0, t2 = math.lgamma(k0 + r), math.lgamma(k0 + 1.0)
        t3, t4 = r * math.log(pi), k0 * math.log1p(-pi)
        log_f0 = t0 - lgamma_r - t2 + t3 + t4
        magnitude = abs(t0) + abs(lgamma_r) + abs(t2) + abs(t3) + abs(t4)
        if not integer_shape:
            k, ok = _own_tail_bracket(2, k0, log_f0, magnitude, r, q, np.inf, ui)
        else:
            # F(k0) = P(Bin(k0 + r, p) >= r): below that binomial's mode, 1 - (mass up to
            # r - 1, summed downwards); past it, the mass from r upwards.
            trials, odds = k0 + r, pi / (1.0 - pi)
            below = (trials - (r - 1.0)) / r * odds >= 1.0  # pmf(r) >= pmf(r - 1)
            j0 = r - 1.0 if below else r
            log_g0, tail_magnitude = _binomial_log_pmf(j0, trials, pi)
            k, ok = _bracket_one(
                2, k0, math.exp(log_f0), r, q, np.inf,
                0, j0, math.exp(log_g0), trials, odds, trials, not below,
                1.0 if below else 0.0, -1.0 if below else 1.0,
                _slack(magnitude + tail_magnitude), ui,
            )  # fmt: skip
        out[i] = k
        todo[i] = not ok
