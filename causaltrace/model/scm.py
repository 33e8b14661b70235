"""Structural causal models over a panel: a DAG of nodes, one mechanism each.

Construction validates the graph (duplicate names, unknown parents, cycles with their nodes in
order) and, by default, dry-runs every mechanism once to check the shape and dtype it returns.
The graph-only views (networkx, pgmpy, d-separation, local Markov independences, a picture)
import their heavy libraries only when called.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import networkx as nx
import numpy as np

from causaltrace.errors import CycleError, GraphError, InterventionError
from causaltrace.model.intervention_points import InterventionDraw, InterventionPoint
from causaltrace.model.interventions import Do, Intervention, Replace, intervene_node
from causaltrace.model.node import Constant, Exogenous, Linear, Node
from causaltrace.model.noise import NoiseStreams, NoNoise
from causaltrace.model.panel import Panel
from causaltrace.model.simulate import sample, simulate
from causaltrace.plotting import draw_graph

if TYPE_CHECKING:  # pragma: no cover
    from causaltrace.model.simulate import World, Worlds

GraphMode = Literal["whole-panel", "none"]


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
    """A structural causal model: nodes over a panel, with optional intervention points.

    Args:
        nodes: The model's nodes, in any order; names must be unique and every parent must be
            one of them (the graph must be acyclic).
        panel: The panel (segments x time) every node's array is shaped by.
        intervention_points: The root causes an episode can draw from; none by default.
        name: A name used in error messages and reprs; ``"scm"`` by default.
        validate_mechanisms: Sample once with ``seed=0`` on construction so that a mechanism
            returning a bad array fails here, naming its node; on by default.

    Raises:
        GraphError: A duplicate or unknown node name, a cycle, or a duplicate intervention
            point.
        MechanismError: With ``validate_mechanisms``, a mechanism returned an invalid array.
    """

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
        self._applied: tuple[Intervention, ...] = ()  # set by intervene()
        if validate_mechanisms:
            sample(self, seed=0)  # raises MechanismError naming the node on a bad output

    # -- graph views -----------------------------------------------------------------------
    # Every view below reads one graph, chosen by ``mutilated``:
    #   "whole-panel" (default): the declared graph (plus ``Replace``'s extra parents) with the
    #     incoming edges of each node under a *hard* intervention at full weight on every cell
    #     and time step removed (Pearl's mutilated graph);
    #   "none": the declared graph (plus ``Replace``'s extra parents), nothing removed.
    # A sliced or time-windowed hard intervention, or a soft one (Shift, Scale, a Replace whose
    # mechanism may read parents), keeps the edges: the node still depends on its parents in
    # the other cells / times, and pooled over the panel the dependence is there.
    @property
    def graph(self) -> nx.DiGraph:
        """A copy of the causal graph as a ``networkx.DiGraph`` (node attribute ``observed``).

        On an intervened SCM this is the mutilated graph where an intervention is hard, whole
        panel and whole window (see :meth:`graph_view`); a sliced, windowed or soft intervention
        keeps the node's incoming edges. Pooled over cells and time, nodes whose mechanisms vary
        with the panel coordinates are dependent although this graph may say otherwise: see
        :meth:`graph_with_panel`.
        """
        return self.graph_view()

    def graph_view(self, mutilated: GraphMode = "whole-panel") -> nx.DiGraph:
        """A copy of the graph, mutilated (``"whole-panel"``) or as declared (``"none"``).

        ``"whole-panel"`` removes the incoming edges of a node only where an intervention sets
        it at full weight on every cell and time step (``Do``, or a ``Replace`` whose mechanism
        is detectably parent-free: ``Exogenous``, ``Constant``, a ``Linear`` without weights, and
        no extra parents), because only then does the node not depend on its parents anywhere
        in the panel. A later soft ``Replace`` on the node restores the edges.

        Args:
            mutilated: ``"whole-panel"`` (default) for the mutilated graph, ``"none"`` for the
                graph as declared.

        Returns:
            A new ``networkx.DiGraph`` with node attribute ``observed``.
        """
        g = self._view(mutilated).copy()
        nx.set_node_attributes(g, {n: self.nodes[n].observed for n in self.order}, "observed")
        return g

    @property
    def interventions(self) -> tuple[Intervention, ...]:
        """The interventions applied to get this SCM (by :meth:`intervene`), in order."""
        return self._applied

    def mutilated_nodes(self) -> frozenset[str]:
        """Nodes whose incoming edges the default ("whole-panel") view removes."""
        return frozenset(_hard_cuts(self._applied, self.panel))

    def _view(self, mutilated: GraphMode = "whole-panel") -> nx.DiGraph:
        if mutilated not in ("whole-panel", "none"):
            raise GraphError(f"mutilated must be 'whole-panel' or 'none', got {mutilated!r}")
        if mutilated == "none" or not self._applied:
            return self._graph
        cache = self.__dict__.setdefault("_view_cache", {})
        if mutilated not in cache:
            g = self._graph.copy()
            for node, keep in _hard_cuts(self._applied, self.panel).items():
                g.remove_edges_from(
                    [(p, node) for p in list(g.predecessors(node)) if p not in keep]
                )
            cache[mutilated] = g
        return cache[mutilated]

    def _require(self, name: str) -> None:
        if name not in self.nodes:
            raise GraphError(f"SCM {self.name!r} has no node {name!r}")

    def parents(self, name: str, *, mutilated: GraphMode = "whole-panel") -> tuple[str, ...]:
        """Parents in the chosen view, in declaration order.

        Args:
            name: The node.
            mutilated: Which graph to read: ``"whole-panel"`` (default) removes the incoming
                edges of nodes under a hard, whole-panel, whole-window intervention;
                ``"none"`` reads the graph as declared.
        """
        self._require(name)
        preds = set(self._view(mutilated).predecessors(name))
        return tuple(p for p in self.nodes[name].parents if p in preds)

    def children(self, name: str, *, mutilated: GraphMode = "whole-panel") -> set[str]:
        """Children of a node in the chosen view.

        Args:
            name: The node.
            mutilated: Which graph to read: ``"whole-panel"`` (default) removes the incoming
                edges of nodes under a hard, whole-panel, whole-window intervention;
                ``"none"`` reads the graph as declared.
        """
        self._require(name)
        return set(self._view(mutilated).successors(name))

    def ancestors(self, name: str, *, mutilated: GraphMode = "whole-panel") -> set[str]:
        """Ancestors of a node in the chosen view (the node itself excluded).

        Args:
            name: The node.
            mutilated: Which graph to read: ``"whole-panel"`` (default) removes the incoming
                edges of nodes under a hard, whole-panel, whole-window intervention;
                ``"none"`` reads the graph as declared.
        """
        self._require(name)
        return nx.ancestors(self._view(mutilated), name)

    def descendants(self, name: str, *, mutilated: GraphMode = "whole-panel") -> set[str]:
        """Descendants of a node in the chosen view (the node itself excluded).

        Args:
            name: The node.
            mutilated: Which graph to read: ``"whole-panel"`` (default) removes the incoming
                edges of nodes under a hard, whole-panel, whole-window intervention;
                ``"none"`` reads the graph as declared.
        """
        self._require(name)
        return nx.descendants(self._view(mutilated), name)

    @property
    def observed(self) -> tuple[str, ...]:
        return tuple(n for n in self.order if self.nodes[n].observed)

    @property
    def latent(self) -> tuple[str, ...]:
        return tuple(n for n in self.order if not self.nodes[n].observed)

    def d_separated(
        self,
        x: str | Iterable[str],
        y: str | Iterable[str],
        given: str | Iterable[str] = (),
        *,
        mutilated: GraphMode = "whole-panel",
    ) -> bool:
        """Whether ``x`` and ``y`` are d-separated by ``given`` in the graph (networkx).

        On an intervened SCM the default answers for the mutilated graph, where only hard,
        whole-panel, whole-window interventions cut edges (see :meth:`graph_view`); pass
        ``mutilated="none"`` for the declared graph. d-separation implies independence per unit
        (cell x time step); pooled over units it does not, when mechanisms vary with the panel
        coordinates: query :meth:`graph_with_panel` for tests on pooled data.

        Args:
            x: A node or a set of nodes.
            y: A node or a set of nodes; overlapping ``x`` answers ``False``.
            given: The conditioning node(s); empty by default. Must not overlap ``x`` or ``y``.
            mutilated: Which graph to read: ``"whole-panel"`` (default) removes the incoming
                edges of nodes under a hard, whole-panel, whole-window intervention;
                ``"none"`` reads the graph as declared.

        Raises:
            GraphError: An unknown node, or ``given`` overlaps the queried nodes.
        """
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
        return nx.is_d_separator(self._view(mutilated), xs, ys, zs)

    def local_markov(
        self, *, mutilated: GraphMode = "whole-panel", with_panel: bool = False
    ) -> list[Independence]:
        """Each node independent of its non-descendants (minus parents) given its parents.

        Only nodes with at least one such non-descendant are listed. These hold per unit (one
        cell at one time step). Pooled over cells and time they can fail: a mechanism that
        varies with a segment level or the date (demand by channel) makes the panel coordinates
        a common cause the plain graph does not show. ``with_panel=True`` reads the graph of
        :meth:`graph_with_panel` instead, whose independences (conditioning on the coordinates
        it makes parents) are the ones to test on pooled data.

        Args:
            mutilated: Which graph to read: ``"whole-panel"`` (default) removes the incoming
                edges of nodes under a hard, whole-panel, whole-window intervention;
                ``"none"`` reads the graph as declared.
            with_panel: Read :meth:`graph_with_panel` (coordinates as parents) instead of the
                plain graph; off by default.

        Returns:
            One :class:`Independence` per node that has a non-descendant other than its parents.
        """
        g = self.graph_with_panel(mutilated=mutilated) if with_panel else self._view(mutilated)
        return _local_markov(g)

    def to_pgmpy(self, *, mutilated: GraphMode = "whole-panel"):
        """The graph as a ``pgmpy.base.DAG`` with latent nodes marked (imports pgmpy).

        The view is :meth:`graph_view`'s: mutilated only by hard, whole-panel, whole-window
        interventions; a sliced, windowed or soft intervention keeps the node's edges.

        Args:
            mutilated: Which graph to read: ``"whole-panel"`` (default) removes the incoming
                edges of nodes under a hard, whole-panel, whole-window intervention;
                ``"none"`` reads the graph as declared.
        """
        # lazy: pgmpy takes ~1.7 s to import; only this export needs it
        from pgmpy.base import DAG

        dag = DAG(ebunch=list(self._view(mutilated).edges()))
        dag.add_nodes_from(self.order)  # isolated nodes too
        dag.latents = set(self.latent)
        return dag

    # -- panel coordinates as nodes ---------------------------------------------------------
    @property
    def panel_coordinates(self) -> tuple[str, ...]:
        """Names of the coordinate nodes of :meth:`graph_with_panel`: the dimensions, then time."""
        return (*self.panel.dimension_names, "time")

    def panel_parents(self) -> Mapping[str, tuple[str, ...]]:
        """The panel coordinates each node's mechanism reads, found by a probe (cached).

        Each mechanism is called once with every parent and its noise held at one constant
        (the median of a ``sample(scm, seed=0)`` and of its noise draw); any variation of the
        output across a dimension's levels (other dimensions fixed) or over time can then only
        come from the coordinates, so that coordinate is marked. A mechanism that raises on the
        probe is marked as reading every coordinate (conservative). A dependence that vanishes
        at the probed input (an interaction with a parent) is missed.
        """
        cache = self.__dict__.setdefault("_panel_parents", {})
        if not cache:
            cache.update(_probe_coordinates(self))
        return cache

    def graph_with_panel(self, *, mutilated: GraphMode = "whole-panel") -> nx.DiGraph:
        """The graph plus one node per panel dimension and one for ``time`` (attribute
        ``coordinate=True``), each a parent of the nodes whose mechanisms read it.

        Pooled over cells and time, the coordinates are common causes: demand and checkout rate
        both vary by channel, so they correlate across cells although the plain graph calls them
        independent. Units are draws of (coordinates, node values) with noise independent across
        units, so this graph's d-separations hold for pooled data, provided mechanisms act unit
        by unit (lags along time or aggregates across cells couple units, and no graph over one
        unit's variables can describe that).

        Args:
            mutilated: Which graph to read: ``"whole-panel"`` (default) removes the incoming
                edges of nodes under a hard, whole-panel, whole-window intervention;
                ``"none"`` reads the graph as declared.
        """
        g = self.graph_view(mutilated)
        coords = self.panel_coordinates
        clash = sorted(set(coords) & set(self.order))
        if clash:
            raise GraphError(
                f"SCM {self.name!r}: node(s) {clash} share a name with a panel coordinate"
            )
        g.add_nodes_from(coords, observed=True, coordinate=True)
        nx.set_node_attributes(g, {n: False for n in self.order}, "coordinate")
        g.add_edges_from((c, n) for n, cs in self.panel_parents().items() for c in cs)
        return g

    def draw(self, path: str, *, title: str | None = None, highlight: Iterable[str] = ()) -> str:
        """Save a picture of the graph as PNG (layered by topological generation).

        Args:
            path: Where to write the PNG.
            title: The picture's title; the SCM's name by default.
            highlight: Nodes to draw highlighted; none by default.

        Returns:
            The path written.
        """

        return draw_graph(self, path, title=title or self.name, highlight=set(highlight))

    # -- interventions ----------------------------------------------------------------------
    def intervene(self, *interventions: Intervention | Sequence[Intervention]) -> SCM:
        """A new SCM in which each intervention wraps its node's mechanism, in order.

        Args:
            *interventions: Interventions, or sequences of them (flattened), applied in order;
                this SCM is left unchanged.

        Returns:
            The intervened SCM; its :attr:`interventions` lists everything applied so far.

        Raises:
            InterventionError: An intervention targets an unknown node, its slice does not fit
                the panel, or its onset is past the panel's last time step.
        """
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
        out = SCM(
            nodes.values(),
            self.panel,
            self.intervention_points.values(),
            name=self.name,
            validate_mechanisms=False,
        )
        out._applied = self._applied + tuple(flat)  # read by the graph views (mutilation)
        return out

    def point(self, name: str) -> InterventionPoint:
        """The intervention point called ``name``.

        Args:
            name: The intervention point's name.

        Raises:
            InterventionError: The SCM has no such intervention point.
        """
        try:
            return self.intervention_points[name]
        except KeyError:
            raise InterventionError(
                f"SCM {self.name!r} has no intervention point {name!r}; known: "
                f"{', '.join(self.intervention_points) or '(none)'}"
            ) from None

    def interventions_for(self, draw: InterventionDraw) -> tuple[Intervention, ...]:
        """The interventions a drawn root cause stands for (see :meth:`InterventionPoint.interventions`).

        Args:
            draw: A draw of one of this SCM's intervention points.
        """
        return self.point(draw.point).interventions(draw)

    # -- simulation -------------------------------------------------------------------------
    def sample(self, seed: int | np.random.SeedSequence) -> World:
        """The observational world for ``seed``.

        Args:
            seed: The root seed of every node's noise stream.
        """

        return sample(self, seed)

    def simulate(
        self,
        interventions: Sequence[Intervention] = (),
        *,
        seed: int | np.random.SeedSequence,
        counterfactual: bool = True,
    ) -> Worlds:
        """Factual world under ``interventions`` and its counterfactual without them.

        Args:
            interventions: The interventions of the factual world; none by default.
            seed: The root seed of every node's noise stream (shared by both worlds).
            counterfactual: Also compute the world without interventions; on by default.

        Returns:
            Both worlds (see :func:`causaltrace.model.simulate.simulate`).
        """

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


# -- graph-view helpers ----------------------------------------------------------------------
def _local_markov(g: nx.DiGraph) -> list[Independence]:
    out = []
    for n in nx.topological_sort(g):
        parents = set(g.predecessors(n))
        others = set(g.nodes) - nx.descendants(g, n) - parents - {n}
        if others:
            out.append(Independence(n, frozenset(others), frozenset(parents)))
    return out


def _parent_free(iv: Intervention) -> bool:
    """Whether the intervention's target reads no parent (a hard intervention)."""
    if isinstance(iv, Do):
        return True
    if isinstance(iv, Replace) and not iv.parents:
        mech = iv.mechanism
        return isinstance(mech, (Exogenous, Constant)) or (
            isinstance(mech, Linear) and not mech.weights
        )
    return False


def _hard_cuts(applied: Sequence[Intervention], panel: Panel) -> dict[str, frozenset[str]]:
    """Node -> the parents it keeps, for nodes cut by a hard full-weight whole-panel intervention.

    Full weight on every cell and step (``weight_summary``'s flag) means whole panel, onset 0, no
    end and a ``Step`` profile (or a slice that covers every cell). After a cut, ``Do``, ``Shift``
    and ``Scale`` only read the (parent-free) value; a soft ``Replace`` may read the node's parents
    again, so it undoes the cut.
    """
    cuts: dict[str, frozenset[str]] = {}
    for iv in applied:
        if _parent_free(iv) and iv.weight_summary(panel)[1]:
            cuts[iv.node] = frozenset()
        elif isinstance(iv, Replace):
            cuts.pop(iv.node, None)
    return cuts


def _probe_coordinates(scm: SCM) -> dict[str, tuple[str, ...]]:

    world = sample(scm, seed=0)
    streams = NoiseStreams(0)
    panel = scm.panel
    out: dict[str, tuple[str, ...]] = {}
    for name in scm.order:
        node = scm.nodes[name]
        noise = (
            None
            if type(node.noise) is NoNoise
            else node.noise.draw(streams.generator(name), panel.shape)
        )
        found: set[str] = set()
        for level in _PROBE_LEVELS:
            parents = {p: _constant_like(world[p], level) for p in node.parents}
            constant_noise = None if noise is None else _constant_like(noise, level)
            try:
                value = node.mechanism(parents, constant_noise, panel)
                found.update(_varying_coordinates(np.asarray(value, dtype=np.float64), panel))
            except Exception:  # a mechanism that cannot take constant inputs: assume it reads all
                found.update(scm.panel_coordinates)
        out[name] = tuple(c for c in scm.panel_coordinates if c in found)
    return out


# Parents held at several levels: at one level a mechanism may hide what it reads (binomial
# thinning of a median count of 0 is 0 in every cell, whatever its cell-specific rate), so a
# coordinate counts if the output varies along it at any of them.
_PROBE_LEVELS = (0.5, 0.9, 1.0)


def _nested_in(panel: Panel, dim: str) -> set[str]:
    """The other dimensions whose level fixes ``dim``'s in every cell (finer ones nested in it)."""
    codes = panel.codes(dim)
    n_levels = int(codes.max()) + 1 if codes.size else 1
    out = set()
    for other in panel.dimension_names:
        if other == dim:
            continue
        theirs = panel.codes(other)
        pairs = np.unique(theirs.astype(np.int64) * n_levels + codes)
        if len(pairs) == len(np.unique(theirs)):
            out.add(other)
    return out


def _constant_like(values: np.ndarray, level: float = 0.5) -> np.ndarray:
    """The array's ``level`` quantile everywhere, in its dtype (read-only, like simulated
    parents)."""
    q = float(np.quantile(np.asarray(values, dtype=np.float64), level))
    out = np.full(values.shape, np.rint(q) if values.dtype.kind in "iu" else q)
    out = out.astype(values.dtype)
    out.setflags(write=False)
    return out


def _varying_coordinates(value: np.ndarray, panel: Panel) -> tuple[str, ...]:
    """Coordinates along which ``value`` varies (other dimensions and time held fixed).

    A dimension nested in a coarser one (a creative belongs to one campaign) is not held fixed
    when the coarser one is tested: holding the creative would hold its campaign too, and a
    mechanism that varies by campaign would read as reading nothing. The coarser dimension is
    then also marked when the finer one alone varies (its levels differ across campaigns as
    well), which adds a coordinate an adjustment needs no more than the finer one."""
    tol = 1e-9 * max(1.0, float(np.nanmax(np.abs(value))) if value.size else 1.0)
    found = []
    for dim in panel.dimension_names:
        finer = _nested_in(panel, dim)
        others = tuple(d for d in panel.dimension_names if d != dim and d not in finer)
        index, n_groups = panel.group_index(others)
        hi = np.full((n_groups, panel.n_time), -np.inf)
        lo = np.full((n_groups, panel.n_time), np.inf)
        np.maximum.at(hi, index, value)
        np.minimum.at(lo, index, value)
        if (hi - lo > tol).any():
            found.append(dim)
    if (value.max(axis=1) - value.min(axis=1) > tol).any():
        found.append("time")
    return tuple(found)
