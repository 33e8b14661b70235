"""The DoWhy gcm export against the engine: counterfactuals, interventions, attributions.

dowhy is in the ``dowhy`` extra, not the dev one (it caps scipy on Python < 3.13): without it
these tests skip.
"""

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dowhy", reason="the dowhy extra: pip install -e '.[dowhy]'")

from dowhy import gcm
from dowhy.gcm.util.general import set_random_seed
from scipy import stats

from causaltrace import (
    SCM,
    Dimension,
    Do,
    Exogenous,
    Linear,
    Node,
    Normal,
    NotInvertibleError,
    Panel,
    Shift,
    TimeAxis,
    Window,
    abduct_noise,
    counterfactual_from_observations,
    load_domain,
    parse_slice,
    simulate,
)
from causaltrace.interop.dowhy_gcm import frame_to_world, panel_frame, to_gcm


def _linear_scm() -> SCM:
    """x -> y -> z, x -> z, Gaussian additive noise (Var x = 1, Var y = 4.25)."""
    panel = Panel.cross([Dimension("g", ("a", "b", "c"))], TimeAxis("2026-01-01", 40, "D"))
    nodes = [
        Node("x", Exogenous(), noise=Normal(1.0)),
        Node("y", Linear.of(1.0, x=2.0), parents=("x",), noise=Normal(0.5)),
        Node("z", Linear.of(-0.5, x=0.3, y=-1.5), parents=("x", "y"), noise=Normal(0.2)),
    ]
    return SCM(nodes, panel, name="linear")


@pytest.fixture(scope="module")
def example():
    return load_domain("example").scm


def test_export_structure(example):
    model = to_gcm(example)
    assert set(model.graph.nodes) == {*example.order, "channel", "region", "time"}
    assert set(example.graph_view("none").edges()) <= set(model.graph.edges())
    assert {("channel", "demand"), ("time", "demand"), ("region", "orders")} <= set(
        model.graph.edges()
    )
    cell = to_gcm(example, cell=3)
    assert set(cell.graph.nodes) == {*example.order, "time"}


# -- counterfactuals ---------------------------------------------------------------------------


def test_additive_counterfactual_matches_gcm():
    scm = _linear_scm()
    world = dict(scm.sample(4))
    model = to_gcm(scm)
    frame = panel_frame(scm, world)
    for node, value in (("y", 3.0), ("x", -1.0)):
        ours = counterfactual_from_observations(scm, world, [Do(node, value=value)])
        theirs = frame_to_world(
            scm,
            gcm.counterfactual_samples(model, {node: lambda v, c=value: c}, observed_data=frame),
        )
        for name in scm.order:
            # Both subtract f(parents) and add it back in float64: rounding only.
            np.testing.assert_allclose(theirs[name], ours[name], rtol=0, atol=1e-10)
        assert not np.allclose(ours["z"], world["z"])
        # One cell's steps (cell=1): the same answer for that cell.
        one = frame_to_world(
            scm,
            gcm.counterfactual_samples(
                to_gcm(scm, cell=1),
                {node: lambda v, c=value: c},
                observed_data=panel_frame(scm, world, cell=1),
            ),
            cell=1,
        )
        np.testing.assert_allclose(one["z"], ours["z"][1], rtol=0, atol=1e-10)


@pytest.mark.parametrize(
    "node,value", [("demand", 300.0), ("checkout_rate", 0.01), ("orders", 5), ("visits", 40)]
)
def test_example_counterfactual_matches_gcm(example, node, value):
    world = dict(example.sample(6))
    frame = panel_frame(example, world)
    ivs = [Do(node, value=value)]
    # gcm abducts each count's uniform as the midpoint of its interval (count_noise="midpoint");
    # abduct_noise without rng picks the same representative, so the two agree everywhere.
    ours = counterfactual_from_observations(example, world, ivs, noise=abduct_noise(example, world))
    theirs = frame_to_world(
        example,
        gcm.counterfactual_samples(
            to_gcm(example), {node: lambda v, c=value: c}, observed_data=frame
        ),
    )
    for name in example.order:
        # Continuous nodes go through ndtr/ndtri and log/exp on both sides identically;
        # counts are integers. 1e-10 allows the last ulps of values up to ~1e3.
        np.testing.assert_allclose(theirs[name], ours[name], rtol=0, atol=1e-10)
    # The midpoint is one representative: where the observation does not pin a count down,
    # another draw of the uniform gives another answer (so the agreement above is not vacuous).
    if node == "demand":
        drawn = counterfactual_from_observations(example, world, ivs, rng=np.random.default_rng(0))
        assert (drawn["orders"] != ours["orders"]).any()  # unpinned cells do differ


def test_drawn_noise_matches_gcm_given_the_same_noise(example):
    world = dict(example.sample(8))
    ivs = [Do("checkout_rate", value=0.05)]
    noise = abduct_noise(example, world, rng=np.random.default_rng(5))
    ours = counterfactual_from_observations(example, world, ivs, noise=noise)
    frame = panel_frame(example, world)
    noise_frame = frame.copy()
    for name, u in noise.items():
        noise_frame[name] = u.reshape(-1)
    for name in example.order:
        if name not in noise:  # deterministic nodes: gcm's zero noise
            noise_frame[name] = 0.0
    theirs = frame_to_world(
        example,
        gcm.counterfactual_samples(
            to_gcm(example), {"checkout_rate": lambda v: 0.05}, noise_data=noise_frame
        ),
    )
    for name in example.order:
        np.testing.assert_allclose(theirs[name], ours[name], rtol=0, atol=1e-10)


# -- interventional samples --------------------------------------------------------------------


