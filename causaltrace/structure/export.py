"""Data for structure learning: sampled worlds of a domain, flattened, and its true graph.

``causaltrace export-structure --domain example --out DIR`` writes, into ``DIR``:

- ``observational.parquet``: ``--samples`` worlds, one row per (world, cell, time step);
- ``interventional/<regime>.parquet``: the same under each regime, plus ``regime`` and
  ``intervened`` columns. A regime is one or more interventions over the whole window, each
  hard (``do``, :class:`~causaltrace.Do`) or soft (``shift``, ``scale``), on every cell or on a
  slice: ``--do node=value[@slice]``, ``--shift node=delta[@slice]``,
  ``--scale node=factor[@slice]``, and ``--regime kind:node=value[@slice],...`` for several
  nodes at once. ``graph.json`` records each regime's kind, node, value, slice and cells;
- ``graph.json``, ``graph.gml`` and ``adjacency.csv``: the true graph;
- ``README.txt``: what the files are, and the pooled-panel pitfall.

Every world has its own seed, spawned from ``--seed`` by ``numpy.random.SeedSequence`` (regime
``r``, world ``i``: ``SeedSequence(seed, spawn_key=(r,)).spawn(samples)[i]``, the observational
regime being ``r = 0`` and the ``k``-th regime flag on the command line ``r = k``), so no global random state is read and
the same arguments write the same bytes. Regimes use independent noise: an interventional world
is not the counterfactual of an observational one.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import numpy as np

from causaltrace.core.files import atomic_write_bytes, atomic_write_text, canonical_json
from causaltrace.datasets.storage import table_bytes
from causaltrace.episodes.domain import load_domain
from causaltrace.errors import CausalTraceError
from causaltrace.model.interventions import Do, Intervention, Scale, Shift
from causaltrace.model.scm import SCM
from causaltrace.model.slices import WHOLE_PANEL, Slice, parse_slice

OBSERVATIONAL_FILE = "observational.parquet"
INTERVENTIONAL_DIR = "interventional"
GRAPH_JSON = "graph.json"
GRAPH_GML = "graph.gml"
ADJACENCY_CSV = "adjacency.csv"
README_FILE = "README.txt"
RESERVED_COLUMNS = ("world", "time", "regime", "intervened")


KINDS = ("do", "shift", "scale")


@dataclass(frozen=True)
class RegimeIntervention:
    """One intervention of a regime: its kind, node, value (the set value, shift or factor)
    and slice (the whole panel when empty), over the whole window."""

    kind: str
    node: str
    value: float
    where: Slice = WHOLE_PANEL

    @property
    def intervention(self) -> Intervention:
        if self.kind == "do":
            return Do(self.node, where=self.where, value=self.value)
        if self.kind == "shift":
            return Shift(self.node, where=self.where, delta=self.value)
        return Scale(self.node, where=self.where, factor=self.value)

    @property
    def hard(self) -> bool:
        """Whether the node stops reading its parents where it applies (``do``)."""
        return self.kind == "do"

    def spec(self) -> str:
        """The text form, ``kind:node=value[@slice]``, that :func:`parse_regime` reads."""
        at = f"@{self.where.canonical()}" if not self.where.is_whole_panel else ""
        return f"{self.kind}:{self.node}={_format_value(self.value)}{at}"

    def stem(self) -> str:
        at = f"_at_{_safe(self.where.canonical())}" if not self.where.is_whole_panel else ""
        return f"{self.kind}_{self.node}_{_format_value(self.value)}{at}"


@dataclass(frozen=True)
class Regime:
    """An interventional regime: its name (the file stem) and its interventions, applied in
    order on the same worlds (several nodes make a multi-node regime)."""

    name: str
    interventions: tuple[RegimeIntervention, ...]

    @property
    def node(self) -> str:
        """The node of a single-intervention regime (kept for ``--do`` callers)."""
        if len(self.interventions) != 1:
            raise CausalTraceError(f"regime {self.name!r} has {len(self.interventions)} nodes")
        return self.interventions[0].node

    @property
    def value(self) -> float:
        if len(self.interventions) != 1:
            raise CausalTraceError(f"regime {self.name!r} has {len(self.interventions)} nodes")
        return self.interventions[0].value

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(iv.node for iv in self.interventions)

    def spec(self) -> str:
        return ",".join(iv.spec() for iv in self.interventions)


def parse_do(spec: str, scm: SCM) -> Regime:
    """``"node=value[@slice]"`` as a one-node ``do`` :class:`Regime` (the ``--do`` flag)."""
    return parse_regime(f"do:{spec}", scm, flag="--do", text=spec)


def parse_regime(spec: str, scm: SCM, *, flag: str = "regime", text: str | None = None) -> Regime:
    """``"kind:node=value[@slice],..."`` as a :class:`Regime`; one-line errors naming the part.

    ``kind`` is ``do`` (set), ``shift`` (add) or ``scale`` (multiply); ``slice`` is
    ``dim=level&dim=level`` (default: every cell). Several comma-separated parts make a
    multi-node regime; a node may appear once.
    """
    shown = f"{flag} {(spec if text is None else text)!r}"
    parts = [p.strip() for p in spec.split(",")]
    if not spec.strip() or not all(parts):
        raise CausalTraceError(f"{shown}: expected kind:node=value[@slice], e.g. do:visits=100")
    ivs = tuple(_parse_part(part, scm, shown) for part in parts)
    nodes = [iv.node for iv in ivs]
    twice = sorted({n for n in nodes if nodes.count(n) > 1})
    if twice:
        raise CausalTraceError(f"{shown}: node(s) {twice} given twice in one regime")
    return Regime("__".join(iv.stem() for iv in ivs), ivs)


def _parse_part(part: str, scm: SCM, shown: str) -> RegimeIntervention:
    kind, colon, rest = part.partition(":")
    kind = kind.strip()
    if not colon or kind not in KINDS:
        raise CausalTraceError(
            f"{shown}: {part!r} must start with one of {', '.join(k + ':' for k in KINDS)}"
        )
    body, at, where_text = rest.partition("@")
    node, sep, text = body.partition("=")
    node, text = node.strip(), text.strip()
    if not sep or not node or not text:
        raise CausalTraceError(f"{shown}: expected node=value, e.g. visits=100")
    if node not in scm.nodes:
        raise CausalTraceError(
            f"{shown}: unknown node {node!r}; nodes of {scm.name!r}: {', '.join(scm.order)}"
        )
    try:
        value = float(text)
    except ValueError:
        raise CausalTraceError(f"{shown}: value {text!r} is not a number") from None
    if not math.isfinite(value):
        raise CausalTraceError(f"{shown}: value {text!r} is not finite")
    if kind == "do" and scm.nodes[node].dtype.kind in "iu" and value != int(value):
        raise CausalTraceError(f"{shown}: node {node!r} is an integer count; give an integer value")
    where = WHOLE_PANEL
    if at:
        if not where_text.strip():
            raise CausalTraceError(f"{shown}: empty slice after '@' (omit '@' for every cell)")
        try:
            where = parse_slice(where_text, scm.panel)
        except CausalTraceError as exc:
            raise CausalTraceError(f"{shown}: {exc}") from None
    return RegimeIntervention(kind, node, value, where)


def _format_value(value: float) -> str:
    return str(int(value)) if value == int(value) and abs(value) < 1e15 else repr(value)


def _safe(text: str) -> str:
    """A slice's text as part of a file name: ``channel=search&region=north`` ->
    ``channel-search_region-north`` (other characters outside [A-Za-z0-9.-] become ``-``)."""
    return "_".join(re.sub(r"[^A-Za-z0-9.\-]", "-", c) for c in text.split("&"))


def world_seeds(seed: int, regime_index: int, samples: int) -> list[np.random.SeedSequence]:
    """The seeds of one regime's worlds (see the module docstring)."""
    return np.random.SeedSequence(seed, spawn_key=(regime_index,)).spawn(samples)


