"""Simulation of factual and counterfactual worlds that share every exogenous draw.

Nodes are evaluated in topological order. Each node's noise is drawn once from its own stream
(:class:`~causaltrace.model.noise.NoiseStreams`) and fed to both worlds. Nodes that do not descend from
an intervened node are computed once and shared by the two worlds, so factual equals
counterfactual there by construction (the same array, not a recomputation).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from causaltrace.errors import MechanismError, NoCounterfactualError
from causaltrace.model.interventions import IntervenedMechanism, Intervention
from causaltrace.model.noise import NoiseStreams, NoNoise
from causaltrace.model.panel import Panel


@dataclass(frozen=True)
class World(Mapping[str, np.ndarray]):
    """Node values of one world: a read-only mapping from node name to a panel array.

    Args:
        arrays: Each node's values, shape ``panel.shape``.
        panel: The panel they are on.
        interventions: The interventions of the model that made this world (the SCM's own,
            ``scm.interventions``, then :func:`simulate`'s for a factual world); ``()`` for an
            observational world of an SCM without interventions. Counterfactuals from
            observations read it to refuse a world with interventions as an observation.
    """

    arrays: Mapping[str, np.ndarray] = field(repr=False)
    panel: Panel = field(repr=False)
    interventions: tuple[Intervention, ...] = field(default=(), repr=False, compare=False)
    # The model and seed that made this world (set by ``simulate`` and ``sample``), so that
    # :meth:`at_step_start` can recompute a step; None for a world built from given arrays.
    source: tuple[Any, int | np.random.SeedSequence] | None = field(
        default=None, repr=False, compare=False
    )

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self.arrays[name]
        except KeyError:
            raise KeyError(f"world has no node {name!r}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.arrays)

    def __len__(self) -> int:
        return len(self.arrays)

    def starting_within(self, step: int) -> tuple[Intervention, ...]:
        """This world's interventions that begin part-way through ``step`` (their window's
        onset is ``step`` and it has a partial onset: :attr:`Window.partial_onset`)."""
        return tuple(
            iv for iv in self.interventions if iv.window.onset == step and iv.window.partial_onset
        )

    def as_of(self, step: int, start: float = 0.0) -> World:
        """This world as it stood at ``start`` (a fraction of the step) into time step
        ``step``: the interventions that begin part-way through ``step`` at or after ``start``
        not yet acting on it, everything else as in this world (the same noise, the same
        earlier steps, every other intervention as it is).

        Its values on ``step`` are that step at its full length as it would have been without
        those interventions: a report that splits a step (a day into hours) takes its part
        before ``start`` from it, which then matches, hour for hour, a world that never had
        those interventions. Only ``step``'s values are meant (later steps see the step
        without them). Only the descendants of those interventions' nodes are recomputed.

        Args:
            step: The time step (index).
            start: Where in the step, in [0, 1); 0 (the step's start) by default.

        Returns:
            The world as of then; this world itself when no intervention begins part-way
            through ``step`` at or after ``start``, or when the world does not know its model
            (``source`` None: a world built from given arrays).
        """
        starting = [iv for iv in self.starting_within(step) if iv.window.start >= start]
        if not starting or self.source is None:
            return self
        model, seed = self.source
        held = {id(iv): replace(iv, window=replace(iv.window, onset_weight=0.0)) for iv in starting}
        targets = {iv.node for iv in starting}
        redo = set(targets)
        for t in targets:
            redo |= model.descendants(t)
        streams = NoiseStreams(seed)
        panel = self.panel
        values = dict(self.arrays)
        for name in model.order:
            if name not in redo:
                continue
            node = _rewrapped(model.nodes[name], held)
            spec = node.noise
            noise = (
                None if type(spec) is NoNoise else spec.draw(streams.generator(name), panel.shape)
            )
            if noise is not None:
                noise.setflags(write=False)
            values[name] = evaluate_node(node, values, noise, panel, panel.shape)
        interventions = tuple(held.get(id(iv), iv) for iv in self.interventions)
        return World(values, panel, interventions, self.source)


@dataclass(frozen=True)
class Worlds:
    """A factual world under ``interventions`` and its counterfactual without them.

    Warning: factual is the world WITH the interventions
        ``factual`` is the world **with** the interventions; ``counterfactual`` is the world
        **without** them. The names follow the episode: the incident (the hidden cause)
        happened, so the world the agent's tables show is the factual one, and the world where
        the cause did not happen is the counterfactual. This is the reverse of the usual
        reading, in which the factual world is the observed, unintervened one. To start
        ``counterfactual_from_observations`` from these worlds, pass ``counterfactual`` as the
        observation (the world without the interventions), never ``factual``: passing
        ``factual``, or this ``Worlds``, raises ``IntervenedObservationError``
        (:mod:`causaltrace.model.counterfactuals`). ``effect(name)`` is factual minus
        counterfactual: what the interventions did.

    Args:
        factual: The world with ``interventions`` applied (``World.interventions`` says so).
        counterfactual: The world without them, from the same noise; ``None`` when simulated
            with ``counterfactual=False``.
        interventions: The interventions of the factual world, in the order applied.
        affected: The nodes they can change: their targets and the targets' descendants.
    """

    factual: World
    counterfactual: World | None
    interventions: tuple[Intervention, ...]
    affected: frozenset[str]

    def effect(self, name: str) -> np.ndarray:
        """Factual minus counterfactual for node ``name`` (zero outside the cause's reach).

        Args:
            name: The node.

        Raises:
            NoCounterfactualError: The worlds were simulated with ``counterfactual=False``.
        """
        if self.counterfactual is None:
            raise NoCounterfactualError(
                f"Worlds.effect({name!r}): these worlds were simulated with counterfactual=False, "
                "so there is no counterfactual to subtract; simulate with counterfactual=True"
            )
        return self.factual[name] - self.counterfactual[name]


def sample(scm, seed: int | np.random.SeedSequence) -> World:
    """The observational world of ``scm`` for ``seed``.

    Args:
        scm (SCM): The model to sample.
        seed: The root seed of every node's noise stream (an int or a ``SeedSequence``).

    Returns:
        Every node's array, with no intervention applied.
    """
    streams = NoiseStreams(seed)
    panel = scm.panel
    shape = panel.shape  # a property: computed once, not per node
    nodes = scm.nodes
    generator = streams.generator
    values: dict[str, np.ndarray] = {}
    for name in scm.order:
        node = nodes[name]
        spec = node.noise
        # NoNoise ignores its generator, and every stream is re-keyed from scratch: skipping the
        # re-keying for deterministic nodes draws exactly the same numbers.
        noise = None if type(spec) is NoNoise else spec.draw(generator(name), shape)
        values[name] = evaluate_node(node, values, noise, panel, shape)
    return World(values, panel, _applied(scm), (scm, seed))


def simulate(
    scm,
    interventions: Sequence[Intervention] = (),
    *,
    seed: int | np.random.SeedSequence,
    counterfactual: bool = True,
) -> Worlds:
    """Simulate ``scm`` under ``interventions`` (factual) and without them (counterfactual).

    ``counterfactual=False`` skips the counterfactual world (``Worlds.counterfactual`` is
    ``None``): the factual world is the same bytes, at about half the cost when only what an
    agent sees is needed (opening a lazily stored episode).

    Args:
        scm (SCM): The model to simulate.
        interventions: The interventions of the factual world, applied in order; none by
            default (then both worlds are the observational one).
        seed: The root seed of every node's noise stream, shared by both worlds.
        counterfactual: Also compute the world without interventions; on by default.

    Returns:
        The factual and counterfactual worlds, the interventions and the affected nodes.

    Raises:
        InterventionError: An intervention does not fit the SCM or its panel.
        MechanismError: A mechanism returned an invalid array.
    """
    want_counterfactual = counterfactual
    interventions = tuple(interventions)
    if interventions:
        intervened, affected = intervened_model(scm, interventions)
    else:
        intervened, affected = scm, frozenset()
    streams = NoiseStreams(seed)
    panel = scm.panel
    shape = panel.shape
    nodes, new_nodes = scm.nodes, intervened.nodes
    generator = streams.generator
    if not want_counterfactual:
        nodes = {n: new_nodes[n] if n in affected else nodes[n] for n in intervened.order}
        affected_now: frozenset[str] = frozenset()
    else:
        affected_now = affected

    def draw(name: str, node, values: Mapping[str, np.ndarray]) -> np.ndarray | None:
        spec = node.noise
        noise = None if type(spec) is NoNoise else spec.draw(generator(name), shape)
        if noise is not None:
            noise.setflags(write=False)
        return noise

    factual, counterfactual = propagate(
        intervened.order, nodes, new_nodes, affected_now, panel, draw
    )
    applied = _applied(scm)
    if interventions:
        mark_intervened(
            factual,
            counterfactual if want_counterfactual else None,
            affected,
            applied + interventions,
        )
    return Worlds(
        World(factual, panel, applied + interventions, (intervened, seed)),
        World(counterfactual, panel, applied, (scm, seed)) if want_counterfactual else None,
        interventions,
        affected,
    )


def _rewrapped(node, held: Mapping[int, Intervention]):
    """``node`` with each intervention of its mechanism chain that ``held`` names (by identity)
    replaced by its held version; the node itself when none is."""
    chain = []
    mechanism = node.mechanism
    while isinstance(mechanism, IntervenedMechanism):
        chain.append(mechanism.intervention)
        mechanism = mechanism.base
    if not any(id(iv) in held for iv in chain):
        return node
    for iv in reversed(chain):
        mechanism = IntervenedMechanism(mechanism, held.get(id(iv), iv))
    return replace(node, mechanism=mechanism)


def _applied(scm) -> tuple[Intervention, ...]:
    """The interventions an SCM already carries (``()`` for an SCM-like stand-in)."""
    return tuple(getattr(scm, "interventions", ()))


# id(array) -> (weak reference to it, the interventions of the world it was computed in): the
# arrays that only a world with interventions holds (an affected node's factual values), so an
# observation given as ``dict(worlds.factual)`` (no ``World`` left to carry the interventions)
# is still recognized. An entry goes when its array does (the reference's callback), so an id
# is never matched to a later array; lookups also check the referent is the same object.
_INTERVENED_ARRAYS: dict[int, tuple[weakref.ref, tuple[Intervention, ...]]] = {}


def mark_intervened(
    factual: Mapping[str, np.ndarray],
    counterfactual: Mapping[str, np.ndarray] | None,
    affected: frozenset[str],
    interventions: tuple[Intervention, ...],
) -> None:
    """Remember the arrays of ``affected`` nodes that only the factual world holds."""
    for name in affected:
        array = factual.get(name)
        if array is None or (counterfactual is not None and counterfactual.get(name) is array):
            continue
        key = id(array)
        try:
            ref = weakref.ref(array, lambda _, key=key: _INTERVENED_ARRAYS.pop(key, None))
        except TypeError:  # not weakly referenceable (not an ndarray): cannot be tracked
            continue
        _INTERVENED_ARRAYS[key] = (ref, interventions)


def intervened_by(array: object) -> tuple[Intervention, ...] | None:
    """The interventions of the world that computed ``array``, if it is an affected node's
    array of a factual world :func:`simulate` made (``None`` otherwise, copies included)."""
    entry = _INTERVENED_ARRAYS.get(id(array))
    if entry is None or entry[0]() is not array:
        return None
    return entry[1]


def propagate(
    order: Sequence[str],
    nodes: Mapping,
    new_nodes: Mapping,
    affected: frozenset[str],
    panel: Panel,
    noise_of: Callable[[str, object, Mapping[str, np.ndarray]], np.ndarray | None],
    base: Mapping[str, np.ndarray] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The intervened world and the world without interventions, node by node in ``order``.

    The one loop behind :func:`simulate` and
    :func:`causaltrace.model.counterfactuals.counterfactual_from_observations`, so that a counterfactual
    from drawn noise and one from abducted noise are computed the same way. ``noise_of(name,
    node, intervened_so_far)`` gives a node's exogenous noise (drawn, or abducted from an
    observation). Nodes outside ``affected`` (not descended from an intervened node) are computed
    once and shared by both worlds. With ``base`` (the observed world without interventions) the
    base world is not recomputed: unaffected nodes take the observed array as it is and only
    affected nodes ask for noise.
    """
    shape = panel.shape
    intervened: dict[str, np.ndarray] = {}
    without: dict[str, np.ndarray] = {}
    for name in order:  # a superset of the original edges: valid for both worlds
        if base is not None and name not in affected:
            intervened[name] = without[name] = base[name]
            continue
        node = nodes[name]
        noise = noise_of(name, node, intervened)
        if name in affected:
            intervened[name] = evaluate_node(new_nodes[name], intervened, noise, panel, shape)
            without[name] = (
                base[name]
                if base is not None
                else evaluate_node(node, without, noise, panel, shape)
            )
        else:
            value = evaluate_node(node, intervened, noise, panel, shape)
            intervened[name] = without[name] = value
    return intervened, without


# SCM -> {interventions key: (intervened SCM, affected nodes)}. Keyed by the identity of the
# Intervention objects, which each entry keeps alive (so an id cannot be reused while cached):
# simulating the same intervention objects again with other seeds skips ``scm.intervene`` (a new
# SCM with its graph and topological sort) and the descendant search. Equal but distinct objects
# are treated as new. Weak on the SCM, so a cached entry never outlives its model.
_INTERVENED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_INTERVENED_PER_SCM = 8


def intervened_model(scm, interventions: tuple[Intervention, ...]):
    """The SCM with ``interventions`` applied, and the nodes they can change (their targets and
    the targets' descendants): cached per SCM by the interventions' identity, because a
    generation run simulates the same interventions on many noise draws."""
    key = tuple(map(id, interventions))
    try:
        cache = _INTERVENED.setdefault(scm, {})
    except TypeError:  # an SCM-like object that cannot be weakly referenced
        cache = None
    if cache is not None:
        hit = cache.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], interventions)):
            return hit[1], hit[2]
    intervened = scm.intervene(interventions)
    targets = {iv.node for iv in interventions}
    affected = set(targets)
    for t in targets:
        affected |= intervened.descendants(t)
    affected = frozenset(affected)
    if cache is not None:
        if len(cache) >= _INTERVENED_PER_SCM:
            cache.pop(next(iter(cache)))
        cache[key] = (interventions, intervened, affected)
    return intervened, affected


