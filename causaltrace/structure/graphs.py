"""True equivalence classes of a domain's graph over any subset of its columns.

Structure learners do not return a DAG: PC and GES return a CPDAG (the Markov equivalence class
of a DAG, when every variable is a column), FCI a PAG (the class of a maximal ancestral graph,
when some variables are hidden). Scoring them against the true DAG punishes what no learner can
know, so this module derives the truth each learner should converge to in the large-sample
limit, from the declared DAG:

- :func:`cpdag`: a DAG's CPDAG: its unshielded colliders, then Meek's rules R1-R3 (Meek 1995:
  from a DAG's pattern, without background knowledge, R1-R3 orient every compelled edge);
- :func:`mag`: the maximal ancestral graph over kept columns, the rest latent (no selection
  variables; Richardson and Spirtes 2002): two columns are adjacent when no set of columns
  d-separates them in the DAG, and the edge is ``a --> b`` when ``a`` is an ancestor of ``b``,
  ``a <-> b`` when neither is an ancestor of the other;
- :func:`pag`: the MAG's partial ancestral graph, FCI's output with a perfect independence
  oracle: the MAG's skeleton with circles, its unshielded colliders, then Zhang's (2008) rules
  R1-R4 and R8-R10 to a fixed point (R5-R7 only fire with selection variables);
- :func:`true_graphs` / :func:`scm_truth`: all of them for a column subset of a DAG or SCM.

Every graph is an :class:`EndpointGraph`: node names and a matrix of endpoint marks in
causal-learn's ``GeneralGraph.graph`` convention, so a causal-learn result converts by reading
its matrix (:meth:`EndpointGraph.from_causallearn`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property

import networkx as nx
import numpy as np

from causaltrace.errors import GraphError
from causaltrace.model.scm import SCM

NO_EDGE = 0
TAIL = -1
ARROW = 1
CIRCLE = 2
MARKS = (TAIL, ARROW, CIRCLE)
_LEFT = {TAIL: "-", ARROW: "<", CIRCLE: "o"}
_RIGHT = {TAIL: "-", ARROW: ">", CIRCLE: "o"}
_FROM_LEFT = {v: k for k, v in _LEFT.items()}
_FROM_RIGHT = {v: k for k, v in _RIGHT.items()}
# pcalg's amat.pag codes: amat[a, b] is the mark at b (0 none, 1 circle, 2 arrowhead, 3 tail).
_PCALG = {NO_EDGE: 0, CIRCLE: 1, ARROW: 2, TAIL: 3}


@dataclass(frozen=True, eq=False)
class EndpointGraph:
    """A graph whose edges carry a mark at each end: a DAG, CPDAG, MAG or PAG.

    ``marks[i, j]`` is the mark at node ``i`` on the edge between ``i`` and ``j``: ``0`` no edge,
    ``-1`` tail (:data:`TAIL`), ``1`` arrowhead (:data:`ARROW`), ``2`` circle (:data:`CIRCLE`).
    This is causal-learn's ``GeneralGraph.graph``: ``i --> j`` is ``marks[i, j] = -1,
    marks[j, i] = 1``; ``i --- j`` is ``-1, -1``; ``i <-> j`` is ``1, 1``; ``i o-> j`` is
    ``2, 1``. One format for every class, so one scorer compares any two of them.

    Args:
        nodes: Node names (unique); the matrix's row and column order.
        marks: A square integer matrix of endpoint marks (copied, stored read-only).

    Raises:
        GraphError: Duplicate names, a shape that does not match, an unknown mark, a self-loop,
            or an edge marked at one end only.
    """

    nodes: tuple[str, ...]
    marks: np.ndarray

    def __post_init__(self) -> None:
        nodes = tuple(str(n) for n in self.nodes)
        marks = np.array(self.marks, dtype=np.int8)
        if len(set(nodes)) != len(nodes):
            dupes = sorted({n for n in nodes if nodes.count(n) > 1})
            raise GraphError(f"EndpointGraph: duplicate node names {dupes}")
        if marks.shape != (len(nodes), len(nodes)):
            raise GraphError(f"EndpointGraph: marks of shape {marks.shape} for {len(nodes)} nodes")
        unknown = sorted(set(np.unique(marks).tolist()) - {NO_EDGE, *MARKS})
        if unknown:
            raise GraphError(f"EndpointGraph: unknown endpoint marks {unknown} (use -1, 1, 2)")
        if np.diagonal(marks).any():
            raise GraphError("EndpointGraph: a node has an edge to itself")
        half = np.argwhere((marks == NO_EDGE) != (marks.T == NO_EDGE))
        if len(half):
            i, j = half[0]
            raise GraphError(
                f"EndpointGraph: edge {nodes[i]}-{nodes[j]} has a mark at one end only"
            )
        marks.setflags(write=False)
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "marks", marks)

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def empty(cls, nodes: Iterable[str]) -> EndpointGraph:
        """The graph with no edges over ``nodes``."""
        nodes = tuple(nodes)
        return cls(nodes, np.zeros((len(nodes), len(nodes)), dtype=np.int8))

    @classmethod
    def from_edges(cls, nodes: Iterable[str], edges: Iterable[str]) -> EndpointGraph:
        """A graph from edge texts: ``"a --> b"``, ``"a <-> b"``, ``"a o-> b"``, ``"a o-o b"``,
        ``"a --- b"``, ``"a <-- b"``, ``"a <-o b"`` (the mark at ``a``, a dash, the mark at
        ``b``; what :meth:`edge_strings` prints).

        Args:
            nodes: Every node name, in matrix order.
            edges: Edge texts; a pair may appear once.

        Raises:
            GraphError: A malformed text, an unknown node, or a pair given twice.
        """
        nodes = tuple(nodes)
        index = {n: i for i, n in enumerate(nodes)}
        marks = np.zeros((len(nodes), len(nodes)), dtype=np.int8)
        for text in edges:
            parts = text.split()
            if len(parts) != 3 or len(parts[1]) != 3 or parts[1][1] != "-":
                raise GraphError(f"edge {text!r}: expected 'a --> b' (marks < - o, > - o)")
            a, sym, b = parts
            if sym[0] not in _FROM_LEFT or sym[2] not in _FROM_RIGHT:
                raise GraphError(f"edge {text!r}: unknown mark in {sym!r}")
            for n in (a, b):
                if n not in index:
                    raise GraphError(f"edge {text!r}: unknown node {n!r}")
            i, j = index[a], index[b]
            if i == j or marks[i, j]:
                raise GraphError(f"edge {text!r}: a self-loop or a pair given twice")
            marks[i, j], marks[j, i] = _FROM_LEFT[sym[0]], _FROM_RIGHT[sym[2]]
        return cls(nodes, marks)

    @classmethod
    def from_directed(cls, nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> EndpointGraph:
        """A directed graph from ``(parent, child)`` pairs (acyclicity is not checked here:
        see :meth:`is_dag`)."""
        nodes = tuple(nodes)
        return cls.from_edges(nodes, [f"{u} --> {v}" for u, v in edges])

    @classmethod
    def from_networkx(cls, g: nx.DiGraph, nodes: Sequence[str] | None = None) -> EndpointGraph:
        """A ``networkx.DiGraph`` as a directed graph (node order ``nodes``, default ``g``'s)."""
        nodes = tuple(g.nodes) if nodes is None else tuple(nodes)
        if set(nodes) != set(g.nodes):
            raise GraphError("from_networkx: nodes must be exactly the graph's nodes")
        return cls.from_directed(nodes, g.edges())

    @classmethod
    def from_causallearn(cls, graph) -> EndpointGraph:
        """A causal-learn ``GeneralGraph`` (``pc(...).G``, ``fci(...)[0]``, ``ges(...)["G"]``):
        its node names and its ``graph`` matrix, which uses this class's convention."""
        return cls(tuple(n.get_name() for n in graph.get_nodes()), np.asarray(graph.graph))

    # -- conversion ----------------------------------------------------------------------------
    def to_causallearn(self):
        """This graph as a causal-learn ``GeneralGraph`` (for causal-learn's own tools)."""
        # optional: causal-learn is the dev extra's; only this converter needs it
        from causallearn.graph.Edge import Edge
        from causallearn.graph.Endpoint import Endpoint
        from causallearn.graph.GeneralGraph import GeneralGraph
        from causallearn.graph.GraphNode import GraphNode

        graph_nodes = [GraphNode(n) for n in self.nodes]
        g = GeneralGraph(graph_nodes)
        for i, j in zip(*np.triu_indices(len(self.nodes), 1), strict=True):
            if self.marks[i, j]:
                end_i, end_j = Endpoint(int(self.marks[i, j])), Endpoint(int(self.marks[j, i]))
                # add_edge refuses some marks in one order (o-- given circle first, returning
                # False and adding nothing) and takes them in the other.
                added = g.add_edge(Edge(graph_nodes[i], graph_nodes[j], end_i, end_j))
                if added is False:
                    added = g.add_edge(Edge(graph_nodes[j], graph_nodes[i], end_j, end_i))
                if added is False:
                    raise GraphError(
                        f"causal-learn refuses {self.edge_text(self.nodes[i], self.nodes[j])}"
                    )
        return g

    def to_networkx(self) -> nx.DiGraph:
        """The graph as a ``networkx.DiGraph``; every edge must be directed.

        Raises:
            GraphError: An edge that is not ``-->``.
        """
        g = nx.DiGraph()
        g.add_nodes_from(self.nodes)
        for u, v, mu, mv in self.edges():
            if (mu, mv) == (TAIL, ARROW):
                g.add_edge(u, v)
            elif (mu, mv) == (ARROW, TAIL):
                g.add_edge(v, u)
            else:
                raise GraphError(f"to_networkx: {self.edge_text(u, v)} is not directed")
        return g

    def to_adjacency(self) -> np.ndarray:
        """0/1 matrix, rows = parents: ``A[u, v] = 1`` for ``u --> v``, both ways for ``u --- v``
        (the convention of export's ``adjacency.csv`` and DCDI's ``DAG*.npy``/``CPDAG*.npy``).

        Raises:
            GraphError: An edge with an arrowhead at both ends or a circle.
        """
        a = np.zeros(self.marks.shape, dtype=np.int8)
        for u, v, mu, mv in self.edges():
            i, j = self.index[u], self.index[v]
            if mu == TAIL and mv in (TAIL, ARROW):
                a[i, j] = 1
            if mv == TAIL and mu in (TAIL, ARROW):
                a[j, i] = 1
            if mu != TAIL and mv != TAIL:
                raise GraphError(f"to_adjacency: {self.edge_text(u, v)} has no tail")
        return a

    def to_pcalg(self) -> np.ndarray:
        """pcalg's ``amat.pag`` coding: ``amat[a, b]`` is the mark at ``b`` (0 none, 1 circle,
        2 arrowhead, 3 tail), for R's pcalg and SID packages."""
        return np.vectorize(_PCALG.__getitem__, otypes=[np.int8])(self.marks.T)

    # -- reading -------------------------------------------------------------------------------
    @cached_property
    def index(self) -> dict[str, int]:
        """Node name -> row."""
        return {n: i for i, n in enumerate(self.nodes)}

    def mark(self, at: str, other: str) -> int:
        """The mark at ``at`` on the edge between ``at`` and ``other`` (0 if not adjacent)."""
        return int(self.marks[self.index[at], self.index[other]])

    def adjacent(self, a: str, b: str) -> bool:
        return bool(self.marks[self.index[a], self.index[b]])

    def edges(self) -> tuple[tuple[str, str, int, int], ...]:
        """Every edge once as ``(u, v, mark at u, mark at v)``, ``u`` before ``v`` in node order."""
        i, j = np.nonzero(np.triu(self.marks != NO_EDGE, 1))
        return tuple(
            (self.nodes[a], self.nodes[b], int(self.marks[a, b]), int(self.marks[b, a]))
            for a, b in zip(i.tolist(), j.tolist(), strict=True)
        )

    @property
    def n_edges(self) -> int:
        return int(np.count_nonzero(np.triu(self.marks, 1)))

    def skeleton(self) -> frozenset[frozenset[str]]:
        """The adjacent pairs."""
        return frozenset(frozenset((u, v)) for u, v, _, _ in self.edges())

    def edge_text(self, u: str, v: str) -> str:
        """``"u --> v"`` (the marks at ``u`` and ``v``), ``"u ... v"`` when not adjacent."""
        mu, mv = self.mark(u, v), self.mark(v, u)
        return f"{u} {_LEFT[mu]}-{_RIGHT[mv]} {v}" if mu else f"{u} ... {v}"

    def edge_strings(self) -> tuple[str, ...]:
        """Every edge as text (:meth:`from_edges` reads it back)."""
        return tuple(self.edge_text(u, v) for u, v, _, _ in self.edges())

    def is_dag(self) -> bool:
        """Every edge ``-->`` and no directed cycle."""
        if any((mu, mv) not in ((TAIL, ARROW), (ARROW, TAIL)) for _, _, mu, mv in self.edges()):
            return False
        return nx.is_directed_acyclic_graph(self.to_networkx())

    def has_bidirected(self) -> bool:
        return bool(((self.marks == ARROW) & (self.marks.T == ARROW)).any())

    def reordered(self, nodes: Sequence[str]) -> EndpointGraph:
        """The same graph with rows in the order ``nodes`` (a permutation of :attr:`nodes`)."""
        if sorted(nodes) != sorted(self.nodes):
            missing = sorted(set(self.nodes) ^ set(nodes))
            raise GraphError(f"reordered: node sets differ by {missing}")
        ix = [self.index[n] for n in nodes]
        return EndpointGraph(tuple(nodes), self.marks[np.ix_(ix, ix)])

    def induced(self, nodes: Iterable[str]) -> EndpointGraph:
        """The subgraph on ``nodes`` (in that order), edges among them kept as they are."""
        nodes = tuple(nodes)
        unknown = sorted(set(nodes) - set(self.nodes))
        if unknown:
            raise GraphError(f"induced: unknown nodes {unknown}")
        ix = [self.index[n] for n in nodes]
        return EndpointGraph(nodes, self.marks[np.ix_(ix, ix)])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EndpointGraph):
            return NotImplemented
        return self.nodes == other.nodes and np.array_equal(self.marks, other.marks)

    def __hash__(self) -> int:
        return hash((self.nodes, self.marks.tobytes()))

    def __str__(self) -> str:
        return "; ".join(self.edge_strings()) or "(no edges)"

    def __repr__(self) -> str:
        return f"EndpointGraph({list(self.nodes)!r}, edges={list(self.edge_strings())!r})"