def columns_for(scm: SCM, include_latent: bool) -> tuple[str, ...]:
    """The node columns exported: the observed nodes (all nodes with ``include_latent``)."""
    return scm.order if include_latent else scm.observed


def regime_frame(
    scm: SCM,
    nodes: Sequence[str],
    seeds: Sequence[np.random.SeedSequence],
    regime: Regime | None = None,
):
    """The worlds of one regime as a DataFrame: ``world``, the dimensions, ``time``, the nodes
    (and, for an interventional one, ``regime`` and ``intervened``: the regime's targets whose
    slice holds the row's cell, comma-joined, ``""`` where none), one row per (world, cell,
    time step)."""
    # lazy: pandas takes ~0.5 s to import; the rest of this module does not need it
    import pandas as pd

    panel = scm.panel
    n_units = panel.size
    n = len(seeds)
    columns: dict[str, object] = {"world": np.repeat(np.arange(n, dtype=np.int64), n_units)}
    for dim in panel.dimensions:  # cells vary slower than time within a world (C order)
        codes = np.tile(np.repeat(panel.codes(dim.name), panel.n_time), n)
        columns[dim.name] = pd.Categorical.from_codes(codes, dim.levels)
    columns["time"] = np.tile(panel.time.values, panel.n_cells * n)
    values: dict[str, list[np.ndarray]] = {name: [] for name in nodes}
    ivs = [] if regime is None else [iv.intervention for iv in regime.interventions]
    for ss in seeds:
        if regime is None:
            world = scm.sample(ss)
        else:
            world = scm.simulate(ivs, seed=ss, counterfactual=False).factual
        for name in nodes:
            values[name].append(np.asarray(world[name]).ravel())
    for name in nodes:
        columns[name] = np.concatenate(values[name])
    if regime is not None:
        columns["regime"] = np.full(n * n_units, regime.name, dtype=object)
        columns["intervened"] = np.tile(np.repeat(intervened_cells(scm, regime), panel.n_time), n)
    return pd.DataFrame(columns)


