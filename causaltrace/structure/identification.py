"""Identification of a causal effect from the graph: back-door and front-door by delegation to
pgmpy, then the ID algorithm (Shpitser and Pearl 2006), which is complete; IDC for conditional
effects; panel coordinates for pooled data.

Two entry points. :func:`identify_effect` takes an SCM (or a graph) and, for an SCM, knows its
panel: pooled rows (every cell and step) are draws of (coordinates, values), and a coordinate
that some ancestor of the treatment and some ancestor of the outcome both read confounds the
effect although the unit graph shows no back-door path (:mod:`causaltrace.structure.panel`).
:func:`identify` takes a graph alone, in two lines::

    g = nx.DiGraph([("W1", "W2"), ("W2", "X"), ("X", "Y")])
    identify(g, "X", "Y", latent_edges=[("W1", "X"), ("W1", "Y")])   # the napkin graph

pgmpy's ``CausalInference`` enumerates back-door and front-door adjustment sets over the
*observed* nodes (hidden nodes are its ``latents``), so a latent confounder is never offered as
an adjustment variable. pgmpy is imported only here, when a function is called. The graph of an
SCM is its default view: on an intervened SCM, the mutilated graph (see
:meth:`causaltrace.model.scm.SCM.graph_view`).

Back-door and front-door are sufficient criteria, not complete ones, and pgmpy's take one
treatment and one outcome, so otherwise (several nodes, a conditional effect, or neither
criterion) the ID algorithm runs on the latent projection of the graph onto its observed nodes
(a hidden node with two observed descendants through hidden nodes becomes a bidirected edge),
with IDC in front for a conditional effect, and ``unidentified`` is reported only when ID finds
a hedge. ID is implemented here (:mod:`causaltrace.structure.id_algorithm`), not delegated: pgmpy
1.1 has no ID, and DoWhy 0.14's ``identify_effect_id`` cannot take hidden confounders (its
public function requires a DAG, so a bidirected edge cannot be given, and a hidden node given
as a node is treated as observed; its internal routine fed a bidirected edge as two opposite
arcs counts them in ancestor sets and calls the napkin graph unidentifiable).
``tests/structure/test_identification_id.py`` pins that DoWhy behaviour.

Every identified answer carries its estimand as an expression
(:mod:`causaltrace.structure.estimands`) that :func:`causaltrace.structure.evaluation.evaluate`
computes on a discrete joint distribution.

pgmpy enumerates subsets of the candidate nodes, so its cost grows as 2 to their number: on
the ads graph (10 observed of 41 nodes, 25 pairs) every call took under 1 s after pgmpy's
import, but on the services graph with every node observed (an exported table with the latent
columns) one query did not return in 4 minutes. Past ``max_enumerated`` candidates
(:data:`MAX_ENUMERATED`, 16: 65,536 subsets) nothing is enumerated: the back-door search finds
one minimal set with networkx (``find_minimal_d_separator`` on the graph without the
treatment's out-edges, restricted to observed non-descendants, which finds a set exactly when
one exists), the front-door search is skipped for ID, which is complete, and the answer's
reason names the bound and how to raise it.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Literal

import networkx as nx

from causaltrace.errors import GraphError
from causaltrace.model.scm import SCM
from causaltrace.structure.admg import (
    Projection,
    causal_dag,
    latent_projection,
    observed_nodes,
    projection_of,
)
from causaltrace.structure.estimands import Estimand, Probability, Product, Sum, summed
from causaltrace.structure.id_algorithm import NotIdentifiable, id_expression, idc_expression
from causaltrace.structure.panel import PooledDataWarning, describe, panel_graph, read_coordinates

# Candidate nodes whose subsets pgmpy may enumerate (2**16 = 65,536 subsets); past it, see the
# module docstring.
MAX_ENUMERATED = 16

__all__ = [
    "Identification",
    "NotIdentifiable",
    "PooledDataWarning",
    "Projection",
    "backdoor_adjustment_sets",
    "frontdoor_adjustment_sets",
    "id_estimand",
    "id_expression",
    "idc_expression",
    "identify",
    "identify_effect",
    "latent_projection",
]

EstimandKind = Literal["backdoor", "frontdoor", "id", "no_effect", "unidentified"]
Names = str | Sequence[str]


@dataclass(frozen=True)
class Identification:
    """How (or why not) the effect of ``treatment`` on ``outcome`` is identified.

    ``adjustment_set`` is the smallest set of its kind (ties broken by sorted names), the empty
    set for ``no_effect``, and ``None`` for ``id`` and ``unidentified``; ``reason`` says why.
    ``alternatives`` lists every set pgmpy found for that kind, smallest first.

    Args:
        treatment: The treatment node, or a tuple of them (as the query gave it).
        outcome: The outcome node, or a tuple of them.
        kind: ``"backdoor"``, ``"frontdoor"``, ``"id"``, ``"no_effect"`` or ``"unidentified"``.
        adjustment_set: The smallest adjustment set of that kind, or ``None``.
        reason: Why this kind (or why not identified), in words.
        alternatives: Every adjustment set found for that kind, smallest first; ``()`` by
            default.
        estimand: The ID (or IDC) algorithm's expression as text when ``kind == "id"``;
            ``None`` by default.
        expression: The estimand of every identified kind as an expression to evaluate: the
            adjustment formula (``backdoor``), the front-door formula, ID's or IDC's expression,
            ``P(outcome)`` for ``no_effect``; ``None`` when unidentified. Its free variables
            are documented in :mod:`causaltrace.structure.estimands`.
        given: The conditioning nodes of a conditional effect ``P(y | do(x), given)``.
        panel_coordinates: The panel coordinates the answer's graph has as observed nodes
            (adjustment candidates); empty when the unit graph was used.
        confounding_coordinates: The coordinates that confound the query on pooled rows (the
            unit graph's answer does not hold there); empty when none does or for a graph.
    """

    treatment: str | tuple[str, ...]
    outcome: str | tuple[str, ...]
    kind: EstimandKind
    adjustment_set: frozenset[str] | None
    reason: str
    alternatives: tuple[frozenset[str], ...] = ()
    estimand: str | None = None
    expression: Estimand | None = None
    given: tuple[str, ...] = ()
    panel_coordinates: tuple[str, ...] = ()
    confounding_coordinates: tuple[str, ...] = ()

    @property
    def identified(self) -> bool:
        return self.kind != "unidentified"

    @property
    def treatments(self) -> tuple[str, ...]:
        return _as_tuple(self.treatment)

    @property
    def outcomes(self) -> tuple[str, ...]:
        return _as_tuple(self.outcome)


def backdoor_adjustment_sets(scm: SCM, treatment: str, outcome: str) -> tuple[frozenset[str], ...]:
    """Minimal back-door adjustment sets, smallest first; ``()`` if there is none.

    ``(frozenset(),)`` means no adjustment is needed (pgmpy reports that as an empty frozenset,
    and raises when no set exists; both are translated here). The sets are for the unit graph:
    for pooled rows use :func:`identify_effect`, which adds the panel coordinates.

    Args:
        scm: The model; its default graph view is read (mutilated on an intervened SCM).
        treatment: The treatment node (must be observed).
        outcome: The outcome node (must be observed).

    Raises:
        GraphError: An unknown or latent node, or ``treatment == outcome``.
    """
    _check_adjustable(scm, treatment, outcome)
    return _backdoor_sets(scm.graph_view(), treatment, outcome)


def frontdoor_adjustment_sets(scm: SCM, treatment: str, outcome: str) -> tuple[frozenset[str], ...]:
    """Front-door adjustment sets (observed mediators), smallest first; ``()`` if none.

    Args:
        scm: The model; its default graph view is read (mutilated on an intervened SCM).
        treatment: The treatment node (must be observed).
        outcome: The outcome node (must be observed).

    Raises:
        GraphError: An unknown or latent node, or ``treatment == outcome``.
    """
    _check_adjustable(scm, treatment, outcome)
    return _frontdoor_sets(scm.graph_view(), treatment, outcome)


def identify(
    graph,
    treatment: Names,
    outcome: Names,
    *,
    given: Names = (),
    latent_edges: Sequence[tuple[str, str]] = (),
    max_enumerated: int = MAX_ENUMERATED,
) -> Identification:
    """Identify ``P(outcome | do(treatment)[, given])`` on a graph alone (no SCM, no panel), or
    raise :class:`NotIdentifiable`.

    Unlike :func:`identify_effect`, which reports ``unidentified`` as a result (to survey many
    pairs), this raises: one query, and its estimand (``.expression``) is what is wanted.

    Args:
        graph: A ``networkx.DiGraph`` (nodes with ``observed=False`` are hidden), a pgmpy
            ``DAG`` with ``latents``, or a :class:`Projection`.
        treatment: One node or several (a joint intervention).
        outcome: One node or several (their joint distribution).
        given: Conditioning nodes for a conditional effect (IDC); none by default.
        latent_edges: Pairs of nodes with a hidden common cause (bidirected edges), so a
            confounder need not be drawn as a node.
        max_enumerated: Candidate nodes past which no adjustment set is enumerated (module
            docstring); the answer's reason says when it applied.

    Returns:
        Back-door, front-door (one treatment, one outcome, no conditioning), else ID or IDC;
        ``no_effect`` when no outcome descends from a treatment (unconditional queries).

    Raises:
        NotIdentifiable: ID finds a hedge, or a node of the query is hidden; the message is
            the reason.
        GraphError: A node not in the graph, overlapping roles, or a graph that is not a DAG.
    """
    answer = _identify_graph(graph, treatment, outcome, given, latent_edges, max_enumerated)
    if not answer.identified:
        raise NotIdentifiable(answer.reason)
    return answer


def _identify_graph(
    graph,
    treatment: Names,
    outcome: Names,
    given: Names,
    latent_edges,
    max_enumerated: int = MAX_ENUMERATED,
) -> Identification:
    dag = causal_dag(graph, latent_edges)
    ts, os, zs = _roles(treatment, outcome, given)
    for role, nodes in (("treatment", ts), ("outcome", os), ("given", zs)):
        for node in nodes:
            if node not in dag:
                raise GraphError(f"{role}: the graph has no node {node!r}")
    return _identify(dag, treatment, outcome, zs, max_enumerated)


def identify_effect(
    model,
    treatment: Names,
    outcome: Names,
    *,
    given: Names = (),
    with_panel: bool | None = None,
    pooled: bool = True,
    latent_edges: Sequence[tuple[str, str]] = (),
    max_enumerated: int = MAX_ENUMERATED,
) -> Identification:
    """Identify the effect of ``treatment`` on ``outcome``: back-door, front-door, then ID.

    For an SCM the data are taken to be pooled rows (every cell and step, as exports and tables
    are) unless ``pooled=False``. ``with_panel`` says which graph is read:

    - ``None`` (default): the unit graph, unless panel coordinates confound the query on pooled
      rows (the unit graph's answer does not hold once they are hidden); then the graph with the
      coordinates as observed nodes, and the reason says which coordinates and why;
    - ``True``: the graph with the coordinates as observed nodes (adjust for them);
    - ``False``: the unit graph, valid within one unit; for pooled rows a
      :class:`PooledDataWarning` names the coordinates that confound.

    A latent treatment or outcome is reported ``unidentified`` (its values are not in the
    data); an unknown node name raises :class:`GraphError`.

    Args:
        model (SCM | nx.DiGraph | DAG | Projection): An SCM (its default graph view: mutilated on an intervened SCM), or a graph as
            :func:`identify` takes it.
        treatment: One node or several.
        outcome: One node or several.
        given: Conditioning nodes of a conditional effect (IDC); none by default.
        with_panel: Whether the panel coordinates are nodes of the graph (see above); only for
            an SCM.
        pooled: Whether the data pool units over cells and time (the default); ``False`` for
            one unit's values across worlds, where coordinates are constant and cannot confound.
        latent_edges: Bidirected edges, for a graph (see :func:`identify`).
        max_enumerated: Candidate nodes past which no adjustment set is enumerated (see
            :func:`identify`).

    Returns:
        The first criterion that applies (or ``no_effect``/``unidentified``), with its reason.

    Raises:
        GraphError: An unknown node, overlapping roles, or ``with_panel`` for a graph.
    """
    if not isinstance(model, SCM):
        if with_panel:
            raise GraphError("with_panel needs an SCM: a graph has no panel coordinates")
        return _identify_graph(model, treatment, outcome, given, latent_edges, max_enumerated)
    scm = model
    ts, os, zs = _roles(treatment, outcome, given)
    for role, nodes in (("treatment", ts), ("outcome", os), ("given", zs)):
        for node in nodes:
            if node not in scm.nodes:
                raise GraphError(f"{role}: SCM {scm.name!r} has no node {node!r}")
    if with_panel:
        return _on_panel(scm, treatment, outcome, zs, None, max_enumerated)
    unit = _identify(scm.graph_view(), treatment, outcome, zs, max_enumerated)
    if not pooled:
        return unit
    confounding = _confounding_coordinates(scm, unit, ts, os, zs)
    if not confounding:
        return unit
    if with_panel is None:
        return _on_panel(scm, treatment, outcome, zs, confounding, max_enumerated)
    query = f"{', '.join(ts)} -> {', '.join(os)}"
    adjust = unit.adjustment_set
    answer = unit.kind if adjust is None else f"{unit.kind}, adjusting for {_set_text(adjust)}"
    warnings.warn(
        PooledDataWarning(
            f"identify_effect({query}, with_panel=False): the answer ({answer}) holds within "
            "one unit, not on rows pooled over cells and time, where panel coordinates "
            f"confound it: {describe(scm, confounding)}. Leave with_panel to its default (or "
            "pass True) to adjust for them, or pass pooled=False for one unit's data."
        ),
        stacklevel=2,
    )
    return replace(
        unit,
        reason=f"{unit.reason}; per unit only: on pooled rows the panel coordinates "
        f"{describe(scm, confounding)} confound it",
        confounding_coordinates=confounding,
    )


def id_estimand(graph: Projection, treatment: Sequence[str], outcome: Sequence[str]) -> str:
    """``P(outcome | do(treatment))`` as text in the observational ``P(V)`` (ID algorithm,
    Shpitser and Pearl 2006, lines 1-7); raises :class:`NotIdentifiable` naming the hedge.

    The text is ``str`` of :func:`~causaltrace.structure.id_algorithm.id_expression`'s
    expression: ``sum_{A}`` marginalizes ``A``, juxtaposition is a product, and ``P(v | A)``
    conditions the distribution of that step (``P`` at the top level; a bracketed expression
    after line 2 or 7 is a derived distribution). Its free variables include the nodes ID's
    line 3 adds to the treatment (see :mod:`causaltrace.structure.estimands`).

    Args:
        graph: The latent projection over the observed nodes (see :func:`latent_projection`).
        treatment: The intervened nodes.
        outcome: The outcome nodes (disjoint from ``treatment``).

    Raises:
        NotIdentifiable: The algorithm found a hedge.
        GraphError: A node is not in the graph, or treatment and outcome overlap.
    """
    return str(id_expression(graph, treatment, outcome))


# -- one query on one causal DAG --------------------------------------------------------------


def _identify(
    dag: nx.DiGraph,
    treatment: Names,
    outcome: Names,
    zs: tuple[str, ...],
    max_enumerated: int = MAX_ENUMERATED,
) -> Identification:
    """The query on a causal DAG (``observed`` on every node); names already checked."""
    ts, os, _ = _roles(treatment, outcome, zs)
    t_out, o_out = _shown(treatment), _shown(outcome)
    for role, nodes in (("treatment", ts), ("outcome", os), ("conditioning node", zs)):
        for node in nodes:
            if not dag.nodes[node].get("observed", True):
                return Identification(
                    t_out,
                    o_out,
                    "unidentified",
                    None,
                    f"the {role} {node!r} is latent (not observed)",
                    given=zs,
                )
    reach = set().union(*(nx.descendants(dag, t) for t in ts))
    if not zs and not reach & set(os):
        return Identification(
            t_out,
            o_out,
            "no_effect",
            frozenset(),
            f"no directed path from {_listed(ts)} to {_listed(os)}: the effect is zero",
            expression=Probability(_ordered(os, dag)),
        )
    notes: list[str] = []
    if len(ts) == 1 and len(os) == 1 and not zs:
        (t,), (o,) = ts, os
        for kind, finder, candidates, formula in (
            ("backdoor", _backdoor_sets, _backdoor_candidates, _backdoor_formula),
            ("frontdoor", _frontdoor_sets, _frontdoor_candidates, _frontdoor_formula),
        ):
            sets = finder(dag, t, o, max_enumerated)
            count = len(candidates(dag, t, o))
            bounded = count > max_enumerated
            if bounded:
                notes.append(_bound_note(kind, count, max_enumerated))
            if sets:
                how = (
                    f"{kind} criterion (one minimal set, networkx: {notes[-1]})"
                    if bounded
                    else f"{kind} criterion (pgmpy)"
                )
                return Identification(
                    t_out,
                    o_out,
                    kind,
                    sets[0],
                    how,
                    sets,
                    expression=formula(dag, t, o, sets[0]),
                )
    projection = projection_of(dag)
    try:
        expression = (
            idc_expression(projection, ts, os, zs) if zs else id_expression(projection, ts, os)
        )
    except NotIdentifiable as hedge:
        hidden = ", ".join(n for n in dag if n not in set(observed_nodes(dag))) or "none"
        criteria = (
            "no observed set satisfies the back-door or the front-door criterion, and "
            if len(ts) == len(os) == 1 and not zs
            else ("IDC reduces the conditional effect to ID, and " if zs else "")
        )
        return Identification(
            t_out,
            o_out,
            "unidentified",
            None,
            f"{criteria}the ID algorithm finds a hedge: {hedge} (latent nodes: {hidden})"
            + (f" ({'; '.join(notes)})" if notes else ""),
            given=zs,
        )
    if zs:
        how = "identified by IDC (Shpitser and Pearl 2006) and ID on the latent projection"
    elif len(ts) == len(os) == 1:
        how = (
            "no back-door or front-door set; identified by the ID algorithm (do-calculus) on the "
            "latent projection"
        )
    else:
        how = "identified by the ID algorithm (do-calculus) on the latent projection"
    if notes:
        how += f" ({'; '.join(notes)})"
    return Identification(
        t_out,
        o_out,
        "id",
        None,
        how,
        estimand=str(expression),
        expression=expression,
        given=zs,
    )


def _backdoor_formula(dag: nx.DiGraph, t: str, o: str, z: frozenset[str]) -> Estimand:
    """sum_z P(o | t, z) P(z) (``P(o | t)`` with no set)."""
    zs = _ordered(z, dag)
    if not zs:
        return Probability((o,), (t,))
    return Sum(zs, Product((Probability((o,), (t, *zs)), Probability(zs))))


def _frontdoor_formula(dag: nx.DiGraph, t: str, o: str, m: frozenset[str]) -> Estimand:
    """sum_m P(m | t) sum_t P(o | t, m) P(t): the inner sum binds ``t`` (the treatment's
    observed value), the outer ``P(m | t)`` reads the intervened one."""
    ms = _ordered(m, dag)
    inner = Sum((t,), Product((Probability((o,), (t, *ms)), Probability((t,)))))
    return summed(ms, Product((Probability(ms, (t,)), inner)))


# -- the panel -------------------------------------------------------------------------------


def _on_panel(
    scm: SCM,
    treatment: Names,
    outcome: Names,
    zs: tuple[str, ...],
    confounding: tuple[str, ...] | None,
    max_enumerated: int = MAX_ENUMERATED,
) -> Identification:
    """The query on the graph with the read coordinates as observed nodes."""
    graph = panel_graph(scm, "observed")
    coordinates = tuple(read_coordinates(scm))
    answer = _identify(graph, treatment, outcome, zs, max_enumerated)
    if confounding is None:
        ts, os, _ = _roles(treatment, outcome, zs)
        unit = _identify(scm.graph_view(), treatment, outcome, zs, max_enumerated)
        confounding = _confounding_coordinates(scm, unit, ts, os, zs)
    if confounding:
        why = f"panel coordinates confound it on pooled rows: {describe(scm, confounding)}"
    else:
        why = "no panel coordinate confounds it on pooled rows"
    return replace(
        answer,
        reason=f"{answer.reason}, on the graph with the panel coordinates "
        f"({', '.join(coordinates) or 'none read'}) as observed nodes; {why}",
        panel_coordinates=coordinates,
        confounding_coordinates=confounding,
    )


def _confounding_coordinates(
    scm: SCM,
    unit: Identification,
    ts: tuple[str, ...],
    os: tuple[str, ...],
    zs: tuple[str, ...],
) -> tuple[str, ...]:
    """The coordinates under which the unit graph's answer fails on pooled rows.

    The answer is checked on the pooled graph with the coordinates hidden (what an analysis
    that ignores them faces): a back-door or front-door set must still satisfy its criterion
    there, an ID expression must come out the same. No effect and no identification stay as
    they are. Named: each coordinate whose hiding alone breaks the answer (all read
    coordinates if only their combination does).
    """
    reads = read_coordinates(scm)
    if not reads or unit.kind in ("no_effect", "unidentified"):
        return ()
    unit_order = projection_of(scm.graph_view()).nodes

    def holds(hidden: nx.DiGraph) -> bool:
        if unit.kind == "backdoor":
            return _is_backdoor(hidden, ts[0], os[0], unit.adjustment_set)
        if unit.kind == "frontdoor":
            return _is_frontdoor(hidden, ts[0], os[0], unit.adjustment_set)
        p = projection_of(hidden)  # same observed nodes and directed edges: same order
        p = Projection(unit_order, p.directed, p.bidirected)
        try:
            again = idc_expression(p, ts, os, zs) if zs else id_expression(p, ts, os)
        except NotIdentifiable:
            return False
        return str(again) == unit.estimand

    if holds(panel_graph(scm, "hidden")):
        return ()
    named = tuple(c for c in reads if not holds(panel_graph(scm, "hidden", only=[c])))
    return named or tuple(reads)


def _is_backdoor(dag: nx.DiGraph, t: str, o: str, z: frozenset[str]) -> bool:
    """Pearl's back-door criterion: no node of ``z`` descends from ``t``, and ``z`` blocks every
    path from ``t`` to ``o`` that starts with an arrow into ``t``."""
    if z & nx.descendants(dag, t):
        return False
    g = dag.copy()
    g.remove_edges_from(list(g.out_edges(t)))
    return nx.is_d_separator(g, {t}, {o}, set(z))


def _is_frontdoor(dag: nx.DiGraph, t: str, o: str, m: frozenset[str]) -> bool:
    """Pearl's front-door criterion: ``m`` intercepts every directed path from ``t`` to ``o``;
    no back-door path from ``t`` to ``m`` is open; ``t`` blocks every back-door path from ``m``
    to ``o``."""
    cut = dag.copy()
    cut.remove_nodes_from(m)
    if nx.has_path(cut, t, o):
        return False
    g = dag.copy()
    g.remove_edges_from(list(g.out_edges(t)))
    if not nx.is_d_separator(g, {t}, set(m), set()):
        return False
    g = dag.copy()
    g.remove_edges_from([e for n in m for e in list(g.out_edges(n))])
    return nx.is_d_separator(g, set(m), {o}, {t})


# -- pgmpy ---------------------------------------------------------------------------------


def _backdoor_candidates(dag: nx.DiGraph, treatment: str, outcome: str) -> set[str]:
    """What a back-door set may hold: observed nodes that do not descend from the treatment."""
    return set(observed_nodes(dag)) - {treatment, outcome} - nx.descendants(dag, treatment)


def _frontdoor_candidates(dag: nx.DiGraph, treatment: str, outcome: str) -> set[str]:
    return set(observed_nodes(dag)) - {treatment, outcome}


def _bound_note(kind: str, candidates: int, bound: int) -> str:
    return (
        f"{candidates} {kind} candidate nodes are more than max_enumerated={bound} to enumerate "
        "(pass a larger max_enumerated to identify_effect or identify for every set)"
    )


def _minimal_backdoor(dag: nx.DiGraph, treatment: str, outcome: str) -> tuple[frozenset[str], ...]:
    """One minimal back-door set, without enumerating (``()`` if none exists)."""
    g = dag.copy()
    g.remove_edges_from(list(g.out_edges(treatment)))
    restricted = _backdoor_candidates(dag, treatment, outcome)
    found = nx.find_minimal_d_separator(g, {treatment}, {outcome}, restricted=restricted)
    return () if found is None else (frozenset(found),)


def _backdoor_sets(
    dag: nx.DiGraph, treatment: str, outcome: str, max_enumerated: int = MAX_ENUMERATED
) -> tuple[frozenset[str], ...]:
    if len(_backdoor_candidates(dag, treatment, outcome)) > max_enumerated:
        return _minimal_backdoor(dag, treatment, outcome)
    inference = _inference(dag)
    with _quiet():
        try:
            found = inference.get_all_backdoor_adjustment_sets(treatment, outcome)
        except ValueError:  # pgmpy: "No valid adjustment set found"
            return ()
    return _sorted_sets(found) if found else (frozenset(),)


def _frontdoor_sets(
    dag: nx.DiGraph, treatment: str, outcome: str, max_enumerated: int = MAX_ENUMERATED
) -> tuple[frozenset[str], ...]:
    if len(_frontdoor_candidates(dag, treatment, outcome)) > max_enumerated:
        return ()  # not searched: ID is complete (the caller's reason says so)
    inference = _inference(dag)
    with _quiet():
        return _sorted_sets(inference.get_all_frontdoor_adjustment_sets(treatment, outcome))


def _inference(dag: nx.DiGraph):
    """pgmpy's CausalInference over a causal DAG (its hidden nodes as pgmpy's ``latents``)."""
    with _quiet():  # pgmpy 1.x warns about its own deprecated modules on import
        # lazy: pgmpy takes ~1.7 s to import; only identification needs it
        from pgmpy.base import DAG
        from pgmpy.inference import CausalInference

    model = DAG(ebunch=list(dag.edges()))
    model.add_nodes_from(dag.nodes)  # isolated nodes too
    model.latents = {n for n in dag if n not in set(observed_nodes(dag))}
    return CausalInference(model)


@contextmanager
def _quiet() -> Iterator[None]:
    """Silence pgmpy 1.x's deprecation notices for the CausalInference adjustment API."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


def _sorted_sets(sets) -> tuple[frozenset[str], ...]:
    return tuple(sorted((frozenset(s) for s in sets), key=lambda s: (len(s), sorted(s))))


# -- names -----------------------------------------------------------------------------------


def _as_tuple(names: Names) -> tuple[str, ...]:
    return (names,) if isinstance(names, str) else tuple(names)


def _shown(names: Names) -> str | tuple[str, ...]:
    """A query's node as given: a string stays a string, a sequence becomes a tuple."""
    return names if isinstance(names, str) else tuple(names)


def _set_text(nodes: frozenset[str]) -> str:
    return "{" + ", ".join(sorted(nodes)) + "}" if nodes else "the empty set"


def _listed(names: Sequence[str]) -> str:
    return ", ".join(repr(n) for n in names)


def _ordered(nodes, dag: nx.DiGraph) -> tuple[str, ...]:
    rank = {n: i for i, n in enumerate(nx.topological_sort(dag))}
    return tuple(sorted(nodes, key=rank.__getitem__))


def _roles(
    treatment: Names, outcome: Names, given: Names
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The three roles as tuples, checked non-empty (treatment, outcome) and disjoint."""
    ts, os, zs = _as_tuple(treatment), _as_tuple(outcome), _as_tuple(given)
    if not ts or not os:
        raise GraphError("a query needs at least one treatment and one outcome node")
    if len(ts) == len(os) == 1 and ts == os:
        raise GraphError(f"treatment and outcome are the same node {ts[0]!r}")
    for (a, xs), (b, ys) in (
        (("treatment", ts), ("outcome", os)),
        (("treatment", ts), ("given", zs)),
        (("outcome", os), ("given", zs)),
    ):
        both = sorted(set(xs) & set(ys))
        if both:
            raise GraphError(f"the {a} and the {b} share {both}")
    return ts, os, zs


def _check_adjustable(scm: SCM, treatment: str, outcome: str) -> None:
    """Known, distinct and observed: what pgmpy's criteria need."""
    for role, node in (("treatment", treatment), ("outcome", outcome)):
        if node not in scm.nodes:
            raise GraphError(f"{role}: SCM {scm.name!r} has no node {node!r}")
    if treatment == outcome:
        raise GraphError(f"treatment and outcome are the same node {treatment!r}")
    for role, node in (("treatment", treatment), ("outcome", outcome)):
        if not scm.nodes[node].observed:
            raise GraphError(f"the {role} {node!r} is latent: adjustment needs it observed")