# -- CPDAG ---------------------------------------------------------------------------------


def _as_digraph(dag: nx.DiGraph | EndpointGraph) -> nx.DiGraph:
    g = dag.to_networkx() if isinstance(dag, EndpointGraph) else dag
    if not nx.is_directed_acyclic_graph(g):
        raise GraphError("expected a DAG: the graph has a directed cycle")
    return g


def cpdag(dag: nx.DiGraph | EndpointGraph) -> EndpointGraph:
    """The CPDAG of a DAG: edges of its unshielded colliders and those Meek's R1-R3 compel are
    directed, the rest undirected (``---``). Why: every DAG of the Markov equivalence class has
    the same skeleton and unshielded colliders (Verma and Pearl 1990), and these rules orient
    exactly the edges all of them share (Meek 1995).

    Args:
        dag: A DAG (``networkx.DiGraph``, or an :class:`EndpointGraph` of directed edges); its
            node order is kept.

    Raises:
        GraphError: A directed cycle or an edge that is not directed.
    """
    g = _as_digraph(dag)
    nodes = tuple(dag.nodes) if isinstance(dag, EndpointGraph) else tuple(g.nodes)
    ix = {n: i for i, n in enumerate(nodes)}
    k = len(nodes)
    adj = np.zeros((k, k), dtype=bool)
    directed = np.zeros((k, k), dtype=bool)  # directed[i, j]: i --> j is compelled
    for u, v in g.edges():
        adj[ix[u], ix[v]] = adj[ix[v], ix[u]] = True
    parents = {ix[v]: [ix[p] for p in g.predecessors(v)] for v in nodes}
    for c, pa in parents.items():
        for a, b in itertools.combinations(pa, 2):
            if not adj[a, b]:
                directed[a, c] = directed[b, c] = True
    _meek(adj, directed)
    marks = np.zeros((k, k), dtype=np.int8)
    marks[adj] = TAIL
    marks[directed.T] = ARROW  # i --> j puts an arrowhead at j: marks[j, i]
    return EndpointGraph(nodes, marks)