def evaluate_node(
    node,
    values: Mapping[str, np.ndarray],
    noise: np.ndarray | None,
    panel: Panel,
    shape: tuple[int, int],
) -> np.ndarray:
    """One node's mechanism on its parents' values and noise, checked: a raised exception, or an
    output of the wrong type, shape or dtype, is a :class:`MechanismError` naming the node. The
    output is made read-only (the two worlds share arrays)."""
    parents = {p: values[p] for p in node.parents}
    try:
        out = node.mechanism(parents, noise, panel)
    except MechanismError:
        raise
    except Exception as exc:
        raise MechanismError(
            f"node {node.name!r}: mechanism {describe_mechanism(node.mechanism)} raised "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(out, np.ndarray):
        raise MechanismError(
            f"node {node.name!r}: mechanism returned {type(out).__name__}, expected a numpy array "
            f"of shape {shape}"
        )
    if out.shape != shape:
        raise MechanismError(
            f"node {node.name!r}: mechanism returned shape {out.shape}, expected "
            f"(n_cells, n_time) = {shape}"
        )
    if out.dtype != node.dtype:
        raise MechanismError(
            f"node {node.name!r}: mechanism returned dtype {out.dtype}, the node declares "
            f"{node.dtype}"
        )
    out.setflags(write=False)  # the two worlds share arrays: nobody may edit them in place
    return out


def describe_mechanism(mechanism) -> str:
    """A mechanism's name for messages (its qualified name, or its class's)."""
    return getattr(mechanism, "__qualname__", None) or type(mechanism).__name__
