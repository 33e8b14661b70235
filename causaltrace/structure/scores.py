"""Scores of a learned graph against the truth: SHD, SID, and precision / recall / F1.

Every score takes two :class:`~causaltrace.structure.graphs.EndpointGraph` over the same node
names (in any order), so a CPDAG, a PAG, a MAG or a DAG is scored by the same code:

- :func:`shd`: the structural Hamming distance, the number of unordered node pairs whose edge
  differs: present in one graph only, or present in both with a different mark at either end.
  A reversed edge counts 1, ``a --> b`` against ``a --- b`` counts 1 (CPDAGs), ``a o-> b``
  against ``a --> b`` counts 1 (PAGs). This is causal-learn's ``SHD`` (``causallearn.graph.SHD``,
  which a test recomputes) and Tsamardinos et al.'s (2006) SHD between PDAGs.
- :func:`adjacency_scores`: precision, recall and F1 of the skeleton (the adjacent pairs).
- :func:`endpoint_scores`, :func:`orientation_scores`: of the endpoints carrying a given mark:
  ``(pair, node)`` with that mark at ``node``. Orientation scores count arrowheads (Tetrad's
  arrowhead precision and recall), the one mark that means the same in every class (``b`` is
  not an ancestor of ``a``); in a DAG or CPDAG each directed edge has one arrowhead, so they
  are the precision and recall of directed edges (a reversed edge is a false positive and a
  false negative). A missing edge's marks count as missing.
- :func:`sid`: the structural intervention distance (Peters and Bühlmann 2015) between a true
  DAG and an estimated DAG or CPDAG (bounds over the DAGs of a CPDAG).

F1 is ``2 TP / (estimated + true)``, the harmonic mean of precision and recall where both are
defined, 0 when one graph has none of the items and the other some, NaN when neither has any.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import networkx as nx
import numpy as np

from causaltrace.errors import GraphError
from causaltrace.structure.graphs import ARROW, CIRCLE, NO_EDGE, TAIL, EndpointGraph


@dataclass(frozen=True)
class PRF:
    """Counts behind a precision / recall / F1 triple.

    Args:
        true_positives: Items in both graphs.
        n_estimated: Items in the estimated graph.
        n_true: Items in the true graph.
    """

    true_positives: int
    n_estimated: int
    n_true: int

    @property
    def precision(self) -> float:
        return self.true_positives / self.n_estimated if self.n_estimated else math.nan

    @property
    def recall(self) -> float:
        return self.true_positives / self.n_true if self.n_true else math.nan

    @property
    def f1(self) -> float:
        total = self.n_estimated + self.n_true
        return 2 * self.true_positives / total if total else math.nan


def _prf(truth: Iterable, estimate: Iterable) -> PRF:
    t, e = set(truth), set(estimate)
    return PRF(len(t & e), len(e), len(t))


def _aligned(truth: EndpointGraph, estimate: EndpointGraph) -> EndpointGraph:
    """``estimate`` with ``truth``'s node order; both must have the same node names."""
    if set(truth.nodes) != set(estimate.nodes):
        differ = sorted(set(truth.nodes) ^ set(estimate.nodes))
        raise GraphError(f"the graphs have different nodes: {differ}")
    return estimate if estimate.nodes == truth.nodes else estimate.reordered(truth.nodes)


def shd(truth: EndpointGraph, estimate: EndpointGraph) -> int:
    """Structural Hamming distance: node pairs whose edge differs (see the module docstring).

    Args:
        truth: The true graph (DAG, CPDAG, MAG or PAG).
        estimate: The learned graph, over the same node names.
    """
    e = _aligned(truth, estimate).marks
    t = truth.marks
    differ = (t != e) | (t.T != e.T)
    return int(np.count_nonzero(np.triu(differ, 1)))


def adjacency_scores(truth: EndpointGraph, estimate: EndpointGraph) -> PRF:
    """Precision, recall and F1 of the adjacent pairs (marks ignored)."""
    return _prf(truth.skeleton(), _aligned(truth, estimate).skeleton())


def _endpoints(g: EndpointGraph, mark: int) -> set[tuple[frozenset[str], str]]:
    i, j = np.nonzero(g.marks == mark)
    return {
        (frozenset((g.nodes[a], g.nodes[b])), g.nodes[a])
        for a, b in zip(i.tolist(), j.tolist(), strict=True)
    }