def _meek(adj: np.ndarray, directed: np.ndarray) -> None:
    """Meek's R1-R3 on a pattern, in place, to a fixed point."""
    k = len(adj)

    def undirected(a: int, b: int) -> bool:
        return adj[a, b] and not directed[a, b] and not directed[b, a]

    changed = True
    while changed:
        changed = False
        for b in range(k):
            for c in range(k):
                if not undirected(b, c):
                    continue
                # R1: a --> b --- c, a and c not adjacent => b --> c
                r1 = any(directed[a, b] and not adj[a, c] and a != c for a in range(k))
                # R2: b --> a --> c and b --- c => b --> c
                r2 = any(directed[b, a] and directed[a, c] for a in range(k))
                # R3: b --- x --> c, b --- y --> c, x and y not adjacent => b --> c
                xs = [x for x in range(k) if undirected(b, x) and directed[x, c]]
                r3 = any(not adj[x, y] for x, y in itertools.combinations(xs, 2))
                if r1 or r2 or r3:
                    directed[b, c] = True
                    changed = True


# -- MAG -----------------------------------------------------------------------------------


def mag(dag: nx.DiGraph | EndpointGraph, observed: Sequence[str]) -> EndpointGraph:
    """The maximal ancestral graph of ``dag`` over ``observed``, the other nodes latent.

    Two observed nodes are adjacent iff no set of observed nodes d-separates them in the DAG
    (an inducing path; Richardson and Spirtes 2002, Theorem 4.2). The candidate set tested is
    their observed ancestors: a maximal ancestral graph satisfies the pairwise Markov property
    with ``an({a, b}) \\ {a, b}``, ancestors and separation among observed nodes agree with the
    DAG's, so if any set separates them, that one does (one d-separation test per pair; a test
    checks it against every subset on random graphs). Marks: ``a --> b`` when ``a`` is an
    ancestor of ``b`` in the DAG, else ``a <-> b`` (no selection variables, so no tails at both
    ends).

    Args:
        dag: The DAG over every node.
        observed: The kept nodes, in output order.

    Raises:
        GraphError: A cycle, or an observed name not in the DAG.
    """
    g = _as_digraph(dag)
    observed = tuple(observed)
    missing = sorted(set(observed) - set(g.nodes))
    if missing:
        raise GraphError(f"mag: nodes {missing} are not in the DAG")
    kept = set(observed)
    anc = {n: nx.ancestors(g, n) for n in observed}
    k = len(observed)
    marks = np.zeros((k, k), dtype=np.int8)
    for i, j in itertools.combinations(range(k), 2):
        a, b = observed[i], observed[j]
        z = ((anc[a] | anc[b]) & kept) - {a, b}
        if nx.is_d_separator(g, {a}, {b}, z):
            continue
        if a in anc[b]:
            marks[i, j], marks[j, i] = TAIL, ARROW
        elif b in anc[a]:
            marks[i, j], marks[j, i] = ARROW, TAIL
        else:
            marks[i, j] = marks[j, i] = ARROW
    return EndpointGraph(observed, marks)


