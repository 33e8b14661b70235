"""Identification by delegation to pgmpy, checked against pgmpy on textbook graphs."""

from __future__ import annotations

import warnings

import pytest

from causaltrace import SCM, Do, Exogenous, GraphError, Linear, Node, Normal, load_domain
from causaltrace.structure.identification import (
    Identification,
    backdoor_adjustment_sets,
    frontdoor_adjustment_sets,
    identify,
    identify_effect,
)

# name -> (edges, latent nodes)
TEXTBOOK = {
    "backdoor": ([("Z", "X"), ("Z", "Y"), ("X", "Y")], set()),
    "frontdoor": ([("U", "X"), ("U", "Y"), ("X", "M"), ("M", "Y")], {"U"}),
    "unidentified": ([("U", "X"), ("U", "Y"), ("X", "Y")], {"U"}),
}


def _scm(edges, latent, panel) -> SCM:
    names = sorted({n for e in edges for n in e})
    parents = {n: tuple(u for u, v in edges if v == n) for n in names}
    nodes = [
        Node(
            n,
            Linear.of(**{p: 1.0 for p in parents[n]}) if parents[n] else Exogenous(),
            parents=parents[n],
            noise=Normal(),
            observed=n not in latent,
        )
        for n in names
    ]
    return SCM(nodes, panel, name="textbook")


def _pgmpy_sets(edges, latent):
    """pgmpy's answers on its own DAG, built without causaltrace."""
    with warnings.catch_warnings():  # pgmpy 1.x warns about its own deprecations
        warnings.simplefilter("ignore", FutureWarning)
        from pgmpy.base import DAG
        from pgmpy.inference import CausalInference

        inference = CausalInference(DAG(edges, latents=latent))
        try:
            back = inference.get_all_backdoor_adjustment_sets("X", "Y")
            back = {frozenset()} if back == frozenset() else set(back)
        except ValueError:
            back = set()
        front = set(inference.get_all_frontdoor_adjustment_sets("X", "Y"))
    return back, front


@pytest.mark.parametrize("name", sorted(TEXTBOOK))
def test_textbook_graphs_agree_with_pgmpy(small_panel, name):
    edges, latent = TEXTBOOK[name]
    scm = _scm(edges, latent, small_panel)
    back, front = _pgmpy_sets(edges, latent)
    assert set(backdoor_adjustment_sets(scm, "X", "Y")) == back
    assert set(frontdoor_adjustment_sets(scm, "X", "Y")) == front
    result = identify_effect(scm, "X", "Y")
    assert isinstance(result, Identification)
    assert result.kind == name


def test_textbook_answers(small_panel):
    def ident(name):
        return identify_effect(_scm(*TEXTBOOK[name], small_panel), "X", "Y")

    assert ident("backdoor").adjustment_set == {"Z"}
    front = ident("frontdoor")
    assert front.adjustment_set == {"M"} and front.identified
    none = ident("unidentified")
    assert none.adjustment_set is None and not none.identified
    assert "U" in none.reason


def test_do_on_the_treatment_removes_the_confounding(small_panel):
    scm = _scm(*TEXTBOOK["unidentified"], small_panel)
    done = scm.intervene(Do("X", value=1.0))  # whole panel: the mutilated graph has no U -> X
    assert identify_effect(done, "X", "Y").adjustment_set == frozenset()


def test_example_domain():
    scm = load_domain("example").scm
    # Per unit no adjustment is needed; pooled rows need the channel (tests/structure/
    # test_panel_identification.py checks the numbers), which the default adds.
    unit = identify_effect(scm, "visits", "tracked_orders", pooled=False)
    assert unit.kind == "backdoor" and unit.adjustment_set == frozenset()
    result = identify_effect(scm, "visits", "tracked_orders")
    assert result.kind == "backdoor" and result.adjustment_set == {"channel"}
    assert identify_effect(scm, "tracked_orders", "visits").kind == "no_effect"
    latent = identify_effect(scm, "checkout_rate", "orders")
    assert latent.kind == "unidentified" and "checkout_rate" in latent.reason
    with pytest.raises(GraphError, match="checkout_rate"):
        backdoor_adjustment_sets(scm, "checkout_rate", "orders")
    with pytest.raises(GraphError, match="'nope'"):
        identify_effect(scm, "visits", "nope")
    with pytest.raises(GraphError, match="'nope'"):
        frontdoor_adjustment_sets(scm, "nope", "orders")


# -- the enumeration bound (issue 45) -------------------------------------------------------------
def _all_observed(domain: str):
    import networkx as nx

    graph = load_domain(domain).scm.graph_view().copy()
    nx.set_node_attributes(graph, True, "observed")  # a table with the latent columns exported
    return graph


@pytest.mark.parametrize(
    ("treatment", "outcome"),
    [("requests", "errors"), ("queue_depth", "latency_p99_ms"), ("utilisation", "errors")],
)
def test_past_the_bound_a_minimal_backdoor_set_is_found_without_enumerating(treatment, outcome):
    """The services graph with every node observed: pgmpy's enumeration of every subset of the
    candidates did not return in 4 minutes. Past ``max_enumerated`` one minimal set is found
    (networkx) and the reason names the bound; the set is a valid back-door set (it blocks every
    back-door path and holds no descendant of the treatment) and is minimal (no node can go)."""
    import networkx as nx

    from causaltrace.structure.identification import MAX_ENUMERATED

    graph = _all_observed("services")
    candidates = set(graph) - {treatment, outcome} - nx.descendants(graph, treatment)
    assert len(candidates) > MAX_ENUMERATED  # the bound applies on the default
    answer = identify(graph, treatment, outcome)
    assert answer.kind == "backdoor", answer.reason
    assert f"more than max_enumerated={MAX_ENUMERATED}" in answer.reason
    cut = graph.copy()
    cut.remove_edges_from(list(cut.out_edges(treatment)))
    z = set(answer.adjustment_set)
    assert z <= candidates and nx.is_d_separator(cut, {treatment}, {outcome}, z)
    assert all(not nx.is_d_separator(cut, {treatment}, {outcome}, z - {n}) for n in z)


def test_under_the_bound_pgmpy_lists_every_set_and_both_paths_agree():
    """On a graph small enough to enumerate, a bound of 0 takes the networkx path and names it,
    a bound above the candidates gives pgmpy's list; the minimal set found without enumerating
    is one of pgmpy's minimal sets."""
    import networkx as nx

    graph = nx.DiGraph(
        [
            ("A", "Z1"),
            ("Z1", "X"),
            ("Z1", "Y"),
            ("B", "Z2"),
            ("Z2", "X"),
            ("Z2", "Y"),
            ("X", "M"),
            ("M", "Y"),
            ("C", "Y"),
        ]
    )
    nx.set_node_attributes(graph, True, "observed")
    small = identify(graph, "X", "Y", max_enumerated=0)
    full = identify(graph, "X", "Y", max_enumerated=64)
    assert "max_enumerated=0" in small.reason and "(pgmpy)" in full.reason
    assert small.kind == full.kind == "backdoor"
    assert small.adjustment_set in full.alternatives
    assert full.adjustment_set == frozenset({"Z1", "Z2"})
