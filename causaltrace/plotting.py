"""Pictures (PNG) of causal graphs. Imports matplotlib lazily, with the non-GUI Agg backend."""

from __future__ import annotations

from pathlib import Path

import networkx as nx


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
