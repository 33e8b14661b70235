"""Issue 28, item 1: identification on pooled panel data.

The example domain's unit graph needs no adjustment for visits -> tracked_orders, but pooled
rows (every cell and day, as the export writes them) are confounded by the channel, which sets
both the demand (so the visits) and the checkout rate (so the orders). The default
identification adjusts for it; with the adjustment set it returns, the back-door estimate
covers the true do-slope, and with the unit graph's empty set it is 35% low (and warns).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from causaltrace import SCM, Do, Exogenous, Linear, Node, Normal, load_domain
from causaltrace.structure.export import regime_frame, world_seeds
from causaltrace.structure.identification import identify_effect
from causaltrace.structure.panel import PooledDataWarning, panel_graph, read_coordinates

Z95 = 1.959963984540054  # the standard normal's 0.975 quantile: two-sided 95% intervals


@pytest.fixture(scope="module")
def example() -> SCM:
    return load_domain("example").scm


@pytest.fixture(scope="module")
def pooled(example):
    """The observational export of the research guide: 200 worlds, seed 0, one row per
    (world, cell, day) (``export_structure(..., samples=200, seed=0)`` writes the same rows)."""
    return regime_frame(example, example.observed, world_seeds(0, 0, 200))


def ols_slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """OLS slope of y on x with an intercept, and its HC1 (heteroskedasticity-robust) standard
    error: counts have variance growing with the visits, so the classical one would be wrong."""
    xc, yc = x - x.mean(), y - y.mean()
    sxx = xc @ xc
    slope = (xc @ yc) / sxx
    resid = yc - slope * xc
    var = len(x) / (len(x) - 2) * np.sum(xc**2 * resid**2) / sxx**2
    return float(slope), float(np.sqrt(var))


def backdoor_slope(frame, treatment: str, outcome: str, adjustment) -> tuple[float, float]:
    """d/dx sum_z P(z) E[y | x, z]: the back-door formula for a conditional mean linear in x
    within each stratum of the (discrete) adjustment set: the strata's OLS slopes averaged
    with the strata's shares of rows, and the standard error of that average (strata are
    independent rows; the shares are fixed by the panel's design, equal cells per level).
    The empty set is one stratum: the pooled slope."""
    keys = sorted(adjustment)
    groups = frame.groupby(keys, observed=True) if keys else [((), frame)]
    slope = var = 0.0
    for _, rows in groups:
        weight = len(rows) / len(frame)
        b, se = ols_slope(rows[treatment].to_numpy(float), rows[outcome].to_numpy(float))
        slope += weight * b
        var += weight**2 * se**2
    return slope, float(np.sqrt(var))


def true_do_slope(scm: SCM, treatment: str, outcome: str, worlds: int, top: int):
    """E[y | do(x + 1)] - E[y | do(x)] from pairs of worlds that share every draw.

    The unit increments y(x + 1) - y(x), averaged over x = 0 .. top - 1, telescope to
    (y(top) - y(0)) / top: one pair of worlds per seed, do(x = 0) against do(x = top). The
    slope is the same for every x here (binomial thinning: E[y | do(x)] = x E[rate] 0.97).
    Averaged within each channel, then with the channels' shares of cells; its standard error
    is the within-channel spread over sqrt(units).
    """
    base = scm.intervene(Do(treatment, value=0))
    effects = np.stack(
        [
            base.simulate([Do(treatment, value=top)], seed=s).effect(outcome) / top
            for s in range(worlds)
        ]
    )  # (worlds, cells, days)
    codes = scm.panel.codes("channel")
    slope = var = 0.0
    for level in np.unique(codes):
        units = effects[:, codes == level, :].ravel()
        weight = float(np.mean(codes == level))
        slope += weight * units.mean()
        var += weight**2 * units.var(ddof=1) / units.size
    return slope, float(np.sqrt(var))


def test_the_default_adjusts_for_the_channel_on_pooled_rows(example):
    answer = identify_effect(example, "visits", "tracked_orders")
    assert answer.kind == "backdoor" and answer.adjustment_set == {"channel"}
    assert answer.confounding_coordinates == ("channel",)
    assert answer.panel_coordinates == ("channel", "time")  # region is read by no mechanism
    assert "channel (-> demand, checkout_rate)" in answer.reason
    assert str(answer.expression) == (
        "sum_{channel} [P(tracked_orders | visits,channel) P(channel)]"
    )


def test_the_unit_answer_on_pooled_rows_warns(example):
    with pytest.warns(PooledDataWarning, match=r"channel \(-> demand, checkout_rate\)") as caught:
        unit = identify_effect(example, "visits", "tracked_orders", with_panel=False)
    assert unit.adjustment_set == frozenset() and unit.confounding_coordinates == ("channel",)
    message = str(caught[0].message)
    assert "with_panel" in message and "pooled=False" in message  # it names the two fixes
    assert caught[0].filename == __file__  # attributed to the caller (stacklevel)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one unit's data: no warning, the unit answer
        alone = identify_effect(example, "visits", "tracked_orders", pooled=False)
        assert alone.adjustment_set == frozenset() and alone.panel_coordinates == ()
        # A query the channel does not confound: the unit answer, no panel, no warning.
        plain = identify_effect(example, "orders", "tracked_orders", with_panel=False)
        assert plain.adjustment_set == frozenset() and plain.confounding_coordinates == ()
        assert identify_effect(example, "orders", "tracked_orders").panel_coordinates == ()


def test_panel_adjusted_estimate_covers_the_true_do_slope(example, pooled):
    truth, truth_se = true_do_slope(example, "visits", "tracked_orders", worlds=50, top=10_000)
    # The simulated truth is the model's: 0.97 E[checkout rate], the rate log-normal around
    # each channel's level (0.03, 0.015, 0.06; sd 0.05 of the log, mean factor e^(0.05^2/2)),
    # channels in equal shares. Within 4 of its standard errors (a false alarm 1 in 15,000).
    analytic = 0.97 * np.mean([0.03, 0.015, 0.06]) * np.exp(0.05**2 / 2)
    assert abs(truth - analytic) < 4 * truth_se

    adjusted = identify_effect(example, "visits", "tracked_orders").adjustment_set
    slope, se = backdoor_slope(pooled, "visits", "tracked_orders", adjusted)
    # The estimate's standard error is 2.3e-4 (0.7% of the slope), the truth's 1.4e-5: the
    # difference of the two has their root-sum-square, and its 95% interval covers zero.
    assert abs(slope - truth) < Z95 * np.hypot(se, truth_se), (slope, se, truth)

    empty, empty_se = backdoor_slope(pooled, "visits", "tracked_orders", frozenset())
    assert abs(empty - truth) > Z95 * np.hypot(empty_se, truth_se)  # the unit graph's set
    assert -0.40 < empty / truth - 1 < -0.30  # the issue's -35% (0.0219 against 0.0339)


def test_graphs_of_pooled_rows(example):
    assert read_coordinates(example) == {
        "channel": ("demand", "checkout_rate"),
        "time": ("demand",),
    }
    hidden = panel_graph(example, "hidden")
    assert not hidden.nodes["channel"]["observed"] and hidden.has_edge("channel", "demand")
    assert "region" not in hidden  # no mechanism reads it: it can confound nothing
    only = panel_graph(example, "observed", only=["time"])
    assert only.nodes["time"]["observed"] and "channel" not in only


def test_a_coordinate_read_by_one_side_only_does_not_confound(small_panel):
    """A coordinate that only the treatment reads is an instrument, not a confounder: the
    unit answer holds pooled, and nothing is added or warned about."""

    class ByDevice(Exogenous):
        def __call__(self, parents, noise, panel):
            return noise + panel.codes("device")[:, None]

    nodes = [
        Node("x", ByDevice(), noise=Normal()),
        Node("y", Linear.of(x=1.0), parents=("x",), noise=Normal()),
    ]
    scm = SCM(nodes, small_panel, name="instrument")
    assert read_coordinates(scm) == {"device": ("x",)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        answer = identify_effect(scm, "x", "y", with_panel=False)
    assert answer.adjustment_set == frozenset() and answer.confounding_coordinates == ()
    both = identify_effect(scm, "x", "y", with_panel=True)  # asked for: the graph has it
    assert both.panel_coordinates == ("device",) and both.adjustment_set == frozenset()


def test_coordinates_a_mechanism_reads_only_away_from_the_median_are_found():
    """Most rows have no real conversions (the median is 0), where binomial thinning is 0 in
    every cell whatever its rate; the probe holds parents at several levels, so the placement
    rate (cross-device conversions) and the time-varying reported fraction (lags) are read,
    and the pooled query adjusts for them."""
    ads = load_domain("ads").scm
    reads = ads.panel_parents()
    assert {"placement"} <= set(reads["modelled_conversions"])
    assert "time" in reads["conversions"]
    r = identify_effect(ads, "real_conversions", "conversions")
    assert r.kind == "backdoor"
    assert {"placement", "time", "browser_os", "geo"} <= r.adjustment_set