# -- PAG -----------------------------------------------------------------------------------


def pag(mag_graph: EndpointGraph) -> EndpointGraph:
    """The PAG of a MAG: what every MAG Markov equivalent to it shares (FCI's output with an
    independence oracle).

    The MAG's skeleton with circles at every end; arrowheads of its unshielded colliders (R0);
    then Zhang's (2008) rules to a fixed point: R1-R3, R4 (discriminating paths, where the
    MAG's collider status decides, the same in every MAG of the class: Ali et al. 2009), R8-R10
    (tails). R5-R7 orient undirected and circle-tail edges, which arise only with selection
    variables, so they are not applied. Zhang proves R0-R4 and R8-R10 complete without selection
    bias: the result is the maximally informative PAG whatever the order the rules fire in.

    Args:
        mag_graph: A MAG (directed and bidirected edges), e.g. from :func:`mag`.

    Raises:
        GraphError: The graph has circles or undirected edges (not a MAG).
    """
    mm = mag_graph.marks
    if (mm == CIRCLE).any() or ((mm == TAIL) & (mm.T == TAIL)).any():
        raise GraphError("pag: expected a MAG (directed and bidirected edges only)")
    m = np.where(mm != NO_EDGE, CIRCLE, NO_EDGE).astype(np.int8)
    k = len(mag_graph.nodes)
    adj = mm != NO_EDGE
    for b in range(k):  # R0: unshielded colliders of the MAG
        nb = np.flatnonzero(adj[b])
        for a, c in itertools.combinations(nb.tolist(), 2):
            if not adj[a, c] and mm[b, a] == ARROW and mm[b, c] == ARROW:
                m[b, a] = m[b, c] = ARROW
    rules = (_r1, _r2, _r3, _r4, _r8, _r9, _r10)
    while any(rule(m, adj, mm) for rule in rules):
        pass
    return EndpointGraph(mag_graph.nodes, m)


