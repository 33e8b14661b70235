"""Files that discovery libraries read, written from i.i.d. unit samples, and read back.

- **bnlearn BIF** (:func:`bif_text`): a discrete Bayesian network over the columns, for bnlearn
  (``read.bif``), pgmpy (``BIFReader``) and other BIF readers. Continuous columns are
  discretized by :func:`discretize`; the CPTs are estimated from the sampled rows with Laplace
  smoothing: ``P(x = s | parents = c) = (n(s, c) + alpha) / (n(c) + alpha * states(x))``
  (``alpha = 1`` by default), so a parent configuration never seen gets the uniform
  distribution. The domains' mechanisms draw counts from continuous parents, so there is no
  exact finite CPT to write; the estimate is what a BIF can carry. The structure is the true
  DAG over the columns, which exists only when no latent node confounds two columns.
- **DCDI / gCastle regime arrays** (:func:`write_regime_arrays`, read back by
  :func:`read_regime_arrays`): DCDI's file set (``data_interv1.npy``, ``regime1.csv``,
  ``intervention1.csv``, ``DAG1.npy``; the data matrix is gCastle's ``X`` and ``DAG1.npy`` its
  ``true_dag``) plus an explicit row-by-column intervention target mask ``targets1.npy``.
- **A CausalBench-like perturbation table** (:func:`write_perturbation_table`): one row per
  sample, the perturbed node (``"non-targeting"`` for a control row) and the values.

**Discretization rule.** A column with at most ``bins`` distinct values keeps them as its
states (``kind = "values"``). Otherwise the cut points are the sample quantiles at ``j / bins``,
``j = 1 .. bins - 1`` (numpy's default linear interpolation), duplicates removed; a value ``v``
gets the state ``#{cuts < v}``, so a state is a right-closed interval ``(c[s-1], c[s]]``
(``kind = "quantiles"``). A cut whose interval below holds no sample (ties at a quantile) is
dropped, merging that interval into the next one, so no state is empty. States are named
``s0``, ``s1``, ... and each BIF variable records the rule and cuts in its ``property`` lines.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from causaltrace.core.files import atomic_write_bytes, atomic_write_text
from causaltrace.errors import CausalTraceError, GraphError
from causaltrace.structure.graphs import ARROW, TAIL, EndpointGraph, TrueGraphs
from causaltrace.structure.samples import OBSERVATIONAL, UnitSamples

NON_TARGETING = "non-targeting"
REGIMES_JSON = "regimes.json"
_REQUIRED = (("data_interv", "npy"), ("regime", "csv"), ("intervention", "csv"), ("targets", "npy"))
README_FILE = "README.txt"


# -- discretization -------------------------------------------------------------------------


@dataclass(frozen=True)
class Discretization:
    """How one column's values map to the states ``s0``, ``s1``, ... (the module's rule).

    Args:
        column: The column's name.
        kind: ``"values"`` (state ``s`` is the value ``cuts[s]``) or ``"quantiles"`` (state
            ``s`` is the interval ``(cuts[s-1], cuts[s]]``, open at both ends of the range).
        cuts: The values, or the cut points, ascending.
    """

    column: str
    kind: str
    cuts: tuple[float, ...]

    @property
    def n_states(self) -> int:
        return len(self.cuts) if self.kind == "values" else len(self.cuts) + 1

    @property
    def states(self) -> tuple[str, ...]:
        return tuple(f"s{i}" for i in range(self.n_states))

    def codes(self, x: np.ndarray) -> np.ndarray:
        """The state index of every value of ``x``.

        Raises:
            CausalTraceError: A ``"values"`` column given a value that is not one of its states.
        """
        x = np.asarray(x, dtype=np.float64)
        cuts = np.asarray(self.cuts, dtype=np.float64)
        if self.kind == "quantiles":
            return np.searchsorted(cuts, x, side="left").astype(np.int64)
        idx = np.clip(np.searchsorted(cuts, x), 0, len(cuts) - 1)
        unknown = cuts[idx] != x
        if unknown.any():
            raise CausalTraceError(
                f"column {self.column!r}: value {x[unknown][0]!r} is not one of its states"
            )
        return idx.astype(np.int64)

    def describe(self, state: int) -> str:
        """A state's meaning in words: ``"= 3"``, ``"<= 12.5"``, ``"(12.5, 30]"``, ``"> 30"``."""
        c = self.cuts
        if self.kind == "values":
            return f"= {c[state]!r}"
        if state == 0:
            return f"<= {c[0]!r}" if c else "any"
        if state == len(c):
            return f"> {c[-1]!r}"
        return f"({c[state - 1]!r}, {c[state]!r}]"


