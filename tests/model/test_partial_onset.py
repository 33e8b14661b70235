"""Interventions that begin part-way through their onset step (``Window.start`` and
``Window.onset_weight``), and the world as it stood at a point of a step (``World.as_of``).

A daily panel's edit made in the afternoon acts on the evening's share of its day: the onset
step takes that share of the effect, and a report that splits the day into hours rebuilds the
hours before the edit from ``as_of``, which must equal, on the step and every step before it,
the world that never had the edit (the same noise, including a node that reads its parent's
past).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from _engine_support import chain_nodes

from causaltrace import SCM, Node, Shift, Step, Window
from causaltrace.errors import InterventionError
from causaltrace.model.simulate import World


@dataclass(frozen=True)
class RunningTotal:
    """A node that reads its parent's past: the running sum of ``y`` over time."""

    def __call__(self, parents, noise, panel):
        return np.cumsum(parents["y"], axis=1)


@pytest.fixture
def history_scm(small_panel) -> SCM:
    nodes = [*chain_nodes(), Node("total", RunningTotal(), parents=("y",))]
    return SCM(nodes, small_panel, name="history")


def _same_up_to(a: World, b: World, step: int) -> None:
    for name in a:
        np.testing.assert_array_equal(a[name][:, : step + 1], b[name][:, : step + 1], name)


def test_window_defaults_are_a_whole_step():
    assert Window(3) == Window(3, None, Step(), 0.0, 1.0)
    assert not Window(3).partial_onset
    assert Window(3, start=0.5, onset_weight=0.3).partial_onset
    np.testing.assert_array_equal(Window(3).weights(6), [0, 0, 0, 1, 1, 1])


def test_onset_weight_scales_only_the_onset_step():
    w = Window(2, end=5, start=0.7, onset_weight=0.25).weights(7)
    np.testing.assert_array_equal(w, [0, 0, 0.25, 1, 1, 0, 0])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"start": 1.0}, "start must be in"),
        ({"start": -0.1}, "start must be in"),
        ({"onset_weight": 1.5}, "onset_weight must be in"),
        ({"onset_weight": -0.2}, "onset_weight must be in"),
    ],
)
def test_window_rejects_out_of_range(kwargs, message):
    with pytest.raises(InterventionError, match=message):
        Window(2, **kwargs)


def test_partial_onset_step_takes_its_share_of_the_effect(history_scm):
    shift = Shift("y", window=Window(5, start=0.5, onset_weight=0.25), delta=2.0)
    worlds = history_scm.simulate([shift], seed=4)
    gap = worlds.effect("y")
    np.testing.assert_array_equal(gap[:, :5], 0.0)
    np.testing.assert_allclose(gap[:, 5], 0.5)
    np.testing.assert_allclose(gap[:, 6:], 2.0)


def test_as_of_matches_the_world_without_the_later_edits(history_scm):
    early = Shift("y", window=Window(5, start=0.3, onset_weight=0.6), delta=1.0)
    late = Shift("y", window=Window(5, start=0.7, onset_weight=0.2), delta=3.0)
    next_day = Shift("y", window=Window(9, start=0.5, onset_weight=0.4), delta=-2.0)
    world = history_scm.simulate([early, late, next_day], seed=9).factual
    # At the start of step 5 neither of its edits acts: as if none had been made.
    _same_up_to(world.as_of(5), history_scm.sample(9), 5)
    # Half-way through step 5 the early edit acts, the late one not yet.
    _same_up_to(world.as_of(5, 0.5), history_scm.simulate([early], seed=9).factual, 5)
    # At the start of step 9 both of step 5's edits act (with their partial step 5).
    _same_up_to(world.as_of(9), history_scm.simulate([early, late], seed=9).factual, 9)
    # A node reading the past is rebuilt too: the running total on step 9 differs.
    assert not np.array_equal(world.as_of(9)["total"][:, 9], world["total"][:, 9])


def test_as_of_works_on_interventions_the_model_carries(history_scm):
    """Edits applied to the model (a background) and to the simulation alike."""
    carried = Shift("y", window=Window(4, start=0.5, onset_weight=0.5), delta=1.5)
    cause = Shift("y", window=Window(4, start=0.25, onset_weight=0.8), delta=-1.0)
    base = history_scm.intervene(carried)
    worlds = base.simulate([cause], seed=2)
    _same_up_to(worlds.factual.as_of(4), history_scm.sample(2), 4)
    # At 0.4 of step 4 the cause (from 0.25) acts and the carried edit (from 0.5) not yet.
    _same_up_to(worlds.factual.as_of(4, 0.4), history_scm.simulate([cause], seed=2).factual, 4)
    _same_up_to(worlds.counterfactual.as_of(4), history_scm.sample(2), 4)


def test_as_of_without_a_partial_step_or_a_model_is_the_world(history_scm):
    whole = Shift("y", window=Window(5), delta=1.0)
    partial = Shift("y", window=Window(7, start=0.5, onset_weight=0.5), delta=1.0)
    world = history_scm.simulate([whole, partial], seed=1).factual
    assert world.as_of(5) is world  # a whole-step edit has no part before it
    assert world.as_of(7, 0.6) is world  # the edit began before that point
    assert world.as_of(7) is not world
    bare = World(dict(world.arrays), world.panel, world.interventions)
    assert bare.as_of(7) is bare  # no model to rebuild the step from
