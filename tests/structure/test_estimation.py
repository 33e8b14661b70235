"""Issue 28, item 2: estimators of what identification returns, scored against the exact
effects of shared-noise worlds (:mod:`causaltrace.structure.truth`).

- Coverage: on the example domain (visits -> tracked orders, back-door {channel}), the small
  ads preset (real conversions -> backend revenue, back-door {audience, geo}) and the services
  domain with the caches' hit rate recorded (requests -> hits, back-door {hit_rate}), the
  back-door regression's 95% interval covers the exported true ATE of the same worlds in at
  least 45 of 50 seeds.
- IPW, AIPW and the regression agree on a binarized treatment of a synthetic SCM where all
  three are consistent, and each covers the truth.
- The front-door estimator's delta-method standard error matches its spread over seeds.
- The sandwich variances and the logistic fit equal statsmodels' (when it is installed).
"""

from __future__ import annotations

import numpy as np
import pytest
from _effects_support import binary_treatment_scm, frontdoor_scm, observing

from causaltrace import Do, load_domain
from causaltrace.errors import CausalTraceError
from causaltrace.structure.estimation import (
    aipw,
    backdoor_regression,
    estimate_effect,
    frontdoor_linear,
    ipw,
    normal_quantile,
)
from causaltrace.structure.export import regime_frame, world_seeds
from causaltrace.structure.identification import identify_effect
from causaltrace.structure.regression import covariates, logistic, ols
from causaltrace.structure.truth import true_effect

# 50 seeds, each an independent data set and its own truth. If the interval's true coverage is
# 95%, the number that cover is Binomial(50, 0.95), and fewer than 45 has probability
# P(X <= 44) = 0.038 (scipy.stats.binom.cdf(44, 50, 0.95)): a correct estimator fails this
# check for about one set of seeds in 26. The seeds are fixed, so the outcome is too.
SEEDS, AT_LEAST = 50, 45


def covered(scm, treatment, outcome, treat, control, worlds, **options) -> tuple[int, int]:
    """How many of SEEDS data sets (``worlds`` worlds each, the export's seeds) have a back-door
    interval holding the true ATE of their own worlds; and how many the additive (fixed
    effects) regression's does."""
    answer = identify_effect(scm, treatment, outcome)
    assert answer.kind == "backdoor"
    hits = additive = 0
    for seed in range(SEEDS):
        seeds = world_seeds(seed, 0, worlds)
        frame = regime_frame(scm, scm.observed, seeds)
        truth = true_effect(
            scm,
            outcome,
            f"do:{treatment}={treat}",
            f"do:{treatment}={control}",
            seeds=seeds,
            by=(),
        )
        options = dict(options, treat=treat, control=control)
        hits += backdoor_regression(frame, answer, **options).covers(truth.ate)
        additive += backdoor_regression(frame, answer, interacted=False, **options).covers(
            truth.ate
        )
    return hits, additive


def test_backdoor_interval_covers_the_true_ate_on_the_example_domain():
    """visits -> tracked orders adjusting for the channel (which confounds pooled rows): the
    effect of 1,000 visits, 0.97 x the channel's checkout rate x 1,000, differs by channel
    (29, 14 and 58 orders), so the additive regression, which weights channels by their
    variance of visits, is 23% low and almost never covers; the interacted one does."""
    scm = load_domain("example").scm
    hits, additive = covered(scm, "visits", "tracked_orders", 1000, 0, worlds=2)
    assert hits >= AT_LEAST, hits
    assert additive <= 5, additive  # 23% bias against a 7% standard error


@pytest.mark.slow  # about 20 s: 50 ads worlds of 13,104 rows and their two arms
def test_backdoor_interval_covers_the_true_ate_on_the_small_ads_preset():
    """real conversions -> backend revenue adjusting for audience and geo (both set the order
    value and the conversion rate): one small ads world (312 cells x 42 days) per seed."""
    scm = load_domain("ads", {"preset": "small"}).scm
    hits, _ = covered(scm, "real_conversions", "backend_revenue", 1, 0, worlds=1)
    assert hits >= AT_LEAST, hits


@pytest.mark.slow  # about 40 s: the small preset's 50 worlds, twice
def test_a_campaign_sliced_intervention_is_adjusted_for_its_campaign():
    """Issue 45: the ads panel is nested (a creative belongs to one campaign), and the probe of
    the coordinates a mechanism reads held the creative fixed while testing the campaign, so it
    never saw the campaign (14 ads mechanisms vary by it). With the order value halved on
    brand_search, real conversions -> backend revenue is confounded by the campaign on pooled
    rows: identification now adjusts for it and the interval covers; with the set the probe
    used to give (audience, geo) it does not."""
    from causaltrace import parse_slice
    from causaltrace.model.interventions import Scale

    scm = load_domain("ads", {"preset": "small"}).scm
    where = parse_slice("campaign=brand_search")
    sliced = scm.intervene(Scale("order_value", where=where, factor=0.5))
    answer = identify_effect(sliced, "real_conversions", "backend_revenue")
    assert answer.adjustment_set == {"audience", "campaign", "geo"}, answer.reason
    hits, _ = covered(sliced, "real_conversions", "backend_revenue", 1, 0, worlds=1)
    assert hits >= AT_LEAST, hits
    old, _ = covered(
        sliced,
        "real_conversions",
        "backend_revenue",
        1,
        0,
        worlds=1,
        adjustment=["audience", "geo"],
    )
    assert old <= 5, old  # the review: -9.4% bias, 0 of 30 covering


