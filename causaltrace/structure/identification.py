"""Identification of a causal effect from the graph: back-door and front-door by delegation to
pgmpy, then the ID algorithm (Shpitser and Pearl 2006), which is complete.

pgmpy's ``CausalInference`` enumerates back-door and front-door adjustment sets over the
*observed* nodes of ``scm.to_pgmpy()`` (whose ``latents`` are the SCM's unobserved nodes), so a
latent confounder is never offered as an adjustment variable. pgmpy is imported only here, when
a function is called. The graph is the SCM's default view: on an intervened SCM, the mutilated
graph (see :meth:`causaltrace.model.scm.SCM.graph_view`).

Back-door and front-door are sufficient criteria, not complete ones, so when neither applies
:func:`identify_effect` runs the ID algorithm on the latent projection of the graph onto its
observed nodes (a hidden node with two observed descendants through hidden nodes becomes a
bidirected edge), and reports ``unidentified`` only when ID finds a hedge. ID is implemented
here, not delegated: pgmpy 1.1 has no ID, and DoWhy 0.14's ``identify_effect_id`` cannot take
hidden confounders (its public function requires a DAG, so a bidirected edge cannot be given,
and a hidden node given as a node is treated as observed; its internal routine fed a bidirected
edge as two opposite arcs counts them in ancestor sets and calls the napkin graph
unidentifiable). ``tests/structure/test_identification_id.py`` pins that DoWhy behaviour.

pgmpy enumerates subsets of the observed nodes, so its cost grows as 2 to the number of
observed nodes. Measured on the ads graph (10 observed of 41 nodes, every observed pair with a
directed path, 25 pairs): every back-door or front-door call took under 1 s after pgmpy's
import (which alone took 1 to 12 s on a loaded 2-core machine), so no guard is added.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import networkx as nx

from causaltrace.errors import GraphError

if TYPE_CHECKING:  # pragma: no cover
    from causaltrace.model.scm import SCM

EstimandKind = Literal["backdoor", "frontdoor", "id", "no_effect", "unidentified"]


@dataclass(frozen=True)
class Identification:
    """How (or why not) the effect of ``treatment`` on ``outcome`` is identified.

    ``adjustment_set`` is the smallest set of its kind (ties broken by sorted names), the empty
    set for ``no_effect``, and ``None`` for ``id`` and ``unidentified``; ``reason`` says why.
    ``alternatives`` lists every set pgmpy found for that kind, smallest first. ``estimand`` is
    the ID algorithm's expression for ``kind == "id"`` (see :func:`id_estimand`).

    Args:
        treatment: The treatment node.
        outcome: The outcome node.
        kind: ``"backdoor"``, ``"frontdoor"``, ``"id"``, ``"no_effect"`` or ``"unidentified"``.
        adjustment_set: The smallest adjustment set of that kind, or ``None``.
        reason: Why this kind (or why not identified), in words.
        alternatives: Every adjustment set found for that kind, smallest first; ``()`` by
            default.
        estimand: The ID algorithm's expression when ``kind == "id"``; ``None`` by default.
    """

    treatment: str
    outcome: str
    kind: EstimandKind
    adjustment_set: frozenset[str] | None
    reason: str
    alternatives: tuple[frozenset[str], ...] = ()
    estimand: str | None = None

    @property
    def identified(self) -> bool:
        return self.kind != "unidentified"


def backdoor_adjustment_sets(scm: SCM, treatment: str, outcome: str) -> tuple[frozenset[str], ...]:
    """Minimal back-door adjustment sets, smallest first; ``()`` if there is none.

    ``(frozenset(),)`` means no adjustment is needed (pgmpy reports that as an empty frozenset,
    and raises when no set exists; both are translated here).

    Args:
        scm: The model; its default graph view is read (mutilated on an intervened SCM).
        treatment: The treatment node (must be observed).
        outcome: The outcome node (must be observed).

    Raises:
        GraphError: An unknown or latent node, or ``treatment == outcome``.
    """
    inference = _inference(scm, treatment, outcome)
    with _quiet():
        try:
            found = inference.get_all_backdoor_adjustment_sets(treatment, outcome)
        except ValueError:  # pgmpy: "No valid adjustment set found"
            return ()
    return _sorted_sets(found) if found else (frozenset(),)


def frontdoor_adjustment_sets(scm: SCM, treatment: str, outcome: str) -> tuple[frozenset[str], ...]:
    """Front-door adjustment sets (observed mediators), smallest first; ``()`` if none.

    Args:
        scm: The model; its default graph view is read (mutilated on an intervened SCM).
        treatment: The treatment node (must be observed).
        outcome: The outcome node (must be observed).

    Raises:
        GraphError: An unknown or latent node, or ``treatment == outcome``.
    """
    inference = _inference(scm, treatment, outcome)
    with _quiet():
        return _sorted_sets(inference.get_all_frontdoor_adjustment_sets(treatment, outcome))


def identify_effect(scm: SCM, treatment: str, outcome: str) -> Identification:
    """Identify the effect of ``treatment`` on ``outcome``: back-door, front-door, then ID.

    A latent treatment or outcome is reported ``unidentified`` (its values are not in the
    data); an unknown node name raises :class:`GraphError`.

    Args:
        scm: The model; its default graph view is read (mutilated on an intervened SCM).
        treatment: The treatment node.
        outcome: The outcome node.

    Returns:
        The first criterion that applies (or ``no_effect``/``unidentified``), with its reason.

    Raises:
        GraphError: An unknown node, or ``treatment == outcome``.
    """
    _check_names(scm, treatment, outcome)
    for role, node in (("treatment", treatment), ("outcome", outcome)):
        if not scm.nodes[node].observed:
            return _none(treatment, outcome, f"the {role} {node!r} is latent (not observed)")
    if outcome not in scm.descendants(treatment):
        return Identification(
            treatment,
            outcome,
            "no_effect",
            frozenset(),
            f"no directed path from {treatment!r} to {outcome!r}: the effect is zero",
        )
    for kind, finder in (
        ("backdoor", backdoor_adjustment_sets),
        ("frontdoor", frontdoor_adjustment_sets),
    ):
        sets = finder(scm, treatment, outcome)
        if sets:
            return Identification(
                treatment, outcome, kind, sets[0], f"{kind} criterion (pgmpy)", sets
            )
    projection = latent_projection(scm.graph_view(), scm.observed)
    try:
        estimand = id_estimand(projection, [treatment], [outcome])
    except NotIdentifiable as hedge:
        return _none(
            treatment,
            outcome,
            "no observed set satisfies the back-door or the front-door criterion, and the ID "
            f"algorithm finds a hedge: {hedge} (latent nodes: {', '.join(scm.latent) or 'none'})",
        )
    return Identification(
        treatment,
        outcome,
        "id",
        None,
        "no back-door or front-door set; identified by the ID algorithm (do-calculus) on the "
        "latent projection",
        estimand=estimand,
    )


def _none(treatment: str, outcome: str, reason: str) -> Identification:
    return Identification(treatment, outcome, "unidentified", None, reason)


def _check_names(scm: SCM, treatment: str, outcome: str) -> None:
    for role, node in (("treatment", treatment), ("outcome", outcome)):
        if node not in scm.nodes:
            raise GraphError(f"{role}: SCM {scm.name!r} has no node {node!r}")
    if treatment == outcome:
        raise GraphError(f"treatment and outcome are the same node {treatment!r}")


def _inference(scm: SCM, treatment: str, outcome: str):
    """pgmpy's CausalInference over the SCM's graph, after checking both nodes are observed."""
    _check_names(scm, treatment, outcome)
    for role, node in (("treatment", treatment), ("outcome", outcome)):
        if not scm.nodes[node].observed:
            raise GraphError(f"the {role} {node!r} is latent: adjustment needs it observed")
    with _quiet():  # pgmpy 1.x warns about its own deprecated modules on import
        # lazy: pgmpy takes ~1.7 s to import; only this export needs it
        from pgmpy.inference import CausalInference

    return CausalInference(scm.to_pgmpy())


@contextmanager
def _quiet() -> Iterator[None]:
    """Silence pgmpy 1.x's deprecation notices for the CausalInference adjustment API."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


