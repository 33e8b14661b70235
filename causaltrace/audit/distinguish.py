"""Which causes can be told apart: from the graph, and by the oracle on the dataset.

Graph: a cause intervenes on the nodes its builder targets (built from one draw of its prior);
everything downstream of them can move. Two causes whose interventions reach the same set of
observed nodes are graph-indistinguishable: no table column separates them by *whether* it
moves, only (perhaps) by how much or where. Observed nodes are the SCM's (``Node.observed``);
the reach is a superset of what actually moves (a path can carry no effect), so the graph
separates causes at most as well as the data can.

Simulation: the oracle's confusion matrix (true x predicted cause) on the dataset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from causaltrace.model.scm import SCM


@dataclass(frozen=True)
class GraphReach:
    """A cause's intervened nodes and the observed nodes they reach (themselves included)."""

    cause: str
    targets: tuple[str, ...]
    reached: frozenset[str]


def graph_reach(scm: SCM, rng: np.random.Generator) -> dict[str, GraphReach]:
    """Per cause, the nodes one drawn intervention targets and the observed nodes it reaches."""
    observed = set(scm.observed)
    out = {}
    for name, point in scm.intervention_points.items():
        draw = point.sample(rng, scm.panel)
        targets = tuple(sorted({iv.node for iv in point.interventions(draw)}))
        moved = set(targets).union(*(scm.descendants(t) for t in targets)) if targets else set()
        out[name] = GraphReach(name, targets, frozenset(moved & observed))
    return out


def separating_nodes(reach: Mapping[str, GraphReach]) -> dict[tuple[str, str], frozenset[str]]:
    """For each unordered pair of causes, the observed nodes reached by one and not the other."""
    names = list(reach)
    return {
        (a, b): reach[a].reached ^ reach[b].reached
        for i, a in enumerate(names)
        for b in names[i + 1 :]
    }


def indistinguishable_pairs(reach: Mapping[str, GraphReach]) -> list[tuple[str, str]]:
    """Pairs of causes that reach exactly the same observed nodes."""
    return [pair for pair, nodes in separating_nodes(reach).items() if not nodes]


def separation_matrix(reach: Mapping[str, GraphReach]) -> pd.DataFrame:
    """Cause x cause: the number of observed nodes that separate them (0: indistinguishable)."""
    names = list(reach)
    data = np.array(
        [[len(reach[a].reached ^ reach[b].reached) for b in names] for a in names], dtype=int
    )
    return pd.DataFrame(data, index=names, columns=names)


def confusion(
    truth: Sequence[str], predicted: Sequence[str], causes: Sequence[str]
) -> pd.DataFrame:
    """Counts of (true cause, predicted cause), rows and columns in ``causes`` order."""
    index = {c: i for i, c in enumerate(causes)}
    counts = np.zeros((len(causes), len(causes)), dtype=int)
    for t, p in zip(truth, predicted):
        if t in index and p in index:
            counts[index[t], index[p]] += 1
    return pd.DataFrame(counts, index=list(causes), columns=list(causes))