def _neighbours(adj: np.ndarray, v: int) -> list[int]:
    return np.flatnonzero(adj[v]).tolist()


def _r1(m: np.ndarray, adj: np.ndarray, _mag: np.ndarray) -> bool:
    """a *-> b o-* c, a and c not adjacent => b --> c."""
    for b in range(len(m)):
        for c in _neighbours(adj, b):
            if m[b, c] != CIRCLE:
                continue
            if any(m[b, a] == ARROW and a != c and not adj[a, c] for a in _neighbours(adj, b)):
                m[b, c], m[c, b] = TAIL, ARROW
                return True
    return False


def _r2(m: np.ndarray, adj: np.ndarray, _mag: np.ndarray) -> bool:
    """a --> b *-> c or a *-> b --> c, and a *-o c => a *-> c."""
    for a in range(len(m)):
        for c in _neighbours(adj, a):
            if m[c, a] != CIRCLE:
                continue
            for b in _neighbours(adj, a):
                if b == c or not adj[b, c]:
                    continue
                first = m[a, b] == TAIL and m[b, a] == ARROW and m[c, b] == ARROW
                second = m[b, a] == ARROW and m[b, c] == TAIL and m[c, b] == ARROW
                if first or second:
                    m[c, a] = ARROW
                    return True
    return False


