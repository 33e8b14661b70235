"""Counterfactuals from observations: abduction, action, prediction (Pearl's three steps).

:func:`~causaltrace.model.simulate.simulate` makes counterfactual pairs from noise it draws. Here the
world without interventions is *given* (every node's values on the panel), and the noise that
produced it is recovered from it:

- a node whose mechanism is an :class:`~causaltrace.model.node.InvertibleMechanism`
  (``invert(parents, value, panel)``) gets that noise exactly (built in:
  :class:`~causaltrace.model.node.Linear`, additive, ``value - f(parents)``;
  :class:`~causaltrace.model.node.Exogenous`, the value itself; a domain may add multiplicative or any
  monotone map);
- a count drawn by inverse CDF from a uniform (its mechanism is an
  :class:`~causaltrace.model.node.IntervalInvertibleMechanism`: ``noise_interval(parents, value,
  panel) -> (lower, upper)``) only confines its uniform to ``(F(x - 1), F(x)]``, with ``F`` the
  CDF given the observed parents. **Rule:** where the counterfactual count is the same for every
  uniform in that interval (the observation pins it down: checked exactly at both ends, the
  inverse CDF being monotone in the uniform) the answer is that count, with or without ``rng``;
  elsewhere the uniform is drawn uniformly in the interval from ``rng`` (the posterior of the
  uniform given the observation), and without ``rng`` an :class:`AbductionError` says how many
  cells are not pinned down.

The abducted noise then feeds the same loop as ``simulate`` (:func:`causaltrace.model.simulate.
propagate`): the interventions wrap their nodes' mechanisms, nodes that do not descend from an
intervened node keep their observed arrays, and descendants are recomputed with their own
abducted noise. Only those descendants need invertible mechanisms; any other node may be
anything. Every abducted noise is checked to reproduce its observation.

The observation is a world of ``scm`` itself. :func:`~causaltrace.model.simulate.simulate`'s
``Worlds.factual`` is the world *with* its interventions (the reverse of the usual reading), so
it is not one: given it (or the ``Worlds``, or the arrays of ``dict(worlds.factual)``, which are
recognized as long as they are not copies) with an SCM that lacks those interventions,
:class:`IntervenedObservationError` names what to pass instead: ``worlds.counterfactual``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from causaltrace.errors import AbductionError, NotInvertibleError
from causaltrace.model.interventions import Intervention
from causaltrace.model.node import (
    IntervalInvertibleMechanism,
    InvertibleMechanism,
    undeclared_inverse,
)
from causaltrace.model.noise import NoNoise
from causaltrace.model.simulate import (
    World,
    Worlds,
    describe_mechanism,
    evaluate_node,
    intervened_by,
    intervened_model,
    mark_intervened,
    propagate,
)


class IntervenedObservationError(AbductionError):
    """A world with interventions was given as an observation of the SCM without them.

    The usual mistake is ``worlds.factual``: in :class:`~causaltrace.model.simulate.Worlds`
    the factual world is the one *with* the interventions, so the observation to start from is
    ``worlds.counterfactual``. The message names the interventions and the fix.
    """


def counterfactual_from_observations(
    scm,
    observed: Mapping[str, np.ndarray],
    interventions: Sequence[Intervention] = (),
    *,
    rng: np.random.Generator | None = None,
    noise: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Every node's values had ``interventions`` been applied to the world ``observed``.

    ``observed`` maps every node of ``scm`` to its values on the panel (shape ``panel.shape``),
    the world *without* the interventions: from :func:`~causaltrace.model.simulate.simulate`,
    ``worlds.counterfactual`` (``worlds.factual`` has them, and raises
    :class:`IntervenedObservationError`, as does a ``Worlds``). ``rng`` draws the uniforms of counts the observation
    does not pin down (see the module docstring); ``noise`` supplies already abducted noise for
    some nodes (e.g. from :func:`abduct_noise`, so that several counterfactual queries about the
    same units share one posterior draw), checked to reproduce the observation.
    Raises :class:`NotInvertibleError` for a descendant of an intervened node whose mechanism
    cannot be inverted, :class:`IntervenedObservationError` for an observation that is a world
    with interventions ``scm`` does not have, and :class:`AbductionError` for other abduction
    failures.
    """
    base = _observed_world(scm, observed)
    interventions = tuple(interventions)
    if interventions:
        intervened, affected = intervened_model(scm, interventions)
    else:
        intervened, affected = scm, frozenset()
    panel = scm.panel
    given = dict(noise or {})
    new_nodes = intervened.nodes

    def abducted(name: str, node, values: Mapping[str, np.ndarray]) -> np.ndarray | None:
        if type(node.noise) is NoNoise:
            return None
        if name in given:
            u = np.asarray(given[name], dtype=np.float64)
            _check_reproduces(node, base, u, panel)
            return _frozen(u)
        interval = _abduct(node, base, panel)
        if not isinstance(interval, tuple):
            return _frozen(interval)
        lower, upper = interval
        if rng is None:
            return _frozen(_pinned(name, node, new_nodes[name], base, values, lower, upper, panel))
        u = upper - (upper - lower) * rng.random(panel.shape)  # uniform on (lower, upper]
        return _frozen(_settle(node, base, u, lower, upper, panel))

    out, without = propagate(
        intervened.order, scm.nodes, new_nodes, affected, panel, abducted, base
    )
    if interventions:  # so this answer, too, is refused as an observation of ``scm``
        mark_intervened(out, without, affected, _applied(scm) + interventions)
    return out


