"""``to_gcm(scm, mode="fit")``: every domain exports, gcm fits it, and its answers are the
engine's.

dowhy is in the ``dowhy`` extra: without it these tests skip. gcm samples from numpy's global
state (seeded per test); its kernel tests run in-process (``default_n_jobs = 1``) and BLAS /
OpenMP use one thread, so that nothing here depends on the machine's load.
"""

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dowhy", reason="the dowhy extra: pip install -e '.[dowhy]'")

from dowhy import gcm
from dowhy.gcm.util.general import set_random_seed
from dowhy.graph import get_ordered_predecessors
from threadpoolctl import threadpool_limits

from causaltrace import NotInvertibleError, Scale, load_domain, parse_slice, simulate
from causaltrace.interop.dowhy_gcm import (
    CELL,
    export_kinds,
    panel_frame,
    probe_mechanisms,
    residual_change_test,
    to_gcm,
)

MEAN_CHANGE = {"difference_estimation_func": lambda a, b: float(np.mean(b) - np.mean(a))}
# gcm's default mechanism-change test (a kernel test) costs seconds per node even on the
# example's 672 rows; test_int64_count_columns keeps it, the others use the export's.
FAST_TESTS = {
    "independence_test": residual_change_test,
    "conditional_independence_test": residual_change_test,
}


def mean_change(scm, worlds, target, nodes=None, **options) -> dict:
    """gcm's attribution of the change of ``target``'s mean from the counterfactual world (old
    data) to the factual one (new data: the same noise), on the ``mode="fit"`` export, one
    process, gcm's draws seeded."""
    old = panel_frame(scm, worlds.counterfactual, nodes=nodes)
    new = panel_frame(scm, worlds.factual, nodes=nodes)
    set_random_seed(0)
    return gcm.distribution_change(
        to_gcm(scm, mode="fit", nodes=nodes),
        old,
        new,
        target,
        shapley_config=gcm.shapley.ShapleyConfig(n_jobs=1),
        **FAST_TESTS,
        **MEAN_CHANGE,
        **options,
    )


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    monkeypatch.setattr(gcm.config, "default_n_jobs", 1)
    with threadpool_limits(1):
        yield


@pytest.fixture(scope="module")
def example():
    return load_domain("example").scm


@pytest.fixture(scope="module")
def ads():
    return load_domain("ads").scm


@pytest.fixture(scope="module")
def services():
    return load_domain("services").scm


# -- what each node becomes --------------------------------------------------------------------


@pytest.mark.parametrize("domain,node", [("ads", "market_demand"), ("services", "demand")])
def test_exact_mode_refuses_a_mechanism_without_inverse(domain, node):
    with pytest.raises(NotInvertibleError, match=f"node '{node}'.*mode='fit'"):
        to_gcm(load_domain(domain).scm)


def test_example_exports_exactly_in_both_modes(example):
    assert set(export_kinds(to_gcm(example)).values()) == {"coordinate", "true"}
    kinds = export_kinds(to_gcm(example, mode="fit"))
    # Declared inverses stay exact (their noise law is what fit estimates); the Constant tag
    # rate gets a fitted ratio.
    assert {n: kinds[n] for n in example.order} == {
        "demand": "abducted",
        "visits": "abducted",
        "checkout_rate": "abducted",
        "orders": "abducted",
        "tag_fire_rate": "ratio",
        "tracked_orders": "abducted",
    }


