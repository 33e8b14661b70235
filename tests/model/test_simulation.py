"""Determinism, noise-stream stability, and counterfactual consistency of simulation."""

import numpy as np
import pytest
from _engine_support import chain_nodes

from causaltrace import (
    SCM,
    Decay,
    Do,
    Exogenous,
    Linear,
    Node,
    Normal,
    Pulse,
    Ramp,
    Replace,
    Scale,
    Shift,
    Step,
    Window,
    parse_slice,
)


def _assert_worlds_equal(a, b):
    assert list(a) == list(b)
    for name in a:
        assert a[name].tobytes() == b[name].tobytes(), name


def test_same_seed_same_bytes(chain_scm):
    _assert_worlds_equal(chain_scm.sample(7), chain_scm.sample(7))
    iv = [Shift("y", window=Window(5), delta=1.0)]
    one, two = chain_scm.simulate(iv, seed=7), chain_scm.simulate(iv, seed=7)
    _assert_worlds_equal(one.factual, two.factual)
    _assert_worlds_equal(one.counterfactual, two.counterfactual)


def test_different_seed_different_arrays(chain_scm):
    a, b = chain_scm.sample(7), chain_scm.sample(8)
    for name in a:
        assert not np.array_equal(a[name], b[name]), name


def test_counterfactual_equals_observational_sample(chain_scm):
    worlds = chain_scm.simulate([Shift("y", delta=3.0)], seed=11)
    _assert_worlds_equal(worlds.counterfactual, chain_scm.sample(11))


def test_noise_of_a_node_ignores_other_nodes(small_panel):
    """Adding, removing or editing a node leaves every other node's noise unchanged."""
    base = SCM(chain_nodes(), small_panel).sample(3)
    edited = chain_nodes()
    edited[3] = Node("w", Exogenous(), noise=Normal(5.0))  # edit w
    edited.insert(0, Node("new_root", Exogenous(), noise=Normal()))  # add a node first
    other = SCM(edited, small_panel).sample(3)
    for name in ("x", "y", "z"):
        assert base[name].tobytes() == other[name].tobytes(), name
    np.testing.assert_allclose(other["w"], 5.0 * base["w"])


def test_non_descendants_identical(chain_scm):
    worlds = chain_scm.simulate([Scale("y", factor=3.0)], seed=1)
    assert worlds.affected == {"y", "z"}
    for name in ("x", "w"):
        assert worlds.factual[name] is worlds.counterfactual[name]
    assert not np.array_equal(worlds.factual["z"], worlds.counterfactual["z"])


@pytest.mark.parametrize("profile", [Step(), Ramp(4), Pulse(3), Decay(2.0)])
def test_unitwise_scm_untouched_outside_slice_and_window(chain_scm, profile):
    panel = chain_scm.panel
    sl = parse_slice("device=tablet&geo=eu", panel)
    window = Window(onset=8, end=15, profile=profile)
    worlds = chain_scm.simulate([Shift("x", where=sl, window=window, delta=2.0)], seed=4)
    inside_cells = sl.mask(panel)
    inside_time = window.weights(panel.n_time) > 0
    inside = inside_cells[:, None] & inside_time[None, :]
    for name in ("x", "y", "z"):
        diff = worlds.effect(name)
        assert np.all(diff[~inside] == 0.0), name
        assert np.all(diff[inside] != 0.0), name
    # The shift of x is exactly delta times the profile weight, at every unit.
    expected = 2.0 * window.weights(panel.n_time)[None, :] * inside_cells[:, None]
    np.testing.assert_allclose(worlds.effect("x"), expected)
    # y = 1 + 2x + e: its effect is twice that of x (linear propagation).
    np.testing.assert_allclose(worlds.effect("y"), 2 * expected)


def test_profiles_shape():
    t = np.arange(6, dtype=float)
    np.testing.assert_allclose(Ramp(3).weights(t), [1 / 3, 2 / 3, 1, 1, 1, 1])
    np.testing.assert_allclose(Pulse(2).weights(t), [1, 1, 0, 0, 0, 0])
    np.testing.assert_allclose(Decay(1.0).weights(t)[:3], [1, 0.5, 0.25])
    np.testing.assert_allclose(Window(2, profile=Step()).weights(5), [0, 0, 1, 1, 1])


