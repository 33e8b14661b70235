"""Slices: the set of cells an intervention touches, and their canonical text form.

A slice is a conjunction of ``dimension=level`` conditions. The empty conjunction is the whole
panel; one condition is a 1D slice; two are a 2D slice. The canonical text form lists the
conditions sorted by dimension name, joined by ``&`` (``device=mobile&geo=us_west``), the
label format of classical localizers such as Squeeze and RiskLoc, so that two equal slices always
print the same and string equality is slice equality.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from causaltrace.errors import SliceError
from causaltrace.model.panel import Panel

WHOLE_PANEL_TEXT = ""


@dataclass(frozen=True)
class Slice:
    """A conjunction of ``dim=level`` conditions, stored as a sorted tuple of pairs.

    Build one with :func:`parse_slice` (validates against a panel) or :meth:`of`.

    Args:
        conditions: ``(dimension, level)`` pairs, in any order (stored sorted); empty (the
            default) is the whole panel.

    Raises:
        SliceError: A dimension appears more than once.
    """

    conditions: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        conds = tuple((str(d), str(v)) for d, v in self.conditions)
        dims = [d for d, _ in conds]
        dupes = sorted({d for d in dims if dims.count(d) > 1})
        if dupes:
            raise SliceError(f"slice names dimension(s) {dupes} more than once")
        object.__setattr__(self, "conditions", tuple(sorted(conds)))

    @classmethod
    def of(cls, mapping: Mapping[str, str] | None = None, **levels: str) -> Slice:
        """``Slice.of(device="mobile")`` or ``Slice.of({"device": "mobile"})``.

        Args:
            mapping: Dimension name -> level; none by default.
            **levels: More ``dimension=level`` conditions (override ``mapping``'s).
        """
        items = dict(mapping or {})
        items.update(levels)
        return cls(tuple(items.items()))

    @property
    def dims(self) -> tuple[str, ...]:
        return tuple(d for d, _ in self.conditions)

    @property
    def order(self) -> int:
        """Number of conditions: 0 for the whole panel, 1 for a 1D slice, 2 for 2D."""
        return len(self.conditions)

    @property
    def is_whole_panel(self) -> bool:
        return not self.conditions

    def as_dict(self) -> dict[str, str]:
        return dict(self.conditions)

    def canonical(self) -> str:
        """The one canonical text form: conditions sorted by dimension name, joined by ``&``."""
        return "&".join(f"{d}={v}" for d, v in self.conditions)

    def __str__(self) -> str:
        return self.canonical()

    def validate(self, panel: Panel) -> Slice:
        """Raise :class:`SliceError` naming any unknown dimension or level.

        Args:
            panel: The panel whose dimensions and levels the conditions must name.

        Returns:
            This slice, for chaining.

        Raises:
            SliceError: An unknown dimension or level.
        """
        for dim_name, level in self.conditions:
            try:
                panel.dimension(dim_name).code(level)
            except SliceError:
                raise
            except Exception as exc:  # PanelError -> SliceError with the same message
                raise SliceError(f"slice {self.canonical()!r}: {exc}") from None
        return self

    def mask(self, panel: Panel) -> np.ndarray:
        """Boolean array over the panel's cells, true where every condition holds.

        Args:
            panel: The panel whose cells to test.
        """
        mask = np.ones(panel.n_cells, dtype=bool)
        for dim_name, level in self.conditions:
            code = panel.dimension(dim_name).code(level)
            mask &= panel.codes(dim_name) == code
        return mask

    def contains(self, other: Slice) -> bool:
        """True if every cell of ``other`` is in this slice (this one is coarser or equal).

        Args:
            other: The slice to test.
        """
        return set(self.conditions) <= set(other.conditions)

    def parents(self) -> list[Slice]:
        """The coarser slices with one condition dropped."""
        return [Slice(tuple(c for c in self.conditions if c != drop)) for drop in self.conditions]


WHOLE_PANEL = Slice()


def parse_slice(text: str | Mapping[str, str] | Slice | None, panel: Panel | None = None) -> Slice:
    """Parse ``"dim=level&dim=level"`` (or a mapping) into a :class:`Slice`.

    ``None``, ``""`` and ``"*"`` mean the whole panel. With a panel, unknown dimensions and
    levels are rejected by name. Whitespace around names is tolerated; anything else malformed
    (a condition without ``=``, an empty name, a repeated dimension) raises :class:`SliceError`.

    Args:
        text: The slice: canonical text, a mapping dimension -> level, a :class:`Slice`
            (returned as is, validated if ``panel`` is given), or ``None`` (the whole panel).
        panel: Validate dimensions and levels against this panel; not validated by default.

    Returns:
        The slice, with its conditions sorted.

    Raises:
        SliceError: Malformed text, a repeated dimension, an unsupported type, or (with
            ``panel``) an unknown dimension or level.
    """
    if isinstance(text, Slice):
        sl = text
    elif text is None:
        sl = WHOLE_PANEL
    elif isinstance(text, Mapping):
        sl = Slice(tuple((str(k).strip(), str(v).strip()) for k, v in text.items()))
    elif isinstance(text, str):
        sl = Slice(tuple(_parse_conditions(text)))
    else:
        raise SliceError(
            f"a slice must be text like 'dim=level&dim=level', got {type(text).__name__}"
        )
    if panel is not None:
        sl.validate(panel)
    return sl


def _parse_conditions(text: str) -> Iterable[tuple[str, str]]:
    stripped = text.strip()
    if stripped in ("", "*"):
        return
    for part in stripped.split("&"):
        if part.count("=") != 1:
            raise SliceError(
                f"slice {text!r}: condition {part.strip()!r} is not of the form dim=level"
            )
        dim_name, level = (s.strip() for s in part.split("="))
        if not dim_name or not level:
            raise SliceError(f"slice {text!r}: condition {part.strip()!r} has an empty name")
        yield dim_name, level


def enumerate_slices(panel: Panel, dims: Iterable[str]) -> list[Slice]:
    """Every slice on exactly ``dims`` that contains at least one cell of the panel.

    Args:
        panel: The panel whose cells to enumerate.
        dims: The dimensions each slice conditions on; none gives ``[WHOLE_PANEL]``.

    Returns:
        The slices, in the order of their level codes.
    """
    dims = tuple(dims)
    if not dims:
        return [WHOLE_PANEL]
    cols = np.stack([panel.codes(d) for d in dims], axis=1)
    combos = np.unique(cols, axis=0)
    out = []
    for row in combos:
        out.append(Slice(tuple((d, panel.dimension(d).levels[c]) for d, c in zip(dims, row))))
    return out