def abduct_noise(
    scm,
    observed: Mapping[str, np.ndarray],
    *,
    nodes: Iterable[str] | None = None,
    rng: np.random.Generator | None = None,
) -> dict[str, np.ndarray]:
    """The exogenous noise of ``nodes`` (default: every node with noise) that produced
    ``observed``.

    Counts get a uniform drawn in their interval from ``rng``, or its midpoint without one (one
    deterministic representative: a counterfactual computed from it is exact where the
    observation pins the count down, and one arbitrary answer elsewhere). Raises
    :class:`NotInvertibleError` for a node with noise whose mechanism cannot be inverted.
    """
    base = _observed_world(scm, observed)
    panel = scm.panel
    names = scm.order if nodes is None else tuple(nodes)
    out: dict[str, np.ndarray] = {}
    for name in names:
        if name not in scm.nodes:
            raise AbductionError(f"abduct_noise: SCM {scm.name!r} has no node {name!r}")
        node = scm.nodes[name]
        if type(node.noise) is NoNoise:
            continue
        interval = _abduct(node, base, panel)
        if not isinstance(interval, tuple):
            out[name] = interval
            continue
        lower, upper = interval
        u = (
            (lower + upper) / 2
            if rng is None
            else upper - (upper - lower) * rng.random(panel.shape)
        )
        out[name] = _settle(node, base, u, lower, upper, panel)
    return out


# ---------------------------------------------------------------------------------------------


