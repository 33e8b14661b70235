"""Every validation error names its culprit."""

import numpy as np
import pytest

from causaltrace import (
    SCM,
    CycleError,
    Exogenous,
    GraphError,
    InterventionError,
    Linear,
    MechanismError,
    Node,
    Normal,
    Shift,
    Window,
    parse_slice,
)


def test_cycle_reported_with_nodes_in_order(small_panel):
    nodes = [
        Node("a", Linear.of(c=1.0), parents=("c",)),
        Node("b", Linear.of(a=1.0), parents=("a",)),
        Node("c", Linear.of(b=1.0), parents=("b",)),
        Node("root", Exogenous(), noise=Normal()),
    ]
    with pytest.raises(CycleError) as info:
        SCM(nodes, small_panel)
    cycle = info.value.cycle
    assert sorted(cycle) == ["a", "b", "c"]
    # The message follows the edges: each node is followed by its child.
    k = cycle.index("a")
    assert cycle[k:] + cycle[:k] == ["a", "b", "c"]
    assert "a -> b -> c -> a" in str(info.value)


def test_unknown_parent_names_node_and_parent(small_panel):
    with pytest.raises(GraphError, match=r"node 'y' has unknown parent 'ghost'"):
        SCM([Node("y", Linear.of(ghost=1.0), parents=("ghost",))], small_panel)


def test_duplicate_node(small_panel):
    node = Node("x", Exogenous(), noise=Normal())
    with pytest.raises(GraphError, match="duplicate node name 'x'"):
        SCM([node, node], small_panel)


def test_self_loop(small_panel):
    with pytest.raises(GraphError, match="'x' lists itself"):
        Node("x", Linear.of(x=1.0), parents=("x",))


def test_wrong_shape_names_node(small_panel):
    bad = Node("bad", lambda pa, u, panel: np.zeros(3))
    with pytest.raises(MechanismError, match=r"node 'bad'.*shape \(3,\).*\(6, 20\)"):
        SCM([bad], small_panel)


def test_wrong_dtype_names_node(small_panel):
    bad = Node("counts", lambda pa, u, panel: np.zeros(panel.shape), dtype="int64")
    with pytest.raises(MechanismError, match=r"node 'counts'.*dtype float64.*int64"):
        SCM([bad], small_panel)


def test_non_array_output_names_node(small_panel):
    with pytest.raises(MechanismError, match=r"node 'scalar'.*returned float"):
        SCM([Node("scalar", lambda pa, u, panel: 1.0)], small_panel)


def test_raising_mechanism_names_node(small_panel):
    def broken(pa, u, panel):
        raise ZeroDivisionError("boom")

    with pytest.raises(MechanismError, match=r"node 'fragile'.*ZeroDivisionError: boom"):
        SCM([Node("fragile", broken)], small_panel)


def test_intervention_on_unknown_node(chain_scm):
    with pytest.raises(InterventionError, match="unknown node 'nope'"):
        chain_scm.intervene(Shift("nope", delta=1.0))


def test_intervention_with_unknown_level(chain_scm):
    with pytest.raises(Exception, match="unknown level 'phone'"):
        chain_scm.intervene(Shift("x", where=parse_slice("device=phone"), delta=1.0))


def test_intervention_onset_past_panel(chain_scm):
    with pytest.raises(InterventionError, match="onset 99"):
        chain_scm.intervene(Shift("x", window=Window(99), delta=1.0))


def test_unknown_intervention_point(chain_scm):
    with pytest.raises(InterventionError, match="no intervention point 'BUDGET_CAP'"):
        chain_scm.point("BUDGET_CAP")


def test_unknown_node_in_graph_query(chain_scm):
    with pytest.raises(GraphError, match="no node 'q'"):
        chain_scm.descendants("q")
