"""Issue 28: PC, GES and FCI on i.i.d. unit samples, scored against the true CPDAG and PAG.

Each case samples ``n`` i.i.d. rows of one unit (``causaltrace.structure.samples.sample_units``:
one fixed cell and time step from ``n`` independent worlds) and derives the truth over the
columns (``causaltrace.structure.graphs.scm_truth``): the MAG with the other nodes latent and
the nodes constant in that unit stripped of their edges, its PAG (FCI's target) and, when the
MAG is a DAG, its CPDAG (PC's and GES's target). Columns constant in the sample are left out
(a constant column is isolated in the truth, and singular for Fisher-z).

Methods (causal-learn): PC (Fisher-z, alpha 0.01, stable), GES (linear-Gaussian BIC), FCI
(Fisher-z, alpha 0.01), on standardized columns; and PC and FCI with a d-separation oracle
instead of a test (``causaltrace.structure.oracle``), which must reach their targets (SHD 0).
Scores (``causaltrace.structure.scores``): SHD (pairs whose marks differ), skeleton F1,
arrowhead F1 (orientation), and SID bounds (over the DAGs of the estimated CPDAG) where the
truth over the columns is a DAG. ``SHD empty`` is the SHD of the graph with no edges.

Where latent nodes confound the columns (services), no CPDAG is the truth: PC and GES are
scored against the PAG, where their tails and undirected edges never equal the PAG's circles,
so read their skeleton and arrowhead F1 there, not their SHD.

    PYTHONPATH=. python bench/discovery_truth.py                    # every case, n = 1000
    PYTHONPATH=. python bench/discovery_truth.py --cases example --n 2000
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from importlib.metadata import version  # noqa: E402

import numpy as np  # noqa: E402

from causaltrace.episodes.domain import load_domain  # noqa: E402
from causaltrace.errors import GraphError  # noqa: E402
from causaltrace.structure.graphs import EndpointGraph, TrueGraphs, scm_truth  # noqa: E402
from causaltrace.structure.oracle import fci_oracle, pc_oracle  # noqa: E402
from causaltrace.structure.samples import sample_units  # noqa: E402
from causaltrace.structure.scores import GraphScores, score_graph, sid  # noqa: E402

ALPHA = 0.01

# label -> (domain, every node a column, the unit's cell)
CASES = {
    "example": ("example", False, 0),
    "example+latent": ("example", True, 0),
    "services@order_queue": ("services", False, "service=order_queue&region=us_east"),
    "services@frontend": ("services", False, "service=frontend&region=us_east"),
}


@dataclass(frozen=True)
class Case:
    label: str
    columns: tuple[str, ...]
    data: np.ndarray  # standardized observational rows
    truth: TrueGraphs
    dag_nx: object  # the DAG over every node, constants' edges removed (for the oracles)
    constant: tuple[str, ...]
    sample_seconds: float


def build_case(label: str, n: int, seed: int) -> Case:
    domain, include_latent, cell = CASES[label]
    scm = load_domain(domain).scm
    start = time.perf_counter()
    columns = scm.order if include_latent else scm.observed
    rows = sample_units(scm, n, seed=seed, columns=columns, cell=cell)
    seconds = time.perf_counter() - start
    cols = rows.varying()
    truth = scm_truth(scm, cols, constant=rows.constant)
    x = rows.column_data(cols)
    return Case(
        label,
        cols,
        (x - x.mean(0)) / x.std(0),
        truth,
        truth.dag.to_networkx(),
        rows.constant,
        seconds,
    )


def run_pc(case: Case) -> EndpointGraph:
    from causallearn.search.ConstraintBased.PC import pc

    cg = pc(case.data, ALPHA, "fisherz", stable=True, show_progress=False, node_names=case.columns)
    return EndpointGraph.from_causallearn(cg.G)


def run_ges(case: Case) -> EndpointGraph:
    from causallearn.search.ScoreBased.GES import ges

    record = ges(case.data, score_func="local_score_BIC", node_names=list(case.columns))
    return EndpointGraph.from_causallearn(record["G"])


def run_fci(case: Case) -> EndpointGraph:
    from causallearn.search.ConstraintBased.FCI import fci

    with contextlib.redirect_stdout(io.StringIO()):  # FCI prints some orientations
        g, _ = fci(case.data, "fisherz", ALPHA, show_progress=False, node_names=list(case.columns))
    return EndpointGraph.from_causallearn(g)


def run_pc_oracle(case: Case) -> EndpointGraph:
    return pc_oracle(case.dag_nx, case.columns)


def run_fci_oracle(case: Case) -> EndpointGraph:
    return fci_oracle(case.dag_nx, case.columns)


# method -> (runner, target class)
METHODS: dict[str, tuple[Callable[[Case], EndpointGraph], str]] = {
    "pc-fisherz": (run_pc, "cpdag"),
    "ges-bic": (run_ges, "cpdag"),
    "fci-fisherz": (run_fci, "pag"),
    "pc-oracle": (run_pc_oracle, "cpdag"),
    "fci-oracle": (run_fci_oracle, "pag"),
}


@dataclass(frozen=True)
class Result:
    case: str
    method: str
    target: str
    n: int
    n_columns: int
    true_edges: int
    empty_shd: int
    scores: GraphScores
    sid: str
    seconds: float


def evaluate(case: Case, methods: Sequence[str]) -> list[Result]:
    out = []
    for m in methods:
        runner, target = METHODS[m]
        if m == "pc-oracle" and case.truth.cpdag is None:
            continue  # latent confounders: PC has no target to reach
        truth = case.truth.cpdag if target == "cpdag" else case.truth.pag
        scored_as = target
        if truth is None:
            truth, scored_as = case.truth.pag, "pag (no cpdag)"
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = runner(case)
        seconds = time.perf_counter() - start
        sid_text = "-"
        if case.truth.column_dag is not None and target == "cpdag":
            try:
                bounds = sid(case.truth.column_dag, found)
                sid_text = f"{bounds.lower}..{bounds.upper}"
            except GraphError:  # no DAG extends the learned PDAG (conflicting orientations)
                sid_text = "n/a"
        out.append(
            Result(
                case.label,
                m,
                scored_as,
                len(case.data),
                len(case.columns),
                truth.n_edges,
                truth.n_edges,  # the empty graph misses every true edge
                score_graph(truth, found),
                sid_text,
                seconds,
            )
        )
    return out


def _f(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.2f}"


def table(results: Sequence[Result]) -> str:
    head = (
        "| case | method | target | n | columns | true edges | SHD | SHD empty | adj. P | adj. R "
        "| adj. F1 | arrow P | arrow R | arrow F1 | SID | seconds |"
    )
    lines = [head, "|" + " --- |" * 16]
    for r in results:
        s = r.scores
        lines.append(
            f"| {r.case} | {r.method} | {r.target} | {r.n} | {r.n_columns} | {r.true_edges} "
            f"| {s.shd} | {r.empty_shd} | {_f(s.adjacency.precision)} | {_f(s.adjacency.recall)} "
            f"| {_f(s.adjacency.f1)} | {_f(s.arrowheads.precision)} | {_f(s.arrowheads.recall)} "
            f"| {_f(s.arrowheads.f1)} | {r.sid} | {r.seconds:.1f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--n", type=int, default=1000, help="i.i.d. rows per case")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    results: list[Result] = []
    for label in args.cases:
        case = build_case(label, args.n, args.seed)
        print(
            f"{label}: {len(case.columns)} columns sampled in {case.sample_seconds:.1f} s; "
            f"constant in this unit: {', '.join(case.constant) or 'none'}",
            flush=True,
        )
        print(f"  true PAG: {case.truth.pag}", flush=True)
        if case.truth.cpdag is not None:
            print(f"  true CPDAG: {case.truth.cpdag}", flush=True)
        done = evaluate(case, args.methods)
        results += done
        print(table(done), flush=True)
    print()
    print(f"causal-learn {version('causal-learn')}, alpha {ALPHA}, n {args.n}, seed {args.seed}")
    print(table(results))


if __name__ == "__main__":
    main()