def intervened_cells(scm: SCM, regime: Regime) -> np.ndarray:
    """Per panel cell, the regime's targets whose slice holds it, comma-joined (object array)."""
    out = np.full(scm.panel.n_cells, "", dtype=object)
    for iv in regime.interventions:
        mask = iv.where.mask(scm.panel)
        out[mask] = np.where(out[mask] == "", iv.node, out[mask] + "," + iv.node)
    return out


def graph_for_export(scm: SCM, with_panel: bool) -> nx.DiGraph:
    """The declared graph (``observed`` on every node), with the panel coordinates if asked."""
    g = scm.graph_with_panel(mutilated="none") if with_panel else scm.graph_view("none")
    if not with_panel:
        nx.set_node_attributes(g, False, "coordinate")
    return g


def _node_order(scm: SCM, g: nx.DiGraph) -> list[str]:
    coords = [c for c in scm.panel_coordinates if c in g]
    return coords + list(scm.order)


def graph_json(scm: SCM, g: nx.DiGraph, regimes: Sequence[Regime]) -> dict:
    order = _node_order(scm, g)
    rank = {n: i for i, n in enumerate(order)}
    edges = sorted(g.edges(), key=lambda e: (rank[e[0]], rank[e[1]]))
    return {
        "scm": scm.name,
        "nodes": [
            {
                "name": n,
                "observed": bool(g.nodes[n]["observed"]),
                "coordinate": bool(g.nodes[n].get("coordinate", False)),
                "description": "" if n not in scm.nodes else scm.nodes[n].description,
            }
            for n in order
        ],
        "edges": [[u, v] for u, v in edges],
        "panel": {
            "dimensions": {d.name: list(d.levels) for d in scm.panel.dimensions},
            "n_cells": scm.panel.n_cells,
            "time": [str(scm.panel.time.values[0]), str(scm.panel.time.values[-1])],
            "n_time": scm.panel.n_time,
        },
        "regimes": [regime_metadata(scm, g, r, order) for r in regimes],
    }


def regime_metadata(scm: SCM, g: nx.DiGraph, regime: Regime, order: Sequence[str]) -> dict:
    """A regime as graph.json records it, for learners that use known intervention targets.

    Per intervention: kind (``do`` hard; ``shift`` / ``scale`` soft), node, value, the slice
    (``{}`` and ``whole_panel`` true for every cell) and the indices of the cells it touches
    (rows of the panel's cell table, the order of the tables' cells); ``cut_edges`` are the
    export graph's edges into nodes the engine mutilates (a ``do`` on every cell and step),
    which is also what ``scm.intervene(...).graph_view()`` removes.
    """
    done = scm.intervene(*[iv.intervention for iv in regime.interventions])
    cut = done.mutilated_nodes()
    cells = []
    for iv in regime.interventions:
        mask = iv.where.mask(scm.panel)
        cells.append(
            {
                "kind": iv.kind,
                "node": iv.node,
                "value": iv.value,
                "hard": iv.hard,
                "slice": iv.where.as_dict(),
                "whole_panel": bool(mask.all()),
                "cells": [int(i) for i in np.flatnonzero(mask)],
                "n_cells": int(mask.sum()),
                "mutilated": iv.node in cut,
            }
        )
    return {
        "name": regime.name,
        "file": f"{INTERVENTIONAL_DIR}/{regime.name}.parquet",
        "spec": regime.spec(),
        "targets": list(regime.targets),
        "interventions": cells,
        "cut_edges": [
            [p, n] for n in regime.targets if n in cut for p in order if g.has_edge(p, n)
        ],
    }


