"""Interventions as transformations of a model (as Pyro's ``poutine.do``), not flags in mechanisms.

Each intervention wraps one node's mechanism. Inside its slice and window the node takes
``x + w * (target(x) - x)``, where ``w`` is the window's profile weight and ``target`` is what the
intervention does at full strength: set (``Do``), shift (``Shift``), scale (``Scale``), or a new
mechanism (``Replace``). Outside, the original mechanism's value is kept exactly. Interventions
compose by wrapping in order: the second sees the output of the first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

import numpy as np

from causaltrace.model.node import Mechanism, Node
from causaltrace.model.panel import Panel
from causaltrace.model.profiles import Window
from causaltrace.model.slices import WHOLE_PANEL, Slice


@dataclass(frozen=True, eq=False)
class Intervention:
    """Base class: a node, the cells it touches, and when. Subclasses define :meth:`target`.

    Interventions are values: two are equal when they are of one type with equal fields, array
    fields (a per-cell factor or value) compared element by element.

    Args:
        node: The node whose mechanism is wrapped.
        where: The cells it touches; the whole panel by default.
        window: When, and with which weight profile; by default a step at time 0 (always,
            at full strength).
    """

    node: str
    where: Slice = WHOLE_PANEL
    window: Window = field(default_factory=Window)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(
            _same(getattr(self, f.name), getattr(other, f.name)) for f in fields(self) if f.compare
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.node, self.where, self.window))

    @property
    def extra_parents(self) -> tuple[str, ...]:
        """Parents the intervened mechanism reads beyond the node's own (for ``Replace``)."""
        return ()

    def target(
        self,
        value: np.ndarray,
        parents: Mapping[str, np.ndarray],
        noise: np.ndarray | None,
        panel: Panel,
    ) -> np.ndarray:
        """What the node takes at full strength; the mechanism blends toward it by weight.

        Args:
            value: The node's value from the mechanism being wrapped.
            parents: The node's parents' values (with ``Replace``'s extra parents).
            noise: The node's exogenous noise, or ``None`` for a deterministic node.
            panel: The panel.
        """
        raise NotImplementedError

    def weight(self, panel: Panel) -> np.ndarray:
        """Weight over the panel, shape ``(n_cells, n_time)`` (slice mask times profile).

        Cached per panel (read-only), because a mechanism is called once per world and per
        episode attempt with the same intervention.

        Args:
            panel: The panel to weigh.
        """
        cache = self.__dict__.setdefault("_weight_cache", {})
        key = id(panel)
        if key not in cache or cache[key][0] is not panel:
            w = self.where.mask(panel)[:, None] * self.window.weights(panel.n_time)[None, :]
            w.setflags(write=False)
            cache.clear()  # one panel at a time: interventions are built per model
            cache[key] = (panel, w, bool((w >= 1.0).all()), bool((w > 0).any()))
        return cache[key][1]

    def weight_summary(self, panel: Panel) -> tuple[np.ndarray, bool, bool]:
        """(weight, whether it is 1 everywhere, whether it is positive anywhere).

        Args:
            panel: The panel to weigh (see :meth:`weight`).
        """
        self.weight(panel)
        _, w, full, touched = self.__dict__["_weight_cache"][id(panel)]
        return w, full, touched

    def describe(self) -> str:
        where = self.where.canonical() or "whole panel"
        return f"{type(self).__name__}({self.node}) on {where} from t={self.window.onset}"


@dataclass(frozen=True, eq=False)
class Do(Intervention):
    """Set the node to ``value`` (a scalar or an array broadcastable to the panel).

    Args:
        node: The node whose mechanism is wrapped.
        where: The cells it touches; the whole panel by default.
        window: When, and with which weight profile; by default a step at time 0 (always,
            at full strength).
        value: The value to set; 0.0 by default.
    """

    value: float | np.ndarray = 0.0

    def target(self, value, parents, noise, panel):
        return np.broadcast_to(np.asarray(self.value, dtype=np.float64), value.shape)


@dataclass(frozen=True, eq=False)
class Shift(Intervention):
    """Add ``delta`` to the node.

    Args:
        node: The node whose mechanism is wrapped.
        where: The cells it touches; the whole panel by default.
        window: When, and with which weight profile; by default a step at time 0 (always,
            at full strength).
        delta: What to add at full weight; 0.0 by default.
    """

    delta: float = 0.0

    def target(self, value, parents, noise, panel):
        return value + self.delta


@dataclass(frozen=True, eq=False)
class Scale(Intervention):
    """Multiply the node by ``factor``: a scalar, or an array broadcastable to the panel (a
    per-cell factor, e.g. an effect whose size differs by segment as the mechanism says).

    Args:
        node: The node whose mechanism is wrapped.
        where: The cells it touches; the whole panel by default.
        window: When, and with which weight profile; by default a step at time 0 (always,
            at full strength).
        factor: The multiplier at full weight; 1.0 by default.
    """

    factor: float | np.ndarray = 1.0

    def target(self, value, parents, noise, panel):
        return value * self.factor


@dataclass(frozen=True, eq=False)
class Replace(Intervention):
    """Swap in a new mechanism, which may read extra ``parents`` (added as graph edges).

    Args:
        node: The node whose mechanism is wrapped.
        where: The cells it touches; the whole panel by default.
        window: When, and with which weight profile; by default a step at time 0 (always,
            at full strength).
        mechanism: The new mechanism, called as ``mechanism(parents, noise, panel)``.
        parents: Nodes it reads beyond the node's own parents; none by default.
    """

    mechanism: Mechanism | None = None
    parents: tuple[str, ...] = ()

    @property
    def extra_parents(self) -> tuple[str, ...]:
        return tuple(self.parents)

    def target(self, value, parents, noise, panel):
        return self.mechanism(parents, noise, panel)


@dataclass(frozen=True)
class IntervenedMechanism:
    """The mechanism of a node after an intervention: the original, blended toward the target."""

    base: Mechanism
    intervention: Intervention

    def __call__(
        self, parents: Mapping[str, np.ndarray], noise: np.ndarray | None, panel: Panel
    ) -> np.ndarray:
        value = self.base(parents, noise, panel)
        w, full, any_touched = self.intervention.weight_summary(panel)
        if not any_touched:
            return value
        target = np.asarray(self.intervention.target(value, parents, noise, panel))
        target = np.broadcast_to(target, value.shape)
        if full:  # the whole panel at full weight: the target itself (a hard do)
            out = np.rint(target) if value.dtype.kind in "iu" else target
            return np.array(out, dtype=value.dtype, copy=True)
        touched = w > 0
        # Full weight takes the target exactly (a hard do), not value + (target - value).
        blended = np.where(w >= 1.0, target, value + w * (target - value))
        if value.dtype.kind in "iu":
            blended = np.rint(blended)
        # Cells outside the slice and window keep the original value bit for bit.
        return np.where(touched, blended, value).astype(value.dtype, copy=False)


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.shape(a) == np.shape(b) and bool(np.array_equal(a, b))
    return bool(a == b)


def intervene_node(node: Node, intervention: Intervention) -> Node:
    """The node with its mechanism wrapped by ``intervention`` (a new frozen ``Node``)."""
    extra = tuple(p for p in intervention.extra_parents if p not in node.parents)
    return Node(
        name=node.name,
        mechanism=IntervenedMechanism(node.mechanism, intervention),
        parents=node.parents + extra,
        noise=node.noise,
        observed=node.observed,
        dtype=node.dtype,
        description=node.description,
    )