def test_backdoor_interval_covers_the_true_ate_on_services_with_the_hit_rate_recorded():
    """requests -> hits, for the analyst who also records the caches' hit rate. On the
    domain's graph the effect is unidentified (the latent hit_rate and request_rate confound
    it); with hit_rate observed, {hit_rate} blocks the back-door path requests <- request_rate
    <- hit_rate -> hits. hits is Binomial(requests, hit_rate), so E[hits | requests, hit_rate]
    = requests x hit_rate exactly: the interacted regression is the right model, and its
    average slope is the mean hit rate, about 0.17 (0.93 and 0.92 in the two caches' 6 of 33
    cells, 0 elsewhere). The contrast is 1,000 more requests at 200,000 a bucket, inside both
    caches' ranges; at do(requests=1000) against 0, far below them, each unit's effect is a
    Binomial(1000, hit_rate) draw of the world's uniforms, noise the data cannot show (on
    product_cache's rows alone that interval covered in 38 of 50 seeds).

    Unadjusted, the service confounds (only caches have hits, and product_cache serves the
    most requests): the slope is 4.8 times the ATE. The additive regression (hits ~ requests +
    hit_rate) misses the interaction: 3.4 times. Neither covers in any seed.

    The interval is very conservative here: its standard error (3.7 hits per 1,000 requests)
    is almost all the covariate-sampling term, which takes hit_rate's rows as i.i.d. draws
    although which cells are caches is fixed by the panel, while the estimate's error against
    the worlds' truth has an SD of 0.004. Coverage alone catches only biases above about 4%,
    so the error of one seed is also held to the fit's classical standard error."""
    scm = observing(load_domain("services").scm, "hit_rate")
    answer = identify_effect(scm, "requests", "hits")
    assert (answer.kind, answer.adjustment_set) == ("backdoor", {"hit_rate"})
    treat, control = 201_000, 200_000
    hits, additive = covered(scm, "requests", "hits", treat, control, worlds=1)
    assert hits >= AT_LEAST, hits
    assert additive <= 5, additive  # 3.4 times the ATE
    unadjusted, _ = covered(scm, "requests", "hits", treat, control, worlds=1, adjustment=())
    assert unadjusted <= 5, unadjusted  # 4.8 times the ATE
    seeds = world_seeds(0, 0, 1)
    frame = regime_frame(scm, scm.observed, seeds)
    truth = true_effect(
        scm, "hits", f"do:requests={treat}", f"do:requests={control}", seeds=seeds, by=()
    )
    e = backdoor_regression(frame, answer, treat=treat, control=control)
    assert abs(e.value - truth.ate) < 4 * e.classical_se, (e, truth.ate)


@pytest.fixture(scope="module")
def binary_data(small_panel_module):
    scm = binary_treatment_scm(small_panel_module)
    seeds = world_seeds(0, 0, 40)  # 40 worlds x 120 units: 4,800 rows
    frame = regime_frame(scm, scm.observed, seeds)
    truth = true_effect(scm, "y", Do("dose", value=1.0), Do("dose", value=-1.0), seeds=seeds)
    return scm, frame, truth


@pytest.fixture(scope="module")
def small_panel_module():
    from causaltrace import Dimension, Panel, TimeAxis

    return Panel.cross(
        [Dimension("device", ("mobile", "desktop", "tablet")), Dimension("geo", ("us", "eu"))],
        TimeAxis("2026-01-01", 20, "D"),
    )


