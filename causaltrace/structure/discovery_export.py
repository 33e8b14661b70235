"""``causaltrace export-discovery``: i.i.d. unit samples of a domain with the true equivalence
classes, in the formats discovery libraries read.

``causaltrace export-discovery --domain example --out DIR`` writes, into ``DIR``:

- ``truth.json``: the true DAG (every node), and over the exported columns the MAG, the PAG
  and, when no latent node confounds two columns, the CPDAG (``graphs.true_graphs``; edges as
  text, ``"a o-> b"``), the nodes constant in this unit, the unit and the seed;
- ``regimes/``: DCDI's file set with an intervention target mask
  (``formats.write_regime_arrays``; ``formats.read_regime_arrays`` reads it back);
- ``perturbations.csv``: one row per sample, the perturbed node or ``non-targeting``;
- ``network.bif`` and ``discretization.json``: the discretized observational rows as a
  Bayesian network over the true DAG, when the truth over the columns is a DAG (else left out,
  and the README says which pairs are confounded);
- ``README.txt``: what the files are and how they were made.

The rows are ``--samples`` i.i.d. draws of one unit per regime (``samples.sample_units``:
world ``i`` of regime ``r`` seeded ``SeedSequence(seed, spawn_key=(r,)).spawn(n)[i]``, like
``export-structure``), so the same arguments write the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from causaltrace.core.files import atomic_write_text
from causaltrace.episodes.domain import load_domain
from causaltrace.errors import CausalTraceError
from causaltrace.structure.export import Regime, parse_regime
from causaltrace.structure.formats import (
    Discretization,
    bif_text,
    discretize,
    write_perturbation_table,
    write_regime_arrays,
)
from causaltrace.structure.graphs import EndpointGraph, TrueGraphs, scm_truth
from causaltrace.structure.samples import UnitSamples, sample_units

TRUTH_JSON = "truth.json"
BIF_FILE = "network.bif"
DISCRETIZATION_JSON = "discretization.json"
PERTURBATIONS_CSV = "perturbations.csv"
REGIMES_DIR = "regimes"
README_FILE = "README.txt"


def graph_json(g: EndpointGraph | None) -> dict | None:
    """A graph as ``{"nodes": [...], "edges": ["a --> b", ...]}`` (``None`` stays ``None``)."""
    if g is None:
        return None
    return {"nodes": list(g.nodes), "edges": list(g.edge_strings())}


def truth_json(truth: TrueGraphs, samples: UnitSamples, domain: str) -> str:
    data = {
        "domain": domain,
        "columns": list(truth.columns),
        "constant": list(samples.constant),
        "unit": {"cell": samples.cell, "time": samples.time},
        "seed": samples.seed,
        "dag": graph_json(truth.dag),
        "mag": graph_json(truth.mag),
        "pag": graph_json(truth.pag),
        "cpdag": graph_json(truth.cpdag),
    }
    return json.dumps(data, indent=2) + "\n"


def _confounded(truth: TrueGraphs) -> list[str]:
    return [e for e in truth.mag.edge_strings() if "<->" in e]


def export_discovery(
    domain_name: str,
    out: str | Path,
    *,
    samples: int = 1000,
    seed: int = 0,
    regimes: Sequence[str] = (),
    include_latent: bool = False,
    cell: int | str = 0,
    time: int | None = None,
    bins: int = 5,
    alpha: float = 1.0,
) -> list[Path]:
    """Write the discovery export of ``domain_name`` into ``out``; returns the files written.

    Args:
        domain_name: A registered domain.
        out: The directory.
        samples: Rows per regime (independent worlds).
        seed: Root seed.
        regimes: Regime texts (``kind:node=value[@slice],...``), in index order.
        include_latent: Export every node as a column (default: the observed ones).
        cell: The unit's cell: an index, or a slice naming one cell.
        time: The unit's time step (default: the middle one).
        bins: The most states of a discretized column in the BIF.
        alpha: The BIF CPTs' Laplace pseudo-count.

    Raises:
        CausalTraceError: A bad domain, count, regime, cell or time, before anything is written.
    """
    if samples < 1:
        raise CausalTraceError(f"--samples must be >= 1, got {samples}")
    if bins < 2:
        raise CausalTraceError(f"--bins must be >= 2, got {bins}")
    scm = load_domain(domain_name).scm
    parsed: list[Regime] = [parse_regime(spec, scm) for spec in regimes]
    names = [r.name for r in parsed]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise CausalTraceError(f"the same regime is given twice: {', '.join(dupes)}")
    columns = scm.order if include_latent else scm.observed
    rows = sample_units(
        scm, samples, seed=seed, columns=columns, regimes=parsed, cell=cell, time=time
    )
    truth = scm_truth(scm, columns, constant=rows.constant)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def put(name: str, text: str) -> None:
        atomic_write_text(out / name, text)
        written.append(out / name)

    put(TRUTH_JSON, truth_json(truth, rows, domain_name))
    written += write_regime_arrays(out / REGIMES_DIR, rows, truth)
    written.append(write_perturbation_table(out / PERTURBATIONS_CSV, rows))
    dag = truth.column_dag
    if dag is not None:
        obs = rows.rows(0)
        disc = [discretize(obs[:, k], c, bins) for k, c in enumerate(rows.columns)]
        name = f"causaltrace_{domain_name}".replace(".", "_")
        put(BIF_FILE, bif_text(dag, obs, disc, alpha=alpha, name=name))
        put(DISCRETIZATION_JSON, json.dumps(_discretization_json(disc), indent=2) + "\n")
    put(README_FILE, readme_text(domain_name, rows, truth, bins=bins, alpha=alpha))
    return written


def _discretization_json(disc: Sequence[Discretization]) -> dict:
    return {
        d.column: {
            "kind": d.kind,
            "cuts": list(d.cuts),
            "states": {s: d.describe(i) for i, s in enumerate(d.states)},
        }
        for d in disc
    }


def readme_text(
    domain_name: str, rows: UnitSamples, truth: TrueGraphs, *, bins: int, alpha: float
) -> str:
    n = int((rows.regime == 0).sum())
    scm_cells = f"cell {rows.cell}, time step {rows.time}"
    lines = [
        f"Discovery export of domain {domain_name!r}: {n} i.i.d. rows per regime of one unit "
        f"({scm_cells}), seed {rows.seed}.",
        "Written by: causaltrace export-discovery --domain "
        f"{domain_name} --samples {n} --seed {rows.seed} --cell {rows.cell} --time {rows.time} "
        f"--bins {bins}" + "".join(f" --regime {r.spec()}" for r in rows.regimes),
        "",
        "Rows. Row i of a regime is the unit's values in world i, an independent world sampled "
        "with its own seed (numpy SeedSequence(seed, spawn_key=(regime,)).spawn(n)[i]); every "
        "row has the same panel coordinates, so rows are i.i.d. draws of the unit's "
        "distribution. Regime 0 is observational; regime k is the k-th --regime. Interventions "
        "cover the whole window; a sliced one touches the unit only if its slice holds the "
        "unit's cell.",
        "",
        "Files",
        f"- {TRUTH_JSON}: the true DAG over every node and, over the columns "
        f"({', '.join(truth.columns)}), the MAG (maximal ancestral graph, the other nodes "
        "latent), the PAG (FCI's target: the MAG's Markov equivalence class) and the CPDAG "
        "(PC's and GES's target) when the MAG is a DAG. Edge marks: '-' tail, '>' or '<' "
        "arrowhead, 'o' circle, e.g. 'a o-> b'. Nodes constant in this unit "
        f"({', '.join(rows.constant) or 'none'}) carry no dependence: their edges are removed "
        "before projecting.",
        f"- {REGIMES_DIR}/: DCDI's files (gCastle reads the same matrices): data_interv1.npy "
        "(all rows x columns, float64), data1.npy (observational rows), regime1.csv (regime "
        "index per row), intervention1.csv (per row, the column indices intervened on at the "
        "unit, comma-separated; empty line for none), targets1.npy (the same as a 0/1 "
        "rows x columns mask, 1 = intervened), MAG1.npy and PAG1.npy (endpoint marks: entry "
        "[i, j] is the mark at i on the edge i-j: 0 none, -1 tail, 1 arrowhead, 2 circle, "
        "causal-learn's GeneralGraph convention), DAG1.npy and CPDAG1.npy when the truth over "
        "the columns is a DAG (0/1, rows = parents, undirected edges both ways), regimes.json "
        "(columns and each regime's name, spec and targets). "
        "causaltrace.structure.formats.read_regime_arrays reads the folder back.",
        f"- {PERTURBATIONS_CSV}: CausalBench-like: one row per sample; 'perturbation' is the "
        "node(s) intervened on at the unit ('+'-joined) or 'non-targeting', 'regime' the "
        "regime's name, then one column per node.",
    ]
    if truth.column_dag is not None:
        lines.append(
            f"- {BIF_FILE}: a discrete Bayesian network (bnlearn's read.bif, pgmpy's BIFReader) "
            "whose structure is the true DAG over the columns. Each column is discretized from "
            f"the observational rows: at most {bins} distinct values are kept as states; "
            f"otherwise cuts at the j/{bins} sample quantiles (duplicates and cuts below an "
            "empty interval dropped), state s = the interval (cut[s-1], cut[s]]. CPTs are "
            f"estimated from the observational rows with Laplace smoothing (alpha {alpha}): "
            "P(x=s | c) = (n(s,c) + alpha) / (n(c) + alpha * states). "
            f"{DISCRETIZATION_JSON} (and each variable's 'property' lines) give the cuts."
        )
    else:
        lines.append(
            f"- no {BIF_FILE}: latent nodes confound columns ("
            + ", ".join(_confounded(truth))
            + "), so no DAG over these columns is the truth; export with --include-latent."
        )
    return "\n".join(lines) + "\n"
