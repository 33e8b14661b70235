"""Sensitivity of an effect estimate to unobserved confounding, and bounds without
identification.

- :func:`e_value` (VanderWeele and Ding 2017): the minimum strength of association, on the
  risk-ratio scale, that an unobserved confounder would need with both the treatment and the
  outcome (conditional on the measured covariates) to explain away an observed risk ratio:
  ``E = RR + sqrt(RR (RR - 1))`` (``RR`` inverted first when below 1), and the same for the
  interval's limit nearer to 1 (``1`` when the interval holds 1). :func:`e_value_smd` for a
  standardized mean difference ``d`` through their approximation ``RR ~ exp(0.91 d)``
  (interval ``exp(0.91 d -/+ 1.78 se)``).
- :func:`robustness_value` and :func:`confounding_sweep` (Cinelli and Hazlett 2020) for a
  linear regression coefficient: an omitted confounder ``Z`` with partial R^2 ``r2_dz`` with
  the treatment (given the covariates) and ``r2_yz`` with the outcome (given treatment and
  covariates) moves the coefficient by ``se sqrt(dof) sqrt(r2_yz r2_dz / (1 - r2_dz))``
  exactly (in the sample), and its standard error to ``se sqrt((1 - r2_yz) / (1 - r2_dz))
  sqrt(dof / (dof - 1))``. The robustness value ``RV_q`` is the strength, equal on both sides,
  that moves the estimate by ``q`` of itself (to zero for ``q = 1``); ``RV_q,alpha`` the one
  that makes the ``1 - alpha`` interval reach it. ``se`` is the classical OLS standard error
  (``Estimate.classical_se``), for which the formulas are exact.
- :func:`manski_bounds` (Manski 1990): with no assumption on confounding, a binary treatment
  and an outcome known to lie in ``[y_min, y_max]``, the average effect lies in an interval of
  width ``y_max - y_min``; its sampling interval is Imbens and Manski's (2004).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from causaltrace.errors import CausalTraceError
from causaltrace.structure.estimation import Estimate, binary_treatment, normal_quantile

__all__ = [
    "ConfoundingSweep",
    "EValue",
    "ManskiBounds",
    "Robustness",
    "bias_adjusted",
    "confounding_sweep",
    "e_value",
    "e_value_smd",
    "manski_bounds",
    "robustness_value",
]

SMD_TO_LOG_RR = 0.91  # VanderWeele and Ding 2017: log RR ~ 0.91 d (Chinn's conversion, via OR)


@dataclass(frozen=True)
class EValue:
    """E-values of a risk ratio and of its interval.

    Args:
        rr: The risk ratio (observed, or converted from a standardized mean difference).
        rr_low: Its interval's lower limit (``nan`` when not given).
        rr_high: Its upper limit.
        point: The E-value of ``rr``.
        ci: The E-value of the limit nearer to 1 (``1.0`` when the interval holds 1,
            ``nan`` when no interval was given).
    """

    rr: float
    rr_low: float
    rr_high: float
    point: float
    ci: float


def _e(rr: float) -> float:
    rr = 1.0 / rr if rr < 1 else rr
    return float(rr + np.sqrt(rr * (rr - 1.0)))


def e_value(rr: float, ci_low: float | None = None, ci_high: float | None = None) -> EValue:
    """The E-value of a risk ratio (and of its interval).

    Args:
        rr: The observed risk ratio (an odds or hazard ratio of a rare outcome too).
        ci_low: The interval's lower limit, if any.
        ci_high: Its upper limit.

    Raises:
        CausalTraceError: A non-positive ratio, or limits on the wrong side of ``rr``.
    """
    lo = float("nan") if ci_low is None else float(ci_low)
    hi = float("nan") if ci_high is None else float(ci_high)
    if rr <= 0 or (lo == lo and lo <= 0):
        raise CausalTraceError("risk ratios are positive")
    if (lo == lo and lo > rr) or (hi == hi and hi < rr):
        raise CausalTraceError(f"the interval ({lo}, {hi}) does not hold the estimate {rr}")
    nearer = lo if rr >= 1 else hi  # the limit between the estimate and the null
    if nearer != nearer:
        ci = float("nan")
    elif (rr >= 1 and nearer <= 1) or (rr < 1 and nearer >= 1):
        ci = 1.0
    else:
        ci = _e(nearer)
    return EValue(float(rr), lo, hi, _e(rr), ci)


def e_value_smd(d: float, se: float | None = None) -> EValue:
    """The E-value of a standardized mean difference ``d`` (difference over the outcome's
    standard deviation), converted as ``RR ~ exp(0.91 d)`` with the interval
    ``exp(0.91 d -/+ 1.78 se)`` (VanderWeele and Ding 2017, for a continuous outcome).

    Args:
        d: The standardized mean difference (a linear effect over the outcome's SD).
        se: Its standard error, for the interval's E-value.
    """
    rr = float(np.exp(SMD_TO_LOG_RR * d))
    if se is None:
        return e_value(rr)
    half = SMD_TO_LOG_RR * normal_quantile(0.95) * se  # 0.91 x 1.96 = 1.78
    return e_value(
        rr, float(np.exp(SMD_TO_LOG_RR * d - half)), float(np.exp(SMD_TO_LOG_RR * d + half))
    )


@dataclass(frozen=True)
class Robustness:
    """How strong an omitted confounder must be to overturn a regression estimate.

    Args:
        estimate: The coefficient (effect) estimated.
        se: Its classical standard error.
        dof: The regression's residual degrees of freedom.
        t: ``estimate / se``.
        partial_r2: The partial R^2 of the treatment with the outcome given the covariates,
            ``t^2 / (t^2 + dof)``: a confounder explaining all the outcome's residual variance
            must explain this much of the treatment's to remove the estimate.
        rv: ``RV_q``: the partial R^2, with treatment and outcome alike, that moves the
            estimate by ``q`` of itself.
        rv_alpha: ``RV_q,alpha``: the one after which the ``1 - alpha`` interval reaches
            ``(1 - q)`` times the estimate.
        q: The share of the estimate to remove (1: to zero).
        alpha: The interval's level (``1 - alpha``).
    """

    estimate: float
    se: float
    dof: int
    t: float
    partial_r2: float
    rv: float
    rv_alpha: float
    q: float
    alpha: float


def robustness_value(
    estimate: float | Estimate,
    se: float | None = None,
    dof: int | None = None,
    *,
    q: float = 1.0,
    alpha: float = 0.05,
) -> Robustness:
    """Cinelli and Hazlett's (2020) robustness values of a regression coefficient.

    Args:
        estimate: The coefficient, or a regression :class:`Estimate` (its ``classical_se``
            and ``dof`` are read).
        se: The classical standard error (not a robust one: the partial R^2 is read from the
            classical t statistic).
        dof: Residual degrees of freedom.
        q: The share of the estimate a confounder must remove.
        alpha: The significance level for ``rv_alpha``.
    """
    est, se, dof = _ols_inputs(estimate, se, dof)
    if q <= 0:
        raise CausalTraceError(f"q must be positive, got {q}")
    # lazy: scipy takes ~0.3 s to import; `import causaltrace` must not pay it
    from scipy import stats

    t = est / se
    fq = q * abs(t) / np.sqrt(dof)  # Cohen's f of the share q of the estimate
    f_crit = abs(stats.t.ppf(alpha / 2, dof - 1)) / np.sqrt(dof - 1)
    fqa = fq - f_crit
    if fqa < 0:
        rv_alpha = 0.0
    elif fq > 1 / f_crit:  # the bound on the outcome's partial R^2 (< 1) binds
        rv_alpha = (fq**2 - f_crit**2) / (1 + fq**2)
    else:
        rv_alpha = 0.5 * (np.sqrt(fqa**4 + 4 * fqa**2) - fqa**2)
    rv = 0.5 * (np.sqrt(fq**4 + 4 * fq**2) - fq**2)
    return Robustness(est, se, dof, t, t**2 / (t**2 + dof), float(rv), float(rv_alpha), q, alpha)


def bias_adjusted(
    estimate: float | Estimate,
    se: float | None = None,
    dof: int | None = None,
    *,
    r2_dz,
    r2_yz,
    reduce: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """The estimate and its standard error had a confounder of the given strength been
    adjusted for (Cinelli and Hazlett 2020, eqs. 4 and 5).

    Args:
        estimate: The coefficient, or a regression :class:`Estimate`.
        se: Its classical standard error.
        dof: Residual degrees of freedom.
        r2_dz: Partial R^2 of the confounder with the treatment given the covariates
            (array-like, broadcast with ``r2_yz``), in ``[0, 1)``.
        r2_yz: Partial R^2 of the confounder with the outcome given treatment and
            covariates, in ``[0, 1]``.
        reduce: The confounder pushed the estimate away from zero (it is moved toward zero);
            ``False`` for the opposite.
    """
    est, se, dof = _ols_inputs(estimate, se, dof)
    r2_dz, r2_yz = np.asarray(r2_dz, dtype=float), np.asarray(r2_yz, dtype=float)
    if (r2_dz < 0).any() or (r2_dz >= 1).any() or (r2_yz < 0).any() or (r2_yz > 1).any():
        raise CausalTraceError("partial R^2 values lie in [0, 1) (treatment) and [0, 1]")
    bias = se * np.sqrt(dof) * np.sqrt(r2_yz * r2_dz / (1.0 - r2_dz))
    sign = np.sign(est) if est != 0 else 1.0
    adjusted = est - sign * bias if reduce else est + sign * bias
    adjusted_se = se * np.sqrt((1.0 - r2_yz) / (1.0 - r2_dz)) * np.sqrt(dof / (dof - 1))
    return adjusted, adjusted_se


@dataclass(frozen=True, eq=False)
class ConfoundingSweep:
    """Bias-adjusted estimates over a grid of confounding strengths.

    Args:
        r2_dz: ``(k,)`` partial R^2 values with the treatment (rows of the grids).
        r2_yz: ``(m,)`` partial R^2 values with the outcome (columns).
        estimate: ``(k, m)`` adjusted estimates.
        se: ``(k, m)`` their standard errors.
        ci_low: ``(k, m)`` interval lower ends.
        ci_high: ``(k, m)`` upper ends.
        robustness: The robustness values of the unadjusted estimate.
    """

    r2_dz: np.ndarray
    r2_yz: np.ndarray
    estimate: np.ndarray = field(repr=False)
    se: np.ndarray = field(repr=False)
    ci_low: np.ndarray = field(repr=False)
    ci_high: np.ndarray = field(repr=False)
    robustness: Robustness

    def table(self):
        """The grid as a long pandas DataFrame (r2_dz, r2_yz, estimate, se, ci_low, ci_high)."""
        # lazy: pandas takes ~0.5 s to import; `import causaltrace` must not pay it
        import pandas as pd

        dz, yz = np.meshgrid(self.r2_dz, self.r2_yz, indexing="ij")
        return pd.DataFrame(
            {
                "r2_dz": dz.ravel(),
                "r2_yz": yz.ravel(),
                "estimate": self.estimate.ravel(),
                "se": self.se.ravel(),
                "ci_low": self.ci_low.ravel(),
                "ci_high": self.ci_high.ravel(),
            }
        )


def confounding_sweep(
    estimate: float | Estimate,
    se: float | None = None,
    dof: int | None = None,
    *,
    r2_dz=(0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3),
    r2_yz=(0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3),
    reduce: bool = True,
    level: float = 0.95,
) -> ConfoundingSweep:
    """The estimate as a function of an omitted confounder's partial R^2 with the treatment
    and with the outcome (a contour plot's grid), with the robustness values.

    Args:
        estimate: The coefficient, or a regression :class:`Estimate` (``classical_se``,
            ``dof``).
        se: Its classical standard error.
        dof: Residual degrees of freedom.
        r2_dz: Grid of partial R^2 with the treatment.
        r2_yz: Grid of partial R^2 with the outcome.
        reduce: The confounder inflated the estimate's magnitude (see :func:`bias_adjusted`).
        level: The intervals' coverage.
    """
    est, se, dof = _ols_inputs(estimate, se, dof)
    dz = np.asarray(r2_dz, dtype=float)
    yz = np.asarray(r2_yz, dtype=float)
    adjusted, adjusted_se = bias_adjusted(
        est, se, dof, r2_dz=dz[:, None], r2_yz=yz[None, :], reduce=reduce
    )
    adjusted_se = np.broadcast_to(adjusted_se, adjusted.shape)
    z = normal_quantile(level)
    return ConfoundingSweep(
        dz,
        yz,
        adjusted,
        adjusted_se,
        adjusted - z * adjusted_se,
        adjusted + z * adjusted_se,
        robustness_value(est, se, dof, alpha=round(1 - level, 12)),
    )


def _ols_inputs(estimate, se, dof) -> tuple[float, float, int]:
    if isinstance(estimate, Estimate):
        if estimate.classical_se is None or estimate.dof is None:
            raise CausalTraceError(
                f"{estimate.method} is not a regression estimate: pass se and dof instead"
            )
        return estimate.value, estimate.classical_se, estimate.dof
    if se is None or dof is None:
        raise CausalTraceError("pass se and dof with a numeric estimate")
    if se <= 0 or dof < 2:
        raise CausalTraceError(f"se must be positive and dof at least 2 (got {se}, {dof})")
    return float(estimate), float(se), int(dof)


@dataclass(frozen=True)
class ManskiBounds:
    """Worst-case bounds on an average effect (no assumption on confounding).

    Args:
        low: Lower bound of ``E[y | do(1)] - E[y | do(0)]``.
        high: Upper bound; ``high - low == y_max - y_min``.
        ci_low: Lower end of the interval that covers the true effect with probability
            ``level`` (Imbens and Manski 2004).
        ci_high: Its upper end.
        y_min: The outcome's lower bound.
        y_max: Its upper bound.
    """

    low: float
    high: float
    ci_low: float
    ci_high: float
    y_min: float
    y_max: float

    def contains(self, value: float) -> bool:
        return bool(self.low <= value <= self.high)


def manski_bounds(
    treatment,
    outcome,
    *,
    y_min: float,
    y_max: float,
    threshold: float | None = None,
    level: float = 0.95,
) -> ManskiBounds:
    """Manski's no-assumption bounds on the average effect of a binary treatment.

    The unobserved potential outcomes (``y(1)`` of the untreated, ``y(0)`` of the treated)
    are replaced by the outcome's bounds: ``E[y(1)]`` lies between ``E[y t] + y_min P(t=0)``
    and ``E[y t] + y_max P(t=0)``, likewise ``E[y(0)]``.

    Args:
        treatment: 0/1 values (or any values with ``threshold``).
        outcome: Values in ``[y_min, y_max]``.
        y_min: The least value the outcome can take (not the least observed).
        y_max: The greatest.
        threshold: Treated means ``treatment > threshold``.
        level: The sampling interval's coverage of the true effect.

    Raises:
        CausalTraceError: An outcome outside its bounds, or a non-binary treatment.
    """
    t = binary_treatment(np.asarray(treatment), threshold)
    y = np.asarray(outcome, dtype=np.float64)
    if not y_min < y_max:
        raise CausalTraceError(f"y_min must be below y_max (got {y_min}, {y_max})")
    if (y < y_min).any() or (y > y_max).any():
        raise CausalTraceError(f"the outcome leaves [{y_min}, {y_max}]")
    lower_rows = y * t + y_min * (1 - t) - (y * (1 - t) + y_max * t)
    upper_rows = y * t + y_max * (1 - t) - (y * (1 - t) + y_min * t)
    low, high = lower_rows.mean(), upper_rows.mean()
    n = y.size
    s_low, s_high = lower_rows.std(ddof=1) / np.sqrt(n), upper_rows.std(ddof=1) / np.sqrt(n)
    c = _imbens_manski(high - low, max(s_low, s_high), level)
    return ManskiBounds(
        float(low), float(high), float(low - c * s_low), float(high + c * s_high), y_min, y_max
    )


def _imbens_manski(width: float, se: float, level: float) -> float:
    """``c`` with ``Phi(c + width / se) - Phi(-c) = level``: between the one-sided and the
    two-sided normal quantile (found by bisection: the left side increases in ``c``)."""
    phi = NormalDist().cdf
    lo, hi = NormalDist().inv_cdf(level), normal_quantile(level)
    if se == 0:
        return lo
    for _ in range(100):
        mid = (lo + hi) / 2
        if phi(mid + width / se) - phi(-mid) < level:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
