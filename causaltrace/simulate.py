"""Simulation of factual and counterfactual worlds that share every exogenous draw.

Nodes are evaluated in topological order. Each node's noise is drawn once from its own stream
(:class:`~causaltrace.noise.NoiseStreams`) and fed to both worlds. Nodes that do not descend from
an intervened node are computed once and shared by the two worlds, so factual equals
counterfactual there by construction (the same array, not a recomputation).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from causaltrace.errors import MechanismError
from causaltrace.interventions import Intervention
from causaltrace.noise import NoiseStreams
from causaltrace.panel import Panel


@dataclass(frozen=True)
class World(Mapping[str, np.ndarray]):
    """Node values of one world: a read-only mapping from node name to a panel array."""

    arrays: Mapping[str, np.ndarray] = field(repr=False)
    panel: Panel = field(repr=False)

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self.arrays[name]
        except KeyError:
            raise KeyError(f"world has no node {name!r}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.arrays)

    def __len__(self) -> int:
        return len(self.arrays)


@dataclass(frozen=True)
class Worlds:
    """A factual world under ``interventions`` and its counterfactual without them."""

    factual: World
    counterfactual: World
    interventions: tuple[Intervention, ...]
    affected: frozenset[str]

    def effect(self, name: str) -> np.ndarray:
        """Factual minus counterfactual for node ``name`` (zero outside the cause's reach)."""
        return self.factual[name] - self.counterfactual[name]


def sample(scm, seed: int | np.random.SeedSequence) -> World:
    """The observational world of ``scm`` for ``seed``."""
    streams = NoiseStreams(seed)
    panel = scm.panel
    values: dict[str, np.ndarray] = {}
    for name in scm.order:
        node = scm.nodes[name]
        noise = streams.draw(name, node.noise, panel.shape)
        values[name] = _evaluate(node, values, noise, panel)
    return World(values, panel)


def simulate(
    scm, interventions: Sequence[Intervention] = (), *, seed: int | np.random.SeedSequence
) -> Worlds:
    """Simulate ``scm`` under ``interventions`` (factual) and without them (counterfactual)."""
    interventions = tuple(interventions)
    intervened = scm.intervene(interventions) if interventions else scm
    targets = {iv.node for iv in interventions}
    affected = set(targets)
    for t in targets:
        affected |= intervened.descendants(t)
    streams = NoiseStreams(seed)
    panel = scm.panel
    factual: dict[str, np.ndarray] = {}
    counterfactual: dict[str, np.ndarray] = {}
    for name in intervened.order:  # a superset of the original edges: valid for both worlds
        noise = streams.draw(name, scm.nodes[name].noise, panel.shape)
        if noise is not None:
            noise.setflags(write=False)
        if name in affected:
            factual[name] = _evaluate(intervened.nodes[name], factual, noise, panel)
            counterfactual[name] = _evaluate(scm.nodes[name], counterfactual, noise, panel)
        else:
            value = _evaluate(scm.nodes[name], counterfactual, noise, panel)
            factual[name] = counterfactual[name] = value
    return Worlds(
        World(factual, panel), World(counterfactual, panel), interventions, frozenset(affected)
    )


def _evaluate(
    node, values: Mapping[str, np.ndarray], noise: np.ndarray | None, panel: Panel
) -> np.ndarray:
    parents = {p: values[p] for p in node.parents}
    try:
        out = node.mechanism(parents, noise, panel)
    except MechanismError:
        raise
    except Exception as exc:
        raise MechanismError(
            f"node {node.name!r}: mechanism {_describe(node.mechanism)} raised "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(out, np.ndarray):
        raise MechanismError(
            f"node {node.name!r}: mechanism returned {type(out).__name__}, expected a numpy array "
            f"of shape {panel.shape}"
        )
    if out.shape != panel.shape:
        raise MechanismError(
            f"node {node.name!r}: mechanism returned shape {out.shape}, expected "
            f"(n_cells, n_time) = {panel.shape}"
        )
    if out.dtype != node.dtype:
        raise MechanismError(
            f"node {node.name!r}: mechanism returned dtype {out.dtype}, the node declares "
            f"{node.dtype}"
        )
    out.setflags(write=False)  # the two worlds share arrays: nobody may edit them in place
    return out


def _describe(mechanism) -> str:
    return getattr(mechanism, "__qualname__", None) or type(mechanism).__name__