def _r3(m: np.ndarray, adj: np.ndarray, _mag: np.ndarray) -> bool:
    """a *-> b <-* c, a *-o d o-* c, a and c not adjacent, d *-o b => d *-> b."""
    for d in range(len(m)):
        for b in _neighbours(adj, d):
            if m[b, d] != CIRCLE:
                continue
            both = [x for x in _neighbours(adj, d) if x != b and adj[x, b]]
            for a, c in itertools.combinations(both, 2):
                if (
                    not adj[a, c]
                    and m[b, a] == ARROW
                    and m[b, c] == ARROW
                    and m[d, a] == CIRCLE
                    and m[d, c] == CIRCLE
                ):
                    m[b, d] = ARROW
                    return True
    return False


def _r4(m: np.ndarray, adj: np.ndarray, mag_marks: np.ndarray) -> bool:
    """A discriminating path <d, ..., a, b, c> for b with b o-* c: b --> c if b is not a
    collider on it in the MAG, else a <-> b <-> c."""
    for b in range(len(m)):
        for c in _neighbours(adj, b):
            if m[b, c] != CIRCLE:
                continue
            a = _discriminated_by(m, adj, b, c)
            if a is None:
                continue
            if mag_marks[b, a] == ARROW and mag_marks[b, c] == ARROW:
                m[a, b] = m[b, a] = m[b, c] = m[c, b] = ARROW
            else:
                m[b, c], m[c, b] = TAIL, ARROW
            return True
    return False