def endpoint_scores(truth: EndpointGraph, estimate: EndpointGraph, mark: int) -> PRF:
    """Precision, recall and F1 of the endpoints with ``mark`` (``ARROW``, ``TAIL`` or
    ``CIRCLE``): an endpoint is a node on an adjacent pair.

    Args:
        truth: The true graph.
        estimate: The learned graph, over the same node names.
        mark: The endpoint mark counted.
    """
    if mark not in (TAIL, ARROW, CIRCLE):
        raise GraphError(f"endpoint_scores: mark must be TAIL, ARROW or CIRCLE, got {mark}")
    return _prf(_endpoints(truth, mark), _endpoints(_aligned(truth, estimate), mark))


def orientation_scores(truth: EndpointGraph, estimate: EndpointGraph) -> PRF:
    """Arrowhead precision, recall and F1 (see the module docstring)."""
    return endpoint_scores(truth, estimate, ARROW)


@dataclass(frozen=True)
class GraphScores:
    """Every mark-level score of one estimate against one truth.

    Args:
        shd: Structural Hamming distance.
        adjacency: Skeleton precision / recall / F1.
        arrowheads: Arrowhead (orientation) precision / recall / F1.
        tails: Tail precision / recall / F1 (in a PAG, a tail says "is an ancestor").
    """

    shd: int
    adjacency: PRF
    arrowheads: PRF
    tails: PRF


def score_graph(truth: EndpointGraph, estimate: EndpointGraph) -> GraphScores:
    """:func:`shd`, :func:`adjacency_scores` and the arrowhead and tail
    :func:`endpoint_scores` of ``estimate`` against ``truth``."""
    return GraphScores(
        shd(truth, estimate),
        adjacency_scores(truth, estimate),
        endpoint_scores(truth, estimate, ARROW),
        endpoint_scores(truth, estimate, TAIL),
    )


# -- SID ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SID:
    """Structural intervention distance: one value per pair of (true DAG, estimated DAG).

    Args:
        lower: The smallest value (the best DAG of an estimated CPDAG).
        upper: The largest value (the worst one).
        values: Every value, sorted; one when both graphs are DAGs.
    """

    lower: int
    upper: int
    values: tuple[int, ...]


def sid(truth: EndpointGraph, estimate: EndpointGraph, *, max_dags: int = 10_000) -> SID:
    """Structural intervention distance (Peters and Bühlmann 2015).

    For every ordered pair ``(i, j)``, ``i != j``, the estimate's causal effect of ``i`` on
    ``j`` is what adjusting for ``i``'s parents in the estimate gives; the pair counts 1 when
    that is wrong for some distribution Markov to the true DAG ``G``:

    - if ``j`` is a parent of ``i`` in the estimate, the estimate says the effect is zero, which
      is wrong iff ``j`` is a descendant of ``i`` in ``G``;
    - otherwise ``Z = pa_est(i)`` must be an adjustment set for ``(i, j)`` in ``G`` (Shpitser,
      VanderWeele and Robins 2010; Perković et al. 2015): no node of ``Z`` descends from a node
      ``w != i`` on a directed path from ``i`` to ``j``, and ``Z`` d-separates ``i`` from ``j``
      once the first edge of every such path is removed (the proper back-door graph), which is
      plain d-separation in ``G`` when ``j`` does not descend from ``i``.

    A CPDAG (as an estimate, or as the truth, as bnlearn's ``sid`` allows) stands for the DAGs
    of its class (the orientations of its undirected edges that add no unshielded collider and
    no cycle); the result lists the SID of every pair and its bounds, as the reference R
    package reports ``sidLowerBound`` and ``sidUpperBound`` for a CPDAG estimate.

    Args:
        truth: The true DAG (or CPDAG).
        estimate: The estimated DAG or CPDAG, over the same node names.
        max_dags: The most DAGs a CPDAG may stand for (enumerating a large class is slow).

    Raises:
        GraphError: Different nodes, a bidirected or circle mark, a PDAG no DAG extends, or more
            than ``max_dags`` DAGs in a class.
    """
    estimate = _aligned(truth, estimate)
    truths = dag_members(truth, max_dags=max_dags)
    estimates = dag_members(estimate, max_dags=max_dags)
    values = sorted(_sid_dags(t, e) for t in truths for e in estimates)
    return SID(values[0], values[-1], tuple(values))


