"""Issue 28, item 6: sensitivity to unobserved confounding (E-values, omitted-variable bias and
robustness values) and bounds for an unidentified effect, against textbook numbers, exact
algebraic identities, and the simulated truth."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _effects_support import confounded_binary_scm
from scipy import stats

from causaltrace import Do
from causaltrace.errors import CausalTraceError
from causaltrace.structure.estimation import backdoor_regression
from causaltrace.structure.export import regime_frame, world_seeds
from causaltrace.structure.identification import Identification, identify_effect
from causaltrace.structure.regression import ols
from causaltrace.structure.sensitivity import (
    bias_adjusted,
    confounding_sweep,
    e_value,
    e_value_smd,
    manski_bounds,
    robustness_value,
)
from causaltrace.structure.truth import true_effect


def test_e_value_of_vanderweele_and_ding():
    """VanderWeele and Ding (2017), the breastfeeding example: RR 3.9 (95% CI 1.8 to 8.7).
    By hand: 3.9 + sqrt(3.9 x 2.9) = 3.9 + 3.363 = 7.26; the lower limit 1.8 + sqrt(1.8 x 0.8)
    = 1.8 + 1.2 = 3.0."""
    e = e_value(3.9, 1.8, 8.7)
    assert e.point == pytest.approx(7.26, abs=0.005)
    assert e.ci == pytest.approx(3.0, abs=1e-12)
    # A protective ratio is inverted first; an interval holding 1 has E-value 1.
    assert e_value(1 / 3.9).point == pytest.approx(e.point)
    assert e_value(0.8, 0.7, 0.95).ci == pytest.approx(
        1 / 0.95 + np.sqrt(1 / 0.95 * (1 / 0.95 - 1))
    )
    assert e_value(1.5, 0.9, 2.5).ci == 1.0
    assert np.isnan(e_value(2.0).ci)
    with pytest.raises(CausalTraceError, match="does not hold"):
        e_value(2.0, 2.5, 3.0)


def test_e_value_of_a_standardized_mean_difference():
    """d = 0.5 (SE 0.1): RR ~ exp(0.91 x 0.5) = exp(0.455) = 1.576, E = 1.576 + sqrt(1.576 x
    0.576) = 2.529; the lower limit exp(0.455 - 1.78 x 0.1) = exp(0.277) = 1.319 gives
    1.319 + sqrt(1.319 x 0.319) = 1.967."""
    e = e_value_smd(0.5, 0.1)
    assert e.rr == pytest.approx(1.576, abs=5e-4)
    assert e.point == pytest.approx(2.529, abs=5e-4)
    assert e.ci == pytest.approx(1.967, abs=5e-4)


def test_robustness_value_of_cinelli_and_hazlett():
    """Cinelli and Hazlett (2020), Darfur: the effect of being directly harmed on peace
    attitudes, t = 4.18445 with 783 degrees of freedom. Their Table 1: partial R^2 of the
    treatment with the outcome 2.19%, RV_q=1 13.88%, RV_q=1,alpha=0.05 7.63%. By hand:
    f = 4.18445 / sqrt(783) = 0.14954, RV = (sqrt(f^4 + 4 f^2) - f^2) / 2 = 0.1388."""
    r = robustness_value(4.18445 * 0.02325654, 0.02325654, 783)
    assert r.partial_r2 == pytest.approx(0.0219, abs=5e-5)
    assert r.rv == pytest.approx(0.1388, abs=5e-5)
    assert r.rv_alpha == pytest.approx(0.0763, abs=5e-5)
    assert robustness_value(0.1, 0.1, 783).rv_alpha == 0.0  # t = 1: not significant anyway


@pytest.fixture(scope="module")
def confounded():
    """y = 1.0 d + 0.5 x + 0.8 z + e and d = 0.5 x + 0.7 z + e: z is the omitted confounder."""
    rng = np.random.default_rng(11)
    n = 2_000
    x, z = rng.normal(size=n), rng.normal(size=n)
    d = 0.5 * x + 0.7 * z + rng.normal(size=n)
    y = 1.0 * d + 0.5 * x + 0.8 * z + rng.normal(size=n)
    return pd.DataFrame({"d": d, "x": x, "z": z, "y": y})


def test_omitted_variable_bias_is_exact_in_sample(confounded):
    """The short regression (z omitted) moved by the formula with z's sample partial R^2 values
    is the long regression (z adjusted for), coefficient and classical standard error alike:
    an identity of least squares (Frisch-Waugh-Lovell), so to rounding."""
    answer = Identification("d", "y", "backdoor", frozenset({"x"}), "test")
    short = backdoor_regression(confounded, answer, interacted=False)
    long = backdoor_regression(confounded, answer, adjustment=["x", "z"], interacted=False)
    # Partial R^2 of z with the treatment given x: the squared correlation of residuals.
    ones = np.ones(len(confounded))
    on_x = np.column_stack([ones, confounded["x"]])
    rd = ols(on_x, confounded["d"].to_numpy()).residuals
    rz = ols(on_x, confounded["z"].to_numpy()).residuals
    r2_dz = np.corrcoef(rd, rz)[0, 1] ** 2
    # Partial R^2 of z with the outcome given d and x: from z's t statistic in the long fit.
    full = np.column_stack([ones, confounded[["d", "x", "z"]].to_numpy()])
    fit = ols(full, confounded["y"].to_numpy())
    t_z = fit.coef[3] / np.sqrt(fit.classical_cov()[3, 3])
    r2_yz = t_z**2 / (t_z**2 + fit.dof)
    adjusted, adjusted_se = bias_adjusted(short, r2_dz=r2_dz, r2_yz=r2_yz)
    assert adjusted == pytest.approx(long.value, rel=1e-10)
    assert adjusted_se == pytest.approx(long.classical_se, rel=1e-10)
    assert short.value > 1.25 and abs(long.value - 1.0) < 0.1  # z inflated the short one


def test_the_sweep_crosses_zero_at_the_robustness_value(confounded):
    """At r2_dz = r2_yz = RV_1 the adjusted estimate is 0, and at RV_1,alpha the adjusted t
    statistic is the critical one: the definitions of the two values."""
    answer = Identification("d", "y", "backdoor", frozenset({"x"}), "test")
    short = backdoor_regression(confounded, answer, interacted=False)
    r = robustness_value(short)
    at_rv, _ = bias_adjusted(short, r2_dz=r.rv, r2_yz=r.rv)
    assert abs(at_rv) < 1e-9 * abs(short.value)
    at_alpha, se_alpha = bias_adjusted(short, r2_dz=r.rv_alpha, r2_yz=r.rv_alpha)
    assert at_alpha / se_alpha == pytest.approx(stats.t.ppf(0.975, short.dof - 1), rel=1e-8)
    sweep = confounding_sweep(short, r2_dz=[0.0, r.rv], r2_yz=[0.0, r.rv])
    assert sweep.estimate[0, 0] == pytest.approx(short.value)
    assert abs(sweep.estimate[1, 1]) < 1e-9
    assert sweep.estimate[1, 0] == sweep.estimate[0, 1] == pytest.approx(short.value)
    assert len(sweep.table()) == 4 and sweep.robustness == r


def test_manski_bounds_contain_the_true_effect(small_panel):
    """u (hidden) confounds a binary treatment and a binary outcome: unidentified. The true
    effect (0.3, from shared-noise worlds) lies within the no-assumption bounds, whose width
    is the outcome's range, 1; the naive difference of means (biased by u) is outside the
    truth's 4-SE band, so the bounds are what is left to say."""
    scm = confounded_binary_scm(small_panel)
    assert identify_effect(scm, "t", "y").kind == "unidentified"
    seeds = world_seeds(0, 0, 50)
    frame = regime_frame(scm, scm.observed, seeds)
    truth = true_effect(scm, "y", Do("t", value=1.0), Do("t", value=0.0), seeds=seeds)
    bounds = manski_bounds(frame["t"], frame["y"], y_min=0.0, y_max=1.0)
    assert bounds.contains(truth.ate) and bounds.ci_low < bounds.low
    assert bounds.high - bounds.low == pytest.approx(1.0)
    treated = frame["t"] == 1
    naive = frame.loc[treated, "y"].mean() - frame.loc[~treated, "y"].mean()
    assert abs(naive - truth.ate) > 4 * truth.ate_se + 0.05  # confounded by u: +0.2 or so
    with pytest.raises(CausalTraceError, match="leaves"):
        manski_bounds(frame["t"], frame["y"] * 2, y_min=0.0, y_max=1.0)