def _parent_of(m: np.ndarray, v: int, c: int) -> bool:
    return bool(m[v, c] == TAIL and m[c, v] == ARROW)


def _discriminated_by(m: np.ndarray, adj: np.ndarray, b: int, c: int) -> int | None:
    """The vertex before ``b`` on a discriminating path ``<d, ..., a, b, c>`` for ``b``, if any.

    Every vertex between ``d`` and ``b`` is a collider on the path and a parent of ``c``, and
    ``d`` is not adjacent to ``c``. Breadth-first from ``b``: a vertex ``v`` on the path (a
    parent of ``c`` with an arrowhead from its inner neighbour) continues to any ``w`` with an
    arrowhead at ``v`` on ``v *-> ... w``: ``w`` ends the path when it is not adjacent to ``c``,
    or continues when it is a parent of ``c`` with an arrowhead at ``w`` from ``v``.
    """
    for a in _neighbours(adj, b):
        if a == c or not _parent_of(m, a, c) or m[a, b] != ARROW:
            continue
        seen = {a, b, c}
        frontier = [a]
        while frontier:
            nxt = []
            for v in frontier:
                for w in _neighbours(adj, v):
                    if w in seen or m[v, w] != ARROW:
                        continue
                    if not adj[w, c]:
                        return a
                    if _parent_of(m, w, c) and m[w, v] == ARROW:
                        seen.add(w)
                        nxt.append(w)
            frontier = nxt
    return None


def _r8(m: np.ndarray, adj: np.ndarray, _mag: np.ndarray) -> bool:
    """a --> b --> c or a -o b --> c, and a o-> c => a --> c."""
    for a in range(len(m)):
        for c in _neighbours(adj, a):
            if not (m[a, c] == CIRCLE and m[c, a] == ARROW):
                continue
            for b in _neighbours(adj, a):
                into_b = m[a, b] == TAIL and m[b, a] in (ARROW, CIRCLE)  # a --> b or a -o b
                if b != c and adj[b, c] and into_b and _parent_of(m, b, c):
                    m[a, c] = TAIL
                    return True
    return False


def _pd_step(m: np.ndarray, u: int, v: int) -> bool:
    """The edge u *-* v is potentially directed from u to v: not into u, not out of v."""
    return bool(m[u, v] != ARROW and m[v, u] != TAIL)


def _uncovered_pd_paths(
    m: np.ndarray, adj: np.ndarray, start: int, first: int, target: int
) -> Iterator[list[int]]:
    """Uncovered potentially directed paths ``start, first, ..., target`` (simple paths; every
    three consecutive vertices unshielded)."""
    if not _pd_step(m, start, first):
        return
    if first == target:
        yield [start, first]
        return
    stack = [[start, first]]
    while stack:
        path = stack.pop()
        prev, cur = path[-2], path[-1]
        for w in _neighbours(adj, cur):
            if w in path or adj[prev, w] or not _pd_step(m, cur, w):
                continue
            if w == target:
                yield [*path, w]
            else:
                stack.append([*path, w])


def _r9(m: np.ndarray, adj: np.ndarray, _mag: np.ndarray) -> bool:
    """a o-> c and an uncovered p.d. path <a, b, d, ..., c> with b, c not adjacent => a --> c."""
    for a in range(len(m)):
        for c in _neighbours(adj, a):
            if not (m[a, c] == CIRCLE and m[c, a] == ARROW):
                continue
            for b in _neighbours(adj, a):
                if b == c or adj[b, c]:
                    continue
                if next(_uncovered_pd_paths(m, adj, a, b, c), None) is not None:
                    m[a, c] = TAIL
                    return True
    return False


