"""The per-simulation shortcuts of issue 2 draw and compute exactly what the plain path did."""

import gc
import hashlib
import importlib

import numpy as np
import pytest
from _engine_support import chain_nodes

from causaltrace import (
    SCM,
    Constant,
    Exogenous,
    InterventionError,
    Linear,
    Node,
    NoiseStreams,
    Normal,
    Shift,
    Uniform,
)

# The package exports the function ``simulate``, which shadows the module's name.
simulate_module = importlib.import_module("causaltrace.model.simulate")


def _reference_generator(seed: int, name: str) -> np.random.Generator:
    """A node's stream as documented: PCG64 keyed by BLAKE2b(root words + name)."""
    root = np.random.SeedSequence(seed).generate_state(4, dtype=np.uint64).tobytes()
    digest = hashlib.blake2b(root + name.encode("utf-8"), digest_size=32).digest()
    bitgen = np.random.PCG64(0)
    bitgen.state = {
        "bit_generator": "PCG64",
        "state": {
            "state": int.from_bytes(digest[:16], "little"),
            "inc": int.from_bytes(digest[16:], "little") | 1,
        },
        "has_uint32": 0,
        "uinteger": 0,
    }
    return np.random.Generator(bitgen)


@pytest.mark.parametrize("name", ["x", "node_17", "é"])
def test_stream_keying_is_the_documented_hash(name):
    streams = NoiseStreams(42)
    got = streams.generator(name).standard_normal(64)
    np.testing.assert_array_equal(got, _reference_generator(42, name).standard_normal(64))
    # Re-keying resets the stream, whatever was drawn from the shared generator before.
    streams.generator("other").random(7)
    np.testing.assert_array_equal(streams.generator(name).standard_normal(64), got)


def test_deterministic_nodes_do_not_disturb_noise(small_panel):
    """Nodes without noise skip the stream re-keying; the noisy nodes draw the same numbers."""
    nodes = [
        Node("c", Constant(2.0)),
        Node("x", Exogenous(), noise=Normal()),
        Node("m", Linear.of(1.0, c=0.5, x=2.0), parents=("c", "x")),
        Node("u", Exogenous(), noise=Uniform()),
    ]
    world = SCM(nodes, small_panel).sample(5)
    x = _reference_generator(5, "x").standard_normal(small_panel.shape)
    u = _reference_generator(5, "u").random(small_panel.shape)
    np.testing.assert_array_equal(world["x"], x)
    np.testing.assert_array_equal(world["u"], u)
    # Linear: weighted parents in order, then noise, then the intercept.
    np.testing.assert_array_equal(
        world["m"], (np.full(small_panel.shape, 2.0) * 0.5 + x * 2.0) + 1.0
    )


def test_linear_without_parents_is_intercept_plus_noise(small_panel):
    world = SCM([Node("k", Linear.of(2.5), noise=Normal(2.0))], small_panel).sample(3)
    noise = _reference_generator(3, "k").standard_normal(small_panel.shape) * 2.0
    np.testing.assert_array_equal(world["k"], np.full(small_panel.shape, 2.5) + noise)
    deterministic = SCM([Node("k", Linear.of(2.5))], small_panel).sample(3)
    np.testing.assert_array_equal(deterministic["k"], np.full(small_panel.shape, 2.5))


def _same_worlds(a, b):
    for name in a.factual:
        assert a.factual[name].tobytes() == b.factual[name].tobytes(), name
        assert a.counterfactual[name].tobytes() == b.counterfactual[name].tobytes(), name
    assert a.affected == b.affected


def test_reused_intervention_objects_give_the_same_worlds(chain_scm):
    shift = Shift("y", delta=1.5)
    first = chain_scm.simulate([shift], seed=3)
    again = chain_scm.simulate([shift], seed=3)  # served by the intervened-model cache
    fresh = chain_scm.simulate([Shift("y", delta=1.5)], seed=3)
    _same_worlds(first, again)
    _same_worlds(first, fresh)
    assert first.affected == {"y", "z"}
    other_seed = chain_scm.simulate([shift], seed=4)
    assert not np.array_equal(other_seed.factual["z"], first.factual["z"])


def test_equal_but_distinct_interventions_are_not_confused(chain_scm):
    a, b = Shift("y", delta=1.0), Shift("y", delta=2.0)
    np.testing.assert_allclose(chain_scm.simulate([a], seed=1).effect("y"), 1.0)
    np.testing.assert_allclose(chain_scm.simulate([b], seed=1).effect("y"), 2.0)
    np.testing.assert_allclose(chain_scm.simulate([a], seed=1).effect("y"), 1.0)


def test_invalid_intervention_raises_every_time(chain_scm):
    bad = Shift("ghost", delta=1.0)
    for _ in range(2):
        with pytest.raises(InterventionError, match="ghost"):
            chain_scm.simulate([bad], seed=0)


def test_cache_is_bounded_and_dies_with_its_model(small_panel):
    scm = SCM(chain_nodes(), small_panel)
    shifts = [Shift("x", delta=float(d)) for d in range(20)]
    for shift in shifts:
        scm.simulate([shift], seed=0)
    assert len(simulate_module._INTERVENED[scm]) <= simulate_module._INTERVENED_PER_SCM
    before = len(simulate_module._INTERVENED)
    del scm
    gc.collect()
    assert len(simulate_module._INTERVENED) == before - 1
