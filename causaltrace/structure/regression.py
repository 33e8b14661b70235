"""The regressions behind the effect estimators: covariate designs, OLS with robust variances,
and a logistic fit.

- :func:`covariates` turns an adjustment set into columns: categorical columns (the panel
  coordinates, strings, booleans, dates) as fixed effects, numeric ones as they are. Jointly
  (one indicator per observed stratum, the cross product of the categorical columns: the
  back-door formula is nonparametric in a discrete adjustment set) or additively (one set of
  indicators per column, as DoWhy encodes them).
- :func:`ols` fits least squares by a QR decomposition and returns each row's contribution to
  the coefficients (``(X'X)^-1 x_i e_i``), from which every sandwich variance follows: HC0 to
  HC3 (White; MacKinnon and White 1985) or clustered (CR1, Liang and Zeger 1986).
- :func:`logistic` fits a logistic regression by Newton's method (iteratively reweighted least
  squares), for propensity scores.
- :func:`summed_variance` is the variance of a sum of per-row contributions, clustered or not:
  the one rule every estimator's standard error uses.

Pure numpy; pandas is used only to read a frame's columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from causaltrace.errors import CausalTraceError

__all__ = [
    "CovType",
    "Design",
    "OLSFit",
    "column_codes",
    "covariates",
    "is_categorical",
    "logistic",
    "ols",
    "summed_variance",
]

CovType = Literal["HC0", "HC1", "HC2", "HC3"]


@dataclass(frozen=True)
class Design:
    """Covariate columns built from an adjustment set (no intercept: the caller adds one).

    Args:
        matrix: ``(n, p)`` float columns: indicators of the categorical part (first level
            dropped), then the numeric columns.
        names: One name per column, ``"channel=email"`` or ``"a=x&b=y"`` for a stratum, the
            column name for a numeric one.
        categorical: The adjustment columns read as categories.
        continuous: The adjustment columns read as numbers.
        random: Per matrix column, whether it varies between samples (``False`` for indicators
            built only from ``fixed`` columns, such as panel coordinates, whose shares the
            panel's design fixes).
    """

    matrix: np.ndarray
    names: tuple[str, ...]
    categorical: tuple[str, ...]
    continuous: tuple[str, ...]
    random: np.ndarray


@dataclass(frozen=True)
class OLSFit:
    """A least-squares fit.

    Args:
        coef: The coefficients, one per design column.
        residuals: ``y - X coef``.
        contributions: ``(n, p)``: row ``i``'s term ``(X'X)^-1 x_i e_i``; the coefficients'
            error is, to first order, their sum, so any sandwich variance is a variance of
            their sum (:func:`summed_variance`).
        xtx_inv: ``(X'X)^-1``.
        dof: Residual degrees of freedom, ``n - p``.
    """

    coef: np.ndarray
    residuals: np.ndarray
    contributions: np.ndarray
    xtx_inv: np.ndarray
    dof: int

    @property
    def n(self) -> int:
        return int(self.residuals.size)

    def classical_cov(self) -> np.ndarray:
        """The homoskedastic covariance ``s^2 (X'X)^-1`` (what omitted-variable-bias formulas
        and DoWhy's linear regression read)."""
        return float(self.residuals @ self.residuals) / self.dof * self.xtx_inv

    def robust_cov(
        self,
        cov_type: CovType = "HC1",
        clusters: np.ndarray | None = None,
        design: np.ndarray | None = None,
    ) -> np.ndarray:
        """A sandwich covariance of the coefficients.

        Args:
            cov_type: ``HC0`` (White), ``HC1`` (``n / (n - p)`` times HC0, the default: Stata's
                ``robust``), ``HC2`` and ``HC3`` (residuals scaled by the leverage, better in
                small samples). Ignored with ``clusters``.
            clusters: One code per row: CR1, rows of a cluster may be dependent (rows of one
                simulated world share its draws).
            design: The design matrix; needed for HC2 and HC3 (the leverages).
        """
        k = self.coef.size
        if clusters is not None:
            return summed_variance(self.contributions, clusters, n_params=k)
        scores = self.contributions
        if cov_type in ("HC2", "HC3"):
            if design is None:
                raise CausalTraceError(f"{cov_type} needs the design matrix (leverages)")
            leverage = np.einsum("ij,jk,ik->i", design, self.xtx_inv, design)
            power = 0.5 if cov_type == "HC2" else 1.0
            scores = scores / (1.0 - np.minimum(leverage, 1 - 1e-12))[:, None] ** power
        elif cov_type not in ("HC0", "HC1"):
            raise CausalTraceError(f"cov_type must be HC0, HC1, HC2 or HC3, not {cov_type!r}")
        cov = scores.T @ scores
        if cov_type == "HC1":
            cov *= self.n / self.dof
        return cov


def is_categorical(values) -> bool:
    """Whether a column is read as categories: not a plain number (a pandas category, strings,
    booleans, dates)."""
    # lazy: pandas takes ~0.5 s to import; `import causaltrace` must not pay it
    from pandas.api import types

    dtype = getattr(values, "dtype", np.asarray(values).dtype)
    return not types.is_numeric_dtype(dtype) or types.is_bool_dtype(dtype)


def column_codes(values) -> tuple[np.ndarray, tuple[str, ...]]:
    """A column's level codes (0..k-1, levels sorted) and the levels as text."""
    # lazy: pandas takes ~0.5 s to import; `import causaltrace` must not pay it
    import pandas as pd

    codes, levels = pd.factorize(pd.Series(values), sort=True)
    if (codes < 0).any():
        raise CausalTraceError("a categorical adjustment column has missing values")
    return codes.astype(np.int64), tuple(str(v) for v in levels)


def covariates(
    frame,
    columns: Sequence[str],
    *,
    joint: bool = True,
    categorical: Sequence[str] = (),
    fixed: Sequence[str] = (),
) -> Design:
    """The covariate columns of an adjustment set.

    Args:
        frame: The rows (a pandas DataFrame).
        columns: The adjustment set.
        joint: One indicator per observed stratum of the categorical columns together (their
            cross product), so a model interacted with it is nonparametric in them; ``False``
            for one set of indicators per column (additive fixed effects, DoWhy's encoding).
        categorical: Numeric columns to read as categories too (a discrete node, say).
        fixed: Columns whose level shares the data's design fixes (panel coordinates: every
            cell and day has one row per world); their indicators are not random.
    """
    columns = list(columns)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise CausalTraceError(f"the data have no column(s) {missing}")
    cats = tuple(c for c in columns if c in categorical or is_categorical(frame[c]))
    nums = tuple(c for c in columns if c not in cats)
    n = len(frame)
    blocks: list[np.ndarray] = []
    names: list[str] = []
    random: list[bool] = []
    if cats:
        coded = [column_codes(frame[c].to_numpy()) for c in cats]
        if joint:
            stacked = np.stack([codes for codes, _ in coded], axis=1)
            combos, strata = np.unique(stacked, axis=0, return_inverse=True)
            labels = [
                "&".join(f"{c}={levels[k]}" for c, (_, levels), k in zip(cats, coded, row))
                for row in combos
            ]
            groups = [(strata.ravel(), labels, any(c not in fixed for c in cats))]
        else:
            groups = [
                (codes, [f"{c}={level}" for level in levels], c not in fixed)
                for c, (codes, levels) in zip(cats, coded)
            ]
        for codes, labels, is_random in groups:
            dummies = np.zeros((n, len(labels)))
            dummies[np.arange(n), codes] = 1.0
            blocks.append(dummies[:, 1:])  # the first level is the baseline
            names += labels[1:]
            random += [is_random] * (len(labels) - 1)
    for c in nums:
        blocks.append(frame[c].to_numpy(dtype=np.float64)[:, None])
        names.append(c)
        random.append(c not in fixed)
    matrix = np.hstack(blocks) if blocks else np.zeros((n, 0))
    return Design(matrix, tuple(names), cats, nums, np.asarray(random, dtype=bool))


def ols(design: np.ndarray, y: np.ndarray, *, names: Sequence[str] = ()) -> OLSFit:
    """Least squares by a QR decomposition.

    Args:
        design: ``(n, p)`` regressors (with the intercept if wanted).
        y: ``(n,)`` outcome.
        names: Column names, to say which are collinear when the design is rank-deficient.

    Raises:
        CausalTraceError: Fewer rows than columns, or collinear columns (a stratum where the
            treatment does not vary, an adjustment column that is constant).
    """
    n, p = design.shape
    if n <= p:
        raise CausalTraceError(
            f"{n} rows cannot fit {p} coefficients; {_fix(_categorical_sources(names))}"
        )
    q, r = np.linalg.qr(design)
    diag = np.abs(np.diag(r))
    tol = diag.max() * max(n, p) * np.finfo(float).eps
    if (diag <= tol).any():
        bad = [names[i] if i < len(names) else str(i) for i in np.flatnonzero(diag <= tol)]
        raise CausalTraceError(collinear_message(bad, p))
    coef = np.linalg.solve(r, q.T @ y)
    r_inv = np.linalg.solve(r, np.eye(p))
    xtx_inv = r_inv @ r_inv.T
    residuals = y - design @ coef
    contributions = (design @ xtx_inv) * residuals[:, None]
    return OLSFit(coef, residuals, contributions, xtx_inv, n - p)


def collinear_message(bad: Sequence[str], n_columns: int) -> str:
    """One line for a rank-deficient design: how many columns, the first three (shortened), the
    categorical adjustment columns they come from, and what to change. Listing every column
    gave a 39 KB message for a joint stratum of four categorical columns."""
    shown = ", ".join(name if len(name) <= 60 else name[:57] + "..." for name in bad[:3])
    if len(bad) > 3:
        shown += f" and {len(bad) - 3} more"
    return (
        f"the regression's columns are collinear: {len(bad)} of {n_columns} ({shown}) are "
        "combinations of the others, a stratum where the treatment does not vary or a constant "
        f"column; {_fix(_categorical_sources(bad))}"
    )


def _categorical_sources(names: Sequence[str]) -> list[str]:
    """The categorical columns behind indicator names (``a=1&b=2``, ``t x a=1``)."""
    parts = (part for name in names for term in name.split(" x ") for part in term.split("&"))
    return sorted({part.split("=", 1)[0] for part in parts if "=" in part})


def _fix(variables: Sequence[str]) -> str:
    if not variables:
        return "drop a constant column, or one the others determine"
    return (
        f"drop or coarsen one of the categorical adjustment columns {', '.join(variables)} "
        "(fewer strata, each holding both treatment values), or fit additive fixed effects "
        "(interacted=False)"
    )


def summed_variance(
    contributions: np.ndarray, clusters: np.ndarray | None = None, *, n_params: int = 0
) -> np.ndarray:
    """The covariance of the sum of per-row contributions ``(n,)`` or ``(n, k)``.

    Rows are independent (the outer products summed), or independent between clusters only
    (each cluster's sum first; CR1's factor ``G / (G - 1) (n - 1) / (n - n_params)``).

    Args:
        contributions: Each row's term of the estimator's first-order error.
        clusters: One code per row, or ``None`` for independent rows.
        n_params: Parameters fitted (for CR1's degrees-of-freedom factor).
    """
    c = contributions if contributions.ndim == 2 else contributions[:, None]
    n = c.shape[0]
    if clusters is None:
        out = c.T @ c
    else:
        codes = np.unique(np.asarray(clusters), return_inverse=True)[1].ravel()
        g = int(codes.max()) + 1
        if g < 2:
            raise CausalTraceError("clustered standard errors need at least two clusters")
        sums = np.zeros((g, c.shape[1]))
        np.add.at(sums, codes, c)
        out = sums.T @ sums * (g / (g - 1)) * ((n - 1) / max(n - n_params, 1))
    return out if contributions.ndim == 2 else out[0, 0]


def logistic(
    design: np.ndarray, target: np.ndarray, *, max_iter: int = 100, tol: float = 1e-10
) -> np.ndarray:
    """Logistic regression coefficients by Newton's method (IRLS).

    Args:
        design: ``(n, p)`` regressors, with the intercept.
        target: ``(n,)`` zeros and ones.
        max_iter: Newton steps before giving up; a converging fit needs about ten.
        tol: Stop when no coefficient moves more than this (relative to its size).

    Raises:
        CausalTraceError: No convergence: the treatment is (nearly) determined by the
            covariates somewhere (no overlap), so the propensity is 0 or 1 and weights blow up.
    """
    beta = np.zeros(design.shape[1])
    for _ in range(max_iter):
        eta = np.clip(design @ beta, -35.0, 35.0)
        p = 1.0 / (1.0 + np.exp(-eta))
        w = p * (1.0 - p)
        hessian = design.T @ (design * w[:, None])
        try:
            step = np.linalg.solve(hessian, design.T @ (target - p))
        except np.linalg.LinAlgError:
            break
        beta = beta + step
        if np.max(np.abs(step)) <= tol * (1.0 + np.max(np.abs(beta))):
            return beta
    raise CausalTraceError(
        "the propensity model did not converge: the treatment is (nearly) determined by the "
        "adjustment set in some stratum (no overlap); coarsen the set or trim the data"
    )
