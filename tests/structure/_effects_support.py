"""Small synthetic SCMs with known effects, for the estimation, truth and sensitivity tests.

Their mechanisms read no panel coordinate, so pooled rows are i.i.d. draws of the unit model
and identification answers on the unit graph.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from causaltrace import SCM, Exogenous, Linear, Node, Normal, Panel, Uniform


@dataclass(frozen=True)
class LogisticIndex:
    """``z + logistic noise`` (the log-odds of a uniform): ``P(index > 0 | z) = sigmoid(z)``,
    so a logistic propensity model of ``1{index > 0}`` on ``z`` is correctly specified."""

    def __call__(self, parents, noise, panel) -> np.ndarray:
        u = np.clip(noise, 1e-12, 1 - 1e-12)
        return parents["z"] + np.log(u / (1 - u))


@dataclass(frozen=True)
class Bernoulli:
    """``1{u < base + sum(weight * parent)}``: a binary outcome with that probability (the
    weights keep it in [0, 1] for binary parents)."""

    base: float
    weights: tuple[tuple[str, float], ...]

    def __call__(self, parents, noise, panel) -> np.ndarray:
        p = self.base + sum(w * parents[name] for name, w in self.weights)
        return (noise < p).astype(np.float64)


@dataclass(frozen=True)
class HeterogeneousOutcome:
    """``y = 1{dose > 0} (effect + z) + z + noise``: the outcome reads the dose only through
    its indicator, whose effect is ``effect + z`` unit by unit (``effect`` on average: ``z``
    has mean 0)."""

    effect: float

    def __call__(self, parents, noise, panel) -> np.ndarray:
        treated, z = (parents["dose"] > 0).astype(np.float64), parents["z"]
        return treated * (self.effect + z) + z + noise


def binary_treatment_scm(panel: Panel) -> SCM:
    """z -> dose -> y <- z with ``dose = z + logistic noise`` (so ``P(dose > 0 | z) =
    sigmoid(z)``, a logistic propensity is right) and ``y`` reading ``1{dose > 0}``, whose
    effect is ``2 + z`` (ATE 2): the binarized treatment's effect is a causal effect, that of
    ``do(dose = 1)`` against ``do(dose = -1)``. The back-door set of dose -> y is {z}."""
    nodes = [
        Node("z", Exogenous(), noise=Normal()),
        Node("dose", LogisticIndex(), parents=("z",), noise=Uniform()),
        Node("y", HeterogeneousOutcome(2.0), parents=("dose", "z"), noise=Normal()),
    ]
    return SCM(nodes, panel, name="binary-treatment")


def frontdoor_scm(panel: Panel) -> SCM:
    """u (latent) -> x -> m -> y <- u: the front-door graph; the effect of x on y is
    0.8 x 1.5 = 1.2 per unit of x."""
    nodes = [
        Node("u", Exogenous(), noise=Normal(), observed=False),
        Node("x", Linear.of(u=1.0), parents=("u",), noise=Normal()),
        Node("m", Linear.of(x=0.8), parents=("x",), noise=Normal()),
        Node("y", Linear.of(m=1.5, u=1.0), parents=("m", "u"), noise=Normal()),
    ]
    return SCM(nodes, panel, name="front-door")


def confounded_binary_scm(panel: Panel) -> SCM:
    """u (latent, binary) -> t -> y <- u with t and y binary: the effect of t on y (0.3) is
    not identified (a bidirected arc), so only bounds are available."""
    nodes = [
        Node("u", Bernoulli(0.5, ()), noise=Uniform(), observed=False),
        Node("t", Bernoulli(0.2, (("u", 0.6),)), parents=("u",), noise=Uniform()),
        Node("y", Bernoulli(0.1, (("t", 0.3), ("u", 0.5))), parents=("t", "u"), noise=Uniform()),
    ]
    return SCM(nodes, panel, name="confounded-binary")


def observing(scm: SCM, *names: str) -> SCM:
    """``scm`` with the latent nodes ``names`` marked observed (the analyst who also records
    them): the same mechanisms, noise and intervention points, in the same order, so every
    world is drawn as before; only the graph's ``observed`` marks (what identification may
    adjust for, what ``regime_frame(scm, scm.observed, ...)`` exports) change."""
    unknown = [name for name in names if name not in scm.nodes]
    if unknown:
        raise KeyError(f"SCM {scm.name!r} has no node(s) {unknown}")
    if scm.interventions:
        raise ValueError("observing() rebuilds a base model: intervene on its result instead")
    nodes = [
        replace(node, observed=True) if node.name in names else node for node in scm.nodes.values()
    ]
    return SCM(
        nodes,
        scm.panel,
        scm.intervention_points.values(),
        name=scm.name,
        validate_mechanisms=False,  # the same mechanisms, validated when scm was built
    )
