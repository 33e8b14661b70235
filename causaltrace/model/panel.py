"""The panel: segment cells crossed with a time axis.

Node values are numpy arrays of shape ``(n_cells, n_time)``. A *cell* is one combination of
levels of the segment dimensions. The panel stores its cells as a table of integer level codes,
so it can be the full cross product of its dimensions or any subset of it: real breakdowns are
nested (a browser belongs to a device class, a creative to a campaign), and a full cross
product of nested dimensions would be mostly structural zeros.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from causaltrace.errors import PanelError


@dataclass(frozen=True)
class Dimension:
    """A named segment dimension with ordered levels, e.g. ``device: mobile, desktop``.

    Args:
        name: The dimension's name (a column of the visible tables); not ``"time"``, and
            without ``&``, ``=``, commas or whitespace.
        levels: Its levels, in order (the order gives the integer codes); non-empty, unique,
            with the same character rules as ``name``.

    Raises:
        PanelError: A bad name, no levels, a bad or repeated level.
    """

    name: str
    levels: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", tuple(self.levels))
        _check_identifier(self.name, "dimension name")
        if not self.levels:
            raise PanelError(f"dimension {self.name!r} has no levels")
        seen: set[str] = set()
        for level in self.levels:
            _check_identifier(level, f"level of dimension {self.name!r}")
            if level in seen:
                raise PanelError(f"dimension {self.name!r} lists level {level!r} twice")
            seen.add(level)

    def code(self, level: str) -> int:
        """Integer code of ``level``; raises naming the dimension and its levels.

        Args:
            level: One of :attr:`levels`.

        Raises:
            PanelError: ``level`` is not a level of this dimension.
        """
        try:
            return self.levels.index(level)
        except ValueError:
            raise PanelError(
                f"unknown level {level!r} of dimension {self.name!r}; "
                f"known levels: {', '.join(self.levels)}"
            ) from None


def _check_identifier(text: str, what: str) -> None:
    # '&' and '=' delimit the canonical slice form, so they may not appear in names.
    if not isinstance(text, str) or not text:
        raise PanelError(f"{what} must be a non-empty string, got {text!r}")
    bad = set(text) & set("&=, \t\n")
    if bad:
        raise PanelError(f"{what} {text!r} contains forbidden characters {sorted(bad)}")


@dataclass(frozen=True)
class TimeAxis:
    """A regular time grid: ``periods`` steps of ``freq`` starting at ``start``.

    ``freq`` is a numpy timedelta unit such as ``"D"`` or ``"h"``; ``step`` multiplies it.

    Args:
        start: The first time stamp, as ``numpy.datetime64`` parses it (``"2024-01-01"``).
        periods: The number of time steps (at least 1).
        freq: The numpy timedelta unit of a step; ``"D"`` (days) by default.
        step: How many ``freq`` units one step spans; 1 by default.

    Raises:
        PanelError: ``periods`` < 1, or ``start``/``freq``/``step`` that numpy rejects.
    """

    start: str
    periods: int
    freq: str = "D"
    step: int = 1

    def __post_init__(self) -> None:
        if int(self.periods) <= 0:
            raise PanelError(f"time axis needs periods >= 1, got {self.periods}")
        try:
            np.datetime64(self.start, self.freq)
            np.timedelta64(self.step, self.freq)
        except (ValueError, TypeError) as exc:
            raise PanelError(
                f"bad time axis start={self.start!r} freq={self.freq!r}: {exc}"
            ) from None

    @cached_property
    def values(self) -> np.ndarray:
        """The time stamps as ``datetime64`` in the axis' unit."""
        start = np.datetime64(self.start, self.freq)
        return start + np.arange(self.periods) * np.timedelta64(self.step, self.freq)

    def __len__(self) -> int:
        return int(self.periods)