def test_do_sets_value_and_cuts_parent_influence(chain_scm):
    worlds = chain_scm.simulate([Do("y", value=5.0)], seed=2)
    assert np.all(worlds.factual["y"] == 5.0)
    # z = -y + e: with y fixed, z's factual value is -5 + its own noise.
    z_noise = worlds.counterfactual["z"] + worlds.counterfactual["y"]
    np.testing.assert_allclose(worlds.factual["z"], -5.0 + z_noise)


def test_interventions_compose_in_order(chain_scm):
    shift_then_scale = chain_scm.simulate(
        [Shift("x", delta=1.0), Scale("x", factor=2.0)], seed=9
    ).factual["x"]
    scale_then_shift = chain_scm.simulate(
        [Scale("x", factor=2.0), Shift("x", delta=1.0)], seed=9
    ).factual["x"]
    x = chain_scm.sample(9)["x"]
    np.testing.assert_allclose(shift_then_scale, 2 * (x + 1))
    np.testing.assert_allclose(scale_then_shift, 2 * x + 1)


def test_replace_adds_parent_edge(chain_scm):
    """Replace can read a new parent; the new edge makes w's effect reach z."""
    iv = Replace("y", mechanism=Linear.of(w=10.0), parents=("w",))
    intervened = chain_scm.intervene(iv)
    assert "w" in intervened.parents("y")
    assert "w" not in chain_scm.parents("y")  # the original model is unchanged
    worlds = chain_scm.simulate([iv], seed=5)
    # The new mechanism keeps y's own noise: y = 10 w + e_y, with e_y = y_cf - (1 + 2 x).
    e_y = worlds.counterfactual["y"] - (1.0 + 2.0 * worlds.counterfactual["x"])
    np.testing.assert_allclose(worlds.factual["y"], 10.0 * worlds.factual["w"] + e_y)


def test_values_are_read_only(chain_scm):
    world = chain_scm.sample(0)
    with pytest.raises(ValueError):
        world["x"][0, 0] = 1.0


def test_cross_segment_mechanism_sees_whole_panel(small_panel):
    """A share mechanism (across cells) and a lag (along time) work on the whole panel."""

    def share(pa, u, panel):
        return panel.group_share(pa["x"], ["geo"])

    def lag(pa, u, panel):
        out = np.zeros(panel.shape)
        out[:, 1:] = pa["x"][:, :-1]
        return out

    nodes = [
        Node("x", lambda pa, u, panel: np.exp(u), noise=Normal()),
        Node("share", share, parents=("x",)),
        Node("lagged", lag, parents=("x",)),
    ]
    scm = SCM(nodes, small_panel)
    world = scm.sample(1)
    np.testing.assert_allclose(small_panel.group_sum(world["share"], ["geo"]), 1.0)
    np.testing.assert_array_equal(world["lagged"][:, 1:], world["x"][:, :-1])
    # Scaling x on one device changes the shares of *other* devices too: not unit-wise.
    worlds = scm.simulate([Scale("x", where=parse_slice("device=mobile"), factor=3.0)], seed=1)
    outside = ~parse_slice("device=mobile").mask(small_panel)
    assert np.abs(worlds.effect("share")[outside]).max() > 0


def test_factual_only_simulation_gives_the_same_factual_bytes(chain_scm):
    interventions = [Shift("y", window=Window(5), delta=2.0)]
    both = chain_scm.simulate(interventions, seed=21)
    factual_only = chain_scm.simulate(interventions, seed=21, counterfactual=False)
    assert factual_only.counterfactual is None
    _assert_worlds_equal(both.factual, factual_only.factual)


def test_effect_without_counterfactual_is_a_named_error():
    """``Worlds.effect`` after ``simulate(counterfactual=False)`` names the cause, not a TypeError."""
    from causaltrace import NoCounterfactualError
    from causaltrace_domains.example import ExampleDomain

    scm = ExampleDomain().scm
    node = next(iter(scm.order))
    worlds = scm.simulate([], seed=0, counterfactual=False)
    with pytest.raises(NoCounterfactualError, match="counterfactual=False"):
        worlds.effect(node)
