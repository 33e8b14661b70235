"""A linear-Gaussian SCM against its closed forms, and its graph against CI tests on its data.

Graph: X -> Y -> Z and X -> W, with
    X = e_X,  Y = 1 + 2 X + e_Y (sd 0.5),  Z = -Y + e_Z,  W = 0.5 X + e_W   (unit-variance e's)
Tolerances: with n draws, a sample mean has standard error sd / sqrt(n) and a Gaussian sample
variance has standard error var * sqrt(2 / (n - 1)). We allow 5 standard errors (a two-sided
miss probability of 6e-7 per check), which follows from the sample size rather than from a
value tuned to pass.
"""

import numpy as np
import pytest
from scipy import stats

from causaltrace import SCM, Dimension, Do, Exogenous, Linear, Node, Normal, Panel, Shift, TimeAxis

N_CELLS, N_TIME = 200, 250  # n = 50,000 units
N = N_CELLS * N_TIME


@pytest.fixture(scope="module")
def lg_scm() -> SCM:
    panel = Panel.cross(
        [Dimension("unit", tuple(f"u{i}" for i in range(N_CELLS)))],
        TimeAxis("2026-01-01", N_TIME),
    )
    nodes = [
        Node("X", Exogenous(), noise=Normal()),
        Node("Y", Linear.of(1.0, X=2.0), parents=("X",), noise=Normal(0.5)),
        Node("Z", Linear.of(0.0, Y=-1.0), parents=("Y",), noise=Normal()),
        Node("W", Linear.of(0.0, X=0.5), parents=("X",), noise=Normal()),
    ]
    return SCM(nodes, panel, name="linear-gaussian")


def _check_moments(values: np.ndarray, mean: float, var: float) -> None:
    values = values.ravel()
    assert abs(values.mean() - mean) <= 5 * np.sqrt(var / N), (values.mean(), mean)
    assert abs(values.var(ddof=1) - var) <= 5 * var * np.sqrt(2 / (N - 1)), (values.var(), var)


def test_observational_moments(lg_scm):
    world = lg_scm.sample(2024)
    _check_moments(world["Y"], 1.0, 4.25)
    _check_moments(world["Z"], -1.0, 5.25)
    _check_moments(world["W"], 0.0, 1.25)


def test_do_y_moments(lg_scm):
    world = lg_scm.simulate([Do("Y", value=3.0)], seed=2025).factual
    _check_moments(world["Z"], -3.0, 1.0)  # Y is cut from X: only e_Z remains
    _check_moments(world["W"], 0.0, 1.25)  # W is not a descendant of Y: unchanged


def test_shift_x_moments(lg_scm):
    world = lg_scm.simulate([Shift("X", delta=1.0)], seed=2026).factual
    _check_moments(world["X"], 1.0, 1.0)
    _check_moments(world["Y"], 3.0, 4.25)
    _check_moments(world["Z"], -3.0, 5.25)
    _check_moments(world["W"], 0.5, 1.25)


def _fisher_z_pvalue(data: dict, x: str, y: str, given: frozenset) -> float:
    """p-value of the partial-correlation (Fisher z) test of x _|_ y | given."""
    cols = [x, y, *sorted(given)]
    mat = np.stack([data[c].ravel() for c in cols])
    precision = np.linalg.inv(np.corrcoef(mat))
    r = -precision[0, 1] / np.sqrt(precision[0, 0] * precision[1, 1])
    z = np.arctanh(r) * np.sqrt(N - len(given) - 3)
    return float(2 * stats.norm.sf(abs(z)))


def test_local_markov_independences_not_rejected(lg_scm):
    world = lg_scm.sample(7)
    implied = lg_scm.local_markov()
    assert {str(i) for i in implied} == {
        "Z _|_ {W, X} | {Y}",
        "W _|_ {Y, Z} | {X}",
        "Y _|_ {W} | {X}",
    }
    # 5 tests at alpha = 0.001 each: under the null, a false rejection has probability < 0.5%.
    for ind in implied:
        for other in ind.others:
            assert _fisher_z_pvalue(world, ind.x, other, ind.given) > 1e-3, (ind, other)


def test_implied_dependence_detected(lg_scm):
    world = lg_scm.sample(7)
    assert not lg_scm.d_separated("W", "Z")  # connected through X -> Y -> Z
    assert _fisher_z_pvalue(world, "W", "Z", frozenset()) < 1e-6
    assert not lg_scm.d_separated("X", "Z", "W")
    assert _fisher_z_pvalue(world, "X", "Z", frozenset({"W"})) < 1e-6
