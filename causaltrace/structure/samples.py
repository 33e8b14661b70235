"""i.i.d. samples of one unit of a domain's SCM, observational and under regimes.

A panel's rows are not i.i.d. draws of one distribution: cells and days differ in their
coordinates (the pooled-panel pitfall of docs/causal-structure.md), and mechanisms that lag or
aggregate couple them. Structure learners and their consistency results assume i.i.d. rows, so
:func:`sample_units` takes one unit (a cell and a time step, fixed) from each of ``n``
independent worlds: every row has the same coordinates and fresh noise, so the rows are i.i.d.
draws of that unit's distribution, whatever the mechanisms do (rows never share noise). When
every mechanism reads its parents at its own unit, the row is Markov to the declared DAG. A
mechanism that lags along time or aggregates across cells reads other units' values too; the
rows stay i.i.d., but a unit's values then depend on other units' noise, and the row need not
be Markov to the declared DAG (the pooled-panel caveat of docs/causal-structure.md).

Seeds follow ``causaltrace export-structure``'s: world ``i`` of regime ``r`` (0 observational,
``k`` the ``k``-th regime) is sampled with ``SeedSequence(seed, spawn_key=(r,)).spawn(n)[i]``,
so a row equals the export's row of that world at that unit, and the same arguments give the
same array. Every world's noise comes from its own ``numpy.random.Generator`` streams keyed by
that seed (``causaltrace.model.noise``); no global random state is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from causaltrace.errors import CausalTraceError
from causaltrace.model.scm import SCM
from causaltrace.model.slices import parse_slice
from causaltrace.structure.export import Regime, parse_regime, world_seeds

OBSERVATIONAL = "observational"


@dataclass(frozen=True, eq=False)
class UnitSamples:
    """Rows of one unit from independent worlds, grouped by regime (observational first).

    Args:
        columns: Node names of ``data``'s columns.
        data: ``(rows, columns)`` float64 values (counts cast exactly).
        regime: ``(rows,)`` regime index per row: 0 observational, ``k`` for ``regimes[k-1]``.
        regimes: The interventional regimes, in index order.
        targets: ``(rows, columns)`` bool: the row's regime intervenes on that column's node at
            the unit (the node is a target and the unit's cell is in the target's slice).
        cell: The unit's cell (row of the panel's cell table).
        time: The unit's time step (index along the panel's time axis).
        seed: The root seed.
        constant: Every node (latent ones too) whose value is the same in all observational
            rows: it carries no dependence in this unit (see ``graphs.true_graphs``).
    """

    columns: tuple[str, ...]
    data: np.ndarray
    regime: np.ndarray
    regimes: tuple[Regime, ...]
    targets: np.ndarray
    cell: int
    time: int
    seed: int
    constant: tuple[str, ...]

    def __post_init__(self) -> None:
        for name in ("data", "regime", "targets"):
            value = np.array(getattr(self, name))
            value.setflags(write=False)
            object.__setattr__(self, name, value)

    @property
    def regime_names(self) -> tuple[str, ...]:
        """``"observational"``, then each regime's name, in index order."""
        return (OBSERVATIONAL, *(r.name for r in self.regimes))

    def rows(self, regime: int = 0) -> np.ndarray:
        """The data rows of one regime (0: observational)."""
        return self.data[self.regime == regime]

    def varying(self, regime: int = 0) -> tuple[str, ...]:
        """The columns that are not constant in one regime's rows (a constant column makes a
        Gaussian test singular)."""
        rows = self.rows(regime)
        return tuple(c for c, x in zip(self.columns, rows.T, strict=True) if np.ptp(x) > 0)

    def column_data(self, columns: Sequence[str], regime: int | None = 0) -> np.ndarray:
        """The values of ``columns`` (in that order), for one regime or every row (``None``)."""
        ix = [self.columns.index(c) for c in columns]
        rows = self.data if regime is None else self.rows(regime)
        return rows[:, ix]


