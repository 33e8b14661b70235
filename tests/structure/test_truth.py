"""Issue 28, item 1 of the estimation work: exact unit-level effects from shared-noise worlds,
their slice and panel averages, and their export next to exported data."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from _effects_support import frontdoor_scm

from causaltrace import Do, Shift, load_domain
from causaltrace.errors import CausalTraceError
from causaltrace.structure.export import regime_frame, world_seeds
from causaltrace.structure.truth import TRUTH_DIR, export_truth, true_effect


@pytest.fixture(scope="module")
def example():
    return load_domain("example").scm


def test_a_linear_effect_is_exact_unit_by_unit(small_panel):
    """x -> m -> y with slopes 0.8 and 1.5 and hidden u -> x, y: every unit's effect of
    do(x = 3) against do(x = 1) is 2 x 1.2 = 2.4, whatever the noise (it is shared), and a
    shift by 1 is 1.2; the Monte Carlo standard error of a constant is 0."""
    scm = frontdoor_scm(small_panel)
    contrast = true_effect(scm, "y", Do("x", value=3.0), Do("x", value=1.0), seeds=4)
    assert np.allclose(contrast.per_unit, 2.4) and contrast.per_unit.shape == (4, 6, 20)
    assert contrast.ate == pytest.approx(2.4) and contrast.ate_se == pytest.approx(0.0, abs=1e-12)
    shifted = true_effect(scm, "y", "shift:x=1", seeds=2)  # against no intervention
    assert np.allclose(shifted.per_unit, 1.2) and shifted.control == ()
    assert shifted.treat == ("shift:x=1",)
    assert contrast.treat == ("do:x=3.0",) and contrast.control == ("do:x=1.0",)


def test_the_control_arm_is_the_exported_world(example):
    """With no control intervention the control outcome is the observational world of each
    seed: unit for unit the rows regime_frame (observational.parquet) writes for those seeds,
    in the same order; so per-unit truths line up with exported rows."""
    seeds = world_seeds(3, 0, 2)
    truth = true_effect(example, "tracked_orders", "scale:checkout_rate=0.5", seeds=seeds)
    rows = regime_frame(example, example.observed, seeds)
    table = truth.frame()
    assert len(table) == len(rows)
    for column in ("world", "channel", "region", "time"):
        assert (table[column] == rows[column]).all()
    assert np.array_equal(table["control"].to_numpy(), rows["tracked_orders"].to_numpy())
    assert (table["effect"] <= 0).all()  # halving the checkout rate never adds an order


def test_slice_averages_match_the_model(example):
    """The effect of 1,000 visits on tracked orders is binomial thinning by 0.97 x the
    checkout rate, log-normal around each channel's level (0.03, 0.015, 0.06; log-sd 0.05, so
    a mean factor e^(0.05^2 / 2)): each channel's CATE is within 4 of its Monte Carlo standard
    errors of 970 x level x e^0.00125 (a false alarm 1 in 15,000 per channel), and the ATE is
    the mean of the three (channels have equal shares of cells)."""
    truth = true_effect(example, "tracked_orders", "do:visits=1000", "do:visits=0", seeds=20)
    for level, rate in zip(("search", "social", "email"), (0.03, 0.015, 0.06)):
        row = truth.cate(f"channel={level}")
        assert row.n_units == 4 * 56  # four regions x 56 days per channel
        assert abs(row.cate - 970 * rate * np.exp(0.05**2 / 2)) < 4 * row.se, row
    channels = [truth.cate(f"channel={c}").cate for c in ("search", "social", "email")]
    assert truth.ate == pytest.approx(np.mean(channels), rel=1e-12)
    assert truth.by_slice[0].slice == "" and len(truth.by_slice) == 1 + 3 + 4
    # Restricting the ATE to a slice gives that slice's CATE, and a table by both dimensions.
    email = true_effect(
        example,
        "tracked_orders",
        "do:visits=1000",
        "do:visits=0",
        seeds=20,
        where="channel=email",
        by=[("channel", "region")],
    )
    assert email.ate == pytest.approx(truth.cate("channel=email").cate, rel=1e-12)
    assert [r.slice for r in email.by_slice][1] == "channel=email&region=north"
    assert len(email.by_slice) == 1 + 4  # email's four regions only


def test_export_writes_json_csv_and_parquet(example, tmp_path):
    seeds = world_seeds(0, 0, 3)
    truth = true_effect(example, "orders", "do:visits=100", "do:visits=0", seeds=seeds)
    written = export_truth(truth, tmp_path, name="visits_orders")
    assert [p.name for p in written] == [
        "visits_orders.json",
        "visits_orders_by_slice.csv",
        "visits_orders_per_unit.parquet",
    ]
    summary = json.loads((tmp_path / TRUTH_DIR / "visits_orders.json").read_text())
    assert summary["ate"] == truth.ate and summary["n_worlds"] == 3
    assert summary["treat"] == ["do:visits=100"] and summary["control"] == ["do:visits=0"]
    assert summary["seeds"][1] == {"entropy": 0, "spawn_key": [0, 1]}  # world_seeds(0, 0, .)
    assert summary["files"]["per_unit"] == "truth/visits_orders_per_unit.parquet"
    table = pd.read_csv(tmp_path / TRUTH_DIR / "visits_orders_by_slice.csv", keep_default_na=False)
    assert table["cate"].tolist() == [r.cate for r in truth.by_slice]  # repr: exact round trip
    per_unit = pd.read_parquet(tmp_path / TRUTH_DIR / "visits_orders_per_unit.parquet")
    assert len(per_unit) == 3 * example.panel.size
    assert per_unit["effect"].mean() == pytest.approx(truth.ate, rel=1e-12)


def test_bad_requests_are_named(example):
    with pytest.raises(CausalTraceError, match="no node"):
        true_effect(example, "revenue", "do:visits=1")
    with pytest.raises(CausalTraceError, match="both empty"):
        true_effect(example, "orders", None)
    with pytest.raises(CausalTraceError, match="not an intervention"):
        true_effect(example, "orders", [Shift("visits", delta=1.0), "do:visits=1"])
