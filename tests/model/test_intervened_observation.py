"""Issue 28, item 7: ``Worlds.factual`` is the world WITH the interventions.

Passing it as an observation to ``counterfactual_from_observations`` (which wants the world
without them) used to give wrong counterfactuals silently. Now every form it can arrive in (the
``Worlds``, the ``World``, the arrays of ``dict(worlds.factual)``) raises a named error that
says to pass ``worlds.counterfactual``; the world without the interventions still works, and so
does the world with them when the SCM carries those interventions.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

from causaltrace import (
    SCM,
    AbductionError,
    Dimension,
    Do,
    Exogenous,
    Linear,
    Node,
    Normal,
    Panel,
    Shift,
    TimeAxis,
    Worlds,
    abduct_noise,
    counterfactual_from_observations,
    simulate,
)
from causaltrace.model import simulate as simulation
from causaltrace.model.counterfactuals import IntervenedObservationError


def _linear_scm() -> SCM:
    panel = Panel.cross([Dimension("g", ("a", "b"))], TimeAxis("2026-01-01", 10, "D"))
    nodes = [
        Node("x", Exogenous(), noise=Normal(1.0)),
        Node("y", Linear.of(1.0, x=2.0), parents=("x",), noise=Normal(0.5)),
        Node("z", Linear.of(-0.5, y=-1.5), parents=("y",), noise=Normal(0.2)),
    ]
    return SCM(nodes, panel, name="linear")


IVS = [Do("y", value=3.0)]
MORE = [Shift("z", delta=1.0)]


def test_the_docstring_says_which_world_is_which():
    assert "``factual`` is the world **with** the interventions" in Worlds.__doc__
    assert "pass ``counterfactual``" in Worlds.__doc__


def test_a_worlds_pair_is_refused():
    scm = _linear_scm()
    worlds = simulate(scm, IVS, seed=1)
    with pytest.raises(IntervenedObservationError, match=r"pass worlds\.counterfactual"):
        counterfactual_from_observations(scm, worlds, MORE)


@pytest.mark.parametrize("form", ["world", "dict"])
def test_the_factual_world_is_refused_naming_the_fix(form):
    scm = _linear_scm()
    worlds = simulate(scm, IVS, seed=1)
    observed = worlds.factual if form == "world" else dict(worlds.factual)
    with pytest.raises(IntervenedObservationError) as caught:
        counterfactual_from_observations(scm, observed, MORE)
    message = str(caught.value)
    assert "Pass worlds.counterfactual" in message  # the fix
    assert "Do(y)" in message  # the interventions it carries
    assert "*with* its interventions" in message  # and why
    if form == "dict":  # the first affected node's array is the one recognized
        assert "observed['y']" in message
    with pytest.raises(IntervenedObservationError):  # abduction alone too
        abduct_noise(scm, observed)
    assert issubclass(IntervenedObservationError, AbductionError)  # old handlers catch it


def test_the_world_without_the_interventions_is_the_observation():
    scm = _linear_scm()
    worlds = simulate(scm, IVS, seed=1)
    got = counterfactual_from_observations(scm, worlds.counterfactual, IVS)
    # Abduction subtracts and prediction adds back the same float64 terms (values of order 10):
    # a few ulps; 1e-12 is far above that and far below the effect.
    np.testing.assert_allclose(got["z"], worlds.factual["z"], rtol=0, atol=1e-12)
    # An answer is itself a world with the interventions: refused as an observation of scm.
    with pytest.raises(IntervenedObservationError, match="observed\\['y'\\]"):
        counterfactual_from_observations(scm, got, MORE)


def test_the_factual_world_is_an_observation_of_the_intervened_scm():
    scm = _linear_scm()
    worlds = simulate(scm, IVS, seed=1)
    done = scm.intervene(*IVS)  # a model that carries the interventions
    for observed in (worlds.factual, dict(worlds.factual)):
        got = counterfactual_from_observations(done, observed, MORE)
        again = simulate(done, MORE, seed=1).factual  # the same noise: the same answer
        np.testing.assert_allclose(got["z"], again["z"], rtol=0, atol=1e-12)


def test_marks_go_with_their_arrays():
    scm = _linear_scm()
    before = len(simulation._INTERVENED_ARRAYS)
    worlds = simulate(scm, IVS, seed=1)
    assert simulation.intervened_by(worlds.factual["z"]) == tuple(IVS)
    assert simulation.intervened_by(worlds.counterfactual["z"]) is None
    assert simulation.intervened_by(worlds.factual["x"]) is None  # shared with the other world
    assert simulation.intervened_by(np.array(worlds.factual["z"])) is None  # a copy
    del worlds
    gc.collect()
    assert len(simulation._INTERVENED_ARRAYS) == before  # no leak across many simulations