def dag_members(pdag: EndpointGraph, *, max_dags: int = 10_000) -> list[np.ndarray]:
    """The DAGs a PDAG stands for, as 0/1 parent matrices (``A[p, c] = 1`` for ``p --> c``):
    every orientation of its undirected edges with no directed cycle and no unshielded collider
    the PDAG does not have (its consistent extensions; for a CPDAG, its Markov equivalence
    class). A DAG stands for itself.

    Args:
        pdag: A graph of directed (``-->``) and undirected (``---``) edges.
        max_dags: Stop with an error beyond this many.

    Raises:
        GraphError: A bidirected or circle mark, no consistent extension, or too many.
    """
    m = pdag.marks
    if ((m == CIRCLE).any()) or ((m == ARROW) & (m.T == ARROW)).any():
        raise GraphError("SID needs DAGs or CPDAGs: the graph has a circle or a bidirected edge")
    adj = m != NO_EDGE
    directed = (m == TAIL) & (m.T == ARROW)  # directed[i, j]: i --> j
    undirected = [
        (int(i), int(j)) for i, j in zip(*np.nonzero(np.triu((m == TAIL) & (m.T == TAIL), 1)))
    ]
    out: list[np.ndarray] = []

    def reaches(d: np.ndarray, src: int, dst: int) -> bool:
        seen, stack = {src}, [src]
        while stack:
            for w in np.flatnonzero(d[stack.pop()]).tolist():
                if w == dst:
                    return True
                if w not in seen:
                    seen.add(w)
                    stack.append(w)
        return False

    def allowed(d: np.ndarray, a: int, b: int) -> bool:
        """a --> b closes no cycle and makes no unshielded collider at b."""
        if reaches(d, b, a):
            return False
        return not any(p != a and not adj[p, a] for p in np.flatnonzero(d[:, b]).tolist())

    def extend(d: np.ndarray, k: int) -> None:
        if k == len(undirected):
            out.append(d.astype(np.int8))
            if len(out) > max_dags:
                raise GraphError(f"SID: the class has more than {max_dags} DAGs (max_dags)")
            return
        i, j = undirected[k]
        for a, b in ((i, j), (j, i)):
            if allowed(d, a, b):
                d[a, b] = True
                extend(d, k + 1)
                d[a, b] = False

    for a, b in zip(*np.nonzero(directed), strict=True):  # the PDAG's own edges, checked
        if reaches(directed, int(b), int(a)):
            raise GraphError("SID: the graph has a directed cycle")
    extend(directed.copy(), 0)
    if not out:
        raise GraphError("SID: no DAG extends this PDAG (its orientations conflict)")
    return out


def _sid_dags(g: np.ndarray, h: np.ndarray) -> int:
    """SID between two DAGs given as 0/1 parent matrices (see :func:`sid`)."""
    k = len(g)
    graph = nx.DiGraph()
    graph.add_nodes_from(range(k))
    graph.add_edges_from(zip(*np.nonzero(g), strict=True))
    desc = np.eye(k, dtype=bool)  # desc[i, j]: j is i or a descendant of i in G
    for v in reversed(list(nx.topological_sort(graph))):
        for c in np.flatnonzero(g[v]).tolist():
            desc[v] |= desc[c]
    wrong = 0
    for i in range(k):
        z = set(np.flatnonzero(h[:, i]).tolist())
        for j in range(k):
            if j == i:
                continue
            if j in z:
                wrong += bool(desc[i, j])
                continue
            if not desc[i, j]:
                wrong += not nx.is_d_separator(graph, {i}, {j}, z)
                continue
            on_path = desc[i] & desc[:, j]  # descendants of i that are ancestors of j
            on_path[i] = False
            forbidden = desc[on_path].any(axis=0)
            if any(forbidden[v] for v in z):
                wrong += 1
                continue
            cut = [(i, c) for c in np.flatnonzero(g[i]).tolist() if on_path[c]]
            graph.remove_edges_from(cut)
            wrong += not nx.is_d_separator(graph, {i}, {j}, z)
            graph.add_edges_from(cut)
    return wrong
