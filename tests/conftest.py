"""Shared fixtures (small panels and SCMs used across the engine tests) and the markers.

Markers say what a test needs beyond the runtime dependencies (pyproject's ``markers``):
``sandbox`` (bubblewrap or unshare: the agent tools), ``chromium`` (the HTML report),
``train`` (torch, TRL, verl), ``ray`` (a local Ray instance), ``slow`` (over ~20 s here). The
README's test command runs everything; the quick command (docs, "Tests") deselects them.

The ``sandbox`` marker is checked, not trusted: a test that starts the tools' sandbox in this
process without the marker fails, naming itself. (With ``CAUSALTRACE_MARKER_AUDIT=<file>`` it
is recorded in that file instead, to find the tests to mark.)
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from _engine_support import chain_nodes

from causaltrace import SCM, Dimension, Panel, TimeAxis
from causaltrace.tools.sandbox import Launcher

_CURRENT: dict[str, pytest.Item | None] = {"item": None}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _CURRENT["item"] = item  # before its fixtures are set up (they may start a sandbox)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    _CURRENT["item"] = item


def pytest_sessionstart(session: pytest.Session) -> None:
    original = Launcher.__init__
    audit = os.environ.get("CAUSALTRACE_MARKER_AUDIT")

    def checked(self, *args, **kwargs):
        item = _CURRENT["item"]
        if item is not None and item.get_closest_marker("sandbox") is None:
            if audit:
                with open(audit, "a") as fh:
                    fh.write(f"{item.nodeid}\n")
            else:
                raise AssertionError(
                    f"{item.nodeid} starts the tools' sandbox: mark it (or its module) "
                    "with pytest.mark.sandbox"
                )
        original(self, *args, **kwargs)

    Launcher.__init__ = checked


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