def _sorted_sets(sets) -> tuple[frozenset[str], ...]:
    return tuple(sorted((frozenset(s) for s in sets), key=lambda s: (len(s), sorted(s))))


# -- the ID algorithm -------------------------------------------------------------------------


class NotIdentifiable(GraphError):
    """The ID algorithm found a hedge: the effect is not identifiable from observational data."""


@dataclass(frozen=True)
class Projection:
    """An acyclic directed mixed graph over ``nodes`` (in topological order): the latent
    projection of a DAG. ``bidirected`` pairs share a hidden common cause.

    Args:
        nodes: The kept nodes, in topological order.
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


def id_estimand(graph: Projection, treatment: Sequence[str], outcome: Sequence[str]) -> str:
    """``P(outcome | do(treatment))`` as an expression in the observational ``P(V)`` (ID algorithm,
    Shpitser and Pearl 2006, lines 1-7); raises :class:`NotIdentifiable` naming the hedge.

    The expression is text: ``sum_{A}`` marginalizes ``A``, juxtaposition is a product, and
    ``P(v | A)`` conditions the distribution of that step (``P`` at the top level; a bracketed
    product after line 7 restricts to a c-component).

    Args:
        graph: The latent projection over the observed nodes (see :func:`latent_projection`).
        treatment: The intervened nodes.
        outcome: The outcome nodes (disjoint from ``treatment``).

    Raises:
        NotIdentifiable: The algorithm found a hedge.
        GraphError: A node is not in the graph, or treatment and outcome overlap.
    """
    x, y = set(treatment), set(outcome)
    unknown = (x | y) - set(graph.nodes)
    if unknown:
        raise GraphError(f"ID: nodes {sorted(unknown)} are not observed nodes of the graph")
    if x & y:
        raise GraphError(f"ID: treatment and outcome share {sorted(x & y)}")
    return _id(y, x, "P", set(graph.nodes), graph)


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
    rank = {n: i for i, n in enumerate(g.nodes)}
    return sorted(
        (frozenset(c) for c in nx.connected_components(h)), key=lambda c: min(rank[n] for n in c)
    )


def _names(nodes: Iterable[str], g: Projection) -> str:
    rank = {n: i for i, n in enumerate(g.nodes)}
    return ",".join(sorted(nodes, key=rank.__getitem__))


def _sum(over: set[str], body: str, g: Projection) -> str:
    return f"sum_{{{_names(over, g)}}} [{body}]" if over else body


def _conditionals(members: Iterable[str], p: str, g: Projection, nodes: set[str]) -> str:
    """prod over v in members of p(v | the nodes before v in topological order)."""
    terms, before = [], []
    for v in (n for n in g.nodes if n in nodes):
        if v in members:
            terms.append(f"{p}({v} | {_names(before, g)})" if before else f"{p}({v})")
        before.append(v)
    return " ".join(terms)


def _id(y: set[str], x: set[str], p: str, v: set[str], g: Projection) -> str:
    if not x:  # line 1
        return _sum(v - y, p if p != "P" else f"P({_names(v, g)})", g)
    an = _ancestors(y, v, g)
    if an != v:  # line 2: only the ancestors of y matter
        inner = _sum(v - an, p if p != "P" else f"P({_names(v, g)})", g)
        return _id(y, x & an, f"[{inner}]", an, g)
    w = (v - x) - _ancestors(y, v, g, cut=x)
    if w:  # line 3: acting on w as well changes nothing
        return _id(y, x | w, p, v, g)
    components = _c_components(v - x, g)
    if len(components) > 1:  # line 4: factorize over the c-components of G[V \ X]
        parts = [_id(set(s), v - s, p, v, g) for s in components]
        return _sum(v - (y | x), " ".join(f"({t})" for t in parts), g)
    (s,) = components
    whole = _c_components(v, g)
    if whole == [frozenset(v)]:  # line 5: a hedge
        raise NotIdentifiable(
            f"hedge for P({_names(y, g)} | do({_names(x, g)})): c-components "
            f"{{{_names(v, g)}}} and {{{_names(s, g)}}}"
        )
    if s in whole:  # line 6
        return _sum(s - y, _conditionals(s, p, g, v), g)
    (big,) = [c for c in whole if s <= c]  # line 7: restrict to the c-component holding s
    return _id(y, x & big, f"[{_conditionals(big, p, g, v)}]", set(big), g)
