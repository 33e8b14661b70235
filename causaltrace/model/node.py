"""Nodes and mechanisms.

A node is a name, its parents, a mechanism and its exogenous noise (DoWhy ``gcm``'s "a causal
model is a graph plus one mechanism per node"). A mechanism is a pure, vectorized function:

    mechanism(parents: Mapping[str, ndarray], noise: ndarray | None, panel: Panel) -> ndarray

returning an array of shape ``panel.shape == (n_cells, n_time)``. It sees the whole panel, so it
may work along time (lags, cumulative sums) and across cells (shares, budget reallocation through
``panel.group_sum``). Parent arrays are read-only: factual and counterfactual worlds share them.

A mechanism whose noise can be recovered from an observation declares it, for
:mod:`causaltrace.model.counterfactuals` and the DoWhy export, by subclassing a variant:
:class:`InvertibleMechanism` (``invert(parents, value, panel) -> noise``) when the noise is a
function of the value (additive, multiplicative, any monotone map), or
:class:`IntervalInvertibleMechanism` (``noise_interval(parents, value, panel) -> (lower,
upper)``) for a count drawn by inverse CDF from a uniform, which the observed count confines to
``(lower, upper]``. Invertibility is declared, never guessed from a method's presence.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from causaltrace.errors import GraphError
from causaltrace.model.noise import NoiseSpec, NoNoise
from causaltrace.model.panel import Panel


@runtime_checkable
class Mechanism(Protocol):
    """A node's structural function: any callable ``(parents, noise, panel) -> array`` of the
    panel's shape (a function, a lambda, or a frozen dataclass with ``__call__``)."""

    def __call__(
        self, parents: Mapping[str, np.ndarray], noise: np.ndarray | None, panel: Panel
    ) -> np.ndarray: ...


class InvertibleMechanism(ABC):
    """A mechanism that declares its noise a function of its value: :meth:`invert` recovers the
    noise that produced an observation (abduction, and DoWhy's invertible mechanisms)."""

    @abstractmethod
    def __call__(
        self, parents: Mapping[str, np.ndarray], noise: np.ndarray | None, panel: Panel
    ) -> np.ndarray: ...

    @abstractmethod
    def invert(
        self, parents: Mapping[str, np.ndarray], value: np.ndarray, panel: Panel
    ) -> np.ndarray:
        """The noise that produced ``value`` given ``parents``."""


class IntervalInvertibleMechanism(ABC):
    """A mechanism that draws a count by inverse CDF from a uniform noise and declares it:
    :meth:`noise_interval` gives the interval ``(lower, upper]`` of noises that produce an
    observed count (its counterfactual is then drawn within it)."""

    @abstractmethod
    def __call__(
        self, parents: Mapping[str, np.ndarray], noise: np.ndarray | None, panel: Panel
    ) -> np.ndarray: ...

    @abstractmethod
    def noise_interval(
        self, parents: Mapping[str, np.ndarray], value: np.ndarray, panel: Panel
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)``: the noises in ``(lower, upper]`` produce ``value``."""


def undeclared_inverse(mechanism: Any) -> str | None:
    """The name of an inverse method (``invert`` or ``noise_interval``) that ``mechanism``
    defines without declaring the matching variant, if any (for error messages and
    ``check_domain``: such a mechanism is treated as not invertible)."""
    for method, variant in (
        ("invert", InvertibleMechanism),
        ("noise_interval", IntervalInvertibleMechanism),
    ):
        if callable(getattr(mechanism, method, None)) and not isinstance(mechanism, variant):
            return method
    return None


@dataclass(frozen=True)
class Node:
    """One variable of a structural causal model, evaluated over the whole panel."""

    name: str
    mechanism: Mechanism
    parents: tuple[str, ...] = ()
    noise: NoiseSpec = field(default_factory=NoNoise)
    observed: bool = True
    dtype: Any = np.float64
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise GraphError(f"a node name must be a non-empty string, got {self.name!r}")
        parents = (self.parents,) if isinstance(self.parents, str) else tuple(self.parents)
        object.__setattr__(self, "parents", parents)
        object.__setattr__(self, "dtype", np.dtype(self.dtype))
        if len(set(parents)) != len(parents):
            raise GraphError(f"node {self.name!r} lists a parent twice: {list(parents)}")
        if self.name in parents:
            raise GraphError(f"node {self.name!r} lists itself as a parent (a cycle of length 1)")
        if not callable(self.mechanism):
            raise GraphError(f"node {self.name!r}: mechanism {self.mechanism!r} is not callable")


# ---------------------------------------------------------------------------------------------
# Built-in mechanisms: frozen dataclasses, so they compare, hash and pickle (worker processes).


@dataclass(frozen=True)
class Exogenous(InvertibleMechanism):
    """The node's value is its noise (a root variable)."""

    def __call__(
        self, parents: Mapping[str, np.ndarray], noise: np.ndarray | None, panel: Panel
    ) -> np.ndarray:
        if noise is None:
            raise ValueError("Exogenous mechanism needs a noise spec on its node")
        return noise

    def invert(
        self, parents: Mapping[str, np.ndarray], value: np.ndarray, panel: Panel
    ) -> np.ndarray:
        """The noise that produced ``value``: the value itself (for abduction)."""
        return np.asarray(value, dtype=np.float64)


@dataclass(frozen=True)
class Constant:
    """A constant over the panel (or a per-cell / per-time array broadcast to it)."""

    value: float | np.ndarray = 0.0
    dtype: Any = np.float64

    def __call__(self, parents, noise, panel: Panel) -> np.ndarray:
        return np.broadcast_to(np.asarray(self.value, dtype=self.dtype), panel.shape).copy()


@dataclass(frozen=True)
class Linear(InvertibleMechanism):
    """``intercept + sum(weight * parent) + noise``: the additive-noise linear mechanism."""

    weights: tuple[tuple[str, float], ...] = ()
    intercept: float = 0.0

    @classmethod
    def of(cls, intercept: float = 0.0, **weights: float) -> Linear:
        return cls(tuple(weights.items()), intercept)

    def __call__(
        self, parents: Mapping[str, np.ndarray], noise: np.ndarray | None, panel: Panel
    ) -> np.ndarray:
        # The first product allocates the output; everything else accumulates in place, in the
        # order: weighted parents (as listed), noise, intercept.
        weights = self.weights
        if not weights:
            out = np.full(panel.shape, float(self.intercept))
            if noise is not None:
                out += noise
            return out
        (name, weight), *rest = weights
        out = parents[name] * weight
        for name, weight in rest:
            out += parents[name] * weight
        if noise is not None:
            out += noise
        if self.intercept:
            out += self.intercept
        return out

    def invert(
        self, parents: Mapping[str, np.ndarray], value: np.ndarray, panel: Panel
    ) -> np.ndarray:
        """The noise that produced ``value`` (additive: ``value - f(parents)``), for abduction."""
        return np.asarray(value, dtype=np.float64) - self(parents, None, panel)
