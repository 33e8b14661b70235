"""Counterfactuals from observations (abduction, action, prediction) against ``simulate``.

``simulate(scm, ivs, seed)`` gives a world without the interventions (``counterfactual``) and the
world with them (``factual``) from the same drawn noise. Handing the world without them to
``counterfactual_from_observations`` must give back the world with them: exactly where the
observation determines it (continuous invertible nodes, pinned counts), and in distribution
where a count's uniform is only known to lie in an interval.
"""

import numpy as np
import pytest

from causaltrace import (
    SCM,
    AbductionError,
    Dimension,
    Do,
    Exogenous,
    InvertibleMechanism,
    Linear,
    Mechanism,
    Node,
    Normal,
    NotInvertibleError,
    Panel,
    Scale,
    Shift,
    TimeAxis,
    Window,
    abduct_noise,
    counterfactual_from_observations,
    load_domain,
    parse_slice,
    simulate,
)
from causaltrace.model.noise import NoiseStreams


def _linear_scm() -> SCM:
    panel = Panel.cross([Dimension("g", ("a", "b", "c"))], TimeAxis("2026-01-01", 40, "D"))
    nodes = [
        Node("x", Exogenous(), noise=Normal(1.0)),
        Node("y", Linear.of(1.0, x=2.0), parents=("x",), noise=Normal(0.5)),
        Node("z", Linear.of(-0.5, x=0.3, y=-1.5), parents=("x", "y"), noise=Normal(0.2)),
    ]
    return SCM(nodes, panel, name="linear")


def test_additive_noise_counterfactual_equals_simulate():
    scm = _linear_scm()
    for ivs in (
        [Do("y", value=3.0)],
        [Shift("x", delta=1.5, window=Window(10))],
        [Scale("y", factor=0.5, where=parse_slice("g=b"))],
    ):
        worlds = simulate(scm, ivs, seed=11)
        got = counterfactual_from_observations(scm, dict(worlds.counterfactual), ivs)
        for name in scm.order:
            # Abduction subtracts and the prediction adds back the same float64 terms: a few
            # ulps of values of order 10 (1e-12 is far above that, far below any effect).
            np.testing.assert_allclose(got[name], worlds.factual[name], rtol=0, atol=1e-12)
        assert not np.allclose(got["z"], worlds.counterfactual["z"])  # the effect is there


def test_abducted_noise_is_the_drawn_noise():
    scm = _linear_scm()
    world = scm.sample(5)
    noise = abduct_noise(scm, dict(world))
    streams = NoiseStreams(5)
    for name in scm.order:
        drawn = scm.nodes[name].noise.draw(streams.generator(name), scm.panel.shape)
        np.testing.assert_allclose(noise[name], drawn, rtol=0, atol=1e-12)


@pytest.fixture(scope="module")
def example():
    return load_domain("example").scm


def test_example_continuous_nodes_and_count_intervals_hold_the_truth(example):
    world = example.sample(2)
    noise = abduct_noise(example, dict(world))
    streams = NoiseStreams(2)
    for name in ("demand", "checkout_rate"):  # invertible (log-normal shock): exact
        drawn = example.nodes[name].noise.draw(streams.generator(name), example.panel.shape)
        # ndtr(ndtri(u)) loses relative precision of 1 - u near u = 1: 1e-9 covers it.
        np.testing.assert_allclose(noise[name], drawn, rtol=0, atol=1e-9)
    # Counts: the true uniform lies in the abducted interval (F(x-1), F(x)].
    for name in ("visits", "orders", "tracked_orders"):
        node = example.nodes[name]
        drawn = node.noise.draw(streams.generator(name), example.panel.shape)
        lo, hi = node.mechanism.noise_interval(
            {p: world[p] for p in node.parents}, world[name], example.panel
        )
        assert ((drawn > lo) & (drawn <= hi)).all(), name


def test_pinned_counts_need_no_rng_and_match_simulate(example):
    # A Do on the constant tag rate only touches tracked_orders, whose parameters change
    # everywhere; setting it to 1 makes the counterfactual count equal orders for every uniform,
    # so every cell is pinned and no rng is needed.
    ivs = [Do("tag_fire_rate", value=1.0)]
    worlds = simulate(example, ivs, seed=4)
    got = counterfactual_from_observations(example, dict(worlds.counterfactual), ivs)
    for name in example.order:
        np.testing.assert_array_equal(got[name], worlds.factual[name])
    np.testing.assert_array_equal(got["tracked_orders"], got["orders"])


def test_unpinned_counts_need_an_rng_and_are_deterministic_where_pinned(example):
    ivs = [Scale("checkout_rate", factor=0.5, where=parse_slice("channel=email"))]
    worlds = simulate(example, ivs, seed=4)
    observed = dict(worlds.counterfactual)
    with pytest.raises(AbductionError, match=r"'orders'.*does not pin down"):
        counterfactual_from_observations(example, observed, ivs)
    a = counterfactual_from_observations(example, observed, ivs, rng=np.random.default_rng(0))
    b = counterfactual_from_observations(example, observed, ivs, rng=np.random.default_rng(1))
    email = parse_slice("channel=email").mask(example.panel)
    for name in ("orders", "tracked_orders"):
        # Outside the slice nothing changed: pinned, equal to the observation and the truth.
        np.testing.assert_array_equal(a[name][~email], worlds.factual[name][~email])
        np.testing.assert_array_equal(b[name][~email], worlds.factual[name][~email])
    assert (a["orders"][email] != b["orders"][email]).any()  # the slice is drawn


