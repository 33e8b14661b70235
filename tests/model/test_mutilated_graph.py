"""Graph views after an intervention: mutilated where hard and whole-panel, as declared otherwise."""

from __future__ import annotations

from itertools import chain, combinations

import numpy as np
import pytest

from causaltrace import (
    SCM,
    Constant,
    Do,
    Exogenous,
    GraphError,
    Linear,
    Node,
    Normal,
    Ramp,
    Replace,
    Scale,
    Shift,
    Window,
    load_domain,
    parse_slice,
)


def _graphs(panel) -> dict[str, SCM]:
    """Chain a -> b -> c, fork b <- a -> c, collider a -> c <- b (each with an isolated d)."""
    specs = {
        "chain": {"b": ("a",), "c": ("b",)},
        "fork": {"b": ("a",), "c": ("a",)},
        "collider": {"c": ("a", "b")},
    }
    out = {}
    for name, parents in specs.items():
        nodes = []
        for n in ("a", "b", "c", "d"):
            ps = parents.get(n, ())
            mech = Linear.of(**{p: 1.0 for p in ps}) if ps else Exogenous()
            nodes.append(Node(n, mech, parents=ps, noise=Normal()))
        out[name] = SCM(nodes, panel, name=name)
    return out


def _queries(names):
    """Every (x, y, given) with x < y and given a subset of the rest."""
    for x, y in combinations(names, 2):
        rest = [n for n in names if n not in (x, y)]
        for given in chain.from_iterable(combinations(rest, k) for k in range(len(rest) + 1)):
            yield x, y, set(given)


@pytest.mark.parametrize("shape", ["chain", "fork", "collider"])
@pytest.mark.parametrize("target", ["a", "b", "c"])
def test_whole_panel_do_matches_pgmpy_do(small_panel, shape, target):
    scm = _graphs(small_panel)[shape]
    done = scm.intervene(Do(target, value=1.0))
    reference = scm.to_pgmpy().do([target])
    assert set(done.graph.edges) == set(reference.edges())
    for x, y, given in _queries(scm.order):
        expected = not reference.is_dconnected(x, y, observed=list(given))
        assert done.d_separated(x, y, given) == expected, (x, y, given)
    assert set(done.to_pgmpy().edges()) == set(reference.edges())


@pytest.mark.parametrize(
    "iv",
    [
        Do("b", where=parse_slice("device=mobile"), value=1.0),
        Do("b", window=Window(5), value=1.0),
        Do("b", window=Window(0, 10), value=1.0),
        Do("b", window=Window(0, profile=Ramp(3)), value=1.0),
        Shift("b", delta=1.0),
        Scale("b", factor=0.5),
        Replace("b", mechanism=lambda parents, noise, panel: noise, parents=()),
    ],
    ids=["sliced", "late-onset", "ended", "ramp", "shift", "scale", "replace-opaque"],
)
def test_partial_or_soft_intervention_keeps_the_observational_graph(small_panel, iv):
    scm = _graphs(small_panel)["chain"]
    after = scm.intervene(iv)
    reference = scm.to_pgmpy()  # no do(): the node still depends on its parents somewhere
    assert set(after.graph.edges) == set(scm.graph.edges)
    assert after.mutilated_nodes() == frozenset()
    for x, y, given in _queries(scm.order):
        expected = not reference.is_dconnected(x, y, observed=list(given))
        assert after.d_separated(x, y, given) == expected, (x, y, given)


def test_explicit_views_and_parent_free_replace(small_panel):
    scm = _graphs(small_panel)["chain"]
    done = scm.intervene(Replace("b", mechanism=Constant(2.0)))
    assert done.mutilated_nodes() == {"b"}
    assert done.d_separated("a", "c")
    assert not done.d_separated("a", "c", mutilated="none")
    assert set(done.graph_view(mutilated="none").edges) == set(scm.graph.edges)
    assert done.parents("b") == () and done.parents("b", mutilated="none") == ("a",)
    assert done.interventions[0].node == "b"
    with pytest.raises(GraphError, match="mutilated"):
        done.graph_view(mutilated="sliced")  # type: ignore[arg-type]


def test_soft_replace_after_do_restores_edges_and_shift_does_not(small_panel):
    scm = _graphs(small_panel)["chain"]
    do = Do("b", value=0.0)
    assert scm.intervene(do, Shift("b", delta=1.0)).mutilated_nodes() == {"b"}
    reread = Replace("b", mechanism=lambda parents, noise, panel: parents["a"] * 2.0)
    assert scm.intervene(do, reread).mutilated_nodes() == frozenset()
    # Interventions applied in two calls accumulate.
    assert scm.intervene(Shift("c", delta=1.0)).intervene(do).mutilated_nodes() == {"b"}


def test_do_on_the_example_domain_cuts_only_the_target():
    scm = load_domain("example").scm
    done = scm.intervene(Do("orders", value=5.0))
    assert done.parents("orders") == ()
    assert done.d_separated("visits", "tracked_orders")
    assert not scm.d_separated("visits", "tracked_orders")
    # Simulation is unaffected by the view: the intervened world sets orders everywhere.
    world = done.sample(seed=0)
    assert np.all(world["orders"] == 5)


# -- panel coordinates: a common cause of pooled data ----------------------------------------


def _residual(values: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Values minus their level mean: the residual of a regression on the level's dummies."""
    means = np.bincount(codes, weights=values) / np.bincount(codes)
    return values - means[codes]


def _fisher_z(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.arctanh(np.corrcoef(a, b)[0, 1]))


def test_pooled_independence_needs_the_panel_coordinates():
    scm = load_domain("example").scm
    plain = {(i.x, o) for i in scm.local_markov() for o in i.others if not i.given}
    assert ("checkout_rate", "visits") in plain  # the plain graph: independent, unconditionally
    with_panel = {i.x: i for i in scm.local_markov(with_panel=True)}
    implied = with_panel["checkout_rate"]
    assert "visits" in implied.others and implied.given == {"channel"}
    assert scm.graph_with_panel().nodes["channel"]["coordinate"] is True

    world = scm.sample(seed=0)
    n_time = scm.panel.n_time
    rate = np.asarray(world["checkout_rate"], dtype=float).ravel()
    visits = np.asarray(world["visits"], dtype=float).ravel()
    channel = np.repeat(scm.panel.codes("channel"), n_time)
    n = rate.size  # 12 cells x 56 days, pooled
    # Under independence, atanh(r) ~ N(0, 1 / (n - 3 - k)) with k conditioning variables
    # (Fisher z); 4 standard errors keep a false failure below 1e-4. k = 2 channel dummies.
    tol_plain = 4.0 / np.sqrt(n - 3)
    tol_given = 4.0 / np.sqrt(n - 3 - 2)
    assert abs(_fisher_z(rate, visits)) > tol_plain  # pooled: channel confounds them
    assert abs(_fisher_z(_residual(rate, channel), _residual(visits, channel))) < tol_given
