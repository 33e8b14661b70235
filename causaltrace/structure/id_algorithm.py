"""The ID and IDC algorithms (Shpitser and Pearl 2006) on an acyclic directed mixed graph.

ID decides whether ``P(y | do(x))`` is a function of the observational ``P(V)`` and, if so,
returns that function as an :class:`~causaltrace.structure.estimands.Estimand`; it is complete
(a failure is a hedge, and the effect is then not identifiable). IDC (Shpitser and Pearl, UAI
2006) reduces a conditional effect ``P(y | do(x), z)`` to ID: while some ``z`` is independent of
``y`` given the rest in the graph with the edges into ``x`` and out of ``z`` removed, that ``z``
becomes a treatment (the second rule of do-calculus); then ``P(y | do(x), z) = P'(y, z) /
sum_y P'(y, z)`` with ``P' = P(y, z | do(x))`` from ID. IDC is complete as well.

Why implemented here, not delegated: pgmpy 1.1 has no ID, and DoWhy 0.14's cannot take hidden
confounders (see :mod:`causaltrace.structure.identification`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import networkx as nx

from causaltrace.errors import GraphError
from causaltrace.structure.admg import Projection, m_separated
from causaltrace.structure.estimands import (
    Distribution,
    Estimand,
    Fraction,
    Probability,
    Product,
    product,
    summed,
)


class NotIdentifiable(GraphError):
    """The ID algorithm found a hedge: the effect is not identifiable from observational data."""


def id_expression(graph: Projection, treatment: Sequence[str], outcome: Sequence[str]) -> Estimand:
    """``P(outcome | do(treatment))`` as an expression in the observational ``P(V)`` (ID, lines
    1-7); raises :class:`NotIdentifiable` naming the hedge.

    Args:
        graph: The latent projection over the observed nodes.
        treatment: The intervened nodes (one or more; none gives the marginal ``P(outcome)``).
        outcome: The outcome nodes (disjoint from ``treatment``).

    Raises:
        NotIdentifiable: The algorithm found a hedge.
        GraphError: A node is not in the graph, or treatment and outcome overlap.
    """
    x, y = _checked(graph, treatment, outcome)
    return _id(y, x, None, set(graph.nodes), graph)


def idc_expression(
    graph: Projection,
    treatment: Sequence[str],
    outcome: Sequence[str],
    given: Sequence[str],
) -> Estimand:
    """``P(outcome | do(treatment), given)`` as an expression in ``P(V)`` (IDC, then ID).

    Args:
        graph: The latent projection over the observed nodes.
        treatment: The intervened nodes.
        outcome: The outcome nodes.
        given: The conditioning nodes (disjoint from both); none is plain ID.

    Raises:
        NotIdentifiable: ID found a hedge for ``P(outcome, given' | do(treatment'))`` after the
            reduction (then the conditional effect is not identifiable either).
        GraphError: A node is not in the graph, or the three sets overlap.
    """
    x, y = _checked(graph, treatment, outcome)
    z = set(given)
    unknown = z - set(graph.nodes)
    if unknown:
        raise GraphError(f"IDC: nodes {sorted(unknown)} are not observed nodes of the graph")
    if z & (x | y):
        raise GraphError(f"IDC: the conditioning set shares {sorted(z & (x | y))}")
    rank = _rank(graph)
    moved = True
    while moved:  # IDC's first line, until no conditioning node can become a treatment
        moved = False
        for node in sorted(z, key=rank.__getitem__):
            rest = z - {node}
            if m_separated(
                graph, y, {node}, x | rest, cut_incoming=x, cut_outgoing={node}
            ):  # rule 2: P(y | do(x), z) = P(y | do(x, node), z \ node)
                x, z, moved = x | {node}, rest, True
                break
    joint = _id(y | z, x, None, set(graph.nodes), graph)
    if not z:
        return joint
    return Fraction(joint, summed(_names(y, graph), joint))


def _checked(
    graph: Projection, treatment: Sequence[str], outcome: Sequence[str]
) -> tuple[set[str], set[str]]:
    x, y = set(treatment), set(outcome)
    unknown = (x | y) - set(graph.nodes)
    if unknown:
        raise GraphError(f"ID: nodes {sorted(unknown)} are not observed nodes of the graph")
    if x & y:
        raise GraphError(f"ID: treatment and outcome share {sorted(x & y)}")
    if not y:
        raise GraphError("ID: no outcome node given")
    return x, y


def _rank(g: Projection) -> dict[str, int]:
    return {n: i for i, n in enumerate(g.nodes)}


def _names(nodes: Iterable[str], g: Projection) -> tuple[str, ...]:
    """Nodes in the graph's topological order (how estimands list them)."""
    return tuple(sorted(nodes, key=_rank(g).__getitem__))


