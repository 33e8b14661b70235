"""causal-learn's PC and FCI run with a d-separation oracle instead of a statistical test.

With an oracle every conditional-independence answer is exact, so a correct PC returns the
CPDAG and a correct FCI the PAG of the true graph over the given columns (the rest latent): what
the learners converge to with infinite data. These runs are an independent computation of the
truth in :mod:`causaltrace.structure.graphs` (causal-learn's code, not ours), and a check that
a learner's implementation reaches its target. causal-learn is imported on call (it is the
dev extra's).

causal-learn 0.1.4.8's FCI is not always the PAG (a test pins both cases on small random graphs,
against the PAG enumerated by brute force): its R5 does not check that the two ends of the
circle path are uncovered, so it can turn circles into ``---`` edges, which need selection
variables; and its R9 misses some uncovered potentially directed paths, leaving ``o->`` where
the PAG has ``-->``. On the domains' graphs (example, services, ads observed columns) it
returns the PAG exactly.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence

import networkx as nx
import numpy as np

from causaltrace.errors import GraphError
from causaltrace.structure.graphs import EndpointGraph


def _oracle_dag(dag: nx.DiGraph, columns: Sequence[str]) -> nx.DiGraph:
    """The DAG with column ``k`` renamed ``k`` (causal-learn's d-separation test asks about
    column indices); latent nodes keep their names, which are strings, so they cannot clash."""
    missing = sorted(set(columns) - set(dag.nodes))
    if missing:
        raise GraphError(f"oracle: columns {missing} are not in the DAG")
    return nx.relabel_nodes(dag, {c: i for i, c in enumerate(columns)}, copy=True)


def fci_oracle(dag: nx.DiGraph, columns: Sequence[str]) -> EndpointGraph:
    """causal-learn's FCI over ``columns`` with d-separation in ``dag`` as its test.

    Args:
        dag: The DAG over every node (``SCM.graph_view("none")``).
        columns: The observed nodes, in output order; the others are latent.
    """
    # optional: causal-learn is the dev extra's; only the oracle runs need it
    from causallearn.search.ConstraintBased.FCI import fci

    placeholder = np.zeros((len(columns) + 1, len(columns)))  # the oracle never reads data
    with contextlib.redirect_stdout(io.StringIO()):  # FCI prints some orientations
        g, _ = fci(
            placeholder,
            "d_separation",
            true_dag=_oracle_dag(dag, columns),
            show_progress=False,
            node_names=list(columns),
        )
    return EndpointGraph.from_causallearn(g)


def pc_oracle(dag: nx.DiGraph, columns: Sequence[str]) -> EndpointGraph:
    """causal-learn's PC over ``columns`` with d-separation in ``dag`` as its test (the CPDAG
    when no latent node confounds two columns).

    Args:
        dag: The DAG over every node.
        columns: The observed nodes, in output order.
    """
    # optional: causal-learn is the dev extra's; only the oracle runs need it
    from causallearn.search.ConstraintBased.PC import pc

    placeholder = np.zeros((len(columns) + 1, len(columns)))
    with contextlib.redirect_stdout(io.StringIO()):
        cg = pc(
            placeholder,
            0.05,
            "d_separation",
            true_dag=_oracle_dag(dag, columns),
            show_progress=False,
            node_names=list(columns),
        )
    return EndpointGraph.from_causallearn(cg.G)
