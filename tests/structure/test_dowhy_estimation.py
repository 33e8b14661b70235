"""DoWhy's back-door linear regression through the bridge equals our OLS on the same rows and
adjustment set (to 1e-8), and DoWhy's own identification agrees with ours on the panel graph.
Skipped without dowhy (the ``dowhy`` extra)."""

from __future__ import annotations

import pytest

pytest.importorskip("dowhy")

from causaltrace import load_domain
from causaltrace.structure.dowhy_estimation import dowhy_estimate
from causaltrace.structure.estimation import backdoor_regression
from causaltrace.structure.export import regime_frame, world_seeds
from causaltrace.structure.identification import identify_effect
from causaltrace.structure.panel import panel_graph


@pytest.fixture(scope="module")
def example():
    scm = load_domain("example").scm
    frame = regime_frame(scm, scm.observed, world_seeds(0, 0, 3))
    return scm, frame, identify_effect(scm, "visits", "tracked_orders")


@pytest.mark.parametrize("adjustment", [None, ("channel", "time")])
def test_dowhy_linear_regression_equals_our_ols(example, adjustment):
    """Both fit tracked_orders on visits and one-hot categories (first level dropped): the
    identification's {channel}, and {channel, time} (56 days as categories). The values agree
    to 1e-8 and so do the classical standard errors (statsmodels' against ours)."""
    _, frame, answer = example
    ours = backdoor_regression(
        frame, answer, adjustment=adjustment, interacted=False, treat=10, control=2
    )
    theirs = dowhy_estimate(frame, answer, adjustment=adjustment, treat=10, control=2).estimate
    assert abs(theirs.value - ours.value) < 1e-8
    assert abs(theirs.se - ours.classical_se) < 1e-8
    assert theirs.adjustment == ours.adjustment
    assert theirs.ci_low < theirs.value < theirs.ci_high


def test_dowhy_identifies_the_same_set_on_the_panel_graph(example):
    """Given the graph with the panel coordinates as nodes (latent nodes absent from the data
    are hidden to DoWhy), DoWhy's own back-door set is the identification's {channel}."""
    scm, frame, answer = example
    result = dowhy_estimate(frame, answer, graph=panel_graph(scm, "observed"))
    assert result.dowhy_set == ("channel",)
    ours = backdoor_regression(frame, answer, interacted=False)
    assert abs(result.estimate.value - ours.value) < 1e-8