@pytest.mark.slow
def test_fit_mode_exports_ads_and_services(ads, services):
    model = to_gcm(ads, mode="fit")
    kinds = export_kinds(model)
    assert set(kinds) == {*ads.order, CELL, *ads.panel.dimension_names, "time"}
    # The ads panel is nested (creatives within campaigns): the root is the cell, each
    # dimension's code a function of it, and every SCM node reads the dimensions and time.
    assert set(model.graph.successors(CELL)) == set(ads.panel.dimension_names)
    assert all(model.graph.has_edge("geo", n) for n in ads.order)
    assert {n: kinds[n] for n in ("tag_fire_rate", "tracked_conversions", "clicks")} == {
        "tag_fire_rate": "ratio",  # a Constant per browser
        "tracked_conversions": "searched",  # a binomial count, monotone in its uniform
        "clicks": "difference",  # a sum of counts, which may be 0
    }
    # Shared shocks, per-segment traits drawn from the first day's noise, group shares and
    # budgets that bind on a campaign's total act across units: learned.
    for node in ("market_demand", "volume_trait", "serving_share", "pacing", "ctr"):
        assert kinds[node] == "learned", node
    assert not probe_mechanisms(ads, ["budget_cutoff_hour"])["budget_cutoff_hour"].local
    kinds = export_kinds(to_gcm(services, mode="fit"))
    assert {n: kinds[n] for n in ("cpu_stolen", "errors", "request_rate", "publish_wait_ms")} == {
        "cpu_stolen": "difference",  # a Constant that is 0 outside noisy neighbours
        "errors": "searched",
        "request_rate": "learned",  # fanned out along the call graph across cells
        "publish_wait_ms": "learned",  # reads the queue's cell from checkout's
    }


def test_projection_onto_observed_nodes(example):
    model = to_gcm(example, mode="fit", nodes=example.observed, coordinates=False)
    # demand and the rates are dropped: visits -> orders -> tracked_orders remains, and each
    # kept node with a dropped parent is learned (visits, with no kept parent, empirical).
    assert set(model.graph.edges()) == {("visits", "orders"), ("orders", "tracked_orders")}
    assert export_kinds(model) == {
        "visits": "empirical",
        "orders": "learned",
        "tracked_orders": "learned",
    }


# -- sampling ----------------------------------------------------------------------------------


def _tolerance(sd: float, mean: float, n_draws: int, n_data: float) -> float:
    return 4 * sd * np.sqrt(1 / n_draws + 1 / n_data) + 1e-9 * max(1.0, abs(mean))


def test_unfitted_fit_mode_samples_the_engine(example):
    """Before fitting, every exact part draws the declared noise: the model is the SCM."""
    set_random_seed(0)
    n_draws, n_worlds = 20_000, 20
    drawn = gcm.draw_samples(to_gcm(example, mode="fit"), n_draws)
    engine = pd.concat([panel_frame(example, example.sample(s)) for s in range(n_worlds)])
    for node in example.order:
        # Units are independent draws in the example (unit-local mechanisms, independent
        # noise): the engine's mean over 20 worlds has standard error sd/sqrt(20 * 672), the
        # model's over its draws sd/sqrt(20000); 4 combined standard errors.
        sd, mean = engine[node].std(), engine[node].mean()
        assert abs(drawn[node].mean() - mean) <= _tolerance(sd, mean, n_draws, len(engine)), node


@pytest.mark.parametrize(
    "domain",
    [
        "example",
        pytest.param("ads", marks=pytest.mark.slow),
        pytest.param("services", marks=pytest.mark.slow),
    ],
)
def test_fitted_model_reproduces_the_data_means(domain, request):
    """Fitted on one world (ads: 20,000 of its units), the model's marginal means are the
    data's, for every node (hidden ones too).

    The model draws rows whose coordinates, noises and residuals are resampled from the data's
    (learned mechanisms: regressions with their residuals): its mean differs from the data's by
    the Monte Carlo error of its draws (sd/sqrt(N)) and by the error of recombining the data's
    rows, at most that of the difference of two independent means of n rows (sd*sqrt(2/n)).
    4 of those combined standard errors. On ads the largest deviations are about 1.6 of them
    (market demand, learned; human clicks, clicks and sessions 3% high: a learned CTR's
    residual recombined with other rows' impressions)."""
    if domain == "ads":
        model, data = request.getfixturevalue("fitted_ads")
        scm = request.getfixturevalue("ads")
    else:
        scm = request.getfixturevalue(domain)
        data = panel_frame(scm, scm.sample(1))
        model = to_gcm(scm, mode="fit")
        gcm.fit(model, data)
    set_random_seed(0)
    n_draws = 20_000
    drawn = gcm.draw_samples(model, n_draws)
    for node in scm.order:
        sd, mean = data[node].std(), data[node].mean()
        tol = _tolerance(sd, mean, n_draws, len(data) / 2)
        assert abs(drawn[node].mean() - mean) <= tol, node


