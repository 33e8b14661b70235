"""Panel coordinates in identification: the graphs pooled data follow, and the warning.

An SCM's graph describes one unit (one cell at one time step). Pooled rows (every cell and
step, as the exports and the tables are) are draws of (coordinates, values): each dimension of
the panel and ``time`` is a root node, a parent of the nodes whose mechanisms read it
(:meth:`~causaltrace.model.scm.SCM.graph_with_panel`, found by a probe). A coordinate read by
an ancestor of the treatment and by one of the outcome is then a common cause the unit graph
does not show: in the example domain ``channel`` sets both the demand (so the visits) and the
checkout rate (so the orders), and on pooled rows the unadjusted slope of tracked orders on
visits is 35% below the effect (docs/research-guide.md, section 4).

Two graphs over the pooled rows, built here:

- ``coordinates="observed"``: the coordinates are columns of the data (the exports have them)
  and may be adjusted for;
- ``coordinates="hidden"``: what a unit-graph answer faces when it is applied to pooled rows.

Coordinates no mechanism reads are left out of both (they can confound nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import networkx as nx

from causaltrace.errors import GraphError

if TYPE_CHECKING:  # pragma: no cover
    from causaltrace.model.scm import SCM


class PooledDataWarning(UserWarning):
    """A per-unit identification was asked for pooled data, and panel coordinates confound it.

    The answer holds within one unit (one cell at one time step, across worlds), not on rows
    pooled over cells and time; ``identify_effect(..., with_panel=True)`` (or the default)
    adjusts for the coordinates, ``pooled=False`` says the data are one unit's.
    """


def read_coordinates(scm: SCM) -> dict[str, tuple[str, ...]]:
    """Each panel coordinate some mechanism reads, with the nodes that read it (SCM order).

    Args:
        scm: The model; the probe of :meth:`~causaltrace.model.scm.SCM.panel_parents` is read
            (on an intervened SCM, a node set by a whole-panel ``Do`` reads none).
    """
    readers: dict[str, list[str]] = {}
    for node in scm.order:
        for c in scm.panel_parents().get(node, ()):
            readers.setdefault(c, []).append(node)
    return {c: tuple(readers[c]) for c in scm.panel_coordinates if c in readers}


def panel_graph(
    scm: SCM,
    coordinates: Literal["observed", "hidden"],
    only: Sequence[str] | None = None,
) -> nx.DiGraph:
    """The causal DAG of pooled rows: the SCM's graph view plus its read coordinates.

    Args:
        scm: The model (its default graph view, mutilated on an intervened SCM).
        coordinates: ``"observed"`` when the rows carry the coordinates as columns,
            ``"hidden"`` for what an analysis that ignores them faces.
        only: Keep these coordinates (default: every coordinate some mechanism reads); used to
            find which coordinate confounds a query.

    Raises:
        GraphError: A node has a coordinate's name.
    """
    g = scm.graph_view()
    clash = sorted(set(scm.panel_coordinates) & set(scm.order))
    if clash:
        raise GraphError(f"SCM {scm.name!r}: node(s) {clash} share a name with a panel coordinate")
    reads = read_coordinates(scm)
    keep = [c for c in reads if only is None or c in only]
    g.add_nodes_from(keep, observed=coordinates == "observed", coordinate=True)
    g.add_edges_from((c, n) for c in keep for n in reads[c])
    return g


def describe(scm: SCM, coordinates: Sequence[str]) -> str:
    """``channel (-> demand, checkout_rate)``: coordinates and the nodes that read them."""
    reads = read_coordinates(scm)
    return ", ".join(f"{c} (-> {', '.join(reads.get(c, ()))})" for c in coordinates)