def _ancestors(
    targets: set[str], nodes: set[str], g: Projection, cut: Iterable[str] = ()
) -> set[str]:
    """Ancestors of ``targets`` (themselves included) in the directed part induced on ``nodes``,
    with the edges into ``cut`` removed."""
    cut = set(cut)
    parents: dict[str, set[str]] = {n: set() for n in nodes}
    for u, v in g.directed:
        if u in nodes and v in nodes and v not in cut:
            parents[v].add(u)
    out, stack = set(targets), list(targets)
    while stack:
        for p in parents[stack.pop()]:
            if p not in out:
                out.add(p)
                stack.append(p)
    return out


def _c_components(nodes: set[str], g: Projection) -> list[frozenset[str]]:
    """Connected components of the bidirected part induced on ``nodes`` (topological order)."""
    h = nx.Graph()
    h.add_nodes_from(nodes)
    h.add_edges_from(tuple(pair) for pair in g.bidirected if pair <= nodes)
    rank = _rank(g)
    return sorted(
        (frozenset(c) for c in nx.connected_components(h)), key=lambda c: min(rank[n] for n in c)
    )


def _joint(p: Distribution | None, v: set[str], g: Projection) -> Estimand:
    """The current distribution over ``v``: ``P(V)`` at the top level, else ``p`` itself."""
    return Probability(_names(v, g)) if p is None else p


def _conditionals(
    members: Iterable[str], p: Distribution | None, g: Projection, nodes: set[str]
) -> Estimand:
    """prod over v in members of p(v | the nodes before v in topological order)."""
    members = set(members)
    terms: list[Estimand] = []
    before: list[str] = []
    for v in (n for n in g.nodes if n in nodes):
        if v in members:
            terms.append(Probability((v,), tuple(before), p))
        before.append(v)
    return product(tuple(terms))


def _id(y: set[str], x: set[str], p: Distribution | None, v: set[str], g: Projection) -> Estimand:
    """ID(y, x, P, G[v]); ``p`` is ``None`` for the observational ``P`` (then ``v`` is every
    node), else the distribution over ``v`` that earlier lines derived."""
    if not x:  # line 1
        return summed(_names(v - y, g), _joint(p, v, g))
    an = _ancestors(y, v, g)
    if an != v:  # line 2: only the ancestors of y matter
        inner = summed(_names(v - an, g), _joint(p, v, g))
        return _id(y, x & an, Distribution(inner, _names(an, g)), an, g)
    w = (v - x) - _ancestors(y, v, g, cut=x)
    if w:  # line 3: acting on w as well changes nothing
        return _id(y, x | w, p, v, g)
    components = _c_components(v - x, g)
    if len(components) > 1:  # line 4: factorize over the c-components of G[V \ X]
        parts = tuple(_id(set(s), v - s, p, v, g) for s in components)
        return summed(_names(v - (y | x), g), Product(parts, grouped=True))
    (s,) = components
    whole = _c_components(v, g)
    if whole == [frozenset(v)]:  # line 5: a hedge
        raise NotIdentifiable(
            f"hedge for P({','.join(_names(y, g))} | do({','.join(_names(x, g))})): "
            f"c-components {{{','.join(_names(v, g))}}} and {{{','.join(_names(s, g))}}}"
        )
    if s in whole:  # line 6
        return summed(_names(s - y, g), _conditionals(s, p, g, v))
    (big,) = [c for c in whole if s <= c]  # line 7: restrict to the c-component holding s
    restricted = Distribution(_conditionals(big, p, g, v), _names(big, g))
    return _id(y, x & big, restricted, set(big), g)
