"""Issue 28: i.i.d. samples of one unit, observational and under regimes (structure/samples.py)."""

from __future__ import annotations

import numpy as np
import pytest

from causaltrace import load_domain
from causaltrace.errors import CausalTraceError
from causaltrace.structure.export import parse_regime, regime_frame, world_seeds
from causaltrace.structure.samples import sample_units


@pytest.fixture(scope="module")
def scm():
    return load_domain("example").scm


def test_rows_are_the_exports_worlds_at_the_unit(scm):
    # Row i of regime r is world i of the export's seed tree, read at the unit: the same code
    # path as export-structure (regime_frame) gives the same values bit for bit.
    regime = parse_regime("do:visits=100", scm)
    s = sample_units(scm, 4, seed=3, columns=scm.order, regimes=[regime], cell=5, time=10)
    panel = scm.panel
    for r, reg in enumerate((None, regime)):
        frame = regime_frame(scm, scm.order, world_seeds(3, r, 4), reg)
        at = frame.iloc[[w * panel.size + 5 * panel.n_time + 10 for w in range(4)]]
        np.testing.assert_array_equal(s.rows(r), at[list(scm.order)].to_numpy(np.float64))
    assert s.regime.tolist() == [0] * 4 + [1] * 4
    assert s.regime_names == ("observational", "do_visits_100")


def test_deterministic_and_seeded(scm):
    a = sample_units(scm, 20, seed=1)
    b = sample_units(scm, 20, seed=1)
    np.testing.assert_array_equal(a.data, b.data)
    assert not np.array_equal(a.data, sample_units(scm, 20, seed=2).data)
    assert a.columns == scm.observed and a.time == scm.panel.n_time // 2 and a.cell == 0


def test_interventional_rows_follow_the_regime(scm):
    regimes = ["do:visits=100", "shift:orders=1@channel=email", "do:visits=100,shift:orders=1"]
    n = 400
    s = sample_units(scm, n, seed=0, columns=scm.order, regimes=regimes)  # cell 0: search
    col = {c: i for i, c in enumerate(s.columns)}
    assert (s.rows(1)[:, col["visits"]] == 100).all()
    # Targets: the do at the unit; the email slice misses cell 0 (search); both in regime 3.
    assert (
        s.targets[s.regime == 1].sum(0)[col["visits"]] == n and s.targets[s.regime == 1].sum() == n
    )
    assert not s.targets[s.regime == 2].any()
    assert s.targets[s.regime == 3][:, [col["visits"], col["orders"]]].all()
    # orders ~ Binomial(100, checkout_rate) under do(visits=100): E[orders - 100 rate] = 0 row
    # by row, with variance E[100 r (1 - r)]; over n i.i.d. rows the mean's SE is the sample sd
    # over sqrt(n). Tolerance 5 SE (a false alarm about once in 1.7 million runs).
    d = s.rows(1)[:, col["orders"]] - 100 * s.rows(1)[:, col["checkout_rate"]]
    assert abs(d.mean()) < 5 * d.std(ddof=1) / np.sqrt(n), (d.mean(), d.std())
    # Regime 3 adds exactly one order on top of a Binomial(100, rate): at least 1.
    assert (s.rows(3)[:, col["orders"]] >= 1).all()


def test_rows_are_independent_across_worlds(scm):
    # Consecutive worlds have unrelated seeds: the lag-1 correlation of a column over n rows has
    # standard error 1/sqrt(n) under independence; 4 SE bounds it (false alarm ~ 6e-5).
    n = 600
    x = sample_units(scm, n, seed=7).rows(0)[:, 0]
    r = np.corrcoef(x[:-1], x[1:])[0, 1]
    assert abs(r) < 4 / np.sqrt(n), r


def test_constant_nodes_are_found():
    s = sample_units(load_domain("example").scm, 30, seed=0)
    assert s.constant == ("tag_fire_rate",)
    services = load_domain("services").scm
    s = sample_units(services, 30, seed=0, cell="service=frontend&region=us_east")
    # frontend has no cache and no queue: hits, queue_depth and consumers are constant there.
    assert {"hits", "queue_depth", "consumers", "cpu_capacity"} <= set(s.constant)
    assert "hits" not in s.varying() and "requests" in s.varying()


@pytest.mark.parametrize(
    ("kwargs", "culprit"),
    [
        ({"n": 0}, "n must be >= 1"),
        ({"seed": -1}, "seed must be >= 0"),
        ({"columns": ["nope"]}, "unknown columns"),
        ({"cell": "channel=search"}, "matches 4 cells"),
        ({"cell": 99}, "out of range"),
        ({"time": 10_000}, "out of range"),
        ({"regimes": ["push:visits=1"]}, "must start with one of"),
    ],
)
def test_bad_arguments(scm, kwargs, culprit):
    args = {"n": 2, **kwargs}
    with pytest.raises(CausalTraceError, match=culprit):
        sample_units(scm, args.pop("n"), **args)