def _ks_rejections(scm, model, ivs, gcm_ivs, node, *, seeds=20, alpha=0.01, n_gcm=2000):
    rejections = 0
    for seed in range(seeds):
        ours = np.asarray(simulate(scm, ivs, seed=seed).factual[node], dtype=float).ravel()
        set_random_seed(seed)
        theirs = gcm.interventional_samples(model, gcm_ivs, num_samples_to_draw=n_gcm)[node]
        rejections += stats.ks_2samp(ours, theirs.to_numpy()).pvalue < alpha
    return rejections


@pytest.mark.parametrize("which", ["linear", "example"])
def test_interventional_samples_match_simulate(example, which):
    if which == "linear":
        scm, ivs, gcm_ivs, node = _linear_scm(), [Do("y", value=3.0)], {"y": lambda v: 3.0}, "z"
    else:
        scm, node = example, "orders"
        ivs, gcm_ivs = [Do("checkout_rate", value=0.02)], {"checkout_rate": lambda v: 0.02}
    model = to_gcm(scm)
    # Under H0 (same law) a two-sample KS p-value is uniform for continuous data and
    # stochastically larger for discrete data (orders) and for our rows, a stratified sample
    # (every unit exactly once, as gcm's empirical coordinate roots draw them at random): so
    # P(p < 0.01) <= 0.01 per seed, and over 20 independent seeds P(3 or more rejections)
    # <= P(Binomial(20, 0.01) >= 3) ~ 0.001.
    assert _ks_rejections(scm, model, ivs, gcm_ivs, node) <= 2
    # Power: the observational law of the same node is rejected almost every time.
    assert _ks_rejections(scm, model, [], gcm_ivs, node, seeds=5) >= 4


# -- attributions ------------------------------------------------------------------------------


def test_arrow_strength_is_the_explained_variance():
    scm = _linear_scm()
    set_random_seed(0)
    strength = gcm.arrow_strength(to_gcm(scm), "z")
    # Removing the arrow p -> z feeds z an independent draw of p; gcm's default measure, the
    # mean increase of z's conditional variance, is then w_p**2 * Var(p) for a linear z:
    # 1.5**2 * Var(y) = 2.25 * (2**2 + 0.5**2) = 9.5625 and 0.3**2 * Var(x) = 0.09. gcm
    # estimates it by Monte Carlo; repeated runs spread by about 2%, so allow 10%.
    assert strength[("y", "z")] == pytest.approx(9.5625, rel=0.1)
    assert strength[("x", "z")] == pytest.approx(0.09, rel=0.1)
    # The coordinates do not enter z's mechanism: their arrows are (Monte Carlo) zero.
    assert abs(strength[("g", "z")]) < 0.01 and abs(strength[("time", "z")]) < 0.01


def test_distribution_change_blames_the_shifted_node():
    scm = _linear_scm()
    old = panel_frame(scm, scm.sample(1))
    new = panel_frame(scm, simulate(scm, [Shift("y", delta=2.0)], seed=2).factual)
    # fit_noise: the true f with a Gaussian noise family fitted to residuals, so the shift of
    # y's noise mean shows up as a change of y's mechanism and only of y's.
    set_random_seed(0)
    change = gcm.distribution_change(
        to_gcm(scm, fit_noise=True),
        old,
        new,
        "z",
        difference_estimation_func=lambda a, b: np.mean(b) - np.mean(a),
    )
    top = max(change, key=lambda k: abs(change[k]))
    assert top == "y"
    # Ground truth: the shift moves E[z] by -1.5 * 2 = -3, all of it through y's mechanism.
    # gcm estimates each mean from a few thousand samples of z (sd ~2.8) and fits y's noise mean
    # on 120 residuals (se 0.5 / sqrt(120) ~ 0.05, times 1.5): 0.5 is several standard errors.
    assert change["y"] == pytest.approx(-3.0, abs=0.5)
    assert all(abs(v) < 0.5 for k, v in change.items() if k != "y")


def test_attribute_anomalies_blames_the_injected_node():
    scm = _linear_scm()
    shock = [Shift("y", delta=5.0, where=parse_slice("g=b"), window=Window(20, 21))]  # 10 sd
    frame = panel_frame(scm, simulate(scm, shock, seed=3).factual)
    anomaly = frame[(frame["g"] == 1) & (frame["time"] == 20)]
    set_random_seed(0)
    scores = gcm.attribute_anomalies(to_gcm(scm), "z", anomaly_samples=anomaly)
    top = max(scores, key=lambda k: float(np.abs(scores[k]).max()))
    assert top == "y"


def test_non_invertible_node_raises_or_is_left_to_fit():
    panel = Panel.cross([Dimension("g", ("a", "b"))], TimeAxis("2026-01-01", 30, "D"))

    def squared(parents, noise, panel):
        return parents["x"] + noise**2

    scm = SCM(
        [
            Node("x", Exogenous(), noise=Normal()),
            Node("y", squared, parents=("x",), noise=Normal()),
        ],
        panel,
    )
    with pytest.raises(NotInvertibleError, match="node 'y'"):
        to_gcm(scm)
    model = to_gcm(scm, unsupported="leave")
    data = pd.concat([panel_frame(scm, scm.sample(s)) for s in range(5)], ignore_index=True)
    gcm.auto.assign_causal_mechanisms(
        model, data, quality=gcm.auto.AssignmentQuality.GOOD, override_models=False
    )
    gcm.fit(model, data)
    assert type(model.causal_mechanism("x")).__name__ == "TrueMechanism"  # exported truth
    assert type(model.causal_mechanism("y")).__name__ != "TrueMechanism"  # learned by gcm
    set_random_seed(0)
    drawn = gcm.draw_samples(model, 500)
    assert drawn["y"].mean() > drawn["x"].mean()  # y = x + noise**2 >= x