def test_ipw_aipw_and_regression_agree_on_a_binarized_treatment(binary_data):
    """dose -> y with back-door {z}: the outcome reads 1{dose > 0}, whose effect is 2 + z
    (ATE 2), and P(dose > 0 | z) = sigmoid(z), so the logistic propensity, the outcome model
    linear in z within arms, and the interacted regression are all right: the three estimates
    of the same data must agree within their standard errors and cover the truth."""
    scm, frame, truth = binary_data
    answer = identify_effect(scm, "dose", "y")
    assert answer.adjustment_set == {"z"}
    estimates = {
        "regression": backdoor_regression(frame, answer, threshold=0.0),
        "ipw": ipw(frame, answer, threshold=0.0),
        "aipw": aipw(frame, answer, threshold=0.0),
    }
    # The per-unit truth is exactly 2 + z: its average over these units is 2 up to z's mean.
    z = frame["z"].to_numpy()
    assert np.allclose(truth.per_unit.ravel(), 2.0 + z)
    z95 = normal_quantile(0.95)
    for name, e in estimates.items():
        assert e.covers(truth.ate), (name, e, truth.ate)
    names = list(estimates)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            ea, eb = estimates[a], estimates[b]
            # Estimates of one quantity from the same rows are positively correlated, so the
            # difference's SE is at most the root-sum-square of the two: a conservative band.
            assert abs(ea.value - eb.value) < z95 * np.hypot(ea.se, eb.se), (ea, eb)
    # AIPW is the efficient one here: its SE is below IPW's (the outcome model removes the
    # variance z puts into y).
    assert estimates["aipw"].se < estimates["ipw"].se


def test_ipw_needs_a_binary_treatment_or_a_threshold(binary_data):
    scm, frame, _ = binary_data
    answer = identify_effect(scm, "dose", "y")
    with pytest.raises(CausalTraceError, match="threshold"):
        ipw(frame, answer)


def test_no_overlap_is_named():
    """A treatment determined by its adjustment set: the regression's columns are collinear
    within strata, the propensity does not converge."""
    import pandas as pd

    from causaltrace.structure.identification import Identification

    rng = np.random.default_rng(0)
    g = rng.integers(0, 3, 600)
    frame = pd.DataFrame({"g": pd.Categorical(g), "t": (g == 2).astype(float)})
    frame["y"] = frame["t"] + rng.normal(size=600)
    answer = Identification("t", "y", "backdoor", frozenset({"g"}), "test")
    with pytest.raises(CausalTraceError, match="collinear"):
        backdoor_regression(frame, answer)
    with pytest.raises(CausalTraceError, match="overlap"):
        ipw(frame, answer)


@pytest.mark.parametrize(
    ("levels", "what"),
    [((8, 9, 10, 12), "cannot fit"), ((3, 3, 4, 5), "collinear")],
    ids=["more-strata-than-rows", "strata-with-one-arm"],
)
def test_collinear_strata_are_named_in_one_short_line(levels, what):
    """Four categorical adjustment columns make more joint strata than 600 rows can fill (or
    strata that hold one treatment value only): issue 45's message listed every column, 39 KB.
    Now one line: the count, at most three examples, the columns they come from, the fix."""
    import pandas as pd

    from causaltrace.structure.identification import Identification

    rng = np.random.default_rng(1)
    columns = {name: rng.integers(0, k, 600) for name, k in zip("abcd", levels)}
    frame = pd.DataFrame({name: pd.Categorical(v) for name, v in columns.items()})
    frame["t"] = rng.integers(0, 2, 600).astype(float)
    frame["y"] = frame["t"] + rng.normal(size=600)
    answer = Identification("t", "y", "backdoor", frozenset(columns), "test")
    with pytest.raises(CausalTraceError, match=what) as raised:
        backdoor_regression(frame, answer)
    message = str(raised.value)
    assert "\n" not in message and len(message) < 600, len(message)
    assert "columns a, b, c, d" in message and "interacted=False" in message, message


def test_a_numeric_adjustment_is_flagged_as_entering_linearly():
    """An outcome that is a product of the treatment and a continuous confounder (as services'
    errors are requests x error_rate): the regression is linear in the confounder and warns,
    naming it (issue 45); stratified on the binned confounder it does not warn."""
    import warnings

    import pandas as pd

    from causaltrace.structure.estimation import AdditiveAdjustmentWarning
    from causaltrace.structure.identification import Identification

    rng = np.random.default_rng(0)
    z = rng.uniform(0.5, 2.0, 2000)
    t = rng.binomial(1, 1 / (1 + np.exp(-2 * (z - 1.2)))).astype(float)
    frame = pd.DataFrame({"t": t, "z": z, "y": 3 * t * z + rng.normal(size=2000)})
    numeric = Identification("t", "y", "backdoor", frozenset({"z"}), "test")
    with pytest.warns(AdditiveAdjustmentWarning, match=r"column\(s\) z enter the model linearly"):
        backdoor_regression(frame, numeric)
    frame["z_bin"] = pd.Categorical(np.digitize(z, [1.0, 1.5]))
    binned = Identification("t", "y", "backdoor", frozenset({"z_bin"}), "test")
    with warnings.catch_warnings():
        warnings.simplefilter("error", AdditiveAdjustmentWarning)
        backdoor_regression(frame, binned)


