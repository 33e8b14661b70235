"""Estimators for what identification returns, on pooled rows as the export writes them.

:func:`~causaltrace.structure.identification.identify_effect` says which adjustment makes an
effect identifiable; these functions estimate it from a DataFrame of rows (one per world, cell
and time step: :func:`causaltrace.structure.export.regime_frame`, ``observational.parquet``),
each returning an :class:`Estimate` with a standard error and a 95% interval:

- :func:`backdoor_regression`: OLS of the outcome on the treatment and the back-door set. By
  default the model is interacted (Lin 2013): the treatment's slope may differ in every stratum
  of the categorical part of the set (the panel coordinates and other categories, as fixed
  effects jointly), and the coefficient reported is the slope averaged over the rows, which is
  the back-door formula ``sum_z P(z) dE[y | x, z]/dx`` for an outcome linear in the treatment
  within strata. ``interacted=False`` is the additive fixed-effects regression (DoWhy's
  ``backdoor.linear_regression``), which weights strata by their treatment variance and so
  misses the average effect when the effect differs between strata (the example domain's
  visits -> tracked orders: -23%, docs/research-guide.md). Heteroskedasticity-robust (HC1 by
  default) or clustered standard errors.
- :func:`ipw` and :func:`aipw`: inverse probability weighting (normalized, Hajek) and the
  augmented (doubly robust) estimator for a binary treatment, or one made binary by a
  threshold; the propensity is a logistic regression on the same covariates (IRLS,
  :func:`~causaltrace.structure.regression.logistic`).
- :func:`frontdoor_linear`: the front-door effect of a linear model, ``sum_m a_m b_m`` from
  the regression of each mediator on the treatment (``a``) and of the outcome on the mediators
  and the treatment (``b``), with a delta-method standard error.
- :func:`estimate_effect`: the estimator that matches an :class:`Identification`'s kind.

Every standard error is the spread of a sum of per-row contributions (the estimator's
first-order error), so ``cluster="world"`` makes all of them robust to rows of one world
sharing its draws. Intervals are normal (``value +/- z se``).

The true effect of the same contrast, from worlds that share every draw, is
:func:`causaltrace.structure.truth.true_effect`; the estimates are scored against it in
``bench/estimation.py``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from causaltrace.errors import CausalTraceError
from causaltrace.structure.identification import Identification
from causaltrace.structure.regression import (
    CovType,
    covariates,
    is_categorical,
    logistic,
    ols,
    summed_variance,
)

__all__ = [
    "AdditiveAdjustmentWarning",
    "Estimate",
    "aipw",
    "backdoor_regression",
    "binary_treatment",
    "estimate_effect",
    "frontdoor_linear",
    "ipw",
    "normal_quantile",
]


@dataclass(frozen=True)
class Estimate:
    """An effect estimate with its uncertainty.

    Args:
        value: The estimated effect of the contrast (treatment value ``treat`` against
            ``control``; for a binary treatment, treated against untreated).
        se: Its standard error.
        ci_low: Lower end of the interval (95% by default).
        ci_high: Upper end.
        method: Which estimator, with its options (``"backdoor.ols interacted HC1"``).
        adjustment: The adjustment set (back-door) or the mediators (front-door), sorted.
        n: Rows used.
        dof: Residual degrees of freedom of the regression (regression estimators), for
            omitted-variable-bias sensitivity (:mod:`causaltrace.structure.sensitivity`).
        classical_se: The homoskedastic standard error of the same coefficient (what the
            omitted-variable-bias formulas are exact for), scaled to the contrast.
    """

    value: float
    se: float
    ci_low: float
    ci_high: float
    method: str
    adjustment: tuple[str, ...]
    n: int = 0
    dof: int | None = None
    classical_se: float | None = None

    def covers(self, truth: float) -> bool:
        """Whether the interval holds ``truth``."""
        return bool(self.ci_low <= truth <= self.ci_high)


def normal_quantile(level: float) -> float:
    """The two-sided normal critical value of a ``level`` interval (1.96 for 0.95)."""
    if not 0 < level < 1:
        raise CausalTraceError(f"level must be in (0, 1), got {level}")
    return NormalDist().inv_cdf(0.5 + level / 2)


def _estimate(value: float, se: float, method: str, adjustment, level: float, **extra) -> Estimate:
    z = normal_quantile(level)
    return Estimate(
        float(value),
        float(se),
        float(value - z * se),
        float(value + z * se),
        method,
        tuple(sorted(adjustment)),
        **extra,
    )


def _query(identification: Identification) -> tuple[str, str]:
    if len(identification.treatments) != 1 or len(identification.outcomes) != 1:
        raise CausalTraceError(
            "the estimators take one treatment and one outcome; this identification has "
            f"{identification.treatments} -> {identification.outcomes}"
        )
    if identification.given:
        raise CausalTraceError("a conditional effect (given=...) has no estimator here")
    return identification.treatments[0], identification.outcomes[0]


def _backdoor_set(identification: Identification, adjustment) -> tuple[str, ...]:
    if adjustment is not None:
        return tuple(sorted(adjustment))
    if identification.kind not in ("backdoor", "no_effect"):
        raise CausalTraceError(
            f"the effect is identified by {identification.kind!r}, not by back-door "
            "adjustment: pass adjustment=... to adjust anyway, or use estimate_effect"
        )
    return tuple(sorted(identification.adjustment_set or ()))


def _clusters(frame, cluster: str | None) -> np.ndarray | None:
    if cluster is None:
        return None
    if cluster not in frame.columns:
        raise CausalTraceError(f"cluster column {cluster!r} is not in the data")
    return frame[cluster].to_numpy()


class AdditiveAdjustmentWarning(UserWarning):
    """A numeric adjustment column enters :func:`backdoor_regression` linearly.

    The regression is linear in each numeric column of the back-door set (interacted, the
    treatment's slope is linear in it too). A mechanism of another form, a product or a ratio
    (services: errors are requests x error_rate), leaves bias the interval does not show: +5.5%
    and 0 of 30 intervals covering in the outside review. Stratify on the column
    (``categorical=[...]`` after binning it) or estimate with the mechanism's own form.
    """


def _warn_additive(numeric: Sequence[str], treatment: str, outcome: str) -> None:
    if numeric:
        warnings.warn(
            AdditiveAdjustmentWarning(
                f"backdoor_regression({treatment} -> {outcome}): the numeric adjustment "
                f"column(s) {', '.join(numeric)} enter the model linearly; if {outcome} depends "
                "on them through a product or a ratio, the estimate is biased. Bin them and "
                "pass categorical=[...] to stratify, or use the mechanism's form."
            ),
            stacklevel=3,
        )


def _numeric(frame, name: str, role: str) -> np.ndarray:
    if name not in frame.columns:
        raise CausalTraceError(f"the {role} {name!r} is not a column of the data")
    if is_categorical(frame[name]):
        raise CausalTraceError(f"the {role} {name!r} is not numeric")
    return frame[name].to_numpy(dtype=np.float64)


def backdoor_regression(
    frame,
    identification: Identification,
    *,
    treat: float = 1.0,
    control: float = 0.0,
    adjustment: Sequence[str] | None = None,
    threshold: float | None = None,
    interacted: bool = True,
    categorical: Sequence[str] = (),
    cov_type: CovType = "HC1",
    cluster: str | None = None,
    level: float = 0.95,
) -> Estimate:
    """Back-door adjustment by OLS: the effect of setting the treatment to ``treat`` instead
    of ``control`` (the slope times ``treat - control``).

    Args:
        frame: Pooled rows with the treatment, the outcome and the adjustment set as columns.
        identification: A back-door (or no-effect) answer of ``identify_effect``; its
            ``panel_coordinates`` are taken as fixed by the design (their indicators are
            not sampled).
        treat: The treatment value of the contrast's first arm.
        control: The second arm's; the estimate is ``E[y | do(treat)] - E[y | do(control)]``
            under a model linear in the treatment.
        adjustment: Adjust for this set instead of the identification's (to compare sets).
        threshold: Regress on the indicator ``treatment > threshold`` instead (the contrast is
            then treated against untreated, as :func:`ipw`'s; ``treat`` and ``control`` keep
            their defaults).
        interacted: Let the slope differ by stratum and report its average (the back-door
            formula, see the module docstring); ``False`` for additive fixed effects.
        categorical: Numeric adjustment columns to treat as categories.
        cov_type: The robust variance (``HC0`` to ``HC3``); ignored with ``cluster``.
        cluster: A column whose values group dependent rows (``"world"``): clustered
            standard errors.
        level: The interval's coverage.

    Raises:
        CausalTraceError: Another kind of identification without ``adjustment``, a column
            missing, ``treat == control``, or collinear columns.
    """
    t_name, y_name = _query(identification)
    adjust = _backdoor_set(identification, adjustment)
    if treat == control:
        raise CausalTraceError("treat and control are the same value: the contrast is zero")
    t = _numeric(frame, t_name, "treatment")
    if threshold is not None:
        if (treat, control) != (1.0, 0.0):
            raise CausalTraceError("with threshold the contrast is 1 against 0: drop treat/control")
        t = binary_treatment(t, threshold)
    y = _numeric(frame, y_name, "outcome")
    cov = covariates(
        frame,
        adjust,
        joint=interacted,
        categorical=categorical,
        fixed=identification.panel_coordinates,
    )
    _warn_additive(cov.continuous, t_name, y_name)
    n, p = cov.matrix.shape
    centered = cov.matrix - cov.matrix.mean(axis=0)
    blocks = [np.ones((n, 1)), t[:, None], cov.matrix]
    names = ["intercept", t_name, *cov.names]
    if interacted and p:
        blocks.append(t[:, None] * centered)
        names += [f"{t_name} x {c}" for c in cov.names]
    design = np.hstack(blocks)
    fit = ols(design, y, names=names)
    clusters = _clusters(frame, cluster)
    var = fit.robust_cov(cov_type, clusters, design)[1, 1]
    if interacted and p and cov.random.any():
        # The average slope over the rows is the population's up to the sampling of the
        # covariates: each row adds (c_i - mean c)' h / n (h: the interaction coefficients).
        h = fit.coef[2 + p :][cov.random]
        var += summed_variance(centered[:, cov.random] @ h / n, clusters)
    scale = treat - control
    kind = ("interacted" if interacted else "additive") + (
        f" {t_name}>{threshold:g}" if threshold is not None else ""
    )
    how = f"cluster({cluster})" if cluster else cov_type
    return _estimate(
        fit.coef[1] * scale,
        np.sqrt(var) * abs(scale),
        f"backdoor.ols {kind} {how}",
        adjust,
        level,
        n=n,
        dof=fit.dof,
        classical_se=float(np.sqrt(fit.classical_cov()[1, 1]) * abs(scale)),
    )


def binary_treatment(values: np.ndarray, threshold: float | None) -> np.ndarray:
    """The treatment as 0.0/1.0: as is when it is binary, else ``values > threshold``.

    Args:
        values: The treatment column.
        threshold: Where to cut a non-binary treatment; ``None`` requires it binary.
    """
    values = np.asarray(values, dtype=np.float64)
    if threshold is not None:
        return (values > threshold).astype(np.float64)
    if not np.isin(values, (0.0, 1.0)).all():
        raise CausalTraceError(
            "the treatment is not binary (0/1): pass threshold=... to binarize it"
        )
    return values


def _propensity(covariate_matrix: np.ndarray, t: np.ndarray, trim: float) -> np.ndarray:
    design = np.hstack([np.ones((t.size, 1)), covariate_matrix])
    beta = logistic(design, t)
    e = 1.0 / (1.0 + np.exp(-np.clip(design @ beta, -35.0, 35.0)))
    return np.clip(e, trim, 1.0 - trim)


def _weighting_inputs(frame, identification, adjustment, threshold, categorical):
    t_name, y_name = _query(identification)
    adjust = _backdoor_set(identification, adjustment)
    t = binary_treatment(_numeric(frame, t_name, "treatment"), threshold)
    if t.min() == t.max():
        raise CausalTraceError("every row has the same treatment: nothing to compare")
    y = _numeric(frame, y_name, "outcome")
    cov = covariates(frame, adjust, joint=True, categorical=categorical)
    return adjust, t, y, cov


def ipw(
    frame,
    identification: Identification,
    *,
    threshold: float | None = None,
    adjustment: Sequence[str] | None = None,
    categorical: Sequence[str] = (),
    trim: float = 0.01,
    cluster: str | None = None,
    level: float = 0.95,
) -> Estimate:
    """Inverse probability weighting (normalized weights, Hajek) for a binary treatment:
    ``E[y | do(1)] - E[y | do(0)]``.

    The standard error treats the propensity as known, which overstates the variance of the
    estimator with an estimated propensity (Hirano, Imbens and Ridder 2003): the interval is
    conservative.

    Args:
        frame: Pooled rows.
        identification: A back-door answer; its adjustment set is the propensity's covariates
            (strata of the categorical part, plus the numeric columns, linearly).
        threshold: Treated means ``treatment > threshold`` (a count or a level made binary);
            ``None`` for a 0/1 treatment. The estimand is then the effect of the indicator,
            a causal effect only when the outcome depends on the treatment through it.
        adjustment: Another adjustment set.
        categorical: Numeric adjustment columns to treat as categories.
        trim: Propensities are clipped to ``[trim, 1 - trim]`` (bounded weights).
        cluster: A column grouping dependent rows.
        level: The interval's coverage.
    """
    adjust, t, y, cov = _weighting_inputs(frame, identification, adjustment, threshold, categorical)
    e = _propensity(cov.matrix, t, trim)
    w1, w0 = t / e, (1.0 - t) / (1.0 - e)
    mu1, mu0 = (w1 @ y) / w1.sum(), (w0 @ y) / w0.sum()
    contributions = w1 * (y - mu1) / w1.sum() - w0 * (y - mu0) / w0.sum()
    var = summed_variance(contributions, _clusters(frame, cluster))
    return _estimate(mu1 - mu0, np.sqrt(var), "backdoor.ipw hajek", adjust, level, n=t.size)


def aipw(
    frame,
    identification: Identification,
    *,
    threshold: float | None = None,
    adjustment: Sequence[str] | None = None,
    categorical: Sequence[str] = (),
    trim: float = 0.01,
    cluster: str | None = None,
    level: float = 0.95,
) -> Estimate:
    """Augmented inverse probability weighting (doubly robust) for a binary treatment.

    The outcome model is OLS on the covariates within each arm, the propensity a logistic
    regression; the estimate is the mean of ``m1 - m0 + t (y - m1) / e - (1 - t) (y - m0) /
    (1 - e)`` and its standard error that term's spread (Robins, Rotnitzky and Zhao 1994),
    consistent when either model is right.

    Args:
        frame: Pooled rows.
        identification: A back-door answer (its set is both models' covariates).
        threshold: See :func:`ipw`.
        adjustment: Another adjustment set.
        categorical: Numeric adjustment columns to treat as categories.
        trim: Propensities are clipped to ``[trim, 1 - trim]``.
        cluster: A column grouping dependent rows.
        level: The interval's coverage.
    """
    adjust, t, y, cov = _weighting_inputs(frame, identification, adjustment, threshold, categorical)
    e = _propensity(cov.matrix, t, trim)
    design = np.hstack([np.ones((t.size, 1)), cov.matrix])
    names = ["intercept", *cov.names]
    arm = t == 1.0
    m1 = design @ ols(design[arm], y[arm], names=names).coef
    m0 = design @ ols(design[~arm], y[~arm], names=names).coef
    psi = m1 - m0 + t * (y - m1) / e - (1.0 - t) * (y - m0) / (1.0 - e)
    value = psi.mean()
    var = summed_variance((psi - value) / t.size, _clusters(frame, cluster))
    return _estimate(value, np.sqrt(var), "backdoor.aipw", adjust, level, n=t.size)


def frontdoor_linear(
    frame,
    identification: Identification,
    *,
    treat: float = 1.0,
    control: float = 0.0,
    mediators: Sequence[str] | None = None,
    cluster: str | None = None,
    level: float = 0.95,
) -> Estimate:
    """The front-door effect in a linear model: ``sum_m a_m b_m`` times ``treat - control``.

    ``a_m`` is the slope of mediator ``m`` on the treatment (no back-door path from the
    treatment to the mediators is open, by the criterion); ``b_m`` the slope of the outcome on
    ``m`` given the treatment and the other mediators (the treatment blocks the mediators'
    back-door paths). The standard error is the delta method on the two regressions' joint
    per-row contributions (HC0, or clustered).

    Args:
        frame: Pooled rows with numeric treatment, mediators and outcome.
        identification: A front-door answer (its adjustment set is the mediators).
        treat: The contrast's first treatment value.
        control: Its second.
        mediators: Other mediators than the identification's.
        cluster: A column grouping dependent rows.
        level: The interval's coverage.
    """
    t_name, y_name = _query(identification)
    if mediators is None:
        if identification.kind != "frontdoor":
            raise CausalTraceError(
                f"the effect is identified by {identification.kind!r}, not front-door: pass "
                "mediators=... to use the front-door formula anyway"
            )
        mediators = identification.adjustment_set or ()
    ms = tuple(sorted(mediators))
    if not ms:
        raise CausalTraceError("the front-door estimator needs at least one mediator")
    if treat == control:
        raise CausalTraceError("treat and control are the same value: the contrast is zero")
    t = _numeric(frame, t_name, "treatment")
    y = _numeric(frame, y_name, "outcome")
    m = np.stack([_numeric(frame, name, "mediator") for name in ms], axis=1)
    n = t.size
    first = np.hstack([np.ones((n, 1)), t[:, None]])
    a, a_rows = [], []
    for k in range(len(ms)):
        fit = ols(first, m[:, k], names=["intercept", t_name])
        a.append(fit.coef[1])
        a_rows.append(fit.contributions[:, 1])
    second = np.hstack([np.ones((n, 1)), t[:, None], m])
    fit2 = ols(second, y, names=["intercept", t_name, *ms])
    b, b_rows = fit2.coef[2:], fit2.contributions[:, 2:]
    a_arr, a_rows_arr = np.asarray(a), np.stack(a_rows, axis=1)
    contributions = a_rows_arr @ b + b_rows @ a_arr  # d(a'b) = b'da + a'db
    var = summed_variance(contributions, _clusters(frame, cluster), n_params=second.shape[1])
    if cluster is None:
        var *= n / fit2.dof  # HC1's degrees-of-freedom factor
    scale = treat - control
    return _estimate(
        float(a_arr @ b) * scale,
        np.sqrt(var) * abs(scale),
        "frontdoor.linear delta",
        ms,
        level,
        n=n,
    )


def estimate_effect(frame, identification: Identification, **options) -> Estimate:
    """The estimator for the identification's kind: :func:`backdoor_regression` for a
    back-door set (or no effect), :func:`frontdoor_linear` for a front-door set.

    Args:
        frame: Pooled rows.
        identification: What ``identify_effect`` returned.
        **options: Passed on (``treat``, ``control``, ``cluster``, ...).

    Raises:
        CausalTraceError: An ID expression (evaluate it on a discrete joint distribution with
            :func:`causaltrace.structure.evaluation.evaluate`) or an unidentified effect
            (bound it: :func:`causaltrace.structure.sensitivity.manski_bounds`).
    """
    if identification.kind in ("backdoor", "no_effect"):
        return backdoor_regression(frame, identification, **options)
    if identification.kind == "frontdoor":
        return frontdoor_linear(frame, identification, **options)
    if identification.kind == "id":
        raise CausalTraceError(
            "the effect is identified by the ID algorithm only: evaluate its expression on a "
            "discrete joint distribution (causaltrace.structure.evaluation.evaluate)"
        )
    raise CausalTraceError(
        f"the effect is not identified ({identification.reason}); bound it instead "
        "(causaltrace.structure.sensitivity.manski_bounds)"
    )
