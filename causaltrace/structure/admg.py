"""Causal graphs with hidden nodes: the DAG a query is asked on, and its latent projection.

Identification reads one form, a ``networkx.DiGraph`` whose nodes carry ``observed`` (a *causal
DAG*), and the ID algorithm reads its latent projection onto the observed nodes (an acyclic
directed mixed graph, :class:`Projection`). :func:`causal_dag` makes the first from what a user
has at hand:

- a ``networkx.DiGraph``: nodes with ``observed=False`` are hidden, the others observed;
- a ``pgmpy`` ``DAG`` (or Bayesian network): its ``latents`` are hidden (pgmpy's DAG is a
  ``networkx.DiGraph``, so its node attributes count too);
- a :class:`Projection`: one hidden node per bidirected edge;

and ``latent_edges``, pairs of observed nodes that share a hidden common cause (a bidirected
edge), add one hidden node each. Two opposite arcs are a cycle, not a bidirected edge, and are
refused. Hidden nodes added here are named ``U_a_b`` (primes appended until the name is free).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import networkx as nx

from causaltrace.errors import GraphError


@dataclass(frozen=True)
class Projection:
    """An acyclic directed mixed graph over ``nodes`` (in topological order): the latent
    projection of a DAG. ``bidirected`` pairs share a hidden common cause.

    Args:
        nodes: The kept nodes, in topological order (estimands list variables in this order).
        directed: ``(u, v)`` edges.
        bidirected: Unordered pairs that share a hidden common cause.
    """

    nodes: tuple[str, ...]
    directed: frozenset[tuple[str, str]]
    bidirected: frozenset[frozenset[str]]


def latent_projection(g: nx.DiGraph, kept: Iterable[str]) -> Projection:
    """Hide every node of ``g`` not in ``kept`` (Verma and Pearl's latent projection).

    ``u -> v`` when a directed path from ``u`` to ``v`` has only hidden inner nodes; ``u <-> v``
    when a hidden node reaches both through hidden nodes only. Why: hidden nodes on a path
    transmit dependence like an edge, and a hidden common cause confounds like a bidirected edge.

    Args:
        g: A DAG (e.g. :meth:`causaltrace.model.scm.SCM.graph_view`).
        kept: The nodes to keep (typically the observed ones).

    Raises:
        GraphError: A kept node is not in ``g``.
    """
    keep = set(kept)
    missing = keep - set(g)
    if missing:
        raise GraphError(f"latent_projection: nodes {sorted(missing)} are not in the graph")

    def reach(start: str) -> set[str]:
        hit, seen, stack = set(), {start}, [start]
        while stack:
            for v in g.successors(stack.pop()):
                if v in keep:
                    hit.add(v)
                elif v not in seen:
                    seen.add(v)
                    stack.append(v)
        return hit

    directed = {(u, v) for u in keep for v in reach(u)}
    bidirected: set[frozenset[str]] = set()
    for h in (n for n in g if n not in keep):
        hits = sorted(reach(h))
        bidirected |= {frozenset((a, b)) for i, a in enumerate(hits) for b in hits[i + 1 :]}
    order = tuple(n for n in nx.topological_sort(g) if n in keep)
    return Projection(order, frozenset(directed), frozenset(bidirected))


def observed_nodes(dag: nx.DiGraph) -> list[str]:
    """The nodes of a causal DAG whose ``observed`` attribute is true (the default)."""
    return [n for n, seen in dag.nodes(data="observed", default=True) if seen]


def projection_of(dag: nx.DiGraph) -> Projection:
    """The latent projection of a causal DAG onto its observed nodes."""
    return latent_projection(dag, observed_nodes(dag))


def causal_dag(graph, latent_edges: Iterable[tuple[str, str]] = ()) -> nx.DiGraph:
    """A copy of ``graph`` as a causal DAG: ``observed`` on every node, hidden common causes
    as hidden nodes (see the module docstring for what ``graph`` may be).

    Args:
        graph: A ``networkx.DiGraph`` (``observed=False`` marks a hidden node), a pgmpy ``DAG``
            with ``latents``, or a :class:`Projection`.
        latent_edges: Pairs of observed nodes with a hidden common cause (bidirected edges), for
            graphs that do not draw that cause as a node.

    Raises:
        GraphError: Not a graph, a cycle, or a latent edge naming an unknown or hidden node.
    """
    if isinstance(graph, Projection):
        dag = nx.DiGraph()
        dag.add_nodes_from(graph.nodes, observed=True)
        dag.add_edges_from(graph.directed)
        pairs = [tuple(sorted(pair)) for pair in graph.bidirected]
    elif isinstance(graph, nx.DiGraph):
        hidden = set(getattr(graph, "latents", None) or ())
        dag = nx.DiGraph()
        for n, data in graph.nodes(data=True):
            dag.add_node(n, observed=bool(data.get("observed", True)) and n not in hidden)
        dag.add_edges_from(graph.edges())
        pairs = []
    else:
        raise GraphError(
            f"expected a networkx DiGraph, a pgmpy DAG or a Projection, got {type(graph).__name__}"
        )
    if not nx.is_directed_acyclic_graph(dag):
        cycle = " -> ".join(str(u) for u, _ in nx.find_cycle(dag))
        raise GraphError(
            f"the graph has a cycle ({cycle}); give a hidden common cause as a latent node or in "
            "latent_edges, not as two opposite arcs"
        )
    for pair in [*pairs, *latent_edges]:
        a, b = pair
        for node in (a, b):
            if node not in dag:
                raise GraphError(f"latent edge {a!r} <-> {b!r}: the graph has no node {node!r}")
            if not dag.nodes[node]["observed"]:
                raise GraphError(f"latent edge {a!r} <-> {b!r}: {node!r} is itself hidden")
        if a == b:
            raise GraphError(f"latent edge {a!r} <-> {b!r} joins a node to itself")
        name = f"U_{a}_{b}"
        while name in dag:
            name += "'"
        dag.add_node(name, observed=False)
        dag.add_edges_from([(name, a), (name, b)])
    return dag


def m_separated(
    g: Projection,
    xs: Iterable[str],
    ys: Iterable[str],
    given: Iterable[str] = (),
    *,
    cut_incoming: Iterable[str] = (),
    cut_outgoing: Iterable[str] = (),
) -> bool:
    """Whether ``xs`` and ``ys`` are m-separated given ``given`` in ``g`` with every edge into
    ``cut_incoming`` (directed and bidirected: Pearl's ``G_{bar X}``) and every directed edge out
    of ``cut_outgoing`` (``G_{underline Z}``) removed.

    Why through a DAG: m-separation in an ADMG is d-separation in the DAG with one hidden node
    per bidirected edge (hidden nodes never conditioned on), which networkx decides.

    Args:
        g: The mixed graph.
        xs: One side.
        ys: The other side.
        given: The conditioning set.
        cut_incoming: Nodes whose incoming edges (arrowheads) are removed.
        cut_outgoing: Nodes whose outgoing directed edges are removed.
    """
    into, out_of = set(cut_incoming), set(cut_outgoing)
    dag = nx.DiGraph()
    dag.add_nodes_from(g.nodes)
    dag.add_edges_from((u, v) for u, v in g.directed if v not in into and u not in out_of)
    for pair in g.bidirected:
        if not pair & into:
            hidden = ("<->", *sorted(pair))  # a tuple never equals a node name (a string)
            dag.add_edges_from((hidden, v) for v in pair)
    return nx.is_d_separator(dag, set(xs), set(ys), set(given))