# -- attributions ------------------------------------------------------------------------------


def _engine_change(worlds, target: str) -> float:
    return float(np.mean(worlds.factual[target]) - np.mean(worlds.counterfactual[target]))


@pytest.mark.parametrize(
    "node,where,factor",
    [
        ("tag_fire_rate", "", 0.4),  # TRACKING_LOSS: a Constant, blamed through its ratio
        ("demand", "region=north", 0.6),  # TRAFFIC_DROP on a region, within the shock's range
    ],
)
def test_distribution_change_is_the_engine_change(example, node, where, factor):
    """Old data: the counterfactual world; new: the factual one (the same noise), so the
    change of the target's mean is the intervention's effect, which gcm must give to the
    intervened node alone."""
    worlds = simulate(example, [Scale(node, where=parse_slice(where), factor=factor)], seed=2)
    change = mean_change(example, worlds, "tracked_orders", num_samples=20_000)
    assert max(change, key=lambda k: abs(change[k])) == node
    # Each set function is a difference of means of 20,000 draws of tracked orders (sd 4.7):
    # standard error 4.7 * sqrt(2 / 20000) = 0.047, and a Shapley value combines such
    # differences with weights summing to 1. The fitted laws recombine the 672 units' noises:
    # about 4.7 * sqrt(2 / 672) = 0.26 at most, but only through the changed node's law, on
    # a change that is a fraction of the mean. 0.15: three of the first, a fraction of the
    # second; the engine's changes are -4.1 and -0.71.
    effect = _engine_change(worlds, "tracked_orders")
    assert change[node] == pytest.approx(effect, abs=0.15)
    assert all(abs(v) < 0.15 for k, v in change.items() if k != node)


def test_distribution_change_beyond_the_mechanism_range(example):
    """Halving the search channel's checkout rate is 13.9 sd of its log-normal shock, beyond
    the 7.9 sd the engine's normal quantile reaches (it clips uniforms at 1e-15): the fitted
    noise sits at that edge, so gcm blames the right mechanism but sees part of the change."""
    worlds = simulate(
        example, [Scale("checkout_rate", where=parse_slice("channel=search"), factor=0.5)], seed=2
    )
    change = mean_change(example, worlds, "tracked_orders")
    effect = _engine_change(worlds, "tracked_orders")  # about -1.95
    top = max(change, key=lambda k: abs(change[k]))
    assert top == "checkout_rate"
    # At the edge the rate is cut by 1 - exp(-0.05 * 7.94) = 33% instead of 50%: about two
    # thirds of the effect (a third is lost), not more than the effect.
    assert effect < change[top] < 0.5 * effect


@pytest.mark.slow
def test_int64_count_columns(example):
    """Count columns as the engine's int64 (not panel_frame's floats): the mechanisms return
    floats, so gcm's Shapley sums stay floats (the exact export with gcm's default KL
    estimator failed there with a casting error)."""
    worlds = simulate(example, [Scale("tag_fire_rate", factor=0.4)], seed=2)

    def frame(world):
        out = panel_frame(example, world)
        for name in example.order:
            if np.dtype(example.nodes[name].dtype).kind == "i":
                out[name] = np.asarray(world[name]).reshape(-1)
        return out

    old, new = frame(worlds.counterfactual), frame(worlds.factual)
    assert old["tracked_orders"].dtype == np.int64
    set_random_seed(0)
    change = gcm.distribution_change(
        to_gcm(example, mode="fit"),
        old,
        new,
        "tracked_orders",
        shapley_config=gcm.shapley.ShapleyConfig(n_jobs=1),
    )
    assert all(np.isfinite(float(v)) for v in change.values())
    assert max(change, key=lambda k: abs(change[k])) == "tag_fire_rate"


