"""Shared fixtures: small panels and SCMs used across the engine tests."""

from __future__ import annotations

import numpy as np
import pytest

from causaltrace import SCM, Dimension, Exogenous, Linear, Node, Normal, Panel, TimeAxis


@pytest.fixture
def small_panel() -> Panel:
    return Panel.cross(
        [Dimension("device", ("mobile", "desktop", "tablet")), Dimension("geo", ("us", "eu"))],
        TimeAxis("2026-01-01", 20, "D"),
    )


def chain_nodes() -> list[Node]:
    """x -> y -> z, w isolated; all additive Gaussian (unit-wise mechanisms)."""
    return [
        Node("x", Exogenous(), noise=Normal()),
        Node("y", Linear.of(1.0, x=2.0), parents=("x",), noise=Normal(0.5)),
        Node("z", Linear.of(0.0, y=-1.0), parents=("y",), noise=Normal()),
        Node("w", Exogenous(), noise=Normal()),
    ]


@pytest.fixture
def chain_scm(small_panel) -> SCM:
    return SCM(chain_nodes(), small_panel, name="chain")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