def _observed_world(scm, observed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The observations as read-only arrays of each node's dtype, checked for shape."""
    _refuse_intervened(scm, observed)
    missing = [n for n in scm.order if n not in observed]
    if missing:
        raise AbductionError(
            f"counterfactual from observations: SCM {scm.name!r} needs values of every node; "
            f"missing {missing}"
        )
    shape = scm.panel.shape
    out: dict[str, np.ndarray] = {}
    for name in scm.order:
        value = np.asarray(observed[name])
        if value.shape != shape:
            raise AbductionError(
                f"observation of node {name!r} has shape {value.shape}, expected the panel's "
                f"{shape}"
            )
        dtype = scm.nodes[name].dtype
        if value.dtype != dtype:
            cast = value.astype(dtype)
            if dtype.kind in "iu" and not np.array_equal(cast, value):
                raise AbductionError(
                    f"observation of count node {name!r} has non-integer values ({value.dtype})"
                )
            value = cast
        else:
            value = value.copy()
        value.setflags(write=False)
        out[name] = value
    return out


def _applied(scm) -> tuple:
    return tuple(getattr(scm, "interventions", ()))


def _refuse_intervened(scm, observed) -> None:
    """Raise :class:`IntervenedObservationError` for a ``Worlds``, or a world (or its arrays)
    computed with interventions that ``scm`` does not carry."""
    if isinstance(observed, Worlds):
        raise IntervenedObservationError(
            "the observation is a Worlds pair (simulate's output); pass worlds.counterfactual, "
            "the world without the interventions (Worlds.factual is the world *with* them: "
            f"{_listed(observed.interventions)})"
        )
    applied = _applied(scm)
    found, where = (), ""
    if isinstance(observed, World) and observed.interventions != applied:
        found, where = observed.interventions, "the observation is a world"
    if not found and isinstance(observed, Mapping):  # dict(worlds.factual): its arrays
        for name in scm.order:
            marked = intervened_by(observed.get(name))
            if marked is not None and marked != applied:
                found, where = marked, f"observed[{name!r}] is an array of a world"
                break
    if found:
        raise IntervenedObservationError(
            f"{where} computed with the interventions {_listed(found)}, but SCM {scm.name!r} "
            f"carries {_listed(applied)}, so it is not an observation of it (simulate()'s "
            "Worlds.factual is the world *with* its interventions). Pass worlds.counterfactual, "
            "the world without them (or scm.sample(seed)); to start from the world with them, "
            "abduct on scm.intervene(*those interventions) instead"
        )


def _listed(interventions) -> str:
    return ", ".join(iv.describe() for iv in interventions) or "none"


def _abduct(node, base: Mapping[str, np.ndarray], panel) -> np.ndarray | tuple:
    """The node's noise (an array) or, for an inverse-CDF count, its interval (lower, upper)."""
    parents = {p: base[p] for p in node.parents}
    mechanism = node.mechanism
    value = base[node.name]
    if isinstance(mechanism, InvertibleMechanism):
        try:
            noise = np.asarray(mechanism.invert(parents, value, panel), dtype=np.float64)
        except Exception as exc:
            raise AbductionError(
                f"node {node.name!r}: {describe_mechanism(mechanism)}.invert raised "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        _check_reproduces(node, base, noise, panel)
        return noise
    if isinstance(mechanism, IntervalInvertibleMechanism):
        lower, upper = (
            np.broadcast_to(np.asarray(b, dtype=np.float64), panel.shape)
            for b in mechanism.noise_interval(parents, value, panel)
        )
        empty = ~(upper > lower)
        if empty.any():
            i = np.argwhere(empty)[0]
            raise AbductionError(
                f"node {node.name!r}: {int(empty.sum())} observed value(s) have probability zero "
                f"given their parents (first at cell {i[0]}, step {i[1]}: value "
                f"{value[tuple(i)]}), so no noise produces them"
            )
        return lower, upper
    raise NotInvertibleError(
        f"node {node.name!r}: its mechanism {describe_mechanism(mechanism)} is neither an "
        "InvertibleMechanism nor an IntervalInvertibleMechanism, so its exogenous noise cannot "
        "be recovered from the observations (and a counterfactual of it is not determined)"
        + _undeclared_hint(mechanism)
    )


def _undeclared_hint(mechanism) -> str:
    method = undeclared_inverse(mechanism)
    if method is None:
        return ""
    variant = "InvertibleMechanism" if method == "invert" else "IntervalInvertibleMechanism"
    return f"; it defines {method}() but does not declare it: subclass {variant}"


def _check_reproduces(node, base, noise: np.ndarray, panel) -> None:
    """Raise unless the mechanism maps the abducted noise back to the observation."""
    bad = ~_reproduces(node, base, noise, panel)
    if bad.any():
        i = np.argwhere(bad)[0]
        raise AbductionError(
            f"node {node.name!r}: the abducted noise does not reproduce the observation in "
            f"{int(bad.sum())} cell-step(s) (first at cell {i[0]}, step {i[1]}); the mechanism "
            f"{describe_mechanism(node.mechanism)} is not invertible there (clipped or saturated?)"
        )


def _reproduces(node, base, noise: np.ndarray, panel) -> np.ndarray:
    value = evaluate_node(node, base, _frozen(noise), panel, panel.shape)
    observed = base[node.name]
    if observed.dtype.kind in "iu":
        return value == observed
    # Inverting a float mechanism and applying it again loses a few ulps (log/exp, ndtr/ndtri).
    return np.isclose(value, observed, rtol=1e-9, atol=1e-12)


def _settle(node, base, u, lower, upper, panel) -> np.ndarray:
    """``u`` where it reproduces the count; the interval's midpoint where rounding at an end of
    the interval made it miss (probability ~1e-16 per cell); an error if that misses too."""
    ok = _reproduces(node, base, u, panel)
    if not ok.all():
        u = np.where(ok, u, (lower + upper) / 2)
        _check_reproduces(node, base, u, panel)
    return u


def _pinned(name, node, new_node, base, values, lower, upper, panel) -> np.ndarray:
    """Without ``rng``: a uniform that gives the counterfactual every uniform in the interval
    gives, or an error naming the cells where uniforms in the interval disagree."""
    shape = panel.shape
    low_end = np.minimum(np.nextafter(lower, np.inf), upper)
    at_low = evaluate_node(new_node, values, _frozen(low_end), panel, shape)
    at_high = evaluate_node(new_node, values, _frozen(upper), panel, shape)
    open_ = at_low != at_high
    if open_.any():
        raise AbductionError(
            f"node {name!r}: the observation does not pin down the counterfactual count in "
            f"{int(open_.sum())} of {open_.size} cell-steps (uniforms in (F(x-1), F(x)] give "
            "different counts); pass rng=numpy.random.Generator to draw them"
        )
    return _settle(node, base, (lower + upper) / 2, lower, upper, panel)


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=np.float64, copy=True)
    a.setflags(write=False)
    return a
