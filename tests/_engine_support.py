"""Engine fixtures shared by several test files (imported by name: the installed verl ships a
top-level ``tests`` package, so ``from tests.conftest import ...`` can resolve to verl's)."""

from __future__ import annotations

from causaltrace import Exogenous, Linear, Node, Normal


def chain_nodes() -> list[Node]:
    """x -> y -> z, w isolated; all additive Gaussian (unit-wise mechanisms)."""
    return [
        Node("x", Exogenous(), noise=Normal()),
        Node("y", Linear.of(1.0, x=2.0), parents=("x",), noise=Normal(0.5)),
        Node("z", Linear.of(0.0, y=-1.0), parents=("y",), noise=Normal()),
        Node("w", Exogenous(), noise=Normal()),
    ]