def discretize(x: np.ndarray, column: str, bins: int = 5) -> Discretization:
    """The discretization of one column's sample (the module docstring's rule).

    Args:
        x: The column's values.
        column: Its name.
        bins: The most states (``>= 2``).

    Raises:
        CausalTraceError: ``bins < 2`` or an empty or non-finite sample.
    """
    if bins < 2:
        raise CausalTraceError(f"bins must be >= 2, got {bins}")
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0 or not np.isfinite(x).all():
        raise CausalTraceError(f"column {column!r}: empty or non-finite values")
    values = np.unique(x)
    if len(values) <= bins:
        return Discretization(column, "values", tuple(values.tolist()))
    cuts = np.unique(np.quantile(x, np.arange(1, bins) / bins))
    used = np.unique(np.searchsorted(cuts, x, side="left"))
    kept = cuts[used[:-1]]  # the upper cut of every non-empty interval but the last one
    return Discretization(column, "quantiles", tuple(kept.tolist()))


# -- BIF -----------------------------------------------------------------------------------


def parents_of(dag: EndpointGraph, node: str) -> tuple[str, ...]:
    """A DAG node's parents, in node order."""
    i = dag.index[node]
    return tuple(
        p for j, p in enumerate(dag.nodes) if dag.marks[j, i] == TAIL and dag.marks[i, j] == ARROW
    )


def cpt(
    child: np.ndarray, parents: Sequence[np.ndarray], cards: Sequence[int], alpha: float = 1.0
) -> np.ndarray:
    """Laplace-smoothed ``P(child | parents)`` from state codes.

    Args:
        child: The child's state codes (one per row).
        parents: Each parent's state codes.
        cards: The number of states of each parent, then of the child.
        alpha: Pseudo-count added to every cell (``> 0``).

    Returns:
        An array of shape ``(*parent cards, child card)`` whose last axis sums to 1.
    """
    if alpha <= 0:
        raise CausalTraceError(f"alpha must be > 0, got {alpha}")
    flat = np.ravel_multi_index((*parents, child), tuple(cards))
    counts = np.bincount(flat, minlength=int(np.prod(cards))).reshape(cards).astype(np.float64)
    counts += alpha
    return counts / counts.sum(axis=-1, keepdims=True)


def bif_text(
    dag: EndpointGraph,
    data: np.ndarray,
    discretizations: Sequence[Discretization],
    *,
    alpha: float = 1.0,
    name: str = "causaltrace",
    max_table: int = 1_000_000,
) -> str:
    """A BIF network: ``dag``'s structure, CPTs estimated from ``data``.

    Args:
        dag: The DAG over the columns (its node order is ``data``'s column order).
        data: ``(rows, columns)`` values (the observational rows).
        discretizations: One per column, in the same order.
        alpha: Laplace pseudo-count.
        name: The network's name (letters, digits, ``_`` and ``-``).
        max_table: The most entries one CPT may have (a BIF of millions of rows is unusable).

    Raises:
        GraphError: ``dag`` is not a DAG.
        CausalTraceError: Columns and discretizations disagree, or a CPT is too large.
    """
    if not dag.is_dag():
        raise GraphError("bif_text: the structure must be a DAG")
    cols = dag.nodes
    if [d.column for d in discretizations] != list(cols) or data.shape[1] != len(cols):
        raise CausalTraceError("bif_text: data, discretizations and the DAG's nodes disagree")
    codes = {d.column: d.codes(data[:, k]) for k, d in enumerate(discretizations)}
    by_col = {d.column: d for d in discretizations}
    lines = [f"network {name} {{", "}"]
    for d in discretizations:
        lines += [
            f"variable {d.column} {{",
            f"  type discrete [ {d.n_states} ] {{ {', '.join(d.states)} }};",
            f"  property discretization = {d.kind} ;",
            f"  property cuts = {' '.join(repr(c) for c in d.cuts)} ;",
            "}",
        ]
    for child in cols:
        pa = parents_of(dag, child)
        cards = [by_col[p].n_states for p in pa] + [by_col[child].n_states]
        if int(np.prod(cards)) > max_table:
            raise CausalTraceError(
                f"bif_text: the CPT of {child!r} would have {int(np.prod(cards))} entries "
                f"(parents {list(pa)}); use fewer bins"
            )
        table = cpt(codes[child], [codes[p] for p in pa], cards, alpha)
        if not pa:
            lines += [f"probability ( {child} ) {{", f"  table {_row(table)};", "}"]
            continue
        lines.append(f"probability ( {child} | {', '.join(pa)} ) {{")
        for config in itertools.product(*(range(c) for c in cards[:-1])):
            states = ", ".join(f"s{s}" for s in config)
            lines.append(f"  ({states}) {_row(table[config])};")
        lines.append("}")
    return "\n".join(lines) + "\n"