def gml_bytes(scm: SCM, g: nx.DiGraph) -> bytes:
    out = nx.DiGraph()
    order = _node_order(scm, g)
    for n in order:
        out.add_node(
            n,
            observed=int(bool(g.nodes[n]["observed"])),
            coordinate=int(bool(g.nodes[n].get("coordinate", False))),
        )
    rank = {n: i for i, n in enumerate(order)}
    out.add_edges_from(sorted(g.edges(), key=lambda e: (rank[e[0]], rank[e[1]])))
    buffer = io.BytesIO()
    nx.write_gml(out, buffer)
    return buffer.getvalue()


def adjacency_csv(scm: SCM, g: nx.DiGraph) -> str:
    """Rows are parents, columns children: ``1`` where the edge row -> column exists."""
    order = _node_order(scm, g)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["parent", *order])
    for u in order:
        writer.writerow([u, *(int(g.has_edge(u, v)) for v in order)])
    return buffer.getvalue()


def readme_text(
    domain_name: str,
    scm: SCM,
    nodes: Sequence[str],
    regimes: Sequence[Regime],
    *,
    samples: int,
    seed: int,
    with_panel: bool,
) -> str:
    panel = scm.panel
    dims = ", ".join(panel.dimension_names)
    left_out = [n for n in scm.order if n not in nodes]
    lines = [
        f"Structure-learning export of domain {domain_name!r} (SCM {scm.name!r}).",
        f"Written by: causaltrace export-structure --domain {domain_name} --samples {samples} "
        f"--seed {seed}"
        + "".join(f" --regime {r.spec()}" for r in regimes)
        + (" --include-latent" if left_out == [] and scm.latent else "")
        + (" --with-panel" if with_panel else ""),
        "",
        "Files",
        f"- {OBSERVATIONAL_FILE}: {samples} worlds sampled from the model, one row per "
        f"(world, cell, time step): {samples} x {panel.n_cells} cells x {panel.n_time} steps. "
        f"Columns: world, {dims}, time, then one column per node: {', '.join(nodes)}.",
        f"- {INTERVENTIONAL_DIR}/<regime>.parquet: the same layout under a regime's "
        "interventions, plus a 'regime' column (the file's name) and an 'intervened' column "
        "(the regime's target nodes whose slice holds the row's cell, comma-joined; empty "
        "where none).",
        f"- {GRAPH_JSON}: the true graph: nodes (observed / coordinate flags), directed edges, "
        "the panel, and each regime: its interventions (kind, node, value, slice, the indices "
        "of the cells it touches) and the edges it cuts.",
        f"- {GRAPH_GML}: the same graph in GML (networkx.read_gml; node attributes observed "
        "and coordinate, 0/1).",
        f"- {ADJACENCY_CSV}: adjacency matrix, rows = parents, columns = children, 1 = edge "
        "(pandas.read_csv(path, index_col=0)).",
        "",
        "Graph",
        "The graph is the declared one (no intervention applied). Nodes with observed=false are "
        "latent: "
        + (
            f"their columns are left out of the tables ({', '.join(left_out)}), so methods "
            "that assume causal sufficiency (PC, GES) face hidden confounders; FCI-type methods "
            "do not."
            if left_out
            else "none are left out of these tables."
        ),
    ]
    if with_panel:
        lines.append(
            "The panel coordinates (" + ", ".join(scm.panel_coordinates) + ") are nodes too "
            "(coordinate=1), each a parent of the nodes whose mechanisms read it "
            "(scm.graph_with_panel())."
        )
    lines += ["", "Regimes", "- observational: no intervention."]
    for r in regimes:
        lines.append(f"- {r.name}: " + "; ".join(_describe(iv) for iv in r.interventions) + ".")
    lines += [
        "A do on every cell is hard everywhere: the node no longer reads its parents or the "
        "panel coordinates (graph.json lists the edges cut). On a slice it is hard in those "
        "cells only, so the pooled graph keeps the edges; shift and scale are soft (the node "
        "still reads its parents). graph.json's regimes give, per intervention, the kind, node, "
        "value, slice and cell indices, for learners that use known intervention targets.",
        "Every world has its own seed, spawned from the export's seed with "
        "numpy.random.SeedSequence; regimes use independent noise (an interventional world is "
        "not the counterfactual of an observational one).",
        "",
        "Pitfall: pooled panel rows",
        "Rows are units (one cell at one time step). They are independent draws only GIVEN the "
        "panel coordinates: mechanisms read the segment levels and the date (demand by channel "
        "and weekday, say), so pooled over cells and time, nodes the graph calls independent "
        "correlate through the coordinates. Condition on (stratify by, or regress on dummies of) "
        f"{dims} and time in conditional-independence tests, or learn on the graph with the "
        "coordinates as nodes (--with-panel). Mechanisms that lag along time or aggregate "
        "across cells couple rows further. Rows of one world also share that world's draws; "
        "rows of different worlds are independent. See docs/causal-structure.md, section "
        "'Panel coordinates: the common cause the graph does not show'.",
    ]
    return "\n".join(lines) + "\n"