def test_frontdoor_delta_method_se_matches_the_spread_over_seeds(small_panel_module):
    """u -> x -> m -> y <- u (u hidden): front-door {m}, effect 0.8 x 1.5 = 1.2 per unit of x
    exactly (linear: every unit's effect is 1.2). Over 40 independent data sets the estimates
    center on it and their standard deviation matches the mean delta-method SE: the ratio of
    a sample SD of 40 normal draws to the true SD lies in [0.75, 1.25] with probability about
    0.98 (chi-square with 39 degrees of freedom)."""
    scm = frontdoor_scm(small_panel_module)
    answer = identify_effect(scm, "x", "y")
    assert (answer.kind, answer.adjustment_set) == ("frontdoor", {"m"})
    truth = true_effect(scm, "y", "do:x=1", "do:x=0", seeds=3)
    assert np.allclose(truth.per_unit, 1.2)
    values, ses = [], []
    for seed in range(40):
        frame = regime_frame(scm, scm.observed, world_seeds(seed, 0, 10))
        e = frontdoor_linear(frame, answer)
        values.append(e.value)
        ses.append(e.se)
    values = np.asarray(values)
    ratio = values.std(ddof=1) / np.mean(ses)
    assert 0.75 < ratio < 1.25, ratio
    # The mean of 40 estimates is within 4 of its standard errors of the truth.
    assert abs(values.mean() - truth.ate) < 4 * np.mean(ses) / np.sqrt(40)
    # estimate_effect dispatches on the kind.
    assert estimate_effect(frame, answer).value == e.value


def test_estimate_effect_refuses_what_it_cannot_estimate(small_panel_module):
    from _effects_support import confounded_binary_scm

    scm = confounded_binary_scm(small_panel_module)
    answer = identify_effect(scm, "t", "y")
    frame = regime_frame(scm, scm.observed, world_seeds(0, 0, 2))
    with pytest.raises(CausalTraceError, match="manski_bounds"):
        estimate_effect(frame, answer)
    with pytest.raises(CausalTraceError, match="not by back-door"):
        backdoor_regression(frame, answer)


# -- the regressions against statsmodels ----------------------------------------------------


@pytest.fixture(scope="module")
def regression_data():
    rng = np.random.default_rng(7)
    n = 400
    x = np.column_stack([np.ones(n), rng.normal(size=n), rng.integers(0, 2, n)])
    y = x @ [1.0, 2.0, -1.0] + rng.normal(size=n) * (1 + np.abs(x[:, 1]))  # heteroskedastic
    clusters = rng.integers(0, 25, n)
    return x, y, clusters


@pytest.mark.parametrize("cov_type", ["HC0", "HC1", "HC2", "HC3"])
def test_sandwich_variances_equal_statsmodels(regression_data, cov_type):
    sm = pytest.importorskip("statsmodels.api")
    x, y, _ = regression_data
    fit = ols(x, y)
    theirs = sm.OLS(y, x).fit(cov_type=cov_type)
    assert np.allclose(fit.coef, theirs.params, rtol=1e-10)
    assert np.allclose(fit.robust_cov(cov_type, design=x), theirs.cov_params(), rtol=1e-8)
    classical = sm.OLS(y, x).fit()
    assert np.allclose(fit.classical_cov(), classical.cov_params(), rtol=1e-8)


def test_cluster_variance_equals_statsmodels(regression_data):
    sm = pytest.importorskip("statsmodels.api")
    x, y, clusters = regression_data
    theirs = sm.OLS(y, x).fit(cov_type="cluster", cov_kwds={"groups": clusters})
    assert np.allclose(ols(x, y).robust_cov(clusters=clusters), theirs.cov_params(), rtol=1e-8)


def test_logistic_fit_equals_statsmodels(regression_data):
    sm = pytest.importorskip("statsmodels.api")
    x, _, _ = regression_data
    rng = np.random.default_rng(8)
    t = (rng.random(x.shape[0]) < 1 / (1 + np.exp(-(x @ [-0.5, 1.0, 0.5])))).astype(float)
    theirs = sm.Logit(t, x).fit(disp=0)
    assert np.allclose(logistic(x, t), theirs.params, rtol=1e-7)


def test_joint_and_additive_designs():
    import pandas as pd

    frame = pd.DataFrame(
        {
            "a": pd.Categorical(["x", "y", "x", "y", "x"]),
            "b": ["p", "p", "q", "q", "q"],
            "w": [1.0, 2.0, 3.0, 4.0, 5.0],
        }
    )
    joint = covariates(frame, ["a", "b", "w"], fixed=("a", "b"))
    assert joint.names == ("a=x&b=q", "a=y&b=p", "a=y&b=q", "w")  # strata, first dropped
    assert joint.random.tolist() == [False, False, False, True]
    additive = covariates(frame, ["a", "b", "w"], joint=False)
    assert additive.names == ("a=y", "b=q", "w")
    assert additive.matrix[:, 0].tolist() == [0, 1, 0, 1, 0]