def resolve_cell(scm: SCM, cell: int | str) -> int:
    """A cell index from an index or a slice text naming exactly one cell
    (``"service=cart&region=us_east"``).

    Raises:
        CausalTraceError: An index out of range, or a slice matching no cell or several.
    """
    n = scm.panel.n_cells
    if isinstance(cell, str):
        mask = parse_slice(cell, scm.panel).mask(scm.panel)
        hits = np.flatnonzero(mask)
        if len(hits) != 1:
            raise CausalTraceError(f"cell {cell!r} matches {len(hits)} cells; name exactly one")
        return int(hits[0])
    if not 0 <= int(cell) < n:
        raise CausalTraceError(f"cell {cell} is out of range: the panel has {n} cells")
    return int(cell)


def sample_units(
    scm: SCM,
    n: int,
    *,
    seed: int = 0,
    columns: Sequence[str] | None = None,
    regimes: Sequence[Regime | str] = (),
    cell: int | str = 0,
    time: int | None = None,
) -> UnitSamples:
    """``n`` i.i.d. rows of one unit per regime (see the module docstring).

    Args:
        scm: The model (a domain's ``scm``).
        n: Worlds, hence rows, per regime.
        seed: Root seed (the export's seed tree).
        columns: Nodes to return; the SCM's observed nodes by default.
        regimes: Interventional regimes, as :class:`~causaltrace.structure.export.Regime` or
            their text (``"do:visits=100,shift:orders=1@channel=email"``, as
            ``export-structure --regime`` reads). Every intervention covers the whole window.
        cell: The unit's cell: an index into the panel's cells, or a slice naming one cell.
        time: The unit's time step; the middle of the window by default (away from the
            first days, which lagged mechanisms start from their initial values).

    Raises:
        CausalTraceError: ``n < 1``, a negative seed, an unknown column, a bad regime, cell or
            time step.
    """
    if n < 1:
        raise CausalTraceError(f"n must be >= 1, got {n}")
    if seed < 0:
        raise CausalTraceError(f"seed must be >= 0, got {seed}")
    cols = tuple(scm.observed if columns is None else columns)
    unknown = [c for c in cols if c not in scm.nodes]
    if unknown:
        raise CausalTraceError(f"unknown columns {unknown}; nodes of {scm.name!r}: {scm.order}")
    parsed = tuple(r if isinstance(r, Regime) else parse_regime(r, scm) for r in regimes)
    c = resolve_cell(scm, cell)
    t = scm.panel.n_time // 2 if time is None else int(time)
    if not 0 <= t < scm.panel.n_time:
        raise CausalTraceError(f"time {t} is out of range: the panel has {scm.panel.n_time} steps")
    order = scm.order
    blocks, labels, masks = [], [], []
    constant: tuple[str, ...] = ()
    for r, regime in enumerate((None, *parsed)):
        ivs = [] if regime is None else [iv.intervention for iv in regime.interventions]
        rows = np.empty((n, len(order)))
        for w, ss in enumerate(world_seeds(seed, r, n)):
            if regime is None:
                world = scm.sample(ss)
            else:
                world = scm.simulate(ivs, seed=ss, counterfactual=False).factual
            rows[w] = [world[name][c, t] for name in order]
        if regime is None:
            constant = tuple(nm for nm, x in zip(order, rows.T, strict=True) if np.ptp(x) == 0)
        blocks.append(rows[:, [order.index(col) for col in cols]])
        labels.append(np.full(n, r, dtype=np.int64))
        masks.append(np.repeat(_unit_targets(scm, regime, cols, c)[None, :], n, axis=0))
    return UnitSamples(
        cols,
        np.concatenate(blocks),
        np.concatenate(labels),
        parsed,
        np.concatenate(masks),
        c,
        t,
        seed,
        constant,
    )


def _unit_targets(scm: SCM, regime: Regime | None, cols: Sequence[str], cell: int) -> np.ndarray:
    """Which columns the regime intervenes on at the unit's cell."""
    out = np.zeros(len(cols), dtype=bool)
    for iv in () if regime is None else regime.interventions:
        if iv.node in cols and iv.where.mask(scm.panel)[cell]:
            out[cols.index(iv.node)] = True
    return out