def _describe(iv: RegimeIntervention) -> str:
    what = {"do": "set to", "shift": "shifted by", "scale": "scaled by"}[iv.kind]
    where = "every cell" if iv.where.is_whole_panel else f"cells where {iv.where.canonical()}"
    kind = "hard" if iv.hard else "soft"
    return f"{iv.node} {what} {_format_value(iv.value)} on {where}, every time step ({kind})"


def export_structure(
    domain_name: str,
    out: str | Path,
    *,
    samples: int = 100,
    seed: int = 0,
    do: Sequence[str] = (),
    regimes: Sequence[str] = (),
    include_latent: bool = False,
    with_panel: bool = False,
) -> list[Path]:
    """Write the export of ``domain_name`` into ``out``; returns the files written, in order.

    ``do`` specs (``node=value[@slice]``) come first, then ``regimes`` specs
    (``kind:node=value[@slice],...``, see :func:`parse_regime`); the ``k``-th regime in that
    order is seeded with ``k``.

    User errors (unknown domain or node, malformed ``do``, bad counts) raise
    :class:`~causaltrace.errors.CausalTraceError` naming the culprit before anything is written.
    """

    if samples < 1:
        raise CausalTraceError(f"--samples must be >= 1, got {samples}")
    if seed < 0:
        raise CausalTraceError(f"--seed must be >= 0, got {seed}")
    scm = load_domain(domain_name).scm
    clash = sorted(set(RESERVED_COLUMNS + scm.panel.dimension_names) & set(scm.order))
    if clash:
        raise CausalTraceError(f"SCM {scm.name!r}: node(s) {clash} clash with a table column")
    parsed = [parse_do(spec, scm) for spec in do] + [parse_regime(spec, scm) for spec in regimes]
    names = [r.name for r in parsed]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise CausalTraceError(f"the same regime is given twice: {', '.join(dupes)}")
    nodes = columns_for(scm, include_latent)
    g = graph_for_export(scm, with_panel)

    out = Path(out)
    written: list[Path] = []

    def put(path: Path, data: bytes | str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            atomic_write_text(path, data)
        else:
            atomic_write_bytes(path, data)
        written.append(path)

    obs = regime_frame(scm, nodes, world_seeds(seed, 0, samples))
    put(out / OBSERVATIONAL_FILE, table_bytes(obs))
    for k, regime in enumerate(parsed, start=1):
        frame = regime_frame(scm, nodes, world_seeds(seed, k, samples), regime)
        put(out / INTERVENTIONAL_DIR / f"{regime.name}.parquet", table_bytes(frame))
    put(out / GRAPH_JSON, canonical_json(graph_json(scm, g, parsed)))
    put(out / GRAPH_GML, gml_bytes(scm, g))
    put(out / ADJACENCY_CSV, adjacency_csv(scm, g))
    put(
        out / README_FILE,
        readme_text(
            domain_name,
            scm,
            nodes,
            parsed,
            samples=samples,
            seed=seed,
            with_panel=with_panel,
        ),
    )
    return written
