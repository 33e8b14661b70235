"""Structural causal models over a panel: a DAG of nodes, one mechanism each.

Construction validates the graph (duplicate names, unknown parents, cycles with their nodes in
order) and, by default, dry-runs every mechanism once to check the shape and dtype it returns.
The graph-only views (networkx, pgmpy, d-separation, local Markov independences, a picture)
import their heavy libraries only when called.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np

from causaltrace.errors import CycleError, GraphError, InterventionError
from causaltrace.intervention_points import InterventionDraw, InterventionPoint
from causaltrace.interventions import Intervention, intervene_node
from causaltrace.node import Node
from causaltrace.panel import Panel

if TYPE_CHECKING:  # pragma: no cover
    from causaltrace.simulate import World, Worlds


@dataclass(frozen=True)
class Independence:
    """``x`` is independent of every node in ``others`` given ``given`` (read off the graph)."""

    x: str
    others: frozenset[str]
    given: frozenset[str]

    def __str__(self) -> str:
        rhs = ", ".join(sorted(self.others))
        cond = ", ".join(sorted(self.given))
        return f"{self.x} _|_ {{{rhs}}} | {{{cond}}}"


class SCM:
    """A structural causal model: nodes over a panel, with optional intervention points."""

    def __init__(
        self,
        nodes: Iterable[Node],
        panel: Panel,
        intervention_points: Iterable[InterventionPoint] = (),
        *,
        name: str = "scm",
        validate_mechanisms: bool = True,
    ):
        self.name = name
        self.panel = panel
        nodes = list(nodes)
        by_name: dict[str, Node] = {}
        for node in nodes:
            if not isinstance(node, Node):
                raise GraphError(f"SCM {name!r}: expected Node objects, got {type(node).__name__}")
            if node.name in by_name:
                raise GraphError(f"SCM {name!r}: duplicate node name {node.name!r}")
            by_name[node.name] = node
        for node in nodes:
            for parent in node.parents:
                if parent not in by_name:
                    raise GraphError(
                        f"SCM {name!r}: node {node.name!r} has unknown parent {parent!r}"
                    )
        self._graph = nx.DiGraph()
        self._graph.add_nodes_from(n.name for n in nodes)
        self._graph.add_edges_from((p, n.name) for n in nodes for p in n.parents)
        self.order: tuple[str, ...] = _topological_order(self._graph, [n.name for n in nodes])
        self.nodes: Mapping[str, Node] = {n: by_name[n] for n in self.order}
        points: dict[str, InterventionPoint] = {}
        for point in intervention_points:
            if point.name in points:
                raise GraphError(f"SCM {name!r}: duplicate intervention point {point.name!r}")
            points[point.name] = point
        self.intervention_points: Mapping[str, InterventionPoint] = points
        if validate_mechanisms:
            from causaltrace.simulate import sample

            sample(self, seed=0)  # raises MechanismError naming the node on a bad output

    # -- graph views -----------------------------------------------------------------------
    @property
    def graph(self) -> nx.DiGraph:
        """A copy of the causal graph as a ``networkx.DiGraph`` (node attribute ``observed``)."""
        g = self._graph.copy()
        nx.set_node_attributes(g, {n: self.nodes[n].observed for n in self.order}, "observed")
        return g

    def _require(self, name: str) -> None:
        if name not in self.nodes:
            raise GraphError(f"SCM {self.name!r} has no node {name!r}")

    def parents(self, name: str) -> tuple[str, ...]:
        self._require(name)
        return self.nodes[name].parents

    def children(self, name: str) -> set[str]:
        self._require(name)
        return set(self._graph.successors(name))

    def ancestors(self, name: str) -> set[str]:
        self._require(name)
        return nx.ancestors(self._graph, name)

    def descendants(self, name: str) -> set[str]:
        self._require(name)
        return nx.descendants(self._graph, name)

    @property
    def observed(self) -> tuple[str, ...]:
        return tuple(n for n in self.order if self.nodes[n].observed)

    @property
    def latent(self) -> tuple[str, ...]:
        return tuple(n for n in self.order if not self.nodes[n].observed)

    def d_separated(
        self, x: str | Iterable[str], y: str | Iterable[str], given: str | Iterable[str] = ()
    ) -> bool:
        """Whether ``x`` and ``y`` are d-separated by ``given`` in the graph (networkx)."""
        xs, ys, zs = (_as_set(v) for v in (x, y, given))
        for n in xs | ys | zs:
            self._require(n)
        if xs & ys:
            return False
        if (xs | ys) & zs:
            raise GraphError(
                f"d-separation query: conditioning set {sorted(zs)} overlaps the "
                f"queried nodes {sorted(xs | ys)}"
            )
        return nx.is_d_separator(self._graph, xs, ys, zs)

    def local_markov(self) -> list[Independence]:
        """Each node independent of its non-descendants (minus parents) given its parents.

        Only nodes with at least one such non-descendant are listed.
        """
        out = []
        for n in self.order:
            others = set(self.order) - self.descendants(n) - set(self.parents(n)) - {n}
            if others:
                out.append(Independence(n, frozenset(others), frozenset(self.parents(n))))
        return out

    def to_pgmpy(self):
        """The graph as a ``pgmpy.base.DAG`` with latent nodes marked (imports pgmpy)."""
        from pgmpy.base import DAG

        dag = DAG(ebunch=list(self._graph.edges()))
        dag.add_nodes_from(self.order)  # isolated nodes too
        dag.latents = set(self.latent)
        return dag

    def draw(self, path: str, *, title: str | None = None, highlight: Iterable[str] = ()) -> str:
        """Save a picture of the graph as PNG (layered by topological generation)."""
        from causaltrace.plotting import draw_graph

        return draw_graph(self, path, title=title or self.name, highlight=set(highlight))

    # -- interventions ----------------------------------------------------------------------
    def intervene(self, *interventions: Intervention | Sequence[Intervention]) -> SCM:
        """A new SCM in which each intervention wraps its node's mechanism, in order."""
        flat = _flatten(interventions)
        nodes = dict(self.nodes)
        for iv in flat:
            if not isinstance(iv, Intervention):
                raise InterventionError(f"expected an Intervention, got {type(iv).__name__}")
            if iv.node not in nodes:
                raise InterventionError(
                    f"intervention {type(iv).__name__} targets unknown node {iv.node!r} "
                    f"of SCM {self.name!r}"
                )
            iv.where.validate(self.panel)
            if iv.window.onset >= self.panel.n_time:
                raise InterventionError(
                    f"intervention on {iv.node!r}: onset {iv.window.onset} is past the panel's "
                    f"last time step {self.panel.n_time - 1}"
                )
            nodes[iv.node] = intervene_node(nodes[iv.node], iv)
        return SCM(
            nodes.values(),
            self.panel,
            self.intervention_points.values(),
            name=self.name,
            validate_mechanisms=False,
        )

    def point(self, name: str) -> InterventionPoint:
        try:
            return self.intervention_points[name]
        except KeyError:
            raise InterventionError(
                f"SCM {self.name!r} has no intervention point {name!r}; known: "
                f"{', '.join(self.intervention_points) or '(none)'}"
            ) from None

    def interventions_for(self, draw: InterventionDraw) -> tuple[Intervention, ...]:
        return self.point(draw.point).interventions(draw)

    # -- simulation -------------------------------------------------------------------------
    def sample(self, seed: int | np.random.SeedSequence) -> World:
        """The observational world for ``seed``."""
        from causaltrace.simulate import sample

        return sample(self, seed)

    def simulate(
        self,
        interventions: Sequence[Intervention] = (),
        *,
        seed: int | np.random.SeedSequence,
        counterfactual: bool = True,
    ) -> Worlds:
        """Factual world under ``interventions`` and its counterfactual without them."""
        from causaltrace.simulate import simulate

        return simulate(self, interventions, seed=seed, counterfactual=counterfactual)

    def __repr__(self) -> str:
        return (
            f"SCM({self.name!r}, {len(self.nodes)} nodes, panel {self.panel.shape}, "
            f"{len(self.intervention_points)} intervention points)"
        )


def _topological_order(graph: nx.DiGraph, declared: list[str]) -> tuple[str, ...]:
    """Topological order that breaks ties by declaration order (stable across runs)."""
    try:
        rank = {n: i for i, n in enumerate(declared)}
        return tuple(nx.lexicographical_topological_sort(graph, key=rank.__getitem__))
    except nx.NetworkXUnfeasible:
        cycle_edges = nx.find_cycle(graph)
        raise CycleError([u for u, _ in cycle_edges]) from None


def _as_set(value: str | Iterable[str]) -> set[str]:
    return {value} if isinstance(value, str) else set(value)


def _flatten(items) -> list[Intervention]:
    out: list[Intervention] = []
    for item in items:
        if isinstance(item, (list, tuple)):
            out.extend(_flatten(item))
        else:
            out.append(item)
    return out
