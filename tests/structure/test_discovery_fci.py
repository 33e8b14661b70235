"""Issue 28: discovery on i.i.d. unit samples scored against the true equivalence classes.

causal-learn's FCI on the services domain's observed columns (which no DAG describes: latent
nodes confound them) against the true PAG, and the same FCI with a d-separation oracle instead
of data reaching that PAG exactly (SHD 0); PC and GES on the example's observed chain against
its CPDAG.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

from causaltrace import load_domain
from causaltrace.structure.graphs import EndpointGraph, scm_truth
from causaltrace.structure.oracle import fci_oracle
from causaltrace.structure.samples import sample_units
from causaltrace.structure.scores import score_graph, shd, sid

# order_queue: a service whose queue depth and consumers vary, so most observed columns do.
SERVICES_UNIT = "service=order_queue&region=us_east"


def standardized(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(0)) / x.std(0)


@pytest.fixture(scope="module")
def services():
    scm = load_domain("services").scm
    rows = sample_units(scm, 300, seed=0, cell=SERVICES_UNIT)
    cols = rows.varying()  # a constant column makes Fisher-z's correlation matrix singular
    return scm, rows, cols, scm_truth(scm, cols, constant=rows.constant)


def test_services_truth_is_a_pag_with_confounding(services):
    scm, rows, cols, truth = services
    assert truth.cpdag is None  # latent demand confounds the load metrics: no DAG
    assert truth.mag.has_bidirected()
    assert {"hits", "connections_pending"} <= set(rows.constant)  # no cache, no pool limit here
    assert set(cols) < set(scm.observed)


def test_fci_oracle_reaches_the_services_pag_exactly(services):
    _, _, cols, truth = services
    dag = truth.dag.to_networkx()  # every node, the constants' edges removed
    found = fci_oracle(dag, cols)
    assert found == truth.pag
    assert shd(truth.pag, found) == 0
    s = score_graph(truth.pag, found)
    assert s.adjacency.f1 == 1.0 and s.adjacency.n_true == truth.pag.n_edges


def test_fci_on_services_samples_is_scored_against_the_pag(services):
    from causallearn.graph.SHD import SHD
    from causallearn.search.ConstraintBased.FCI import fci

    _, rows, cols, truth = services
    with contextlib.redirect_stdout(io.StringIO()):
        g, _ = fci(
            standardized(rows.column_data(cols)),
            "fisherz",
            0.01,
            show_progress=False,
            node_names=list(cols),
        )
    found = EndpointGraph.from_causallearn(g)
    s = score_graph(truth.pag, found)
    # The scorer agrees with causal-learn's own SHD and its counts with the graphs.
    assert s.shd == SHD(truth.pag.to_causallearn(), g).get_shd()
    assert s.adjacency.n_true == truth.pag.n_edges and s.adjacency.n_estimated == found.n_edges
    assert 0 <= s.adjacency.f1 <= 1 and s.shd <= len(cols) * (len(cols) - 1) // 2


def test_pc_and_ges_on_the_example_chain():
    from causallearn.search.ConstraintBased.PC import pc
    from causallearn.search.ScoreBased.GES import ges

    scm = load_domain("example").scm
    rows = sample_units(scm, 1000, seed=0)
    truth = scm_truth(scm, rows.columns, constant=rows.constant)
    x = standardized(rows.rows(0))
    cols = list(rows.columns)
    cg = pc(x, 0.01, "fisherz", stable=True, show_progress=False, node_names=cols)
    found_pc = EndpointGraph.from_causallearn(cg.G)
    found_ges = EndpointGraph.from_causallearn(
        ges(x, score_func="local_score_BIC", node_names=cols)["G"]
    )
    # GES recovers the chain's CPDAG (undirected: the chain, its reversal and the fork are
    # equivalent); SID is over the class's 3 DAGs: 0 (the truth), 3 (the fork), 6 (reversed).
    assert shd(truth.cpdag, found_ges) == 0
    assert sid(truth.column_dag, found_ges).values == (0, 3, 6)
    # PC drops visits --- orders: tracked_orders ~ Binomial(orders, 0.97) is nearly a copy of
    # orders, so given tracked_orders the partial correlation of visits and orders is small;
    # its Fisher z, atanh(r) * sqrt(n - 1 - 3), falls below alpha 0.01's 2.576 (a type II
    # error of a near-deterministic child, not a scorer fault). The scores say exactly that.
    precision = np.linalg.inv(np.corrcoef(x.T))
    r = -precision[0, 1] / np.sqrt(precision[0, 0] * precision[1, 1])
    assert abs(np.arctanh(r) * np.sqrt(len(x) - 4)) < 2.576
    assert found_pc.edge_strings() == ("orders --- tracked_orders",)
    s = score_graph(truth.cpdag, found_pc)
    assert (s.shd, s.adjacency.precision, s.adjacency.recall) == (1, 1.0, 0.5)