def _r10(m: np.ndarray, adj: np.ndarray, _mag: np.ndarray) -> bool:
    """a o-> c, b --> c <-- d, uncovered p.d. paths from a to b and from a to d whose vertices
    after a (mu, omega) are distinct and not adjacent => a --> c."""
    for a in range(len(m)):
        for c in _neighbours(adj, a):
            if not (m[a, c] == CIRCLE and m[c, a] == ARROW):
                continue
            parents = [v for v in _neighbours(adj, c) if v != a and _parent_of(m, v, c)]
            if len(parents) < 2:
                continue
            firsts = {
                p: {
                    mu
                    for mu in _neighbours(adj, a)
                    if next(_uncovered_pd_paths(m, adj, a, mu, p), None) is not None
                }
                for p in parents
            }
            for b, d in itertools.combinations(parents, 2):
                if any(mu != om and not adj[mu, om] for mu in firsts[b] for om in firsts[d]):
                    m[a, c] = TAIL
                    return True
    return False


# -- the truth of a domain ---------------------------------------------------------------------


@dataclass(frozen=True)
class TrueGraphs:
    """The true graphs of a DAG seen through a set of columns.

    Args:
        dag: The DAG over every node (constant nodes without edges).
        columns: The observed columns the other graphs are over.
        mag: The maximal ancestral graph over ``columns`` (the rest latent).
        pag: Its PAG: FCI's target.
        cpdag: The CPDAG of the MAG when the MAG has no bidirected edge (then it is a DAG
            over the columns and PC's and GES's target), else ``None`` (no DAG over these
            columns is Markov and faithful to the data).
    """

    dag: EndpointGraph
    columns: tuple[str, ...]
    mag: EndpointGraph
    pag: EndpointGraph
    cpdag: EndpointGraph | None

    @property
    def column_dag(self) -> EndpointGraph | None:
        """The MAG when it is a DAG (every confounder observed), else ``None``."""
        return None if self.cpdag is None else self.mag


def true_graphs(
    dag: nx.DiGraph | EndpointGraph, columns: Sequence[str], *, constant: Iterable[str] = ()
) -> TrueGraphs:
    """DAG, MAG, PAG and (when the MAG is a DAG) CPDAG of ``dag`` over ``columns``.

    Args:
        dag: The DAG over every node.
        columns: The observed nodes; every other node is latent.
        constant: Nodes whose value does not vary in the data (e.g. a ``Constant`` mechanism, or
            a count that is always 0 in the chosen unit). Their edges are removed before
            projecting, because a constant carries no dependence: kept as a latent parent it
            would put a false ``<->`` between its children. A constant column stays, isolated.

    Raises:
        GraphError: A cycle, or an unknown column or constant node.
    """
    g = _as_digraph(dag).copy()
    unknown = sorted((set(columns) | set(constant)) - set(g.nodes))
    if unknown:
        raise GraphError(f"true_graphs: nodes {unknown} are not in the DAG")
    for n in constant:
        g.remove_edges_from(list(g.in_edges(n)) + list(g.out_edges(n)))
    nodes = tuple(dag.nodes) if isinstance(dag, EndpointGraph) else tuple(g.nodes)
    the_mag = mag(g, columns)
    return TrueGraphs(
        EndpointGraph.from_networkx(g, nodes),
        tuple(columns),
        the_mag,
        pag(the_mag),
        None if the_mag.has_bidirected() else cpdag(the_mag),
    )


def scm_truth(
    scm: SCM, columns: Sequence[str] | None = None, *, constant: Iterable[str] = ()
) -> TrueGraphs:
    """:func:`true_graphs` of an SCM's declared graph (no intervention applied), over
    ``columns`` (default: its observed nodes).

    Args:
        scm: The model.
        columns: The observed columns; the SCM's observed nodes by default.
        constant: Nodes constant in the data (see :func:`true_graphs`).
    """
    cols = scm.observed if columns is None else tuple(columns)
    return true_graphs(scm.graph_view("none"), cols, constant=constant)
