"""Shared fixtures: small panels and SCMs used across the engine tests."""

from __future__ import annotations

import numpy as np
import pytest
from _engine_support import chain_nodes

from causaltrace import SCM, Dimension, Panel, TimeAxis


@pytest.fixture
def small_panel() -> Panel:
    return Panel.cross(
        [Dimension("device", ("mobile", "desktop", "tablet")), Dimension("geo", ("us", "eu"))],
        TimeAxis("2026-01-01", 20, "D"),
    )


@pytest.fixture
def chain_scm(small_panel) -> SCM:
    return SCM(chain_nodes(), small_panel, name="chain")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
