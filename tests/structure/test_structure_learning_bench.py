"""Issue 14: the structure-learning benchmark's core (bench/structure_learning.py).

Runs the real causal-learn on the example domain at small n; what is asserted follows from the
graph: the true CPDAG of known graphs, PC recovering the per-unit chain, and the pooled-panel
pitfall (a coordinate left out of the columns leaves an edge no conditioning can remove).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "structure_learning.py"


@pytest.fixture(scope="module")
def sl():
    spec = importlib.util.spec_from_file_location("structure_learning_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_true_cpdag_of_known_graphs(sl):
    # a -> c <- b is a v-structure (a, b not adjacent): every DAG in the class has it, and
    # Meek's rule 1 then orients c -> d. Nothing stays undirected.
    marks = sl.edge_marks(sl.true_cpdag("abcd", [("a", "c"), ("b", "c"), ("c", "d")]))
    assert marks == {
        frozenset("ac"): ("a", "c"),
        frozenset("bc"): ("b", "c"),
        frozenset("cd"): ("c", "d"),
    }
    # A chain a -> b -> c is Markov equivalent to its reversal and to the fork: both undirected.
    chain = sl.edge_marks(sl.true_cpdag("abc", [("a", "b"), ("b", "c")]))
    assert chain == {frozenset("ab"): None, frozenset("bc"): None}
    # SHD (causal-learn): the empty graph misses each of the 2 edges.
    truth = sl.true_cpdag("abc", [("a", "b"), ("b", "c")])
    assert sl.score(truth, sl.empty_graph("abc")).shd == 2
    assert sl.score(truth, truth).shd == 0


@pytest.fixture(scope="module")
def cases(sl):
    # n_unit=1000: the weakest true dependence, visits -> orders in the first cell (search,
    # about 400 visits and a 3% checkout rate), has correlation about 0.35, a Fisher z of about
    # 0.35 * sqrt(997) = 11, far past alpha 0.01's 2.6; the seed is fixed.
    return {
        c.name: c
        for c in sl.build_cases("example", n_unit=1000, n_pooled=3000, include_latent=True)
    }


def test_pc_recovers_the_unit_graph(sl, cases):
    unit = cases["unit"]
    assert "tag_fire_rate (constant)" in unit.hidden  # Constant(0.97): removed, not projected
    (result,) = sl.evaluate(unit, ["pc-fisherz"])
    assert result.empty_shd == len(unit.truth_edges) == 4
    # Learning something right: visits -> orders -> tracked_orders are strong (|z| > 10).
    assert result.score.shd < result.empty_shd


def test_pooled_without_coordinates_has_the_channel_edge(sl, cases):
    # Pooled over cells, demand and checkout_rate both vary by channel, which is not a column:
    # no conditioning set of node columns separates them, so PC keeps an edge the truth lacks.
    pooled = cases["pooled"]
    assert ("demand", "checkout_rate") not in pooled.truth_edges
    marks = sl.edge_marks(sl.run_pc(pooled))
    spurious = {frozenset(p) for p in [("demand", "checkout_rate"), ("visits", "checkout_rate")]}
    assert spurious & set(marks)
    # Per unit the same pair is independent (the channel is fixed), and PC finds no such edge.
    assert not spurious & set(sl.edge_marks(sl.run_pc(cases["unit"])))
