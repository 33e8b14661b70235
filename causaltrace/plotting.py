"""Pictures (PNG) of causal graphs and of alerted KPIs over time. Imports matplotlib lazily,
with the non-GUI Agg backend."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import numpy as np


def pyplot():
    # lazy: matplotlib takes ~0.5 s to import; only drawing needs it
    import matplotlib

    matplotlib.use("Agg", force=True)
    # lazy: matplotlib takes ~0.5 s to import; only drawing needs it
    import matplotlib.pyplot as plt

    return plt


def draw_graph(scm, path: str | Path, *, title: str, highlight: set[str] = frozenset()) -> str:
    """Draw the SCM's DAG left to right by topological generation; latent nodes dashed,
    ``highlight`` nodes (e.g. intervention targets) in orange. Returns the path written."""

    plt = pyplot()
    graph = scm.graph
    for layer, nodes in enumerate(nx.topological_generations(graph)):
        for n in nodes:
            graph.nodes[n]["layer"] = layer
    pos = nx.multipartite_layout(graph, subset_key="layer")
    n_layers = 1 + max(graph.nodes[n]["layer"] for n in graph)
    widest = max(sum(1 for n in graph if graph.nodes[n]["layer"] == k) for k in range(n_layers))
    fig, ax = plt.subplots(figsize=(max(7, 1.25 * n_layers), max(4.5, 0.8 * widest)))
    colors = [
        "#f4a261" if n in highlight else ("#a8dadc" if graph.nodes[n]["observed"] else "#e5e5e5")
        for n in graph
    ]
    nx.draw_networkx_edges(
        graph, pos, ax=ax, arrows=True, arrowsize=12, edge_color="#555555", node_size=1300
    )
    nx.draw_networkx_nodes(
        graph,
        pos,
        ax=ax,
        node_color=colors,
        node_size=1300,
        edgecolors=["#333333" if graph.nodes[n]["observed"] else "#999999" for n in graph],
        linewidths=1.0,
    )
    nx.draw_networkx_labels(graph, pos, ax=ax, font_size=7)
    ax.set_title(f"{title}  (grey: latent; orange: highlighted)")
    ax.axis("off")
    ax.margins(0.12)
    fig.tight_layout()
    path = str(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


@dataclass(frozen=True)
class KpiSeries:
    """One alerted KPI per time step over the alert's scope, with and without the cause.

    ``where`` says which cells the series sums over (the scope's slice, or why it is the whole
    panel); ``counterfactual`` is None where no counterfactual world is at hand. Windows are
    ``(start, end)`` time indices, ``end`` exclusive: ``alert_window`` is the window the alert
    reports on (None: unknown), ``interventions`` the windows the causes act in (empty: no
    label at hand, or causes that inject nothing).
    """

    kpi: str
    scope: str
    where: str
    times: np.ndarray
    factual: np.ndarray
    counterfactual: np.ndarray | None = None
    alert_window: tuple[int, int] | None = None
    interventions: tuple[tuple[int, int], ...] = ()


def _edge(times: np.ndarray, index: int):
    """Where time index ``index`` starts on the x axis (one step past the end for ``n``)."""
    if index < len(times):
        return times[index]
    step = times[-1] - times[-2] if len(times) > 1 else np.timedelta64(1, "D")
    return times[-1] + step * (index - len(times) + 1)


def draw_kpi_series(series: Sequence[KpiSeries], path: str | Path, *, title: str) -> str:
    """One panel per series, stacked: the factual line (what the agent's tables show), the
    counterfactual (dashed), the alert's window and each cause's window shaded. Returns the
    path written."""

    if not series:
        raise ValueError("draw_kpi_series: nothing to draw")
    plt = pyplot()
    fig, axes = plt.subplots(
        len(series), 1, figsize=(9, 3.2 * len(series)), squeeze=False, sharex=True
    )
    for ax, one in zip(axes[:, 0], series):
        times = np.asarray(one.times)
        if one.alert_window is not None:
            start, end = one.alert_window
            span = (_edge(times, start), _edge(times, end))
            ax.axvspan(*span, color="#ffd166", alpha=0.35, label="alert window")
        for k, (onset, end) in enumerate(one.interventions):
            label = "intervention window" if k == 0 else None
            span = (_edge(times, onset), _edge(times, end))
            ax.axvspan(*span, fill=False, hatch="//", edgecolor="#e63946", lw=0, label=label)
            ax.axvline(_edge(times, onset), color="#e63946", lw=1)
        if one.counterfactual is not None:
            cf = "counterfactual (no cause)"
            ax.plot(times, one.counterfactual, label=cf, color="#888888", ls="--")
        ax.plot(times, one.factual, label="factual (what the agent sees)", color="#1d3557")
        where = "" if one.where == one.scope else f"  [{one.where}]"
        ax.set_title(f"{one.kpi} over {one.scope}{where}", fontsize=10)
        ax.legend(loc="best", fontsize=7)
    fig.suptitle(title)
    fig.autofmt_xdate()
    fig.tight_layout()
    path = str(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