@dataclass(frozen=True)
class Panel:
    """Segment cells (rows of level codes) crossed with a time axis.

    Build the full cross product with :meth:`cross`, or restrict it with :meth:`where`.

    Args:
        dimensions: The segment dimensions, with unique names (none named ``"time"``).
        time: The time axis.
        cells: Integer level codes, shape ``(n_cells, len(dimensions))``, one row per cell;
            at least one row, every code within its dimension's levels.

    Raises:
        PanelError: Repeated dimensions, a bad ``cells`` shape, no cells, or codes out of range.
    """

    dimensions: tuple[Dimension, ...]
    time: TimeAxis
    cells: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        dims = tuple(self.dimensions)
        object.__setattr__(self, "dimensions", dims)
        names = [d.name for d in dims]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise PanelError(f"panel lists dimension(s) {dupes} twice")
        if "time" in names:
            raise PanelError("'time' is reserved for the time axis; rename that dimension")
        cells = np.asarray(self.cells, dtype=np.int64)
        if cells.ndim != 2 or cells.shape[1] != len(dims):
            raise PanelError(f"cells must have shape (n_cells, {len(dims)}), got {cells.shape}")
        if cells.shape[0] == 0:
            raise PanelError("panel has no cells")
        for j, dim in enumerate(dims):
            col = cells[:, j]
            if col.min() < 0 or col.max() >= len(dim.levels):
                raise PanelError(f"cell codes of dimension {dim.name!r} out of range")
        cells.setflags(write=False)
        object.__setattr__(self, "cells", cells)

    # -- construction -------------------------------------------------------------------
    @classmethod
    def cross(cls, dimensions: Iterable[Dimension], time: TimeAxis) -> Panel:
        """The full cross product of ``dimensions`` (C order: the last dimension varies fastest).

        Args:
            dimensions: The segment dimensions; none gives a single cell.
            time: The time axis.
        """
        dims = tuple(dimensions)
        if dims:
            grids = np.meshgrid(*[np.arange(len(d.levels)) for d in dims], indexing="ij")
            cells = np.stack([g.ravel() for g in grids], axis=1)
        else:
            cells = np.zeros((1, 0), dtype=np.int64)
        return cls(dims, time, cells)

    def where(self, keep: Callable[[Mapping[str, np.ndarray]], np.ndarray]) -> Panel:
        """Keep the cells for which ``keep(levels)`` is true.

        ``keep`` receives a mapping from dimension name to an array of level *names*, one per
        cell, and returns a boolean array: e.g. drop browsers that do not exist on a device.

        Args:
            keep: The predicate: dimension name -> level names per cell, to a boolean array of
                shape ``(n_cells,)``.

        Returns:
            A new panel with the kept cells, in their order.

        Raises:
            PanelError: ``keep`` returned an array of the wrong shape.
        """
        labels = {
            d.name: np.asarray(d.levels, dtype=object)[self.cells[:, j]]
            for j, d in enumerate(self.dimensions)
        }
        mask = np.asarray(keep(labels), dtype=bool)
        if mask.shape != (self.n_cells,):
            raise PanelError(
                f"where() predicate returned shape {mask.shape}, expected ({self.n_cells},)"
            )
        return Panel(self.dimensions, self.time, self.cells[mask])

    # -- shape ----------------------------------------------------------------------------
    @property
    def n_cells(self) -> int:
        return int(self.cells.shape[0])

    @property
    def n_time(self) -> int:
        return len(self.time)

    @property
    def shape(self) -> tuple[int, int]:
        """Shape of every node value: ``(n_cells, n_time)``."""
        return (self.n_cells, self.n_time)

    @property
    def size(self) -> int:
        """Number of units: cells times time steps."""
        return self.n_cells * self.n_time

    @cached_property
    def dimension_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dimensions)

    def dimension(self, name: str) -> Dimension:
        """The dimension called ``name``; raises naming the known ones.

        Args:
            name: The dimension's name.

        Raises:
            PanelError: No dimension has that name.
        """
        for dim in self.dimensions:
            if dim.name == name:
                return dim
        raise PanelError(
            f"unknown dimension {name!r}; known dimensions: {', '.join(self.dimension_names) or '(none)'}"
        )

    def codes(self, name: str) -> np.ndarray:
        """Level code of dimension ``name`` for every cell, shape ``(n_cells,)``.

        Args:
            name: The dimension's name.
        """
        return self.cells[:, self._index(name)]

    def labels(self, name: str) -> np.ndarray:
        """Level name of dimension ``name`` for every cell (object array).

        Args:
            name: The dimension's name.
        """
        return np.asarray(self.dimension(name).levels, dtype=object)[self.codes(name)]

    def _index(self, name: str) -> int:
        try:
            return self.dimension_names.index(name)
        except ValueError:
            self.dimension(name)  # raises with the known names
            raise

    # -- grouping (cross-segment mechanisms) ----------------------------------------------
    def group_index(self, dims: Sequence[str]) -> tuple[np.ndarray, int]:
        """Dense group id per cell for the groups defined by ``dims``, and the group count.

        ``dims=()`` puts every cell in one group. Groups are numbered in the order of the
        mixed-radix code of their levels, so the numbering does not depend on cell order.

        Args:
            dims: The dimensions whose level combinations define the groups.

        Returns:
            The group id of each cell (shape ``(n_cells,)``) and the number of groups.
        """
        index, n_groups, _, _ = self._grouping(tuple(dims))
        return index, n_groups

    def _grouping(self, dims: tuple[str, ...]) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
        # Cached per dims: mechanisms call this on every simulation.
        cache = self.__dict__.setdefault("_grouping_cache", {})
        if dims not in cache:
            key = np.zeros(self.n_cells, dtype=np.int64)
            for name in dims:
                key = key * len(self.dimension(name).levels) + self.codes(name)
            uniques, inverse = np.unique(key, return_inverse=True)
            order = np.argsort(inverse, kind="stable")
            starts = np.searchsorted(inverse[order], np.arange(uniques.size))
            cache[dims] = (inverse.astype(np.intp), int(uniques.size), order, starts)
        return cache[dims]

    def group_sum(self, values: np.ndarray, dims: Sequence[str]) -> np.ndarray:
        """Sum ``values`` (shape ``(n_cells, ...)``) over the cells of each group of ``dims``.

        Returns shape ``(n_groups, ...)``; a sort-and-``reduceat``, so it costs one pass.

        Args:
            values: An array whose first axis is the cells.
            dims: The grouping dimensions (see :meth:`group_index`).
        """
        _, _, order, starts = self._grouping(tuple(dims))
        return np.add.reduceat(np.asarray(values)[order], starts, axis=0)

    def group_mean(self, values: np.ndarray, dims: Sequence[str]) -> np.ndarray:
        """Mean of ``values`` over the cells of each group of ``dims``, shape ``(n_groups, ...)``.

        Args:
            values: An array whose first axis is the cells.
            dims: The grouping dimensions (see :meth:`group_index`).
        """
        index, n_groups = self.group_index(tuple(dims))
        counts = np.bincount(index, minlength=n_groups).astype(np.float64)
        sums = self.group_sum(values, dims)
        return sums / counts.reshape(-1, *([1] * (sums.ndim - 1)))

    def group_broadcast(self, group_values: np.ndarray, dims: Sequence[str]) -> np.ndarray:
        """Inverse of :meth:`group_sum`'s grouping: give every cell its group's value.

        Args:
            group_values: An array whose first axis is the groups of ``dims``.
            dims: The grouping dimensions (see :meth:`group_index`).
        """
        index, _ = self.group_index(tuple(dims))
        return np.asarray(group_values)[index]

    def group_share(self, values: np.ndarray, dims: Sequence[str]) -> np.ndarray:
        """Each cell's share of its group's total (0 where the group total is 0).

        Args:
            values: An array whose first axis is the cells.
            dims: The grouping dimensions (see :meth:`group_index`).
        """
        totals = self.group_broadcast(self.group_sum(values, dims), dims)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(totals > 0, values / np.where(totals > 0, totals, 1), 0.0)

    def frame(self):
        """The cells as a pandas DataFrame of level names (imports pandas lazily)."""
        # lazy: pandas takes ~0.5 s to import; the rest of this module does not need it
        import pandas as pd

        return pd.DataFrame(
            {
                d.name: pd.Categorical.from_codes(self.codes(d.name), d.levels)
                for d in self.dimensions
            }
        )