@pytest.mark.slow
def test_ads_tracking_outage_is_blamed_on_the_tag(ads):
    """A tracking outage (the tag's fire rate cut to a fifth on iOS Safari) on the export of
    the conversion funnel's end: real conversions (learned: their parents are dropped), the tag
    and consent rates (Constants: fitted ratios), tracked and modelled conversions and reported
    conversions (binomial counts: the true mechanisms, their uniforms fitted)."""
    worlds = simulate(
        ads,
        [Scale("tag_fire_rate", where=parse_slice("browser_os=ios_safari"), factor=0.2)],
        seed=2,
    )
    keep = [
        "real_conversions",
        "tag_fire_rate",
        "consent_rate",
        "tracked_conversions",
        "modelled_conversions",
        "conversions",
    ]
    change = mean_change(ads, worlds, "conversions", nodes=keep, num_samples=20_000)
    effect = _engine_change(worlds, "conversions")  # about -0.235 conversions per cell-day
    assert max(change, key=lambda k: abs(change[k])) == "tag_fire_rate"
    # Conversions have sd 4.0 per unit: a difference of means of 20,000 draws has standard
    # error 0.04; 0.1 is 2.5 of them (the fitted uniforms of the 76,608 units add little).
    assert change["tag_fire_rate"] == pytest.approx(effect, abs=0.1)
    assert all(abs(v) < 0.1 for k, v in change.items() if k != "tag_fire_rate")


@pytest.fixture(scope="module")
def fitted_ads(ads):
    """The whole ads export fitted on 20,000 units of one world (few enough per cell that the
    noise laws are pooled over cells)."""
    data = panel_frame(ads, ads.sample(1)).sample(20_000, random_state=0)
    model = to_gcm(ads, mode="fit")
    with threadpool_limits(1):
        gcm.fit(model, data)
    return model, data


@pytest.mark.slow
def test_fitted_ads_mechanisms_invert(ads, fitted_ads):
    """What gcm's anomaly attribution and counterfactuals rely on: each fitted mechanism
    evaluated at the noise it estimates from a row gives the row's value back. Bisection finds
    a uniform to 2**-36 (a count's interval midpoint, so the count exactly); ratios,
    differences and learned residuals invert by arithmetic."""
    model, data = fitted_ads
    rows = data.iloc[:500]
    for node in ads.order:
        mechanism = model.causal_mechanism(node)
        parents = rows[get_ordered_predecessors(model.graph, node)].to_numpy()
        value = rows[node].to_numpy()
        noise = mechanism.estimate_noise(value, parents)
        back = mechanism.evaluate(parents, noise).ravel()
        np.testing.assert_allclose(back, value, rtol=1e-6, atol=1e-9, err_msg=node)


@pytest.mark.slow
def test_attribute_anomalies_on_the_ads_export(ads, fitted_ads):
    """gcm's anomaly attribution runs on the whole fitted ads export and returns finite scores.
    The anomaly: the mobile unit whose conversion rate, raised by half (5 sd of its log-normal
    noise, sd 0.08), is the highest; gcm scores how unusual the rate is among all units, which
    the rate's own noise and its segment's trait (learned: a high trait is unusual too) explain.

    gcm combines the anomalous unit's noises with ``num_distribution_samples`` drawn ones, so
    the unit repeats that many times in a row set, and a mechanism placed on the panel
    evaluates each repeat in its own pass over the 76,608 units: a few hundred samples keep
    it to seconds per set of players (gcm's default, 3,000, to minutes)."""
    model, _ = fitted_ads
    shocked = simulate(ads, [Scale("cvr", where=parse_slice("device=mobile"), factor=1.5)], seed=3)
    frame = panel_frame(ads, shocked.factual)
    mobile = frame[frame["device"] == ads.panel.dimension("device").levels.index("mobile")]
    anomaly = mobile.loc[[mobile["cvr"].idxmax()]]
    set_random_seed(0)
    scores = gcm.attribute_anomalies(
        model,
        "cvr",
        anomaly_samples=anomaly,
        num_distribution_samples=200,
        shapley_config=gcm.shapley.ShapleyConfig(n_jobs=1),
    )
    values = {k: float(np.asarray(v, dtype=float).ravel()[0]) for k, v in scores.items()}
    assert values and all(np.isfinite(v) for v in values.values())
    assert values["cvr"] > 0
    assert "cvr" in sorted(values, key=lambda k: -values[k])[:2]