def _row(p: np.ndarray) -> str:
    return ", ".join(repr(float(v)) for v in p)


# -- DCDI / gCastle regime arrays -----------------------------------------------------------


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def regime_metadata(samples: UnitSamples) -> list[dict]:
    """Per regime index: its name, spec, the nodes it intervenes on, and those it intervenes
    on at the unit (column names and indices)."""
    out = [
        {
            "index": 0,
            "name": OBSERVATIONAL,
            "spec": "",
            "targets": [],
            "unit_targets": [],
            "unit_target_indices": [],
        }
    ]
    for k, regime in enumerate(samples.regimes, start=1):
        row = samples.targets[samples.regime == k][0]
        ix = np.flatnonzero(row).tolist()
        out.append(
            {
                "index": k,
                "name": regime.name,
                "spec": regime.spec(),
                "targets": list(regime.targets),
                "unit_targets": [samples.columns[i] for i in ix],
                "unit_target_indices": ix,
            }
        )
    return out


def write_regime_arrays(
    out: str | Path, samples: UnitSamples, truth: TrueGraphs | None = None, *, index: int = 1
) -> list[Path]:
    """DCDI's file set (gCastle reads the same matrices) for ``samples``, into ``out``.

    Files (``i`` = ``index``): ``data_interv{i}.npy`` every row (float64, rows x columns);
    ``data{i}.npy`` the observational rows; ``regime{i}.csv`` one regime index per row (0
    observational); ``intervention{i}.csv`` per row the comma-separated column indices its
    regime intervenes on at the unit (an empty line for none: DCDI's format);
    ``targets{i}.npy`` the same as a 0/1 rows x columns mask (uint8, 1 = intervened);
    ``regimes.json`` the columns and each regime (:func:`regime_metadata`); with ``truth``,
    ``MAG{i}.npy`` and ``PAG{i}.npy`` (endpoint marks, ``EndpointGraph``'s convention) and,
    when the truth over the columns is a DAG, ``DAG{i}.npy`` and ``CPDAG{i}.npy`` (0/1, rows =
    parents, an undirected edge both ways).

    Args:
        out: The directory (created).
        samples: The rows.
        truth: The true graphs over ``samples.columns``; none by default.
        index: The data set number in the file names (DCDI's ``i_dataset``).

    Returns:
        The files written.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def put(name: str, data: bytes | str) -> None:
        path = out / name
        if isinstance(data, str):
            atomic_write_text(path, data)
        else:
            atomic_write_bytes(path, data)
        written.append(path)

    put(f"data_interv{index}.npy", _npy(np.asarray(samples.data, dtype=np.float64)))
    put(f"data{index}.npy", _npy(np.asarray(samples.rows(0), dtype=np.float64)))
    put(f"regime{index}.csv", "".join(f"{int(r)}\n" for r in samples.regime))
    put(
        f"intervention{index}.csv",
        "".join(",".join(map(str, np.flatnonzero(row))) + "\n" for row in samples.targets),
    )
    put(f"targets{index}.npy", _npy(samples.targets.astype(np.uint8)))
    meta = {
        "columns": list(samples.columns),
        "regimes": regime_metadata(samples),
        "unit": {"cell": samples.cell, "time": samples.time},
        "seed": samples.seed,
        "constant": list(samples.constant),
        "index": index,
    }
    if truth is not None:
        if truth.columns != samples.columns:
            raise CausalTraceError("write_regime_arrays: the truth is over other columns")
        put(f"MAG{index}.npy", _npy(truth.mag.marks.astype(np.int8)))
        put(f"PAG{index}.npy", _npy(truth.pag.marks.astype(np.int8)))
        if truth.cpdag is not None:
            put(f"DAG{index}.npy", _npy(truth.mag.to_adjacency()))
            put(f"CPDAG{index}.npy", _npy(truth.cpdag.to_adjacency()))
    put(REGIMES_JSON, json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return written


@dataclass(frozen=True, eq=False)
class RegimeArrays:
    """What :func:`read_regime_arrays` reads back.

    Args:
        columns: Column names.
        data: Every row (float64).
        regime: Regime index per row.
        targets: Boolean rows x columns intervention mask.
        regimes: Per regime index, its metadata (``regimes.json``).
        mag: The true MAG, if written.
        pag: The true PAG, if written.
        dag: The true DAG's 0/1 adjacency (rows = parents), if written.
        cpdag: The true CPDAG's 0/1 adjacency, if written.
    """

    columns: tuple[str, ...]
    data: np.ndarray
    regime: np.ndarray
    targets: np.ndarray
    regimes: tuple[dict, ...]
    mag: EndpointGraph | None
    pag: EndpointGraph | None
    dag: np.ndarray | None
    cpdag: np.ndarray | None


def read_regime_arrays(path: str | Path, *, index: int = 1) -> RegimeArrays:
    """Read what :func:`write_regime_arrays` wrote, checking the files agree.

    Args:
        path: The directory.
        index: The data set number in the file names.

    Raises:
        CausalTraceError: A missing file, or files that disagree (row counts, the intervention
            list and the mask, a regime index without metadata).
    """
    path = Path(path)
    needed = [REGIMES_JSON, *(f"{n}{index}.{e}" for n, e in _REQUIRED)]
    missing = [name for name in needed if not (path / name).is_file()]
    if missing:
        raise CausalTraceError(f"regime arrays in {path}: missing {', '.join(missing)}")
    meta = json.loads((path / REGIMES_JSON).read_text())
    data = np.load(path / f"data_interv{index}.npy", allow_pickle=False)
    regime = np.loadtxt(path / f"regime{index}.csv", dtype=np.int64, ndmin=1)
    mask = np.load(path / f"targets{index}.npy", allow_pickle=False).astype(bool)
    with open(path / f"intervention{index}.csv", newline="") as f:
        lists = [[int(v) for v in row] for row in csv.reader(f)]
    columns = tuple(meta["columns"])
    n = len(data)
    if data.shape != (n, len(columns)) or regime.shape != (n,) or mask.shape != data.shape:
        raise CausalTraceError(f"regime arrays in {path}: data, regime and mask shapes disagree")
    if len(lists) != n:
        raise CausalTraceError(f"regime arrays in {path}: {len(lists)} intervention rows for {n}")
    from_lists = np.zeros_like(mask)
    for r, ix in enumerate(lists):
        from_lists[r, ix] = True
    if not np.array_equal(from_lists, mask):
        raise CausalTraceError(
            f"regime arrays in {path}: intervention{index}.csv and the mask differ"
        )
    known = {int(r["index"]) for r in meta["regimes"]}
    if not set(np.unique(regime).tolist()) <= known:
        raise CausalTraceError(f"regime arrays in {path}: a regime index has no metadata")

    def graph(name: str) -> EndpointGraph | None:
        file = path / f"{name}{index}.npy"
        return EndpointGraph(columns, np.load(file)) if file.exists() else None

    def matrix(name: str) -> np.ndarray | None:
        file = path / f"{name}{index}.npy"
        return np.load(file) if file.exists() else None

    return RegimeArrays(
        columns,
        data,
        regime,
        mask,
        tuple(meta["regimes"]),
        graph("MAG"),
        graph("PAG"),
        matrix("DAG"),
        matrix("CPDAG"),
    )


# -- perturbation table ----------------------------------------------------------------------


def perturbation_labels(samples: UnitSamples) -> list[str]:
    """Per row, the nodes its regime intervenes on at the unit joined by ``+`` (CausalBench's
    label for a combination), or ``"non-targeting"`` where none (every observational row, and
    a regime whose slices miss the unit's cell)."""
    return [
        "+".join(c for c, hit in zip(samples.columns, row, strict=True) if hit) or NON_TARGETING
        for row in samples.targets
    ]


def perturbation_csv(samples: UnitSamples) -> str:
    """The perturbation table as CSV: ``perturbation``, ``regime`` (the regime's name), then one
    column per node; one row per sample; values written with ``repr`` (exact floats)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["perturbation", "regime", *samples.columns])
    names = samples.regime_names
    for label, r, row in zip(
        perturbation_labels(samples), samples.regime, samples.data, strict=True
    ):
        writer.writerow([label, names[int(r)], *(repr(float(v)) for v in row)])
    return buffer.getvalue()


def write_perturbation_table(path: str | Path, samples: UnitSamples) -> Path:
    """Write :func:`perturbation_csv` to ``path``; returns it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, perturbation_csv(samples))
    return path