def test_drawn_counterfactual_counts_follow_the_true_posterior(example):
    # Over seeds, (observation, our counterfactual) and (observation, simulate's factual) are
    # draws of the same joint law: compare the mean drop in orders on the intervened slice.
    ivs = [Scale("checkout_rate", factor=0.5, where=parse_slice("channel=search"))]
    mask = parse_slice("channel=search").mask(example.panel)
    ours, truth = [], []
    for seed in range(30):
        worlds = simulate(example, ivs, seed=seed)
        observed = dict(worlds.counterfactual)
        got = counterfactual_from_observations(
            example, observed, ivs, rng=np.random.default_rng(1000 + seed)
        )
        ours.append((observed["orders"] - got["orders"])[mask].mean())
        truth.append((observed["orders"] - worlds.factual["orders"])[mask].mean())
    ours, truth = np.array(ours), np.array(truth)
    # Both estimate the same expected drop (about half of ~12 daily search orders per cell);
    # their difference over 30 seeds has standard error sd(diff) / sqrt(30): allow 4 of them.
    diff = ours - truth
    assert abs(diff.mean()) < 4 * diff.std(ddof=1) / np.sqrt(len(diff)) + 1e-9
    assert truth.mean() > 3  # a real effect, so the comparison can fail


def test_non_invertible_descendant_is_named():
    panel = Panel.cross([Dimension("g", ("a", "b"))], TimeAxis("2026-01-01", 5, "D"))

    def squared(parents, noise, panel):
        return parents["x"] + noise**2  # noise sign is lost: not invertible

    scm = SCM(
        [
            Node("x", Exogenous(), noise=Normal()),
            Node("y", squared, parents=("x",), noise=Normal()),
            Node("z", Linear.of(y=1.0), parents=("y",), noise=Normal()),
        ],
        panel,
    )
    world = dict(scm.sample(0))
    with pytest.raises(NotInvertibleError, match=r"node 'y'.*neither an InvertibleMechanism"):
        counterfactual_from_observations(scm, world, [Shift("x", delta=1.0)])
    # Nodes outside the intervention's reach need no abduction: y is kept as observed.
    got = counterfactual_from_observations(scm, world, [Shift("z", delta=1.0)])
    np.testing.assert_array_equal(got["y"], world["y"])
    np.testing.assert_allclose(got["z"], world["z"] + 1.0, rtol=0, atol=1e-12)


def test_invertibility_is_declared_not_guessed():
    """A mechanism with an ``invert`` method that does not subclass InvertibleMechanism is not
    inverted, and the error says what to declare; declaring it makes the same node invertible."""
    panel = Panel.cross([Dimension("g", ("a", "b"))], TimeAxis("2026-01-01", 5, "D"))

    class Undeclared:
        def __call__(self, parents, noise, panel):
            return parents["x"] + noise

        def invert(self, parents, value, panel):
            return value - parents["x"]

    class Declared(Undeclared, InvertibleMechanism):
        pass

    def scm_with(mechanism):
        nodes = [Node("x", Exogenous(), noise=Normal()), Node("y", mechanism, ("x",), Normal())]
        return SCM(nodes, panel)

    assert isinstance(Exogenous(), InvertibleMechanism) and isinstance(Linear(), Mechanism)
    world = dict(scm_with(Declared()).sample(0))
    with pytest.raises(NotInvertibleError, match=r"defines invert\(\) but does not declare"):
        counterfactual_from_observations(scm_with(Undeclared()), world, [Shift("x", delta=1.0)])
    got = counterfactual_from_observations(scm_with(Declared()), world, [Shift("x", delta=1.0)])
    np.testing.assert_allclose(got["y"], world["y"] + 1.0, rtol=0, atol=1e-12)


def test_bad_observations_are_named(example):
    world = dict(example.sample(0))
    partial = {k: v for k, v in world.items() if k != "visits"}
    with pytest.raises(AbductionError, match="missing \\['visits'\\]"):
        counterfactual_from_observations(example, partial, [])
    wrong = {**world, "orders": world["orders"][:, :3]}
    with pytest.raises(AbductionError, match="node 'orders' has shape"):
        counterfactual_from_observations(example, wrong, [])
    impossible = {**world, "orders": world["visits"] + 1}  # more orders than visits
    with pytest.raises(AbductionError, match=r"'orders'.*probability zero"):
        counterfactual_from_observations(
            example, impossible, [Do("checkout_rate", value=0.01)], rng=np.random.default_rng(0)
        )


def test_given_noise_is_reused_and_checked(example):
    ivs = [Do("demand", value=300.0)]
    worlds = simulate(example, ivs, seed=9)
    observed = dict(worlds.counterfactual)
    noise = abduct_noise(example, observed, rng=np.random.default_rng(3))
    a = counterfactual_from_observations(example, observed, ivs, noise=noise)
    b = counterfactual_from_observations(example, observed, ivs, noise=noise)
    for name in example.order:
        np.testing.assert_array_equal(a[name], b[name])
    bad = {**noise, "visits": np.zeros(example.panel.shape)}
    with pytest.raises(AbductionError, match=r"'visits'.*does not reproduce"):
        counterfactual_from_observations(example, observed, ivs, noise=bad)
